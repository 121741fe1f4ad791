"""The pure-Python fallback of the search tools, used when rg is missing, cannot run, or is
disabled with TOYCODER_NO_RG=1. It walks the tree with IgnoreMatcher (the file set rg's flags
give), reads files as rg does and matches lines with `re`, in a thread that a cancelled call stops.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading

from .base import ToolError
from .search_common import _Hits, _Plan, _TopPaths


def _walk(plan: _Plan, stop: threading.Event):
    if not plan.target_is_dir:
        yield os.fsencode(plan.target)
        return
    for rel in plan.matcher.walk_rel(plan.target or None):
        if stop.is_set():  # the tool call was cancelled: end the thread's work early
            return
        yield rel


async def _in_thread(func, *args) -> None:
    """Run a fallback in a thread; a cancelled call also stops the thread's walk."""
    stop = threading.Event()
    try:
        await asyncio.to_thread(func, *args, stop)
    except asyncio.CancelledError:
        stop.set()
        raise


def _py_files(plan: _Plan, top: _TopPaths, stop: threading.Event) -> None:
    rels = plan.select(list(_walk(plan, stop)))
    top.extend([rel.decode("utf-8", "surrogateescape") for rel in rels])


_NO_PREFILTER = re.compile(r"\\[AZ]|\(\?<?[=!]")
_NEWLINE_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\n")


def _compile_py(pattern: str, case_sensitive: bool) -> tuple[re.Pattern[str], re.Pattern[str] | None]:
    if "\n" in pattern or _NEWLINE_ESCAPE.search(pattern):
        raise ToolError(f"invalid regex {pattern!r}: the literal \"\\n\" is not allowed in a regex")
    flags = 0 if case_sensitive else re.IGNORECASE
    try:
        rx = re.compile(pattern, flags)
        # A whole-file search finds every file that has a matching line (and maybe more), unless
        # the pattern looks across line ends or at the ends of the whole text.
        pre = None if _NO_PREFILTER.search(pattern) else re.compile(pattern, flags | re.MULTILINE)
    except re.error as e:
        raise ToolError(f"invalid regex {pattern!r}: {e}") from None
    return rx, pre


def _read_text(path: bytes) -> str | None:
    """The text as rg sees it: None for a binary file (a NUL byte anywhere, after UTF-16 BOM
    decoding), a UTF-8 BOM removed, invalid UTF-8 replaced."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        text = data.decode("utf-16", "replace")
        return None if "\x00" in text else text
    if b"\x00" in data:
        return None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return data.decode("utf-8", "replace")


def _py_grep(plan: _Plan, rx: re.Pattern[str], pre: re.Pattern[str] | None, hits: _Hits,
             stop: threading.Event) -> None:
    root = os.fsencode(str(plan.ws_root))
    search = rx.search
    for rel in plan.select(list(_walk(plan, stop))):
        if stop.is_set():
            return
        text = _read_text(root + b"/" + rel)
        if not text or (pre is not None and pre.search(text) is None):
            continue
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        found = [(i, line) for i, line in enumerate(lines, 1) if search(line)]
        if found:
            hits.add_file(rel.decode("utf-8", "surrogateescape"), found[: hits.limit], len(found))
