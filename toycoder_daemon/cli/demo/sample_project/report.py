"""Print a small report of the numbers given on the command line: python report.py 2 4 6"""

import sys

from calc import average, spread


def main(argv):
    numbers = [float(a) for a in argv] or [2, 4, 6]
    print(f"average: {average(numbers)}")
    print(f"spread:  {spread(numbers)}")


if __name__ == "__main__":
    main(sys.argv[1:])
