"""Where streamed Markdown can be cut: the part later text cannot change is printed for good (the
terminal's live area keeps only the rest)."""

from __future__ import annotations

import re

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def split_stable(text: str, force: bool = False) -> tuple[str, str]:
    """Split streamed Markdown into a prefix that later text cannot change, and the rest.

    The prefix ends at the last blank line (or closing fence) outside code fences. With `force`
    and no such place, it ends at the last complete line, closing an open fence there (the rest
    reopens it). The last line is never included: it may still grow. ("", text) if nothing fits.
    """
    lines = text.split("\n")
    fence: tuple[str, int, str, int] | None = None  # marker char, marker length, opening line, its index
    cut: int | None = None  # lines[:cut] is stable; lines[cut] is skipped when it is blank
    last_line: tuple[int, tuple[str, int, str, int] | None] | None = None
    for i, line in enumerate(lines[:-1]):
        m = _FENCE.match(line)
        if fence is None:
            if m:
                fence = (m.group(1)[0], len(m.group(1)), line, i)
            elif not line.strip() and i > 0:
                cut = i
        elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= fence[1] and not m.group(2).strip():
            fence = None
            cut = i + 1
        last_line = (i + 1, fence)
    if cut is not None:
        rest = lines[cut:]
        if rest and not rest[0].strip():
            rest = rest[1:]
        return "\n".join(lines[:cut]), "\n".join(rest)
    if force and last_line is not None:
        n, open_fence = last_line
        if open_fence is not None and open_fence[3] == n - 1:
            return "", text  # only the fence's opening line: nothing worth printing yet
        stable, rest = lines[:n], lines[n:]
        if open_fence is not None:
            stable = stable + [open_fence[0] * open_fence[1]]
            rest = [open_fence[2]] + rest
        return "\n".join(stable), "\n".join(rest)
    return "", text
