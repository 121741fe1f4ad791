"""Writing tools: write_file and edit_file (sensitive: the person sees the diff and decides).

Both compute their change once for the permission preview, and write it atomically (temp file,
fsync, os.replace) keeping the file's encoding, BOM, line endings and mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from ..atomic import SymlinkInPath, atomic_write
from .base import ToolContext, ToolError, tool
from .safe_fs import open_regular
from .workspace import OutsideWorkspace

BOM = "\ufeff"


@dataclass
class TextFile:
    text: str
    encoding: str = "utf-8"
    bom: bool = False
    exists: bool = True

    @property
    def newline(self) -> str:
        return "\r\n" if "\r\n" in self.text else "\n"


def load(p: Path) -> TextFile:
    try:  # regular files only, never blocking on a FIFO, no symlink race (safe_fs.py)
        with open_regular(p) as fh:
            data = fh.read()
    except FileNotFoundError:
        return TextFile("", exists=False)
    if b"\x00" in data[:8192]:
        raise ToolError(f"{p.name} looks like a binary file; it cannot be edited as text")
    try:
        text, enc = data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text, enc = data.decode("latin-1"), "latin-1"
    bom = text.startswith(BOM)
    return TextFile(text[1:] if bom else text, enc, bom)


def save(p: Path, f: TextFile, text: str) -> None:
    data = ((BOM if f.bom else "") + text).encode(f.encoding, errors="strict")
    # p is resolved and checked: no symlink may appear in it now (a swapped directory fails the
    # write instead of leading it outside); missing directories are made inside verified parents
    try:
        atomic_write(p, data, nofollow=True, parents=True, keep_mode=True)
    except SymlinkInPath:
        raise ToolError(f"{p.name}: the path changed while it was written (a directory became a symlink); "
                        "refused") from None


def unified_diff(rel: str, before: str, after: str, existed: bool = True) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=f"a/{rel}" if existed else "/dev/null", tofile=f"b/{rel}",
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


async def _to_completion(work: Any) -> str:
    """Run a write on a thread to the end even if the turn is cancelled meanwhile: a thread cannot
    be stopped halfway, so the write happens either way, and the turn must say so truthfully."""
    fut = asyncio.ensure_future(asyncio.to_thread(work))
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await fut
        raise


def _target(ctx: ToolContext, path: str) -> Path:
    try:
        p = ctx.workspace.resolve(path, for_write=True)
    except OutsideWorkspace as e:
        raise ToolError(f"refused: {e}") from None
    if p in ctx.workspace.open_documents and p.is_file() and ctx.workspace.unsaved(p, load(p).text) is not None:
        # Writing the disk copy would fight the person's unsaved work (and a reload would lose it).
        raise ToolError(f"{path} has unsaved changes in the editor; ask the user to save or discard them first")
    return p


# ---- write_file -------------------------------------------------------------------------------

def _plan_write(ctx: ToolContext, path: str, content: str) -> tuple[Path, TextFile, str]:
    p = _target(ctx, path)
    f = load(p)
    if f.exists and f.newline == "\r\n" and "\r\n" not in content:
        content = content.replace("\n", "\r\n")  # keep the file's line endings
    return p, f, content


async def _write_preview(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    p, f, content = await asyncio.to_thread(_plan_write, ctx, args["path"], args["content"])
    rel = ctx.workspace.relative(p)
    return {"kind": "diff", "path": rel, "uri": p.as_uri(), "diff": unified_diff(rel, f.text, content, f.exists)}


@tool(level="sensitive", title=lambda a: f"write_file {a.get('path', '')}", preview=_write_preview)
async def write_file(
    ctx: ToolContext,
    path: Annotated[str, "File path, relative to the workspace root"],
    content: Annotated[str, "The complete new content of the file"],
) -> str:
    """Create a file or overwrite it with the given content (parent directories are created).
    Prefer edit_file for changes to an existing file."""

    def run() -> str:
        p, f, text = _plan_write(ctx, path, content)
        save(p, f, text)
        if ctx.changed is not None:
            ctx.changed.append(str(p))
        n = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        verb = "overwrote" if f.exists else "created"
        return f"{verb} {ctx.workspace.relative(p)} ({n} lines)"

    return await _to_completion(run)


# ---- edit_file --------------------------------------------------------------------------------

def _closest(text: str, needle: str, n: int = 3) -> str:
    lines = text.splitlines()
    first = next((ln for ln in needle.splitlines() if ln.strip()), needle).strip()
    scored = sorted(
        ((difflib.SequenceMatcher(None, first, ln.strip()).ratio(), i) for i, ln in enumerate(lines)), reverse=True
    )[:n]
    shown = [f"{i + 1:6}\t{lines[i]}" for score, i in sorted(scored, key=lambda s: s[1]) if score > 0.4]
    return "\n".join(shown)


def _plan_edit(ctx: ToolContext, path: str, old: str, new: str, replace_all: bool) -> tuple[Path, TextFile, str, int]:
    p = _target(ctx, path)
    f = load(p)
    if not f.exists:
        raise ToolError(f"file not found: {path} (use write_file to create it)")
    if old == "":
        raise ToolError("old_string is empty; give the exact text to replace")
    if old == new:
        raise ToolError("old_string and new_string are the same; nothing to change")
    if f.newline == "\r\n" and "\r\n" not in old:
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
    count = f.text.count(old)
    if count == 0:
        near = _closest(f.text, old)
        hint = f"\nThe closest lines in the file are:\n{near}" if near else ""
        raise ToolError(
            f"old_string was not found in {path}. It must match the file exactly, whitespace and "
            f"indentation included; read the file again and copy the text.{hint}"
        )
    if count > 1 and not replace_all:
        raise ToolError(
            f"old_string matches {count} places in {path}; add surrounding lines so it matches exactly "
            "one, or pass replace_all=true to change every one"
        )
    text = f.text.replace(old, new) if replace_all else f.text.replace(old, new, 1)
    return p, f, text, count if replace_all else 1


async def _edit_preview(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    p, f, text, _ = await asyncio.to_thread(
        _plan_edit, ctx, args["path"], args["old_string"], args["new_string"], bool(args.get("replace_all"))
    )
    rel = ctx.workspace.relative(p)
    return {"kind": "diff", "path": rel, "uri": p.as_uri(), "diff": unified_diff(rel, f.text, text)}


@tool(level="sensitive", title=lambda a: f"edit_file {a.get('path', '')}", preview=_edit_preview)
async def edit_file(
    ctx: ToolContext,
    path: Annotated[str, "File path, relative to the workspace root"],
    old_string: Annotated[str, "Exact text to replace (must match once unless replace_all)"],
    new_string: Annotated[str, "Replacement text"],
    replace_all: Annotated[bool, "Replace every occurrence"] = False,
) -> str:
    """Replace an exact piece of text in a file. old_string must match the file exactly (whitespace
    included) and only once, unless replace_all is true. Read the file first."""

    def run() -> str:
        p, f, text, n = _plan_edit(ctx, path, old_string, new_string, replace_all)
        save(p, f, text)
        if ctx.changed is not None:
            ctx.changed.append(str(p))
        return f"edited {ctx.workspace.relative(p)}: replaced {n} occurrence{'s' if n != 1 else ''}"

    return await _to_completion(run)
