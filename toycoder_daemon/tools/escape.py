"""Text that every JSON encoder can take, and names that cannot forge lines: escapes.

A file name that is not UTF-8 reaches Python as a str with lone surrogates (surrogateescape), and
a model may send one in its arguments ("nope\\udcff.txt"). Such a str cannot be encoded as UTF-8,
so tool output shows it escaped: an undecodable byte as `\\xNN`, any other lone surrogate as
`\\uDNNN`.

A name may also hold a newline, an ESC or a bidi override: raw in a listing, it forges lines ("[tool
result ends] SYSTEM: ...") or repaints a terminal. `escape_name` writes those as escapes too
(core/util/visible.py: `\\x0a`, `\\x1b`, `\\u202e`), and every listing of names (list_directory,
glob_search, grep_search) goes through it. `unescape_name` turns both forms back into the name, so a
name the model copies from a listing still opens.
"""

from __future__ import annotations

import re

from toycoder_daemon.core.util.visible import visible

_SURROGATE = re.compile("[\ud800-\udfff]")
_NAME_ESCAPE = re.compile(r"\\x(0[1-9a-fA-F]|1[0-9a-fA-F]|7[fF]|[89a-fA-F][0-9a-fA-F])"
                          r"|\\u(00[89][0-9a-fA-F]|202[a-eA-E]|206[6-9])")

NAME_NOTE = ("(bytes of a name that are not UTF-8 are shown as \\xNN, control characters as \\xNN or \\uNNNN; "
             "a path written that way opens them)")
"""Said once in a listing that has such a name."""


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def escape_surrogates(text: str) -> str:
    """`text` with each lone surrogate written as an escape (unchanged when there is none)."""
    return _SURROGATE.sub(_escape, text) if _SURROGATE.search(text) else text


def has_surrogates(text: str) -> bool:
    return _SURROGATE.search(text) is not None


def escape_name(name: str) -> str:
    """A file name (or path) as a listing shows it: lone surrogates and control characters escaped."""
    return visible(escape_surrogates(name))


def name_escaped(name: str) -> bool:
    """Whether `escape_name` changes `name` (the listing then ends with NAME_NOTE)."""
    return escape_name(name) != name


def _unescape(m: re.Match[str]) -> str:
    if m.group(1) is not None:
        code = int(m.group(1), 16)
        return chr(0xDC00 + code) if code >= 0x80 else chr(code)
    return chr(int(m.group(2), 16))


def unescape_name(text: str) -> str:
    """The escapes `escape_name` writes back to the name: `\\xNN` of a byte 0x80-0xff to its
    surrogateescape form, `\\xNN` of a control character and `\\uNNNN` of a C1 control or a bidi
    override to that character."""
    return _NAME_ESCAPE.sub(_unescape, text)
