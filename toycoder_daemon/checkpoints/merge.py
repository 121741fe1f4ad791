"""Taking one change back out of a text that was edited since: undo of an edit that went into an
editor's buffer, where the person's own unsaved edits must stay as they are.

The agent's change is `before` -> `after`; the text now is `after` plus whatever the person typed.
Each hunk of the agent's change (lines, difflib) is put back as `before` had it, at its place in the
text now, provided no edit of the person's overlaps it: changes one of the lines the agent wrote, or
inserts lines in the middle of them, or at the very place the agent removed lines ("the text around
the agent's change was edited"). Then the result is None: a real conflict. Lines typed right above
or below the agent's change are the person's own and stay, like every other edit elsewhere.

Among repeated lines a change can often be aligned more than one way (removing one of two equal
lines: the first or the second?), and each way puts the person's edits elsewhere. The answer is
None (a conflict, never a misplaced edit) when a change of either side could slide next to or past
the other one (`_slides`), and when the merge with the changes aligned from the start and from the
end (difflib on the lines, and on them reversed) gives different texts.
"""

from __future__ import annotations


def _hunks(a: list[str], b: list[str], late: bool = False) -> list[tuple[int, int, int, int]]:
    """The changes a -> b as (i1, i2, j1, j2): a[i1:i2] became b[j1:j2]; `late`: aligned from the end."""
    from difflib import SequenceMatcher  # undo of a buffer edit only: not in every new process

    if not late:
        return [(i1, i2, j1, j2) for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
                if op != "equal"]
    na, nb = len(a), len(b)
    return [(na - i2, na - i1, nb - j2, nb - j1) for i1, i2, j1, j2 in reversed(_hunks(a[::-1], b[::-1]))]


def _slides(x: list[str], y: list[str], h: tuple[int, int, int, int]) -> tuple[int, int]:
    """How far the hunk x[i1:i2] -> y[j1:j2] could move up and down and still make `y` from `x`:
    a pure insertion or deletion next to equal lines (removing one of two equal lines)."""
    i1, i2, j1, j2 = h
    if i1 < i2 and j1 < j2:
        return 0, 0
    seq, s1, s2 = (x, i1, i2) if i1 < i2 else (y, j1, j2)  # the lines removed, or the lines inserted
    up = 0
    while s1 - up > 0 and seq[s1 - up - 1] == seq[s2 - up - 1]:
        up += 1
    down = 0
    while s2 + down < len(seq) and seq[s1 + down] == seq[s2 + down]:
        down += 1
    return up, down


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
    """`now` with the change `before` -> `after` taken back, or None when `now` was edited around it
    or the result depends on how repeated lines are aligned."""
    b, a, n = (t.splitlines(keepends=True) for t in (before, after, now))
    results = {_revert(b, a, n, _hunks(b, a, late_agent), _hunks(a, n, late_theirs))
               for late_agent in (False, True) for late_theirs in (False, True)}
    return results.pop() if len(results) == 1 else None


def _revert(b: list[str], a: list[str], n: list[str], agent: list[tuple[int, int, int, int]],
            theirs: list[tuple[int, int, int, int]]) -> str | None:
    """`n` with the agent's hunks (b -> a) put back as `b` had them, given the person's (a -> n)."""
    out = list(n)
    for hunk in reversed(agent):  # from the end: earlier places keep their index
        i1, i2, j1, j2 = hunk
        up, down = _slides(b, a, hunk)
        shift = 0
        for k1, k2, l1, l2 in theirs:
            if _overlap(j1, j2, k1, k2):
                return None
            their_up, their_down = _slides(a, n, (k1, k2, l1, l2))
            if (up or down or their_up or their_down) and max(j1 - up, k1 - their_up) <= min(j2 + down, k2 + their_down):
                return None  # either could be aligned on the other side of the other: no telling where it goes
            if k2 <= j1:
                shift += (l2 - l1) - (k2 - k1)
        out[j1 + shift:j2 + shift] = b[i1:i2]
    return "".join(out)
