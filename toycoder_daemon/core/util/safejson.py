"""JSON on our side that cannot fail on what a workspace or a model sends.

* Lone surrogates (a file name that is not UTF-8, decoded with surrogateescape, or a model-sent
  `"\\udcff"`) cannot be encoded as UTF-8. Every encoder (session files, provider requests, the
  wire) writes them as U+FFFD instead: the text stays readable, the file and the request stay valid
  UTF-8 and valid JSON for strict parsers. Properly paired surrogates become their character.
* Nesting: Python's json recurses, so a document nested ~1000 deep raises RecursionError (not a
  ValueError) and takes the caller down. `loads` refuses anything deeper than MAX_DEPTH with a
  ValueError, checked by a linear scan before parsing.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 200
"""Deepest nesting `loads` accepts; real tool arguments are a few levels deep."""

REPLACEMENT = "\ufffd"


class TooDeep(ValueError):
    """The JSON text nests deeper than the limit."""


def scrub(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (the same object when there is none)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        # utf-16 with surrogatepass re-pairs split pairs; what stays lone is replaced on decode.
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def scrub_tree(value: Any) -> Any:
    """A JSON-shaped value with every string (keys included) scrubbed; unchanged parts are shared."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub(k) if isinstance(k, str) else k: scrub_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_tree(v) for v in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """json.dumps whose output always encodes as UTF-8 (lone surrogates become U+FFFD)."""
    kwargs.setdefault("ensure_ascii", False)
    return scrub(json.dumps(value, **kwargs))


def dumps_bytes(value: Any, **kwargs: Any) -> bytes:
    return dumps(value, **kwargs).encode("utf-8")


def depth(text: str) -> int:
    """Deepest nesting of arrays/objects in a JSON text (brackets inside strings do not count)."""
    deepest = level = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            level += 1
            deepest = max(deepest, level)
        elif ch in "]}":
            level -= 1
    return deepest


def loads(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """json.loads that raises ValueError (TooDeep) instead of RecursionError on deep input."""
    s = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    if s.count("[") + s.count("{") > max_depth and (d := depth(s)) > max_depth:  # the scan only when it could be
        raise TooDeep(f"JSON nested {d} levels deep (the limit is {max_depth})")
    return json.loads(s)
