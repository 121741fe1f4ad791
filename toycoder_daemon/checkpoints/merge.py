"""Taking one change back out of a text that was edited since: undo of an edit that went into an
editor's buffer, where the person's own unsaved edits must stay as they are.

The agent's change is `before` -> `after`; the text now is `after` plus whatever the person typed.
Each hunk of the agent's change (lines, difflib) is put back as `before` had it, at its place in the
text now, provided no edit of the person's overlaps it: changes one of the lines the agent wrote, or
inserts lines in the middle of them, or at the very place the agent removed lines ("the text around
the agent's change was edited"). Then the result is None: a real conflict. Lines typed right above
or below the agent's change are the person's own and stay, like every other edit elsewhere.
"""

from __future__ import annotations


def _hunks(a: list[str], b: list[str]) -> list[tuple[int, int, int, int]]:
    from difflib import SequenceMatcher  # undo of a buffer edit only: not in every new process

    return [(i1, i2, j1, j2) for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
            if op != "equal"]


def _overlap(j1: int, j2: int, k1: int, k2: int) -> bool:
    """Whether the person's edit of lines [k1, k2) of the agent's text collides with the agent's
    hunk [j1, j2): shared lines, an insertion inside it, or both insertions at one place."""
    if j1 == j2 and k1 == k2:
        return j1 == k1
    if j1 == j2:
        return k1 < j1 < k2
    if k1 == k2:
        return j1 < k1 < j2
    return max(j1, k1) < min(j2, k2)


def revert(before: str, after: str, now: str) -> str | None:
    """`now` with the change `before` -> `after` taken back, or None when `now` was edited around it."""
    b, a, n = (t.splitlines(keepends=True) for t in (before, after, now))
    theirs = _hunks(a, n)  # the person's edits since: a[k1:k2] became n[l1:l2]
    out = list(n)
    for i1, i2, j1, j2 in reversed(_hunks(b, a)):  # from the end: earlier places keep their index
        shift = 0
        for k1, k2, l1, l2 in theirs:
            if _overlap(j1, j2, k1, k2):
                return None
            if k2 <= j1:
                shift += (l2 - l1) - (k2 - k1)
        out[j1 + shift:j2 + shift] = b[i1:i2]
    return "".join(out)
