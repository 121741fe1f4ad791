"""Text that every JSON encoder can take: lone surrogates written out as escapes.

A file name that is not UTF-8 reaches Python as a str with lone surrogates (surrogateescape), and
a model may send one in its arguments ("nope\\udcff.txt"). Such a str cannot be encoded as UTF-8,
so tool output shows it escaped: an undecodable byte as `\\xNN`, any other lone surrogate as
`\\uDNNN`. `unescape_bytes` turns the `\\xNN` form back into the name, so a name the model copies
from a listing still opens.
"""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")
_BYTE_ESCAPE = re.compile(r"\\x([89a-fA-F][0-9a-fA-F])")

NAME_NOTE = "(bytes of a name that are not UTF-8 are shown as \\xNN; a path written that way opens them)"
"""Said once in a listing that has such a name."""


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def escape_surrogates(text: str) -> str:
    """`text` with each lone surrogate written as an escape (unchanged when there is none)."""
    return _SURROGATE.sub(_escape, text) if _SURROGATE.search(text) else text


def has_surrogates(text: str) -> bool:
    return _SURROGATE.search(text) is not None


def unescape_bytes(text: str) -> str:
    """`\\xNN` escapes of bytes 0x80-0xff back to the surrogateescape form of a file name."""
    return _BYTE_ESCAPE.sub(lambda m: chr(0xDC00 + int(m.group(1), 16)), text)
