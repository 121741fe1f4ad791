"""Lines of a file read in chunks, long lines cut while reading: memory stays bounded by the cut,
however long a line is (a 1 GB file without a newline is read 64 KiB at a time).

A cut line keeps `cap + secrets.longest()` characters, so `secrets.clip(head, cap, cut_after=True)`
sees a key that crosses the cut whole and redacts it before cutting.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from typing import BinaryIO, NamedTuple

from toycoder_daemon.core.util import secrets

CHUNK = 1 << 16


class Line(NamedTuple):
    text: str
    """The line without its end; only the first characters when `more`."""
    more: int
    """Characters of the line that were read past and dropped (0: `text` is the whole line)."""


def _finish(parts: list[str], more: int, last_cr: bool) -> Line:
    text = "".join(parts)
    if more:
        return Line(text, more - 1 if last_cr else more)
    return Line(text[:-1] if text.endswith("\r") else text, 0)


def read_lines(f: BinaryIO, cap: int, first: bytes = b"") -> Iterator[Line]:
    """Each line of `first` + the rest of `f`, cut past `cap + secrets.longest()` characters."""
    keep = cap + secrets.longest()
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    parts: list[str] = []
    size = more = 0
    last_cr = seen = False
    data = first or f.read(CHUNK)
    while True:
        text = decoder.decode(data, final=not data)
        start = 0
        while start < len(text):
            seen = True
            end = text.find("\n", start)
            piece = text[start:] if end < 0 else text[start:end]
            room = keep - size
            if len(piece) <= room:
                parts.append(piece)
                size += len(piece)
            else:
                if room > 0:
                    parts.append(piece[:room])
                    size += room
                more += len(piece) - max(room, 0)
            if piece:
                last_cr = piece.endswith("\r")
            if end < 0:
                break
            yield _finish(parts, more, last_cr)
            parts, size, more, last_cr, seen = [], 0, 0, False, False
            start = end + 1
        if not data:
            break
        data = f.read(CHUNK)
    if seen:
        yield _finish(parts, more, last_cr)
