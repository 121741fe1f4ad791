"""Read-only file tools: read_file and list_directory."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

from .. import secrets
from .base import ToolContext, ToolError, tool
from .search_rg import ignored_entries
from .workspace import OutsideWorkspace


def _resolve(ctx: ToolContext, path: str) -> Path:
    try:
        return ctx.workspace.resolve(path)
    except OutsideWorkspace as e:
        raise ToolError(f"refused: {e}") from None


LINE_CAP = 4000
"""Characters shown of one line (minified files have megabyte lines)."""
PROBE = 8192


def _is_binary(head: bytes) -> bool:
    return b"\x00" in head


def _page(lines: Iterator[str], offset: int, limit: int, max_bytes: int) -> tuple[str, int, int, int]:
    """Number the lines offset..offset+limit-1 (within max_bytes) while counting them all, holding
    only the page in memory."""
    start = max(1, offset)
    out: list[str] = []
    size = 0
    end = start - 1
    full = False
    total = 0
    for total, line in enumerate(lines, 1):
        if full or total < start:
            continue
        line = line.rstrip("\r\n")
        if len(line) > LINE_CAP:
            kept = secrets.clip(line, LINE_CAP)  # redacted before the cut, a key's piece at the cut too
            line = kept.head + (f" [... {kept.dropped} more characters on this line]" if kept.dropped else "")
        shown = f"{total:6}\t{line}"
        if (size + len(shown) + 1 > max_bytes and out) or total >= start + limit:
            full = True
            continue
        out.append(shown)
        size += len(shown) + 1
        end = total
    return "\n".join(out), start, end, total


def _disk_page(p: Path, offset: int, limit: int, max_bytes: int) -> tuple[str, int, int, int]:
    with p.open("rb") as f:
        if _is_binary(f.read(PROBE)):
            raise ToolError(f"{p.name} looks like a binary file; read_file only shows text")
        f.seek(0)
        return _page((raw.decode("utf-8", errors="replace") for raw in f), offset, limit, max_bytes)


def _small_text(p: Path) -> str | None:
    """The disk text, to compare with an open editor buffer (None if unreadable or binary)."""
    try:
        data = p.read_bytes()
    except OSError:
        return None
    return None if _is_binary(data[:PROBE]) else data.decode("utf-8", errors="replace")


@tool(level="safe", title=lambda a: f"read_file {a.get('path', '')}")
async def read_file(
    ctx: ToolContext,
    path: Annotated[str, "File path, relative to the workspace root"],
    offset: Annotated[int, "First line to show (1-based)"] = 1,
    limit: Annotated[int | None, "How many lines to show (default: the configured page size)"] = None,
) -> str:
    """Read a text file from the workspace. Lines come numbered; long files are paged with offset/limit
    (the header says which lines of how many you got). Shows the editor's unsaved text when the file is
    open in the editor."""
    p = _resolve(ctx, path)
    page = limit if limit and limit > 0 else ctx.settings.read_default_lines
    max_bytes = ctx.settings.read_max_bytes
    open_in_editor = p in ctx.workspace.open_documents
    if not open_in_editor and not p.exists():
        raise ToolError(f"file not found: {path}")
    if p.is_dir():
        raise ToolError(f"{path} is a directory; use list_directory")
    buffer = None
    if open_in_editor:
        disk = await asyncio.to_thread(_small_text, p) if p.exists() else None
        buffer = ctx.workspace.unsaved(p, disk)
    if buffer is not None:
        source = " (the editor's unsaved text, not yet on disk)"
        body, start, end, total = _page(iter(buffer.splitlines()), offset, page, max_bytes)
    else:
        source = ""
        body, start, end, total = await asyncio.to_thread(_disk_page, p, offset, page, max_bytes)
    rel = ctx.workspace.relative(p)
    if total == 0:
        return f"{rel}: empty file{source}"
    if start > total:
        raise ToolError(f"offset {offset} is past the end of {rel} ({total} lines)")
    header = f"{rel}: lines {start}-{end} of {total}{source}"
    if end < total:
        header += f" (more: call read_file with offset={end + 1})"
    return f"{header}\n{body}"


def _list(p: Path, max_entries: int, hidden: set[str]) -> tuple[list[str], int]:
    """Entry lines (at most max_entries) and how many more there are, leaving out `.git` and the
    names in `hidden`."""
    entries = []
    with os.scandir(p) as it:
        for e in it:
            if e.name != ".git" and e.name not in hidden:
                entries.append(e)
    entries.sort(key=lambda e: (not e.is_dir(follow_symlinks=False), e.name.lower()))
    lines = []
    for e in entries[:max_entries]:
        if e.is_symlink():
            lines.append(f"link  {e.name} -> {os.readlink(e.path)}")
        elif e.is_dir():
            lines.append(f"dir   {e.name}/")
        else:
            try:
                size = e.stat().st_size
            except OSError:
                size = 0
            lines.append(f"file  {e.name}  ({size} bytes)")
    return lines, max(0, len(entries) - max_entries)


@tool(level="safe", title=lambda a: f"list_directory {a.get('path') or '.'}")
async def list_directory(
    ctx: ToolContext,
    path: Annotated[str, "Directory, relative to the workspace root"] = ".",
) -> str:
    """List a directory of the workspace: each entry with its kind and size (directories first).
    Entries ignored by .gitignore are left out (the last line says how many)."""
    p = _resolve(ctx, path or ".")
    if not p.is_dir():
        raise ToolError(f"not a directory: {path}")
    max_entries = ctx.settings.list_max_entries if ctx.settings else 500
    rel = ctx.workspace.relative(p)
    names = await asyncio.to_thread(os.listdir, p)
    # rg says which entries the ignore rules hide (search_rg.py: the same rules as the searches).
    hidden = await ignored_entries(ctx.workspace.root, "" if rel == "." else Path(rel).as_posix(),
                                   [n for n in names if n != ".git"])
    ignored = len(hidden)
    lines, more = await asyncio.to_thread(_list, p, max_entries, hidden)
    note = f"\n({ignored} ignored {'entry' if ignored == 1 else 'entries'} not shown)" if ignored else ""
    if not lines:
        return (f"{rel}/ (0 entries)" + note) if ignored else f"{rel}/ is empty"
    tail = f"\n... and {more} more entries" if more else ""
    return f"{rel}/ ({len(lines) + more} entries)\n" + "\n".join(lines) + tail + note
