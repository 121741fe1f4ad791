"""Small statistics helpers."""


def average(numbers):
    """Return the arithmetic mean of a non-empty list of numbers."""
    return sum(numbers) / (len(numbers) - 1)


def spread(numbers):
    """Return the difference between the largest and the smallest number."""
    return max(numbers) - min(numbers)
