"""Text shown to a person exactly as it is: control characters and bidi overrides as escapes.

A model (or a file name, or a repository) controls much of what the faces show: titles, commands,
diffs, arguments, names. A raw ESC can repaint a terminal (`curl …|sh` drawn as `pytest -q`), a
carriage return or backspace can overwrite what was printed, and a bidi override (U+202A-U+202E,
U+2066-U+2069) reorders what an editor draws. `visible` writes each of them as an escape, so what
the person reads is what runs:

- C0 controls, DEL and ESC as `\\x1b`; C1 controls as `\\u009b` (never `\\xNN`, which tools/escape.py
  uses for a name's bytes that are not UTF-8); bidi overrides and isolates as `\\u202e`.
- With `lines=True` (multi-line text: a diff, a command, a reply) newline and tab stay, and so does
  a carriage return right before a newline (CRLF text); a lone carriage return is escaped.
"""

from __future__ import annotations

import re
from typing import Any

_ALWAYS = "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
_INLINE = re.compile(f"[{_ALWAYS}\t\n\r]")
_LINES = re.compile(f"[{_ALWAYS}]|\r(?!\n)")


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}"


def visible(text: str, *, lines: bool = False) -> str:
    """`text` with every control character and bidi override written as an escape; with `lines`,
    newline, tab and CRLF kept."""
    pattern = _LINES if lines else _INLINE
    return pattern.sub(_escape, text) if pattern.search(text) else text


def visible_tree(value: Any, *, lines: bool = True) -> Any:
    """`value` (JSON-like: dicts, lists, strings) with `visible` applied to every string in it,
    keys included; anything else as it is."""
    if isinstance(value, str):
        return visible(value, lines=lines)
    if isinstance(value, dict):
        return {visible_tree(k, lines=False): visible_tree(v, lines=lines) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [visible_tree(v, lines=lines) for v in value]
    return value
