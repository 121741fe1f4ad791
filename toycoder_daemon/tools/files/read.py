"""Read-only file tools: read_file and list_directory.

They open files through safe_fs (regular files only, no symlink race, their own thread pool) and
read in chunks, cutting long lines while reading (line_reader.py): memory is bounded by the page.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

from toycoder_daemon.core.util import secrets
from toycoder_daemon.tools.base import ToolContext, ToolError, tool
from toycoder_daemon.tools.escape import NAME_NOTE, escape_name, name_escaped
from toycoder_daemon.tools.files.editor_text import served_text
from toycoder_daemon.tools.files.line_reader import Line, read_lines
from toycoder_daemon.tools.files.safe_fs import kind, lstat, off_loop, open_directory, open_regular
from toycoder_daemon.tools.workspace import OutsideWorkspace, unsaved_text


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


def _shown(line: Line) -> str:
    """A line cut to LINE_CAP, redacted before the cut (a key's piece at the cut too)."""
    if line.more:  # cut while reading: the head holds LINE_CAP + the longest key's length
        kept = secrets.clip(line.text, LINE_CAP, cut_after=True)
        dropped = kept.dropped + line.more
    elif len(line.text) > LINE_CAP:
        kept = secrets.clip(line.text, LINE_CAP)
        dropped = kept.dropped
    else:
        return line.text
    return kept.head + (f" [... {dropped} more characters on this line]" if dropped else "")


def _page(lines: Iterator[Line], offset: int, limit: int, max_bytes: int) -> tuple[str, int, int, int]:
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
        shown = f"{total:6}\t{_shown(line)}"
        if (size + len(shown) + 1 > max_bytes and out) or total >= start + limit:
            full = True
            continue
        out.append(shown)
        size += len(shown) + 1
        end = total
    return "\n".join(out), start, end, total


def _disk_page(p: Path, offset: int, limit: int, max_bytes: int) -> tuple[str, int, int, int]:
    with open_regular(p) as f:
        head = f.read(PROBE)
        if _is_binary(head):
            raise ToolError(f"{p.name} looks like a binary file; read_file only shows text")
        return _page(read_lines(f, LINE_CAP, head), offset, limit, max_bytes)


def _small_text(p: Path, buffer: str) -> str | None:
    """The disk text, to compare with an open editor buffer (None if unreadable, binary or much
    bigger than the buffer: then they differ anyway, and it is not read whole)."""
    try:
        with open_regular(p) as f:
            data = f.read(4 * len(buffer) + 65536)
            if f.read(1):
                return None
    except (OSError, ToolError):
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
    st = await off_loop(lstat, p)
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{path} is a directory; use list_directory")
    text = ctx.workspace.open_documents.get(p)  # an LSP editor's open buffer
    if text is None:
        text = await served_text(ctx, p)  # an editor that serves files (ACP fs/read_text_file)
    if text is None and st is None:
        raise ToolError(f"file not found: {path}")
    buffer = None
    if text is not None:
        disk = await off_loop(_small_text, p, text) if st is not None else None
        buffer = unsaved_text(text, disk)
    if buffer is not None:
        source = " (the editor's unsaved text, not yet on disk)"
        body, start, end, total = _page((Line(t, 0) for t in buffer.splitlines()), offset, page, max_bytes)
    else:
        source = ""
        try:
            body, start, end, total = await off_loop(_disk_page, p, offset, page, max_bytes)
        except FileNotFoundError:  # removed since the check
            raise ToolError(f"file not found: {path}") from None
    rel = ctx.workspace.relative(p)
    if total == 0:
        return f"{rel}: empty file{source}"
    if start > total:
        raise ToolError(f"offset {offset} is past the end of {rel} ({total} lines)")
    header = f"{rel}: lines {start}-{end} of {total}{source}"
    if end < total:
        header += f" (more: call read_file with offset={end + 1})"
    return f"{header}\n{body}"


def _entry(fd: int, e: os.DirEntry[str]) -> str:
    name = escape_name(e.name)
    if e.is_symlink():
        return f"link  {name} -> {escape_name(os.readlink(e.name, dir_fd=fd))}"
    if e.is_dir(follow_symlinks=False):
        return f"dir   {name}/"
    try:
        st = e.stat(follow_symlinks=False)
    except OSError:
        return f"file  {name}  (0 bytes)"
    if not stat.S_ISREG(st.st_mode):  # told apart, never opened
        return f"other {name}  ({kind(st.st_mode)})"
    return f"file  {name}  ({st.st_size} bytes)"


def _list(p: Path, max_entries: int, hidden: set[str]) -> tuple[list[str], int, bool]:
    """Entry lines (at most max_entries), how many more there are, and whether a name was escaped,
    leaving out `.git` and the names in `hidden`. The directory is opened without following a
    symlink (safe_fs.open_directory) and listed through that fd."""
    fd = open_directory(p)
    try:
        with os.scandir(fd) as it:
            entries = [e for e in it if e.name != ".git" and e.name not in hidden]
        entries.sort(key=lambda e: (not e.is_dir(follow_symlinks=False), e.name.lower()))
        lines = [_entry(fd, e) for e in entries[:max_entries]]
    finally:
        os.close(fd)
    escaped = any(name_escaped(e.name) for e in entries[:max_entries])
    return lines, max(0, len(entries) - max_entries), escaped


def _names(p: Path) -> list[str]:
    fd = open_directory(p)
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


@tool(level="safe", title=lambda a: f"list_directory {a.get('path') or '.'}")
async def list_directory(
    ctx: ToolContext,
    path: Annotated[str, "Directory, relative to the workspace root"] = ".",
) -> str:
    """List a directory of the workspace: each entry with its kind and size (directories first).
    Entries ignored by .gitignore are left out (the last line says how many)."""
    p = _resolve(ctx, path or ".")
    st = await off_loop(lstat, p)
    if st is None or not stat.S_ISDIR(st.st_mode):
        raise ToolError(f"not a directory: {path}")
    max_entries = ctx.settings.list_max_entries if ctx.settings else 500
    rel = ctx.workspace.relative(p)
    names = await off_loop(_names, p)
    # rg says which entries the ignore rules hide (search/rg_runs.py: the same rules as the searches);
    # imported here, as the searches do: not in every new process
    from toycoder_daemon.tools.search.rg_runs import ignored_entries

    root = ctx.workspace.root_of(p) or ctx.workspace.root  # an additional directory's own ignore rules
    in_root = "" if p == root else p.relative_to(root).as_posix()
    hidden = await ignored_entries(root, in_root, [n for n in names if n != ".git"])
    ignored = len(hidden)
    lines, more, escaped = await off_loop(_list, p, max_entries, hidden)
    rel = escape_name(rel)
    note = f"\n({ignored} ignored {'entry' if ignored == 1 else 'entries'} not shown)" if ignored else ""
    if escaped:
        note += f"\n{NAME_NOTE}"
    if not lines:
        return (f"{rel}/ (0 entries)" + note) if ignored else f"{rel}/ is empty"
    tail = f"\n... and {more} more entries" if more else ""
    return f"{rel}/ ({len(lines) + more} entries)\n" + "\n".join(lines) + tail + note
