"""Writing tools: write_file and edit_file (sensitive: the person sees the diff and decides).

Both compute their change for the permission preview and again when allowed, and refuse when the
base changed in between (what was approved is what is written). The change is checkpointed, then
written atomically (temp file, fsync, os.replace) keeping the file's encoding, BOM, line endings
and mode; or, for a file open in an editor that can apply edits, sent through the editor so the
buffer (unsaved work, undo history) gets it. An editor that serves files (ACP fs/read_text_file)
gives the base (an edit is refused when it cannot answer); one that is the source of truth for
every file (ACP fs/write_text_file) gets every edit as the whole new text, a BOM the file had
included, except for a file that is not UTF-8: the client would write the text back as UTF-8, so the
daemon writes it here in its encoding (editor_text.py, core.ports.Frontend).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from toycoder_daemon.core.util.atomic import SymlinkInPath, atomic_write
from toycoder_daemon.tools.base import ToolContext, ToolError, tool
from toycoder_daemon.tools.files.editor_text import served_text
from toycoder_daemon.tools.files.safe_fs import open_regular
from toycoder_daemon.tools.files.write_lock import Identity, PathBusy, path_lock
from toycoder_daemon.tools.workspace import OutsideWorkspace, unsaved_text

BOM = "\ufeff"


@dataclass
class TextFile:
    text: str
    encoding: str = "utf-8"
    bom: bool = False
    exists: bool = True
    in_editor: bool = False
    """The change goes through the editor (Frontend.apply_edit); the text is its buffer, if it has one."""
    tracked: bool = False
    """The text is an LSP open document (workspace.open_documents): it follows didChange live."""
    editor_bom: bool = False
    """The editor's whole text starts with a BOM: a whole-file write (ACP) sends it back."""
    identity: Identity | None = None
    """The file on disk the text was read from (None: it did not exist, or the text is the editor's)."""

    @property
    def newline(self) -> str:
        return "\r\n" if "\r\n" in self.text else "\n"


def _read(p: Path) -> tuple[bytes, Identity] | None:
    """The bytes of `p` and which file they came from (None: absent)."""
    try:  # regular files only, never blocking on a FIFO, no symlink race (safe_fs.py)
        with open_regular(p) as fh:
            st = os.fstat(fh.fileno())
            data = fh.read()
    except FileNotFoundError:
        return None
    return data, Identity.of(st, data)


def load(p: Path) -> TextFile:
    read = _read(p)
    if read is None:
        return TextFile("", exists=False)
    data, identity = read
    if b"\x00" in data[:8192]:
        raise ToolError(f"{p.name} looks like a binary file; it cannot be edited as text")
    try:
        text, enc = data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text, enc = data.decode("latin-1"), "latin-1"
    bom = text.startswith(BOM)
    return TextFile(text[1:] if bom else text, enc, bom, identity=identity)


def save(p: Path, f: TextFile, text: str) -> None:
    data = ((BOM if f.bom else "") + text).encode(f.encoding, errors="strict")
    # p is resolved and checked: no symlink may appear in it now (a swapped directory fails the
    # write instead of leading it outside); missing directories are made inside verified parents
    try:
        atomic_write(p, data, nofollow=True, parents=True, keep_mode=True)
    except SymlinkInPath:
        raise ToolError(f"{p.name}: the path changed while it was written (a directory became a symlink); "
                        "refused") from None


def unified_diff(rel: str, before: str, after: str, existed: bool = True, remains: bool = True) -> str:
    """`existed`/`remains`: the file was there before / is there after (else that side is /dev/null)."""
    import difflib  # previews only: not in every new process

    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=f"a/{rel}" if existed else "/dev/null", tofile=f"b/{rel}" if remains else "/dev/null",
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


async def _to_completion(work: Any) -> Any:
    """Finish a write even if the turn is cancelled meanwhile: a thread cannot be stopped halfway
    (nor an edit the editor may already have applied), so the write happens either way, and the
    turn must say so truthfully. `work`: a function (run on a thread) or a coroutine."""
    fut = asyncio.ensure_future(work if asyncio.iscoroutine(work) else asyncio.to_thread(work))
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await fut
        raise


def _target(ctx: ToolContext, path: str) -> Path:
    try:
        return ctx.workspace.resolve(path, for_write=True)
    except OutsideWorkspace as e:
        raise ToolError(f"refused: {e}") from None


async def _served(ctx: ToolContext, path: str) -> str | None:
    """The text an editor that serves files has of `path` (asked once per phase; None for LSP open
    documents, read live in _base, and for a path _target refuses: the plan reports that)."""
    try:
        p = _target(ctx, path)
    except ToolError:
        return None
    return await served_text(ctx, p, editing=True)


def _written_here(ctx: ToolContext, f: TextFile) -> bool:
    """An editor that writes all files is sent text it writes as UTF-8: another encoding would be lost."""
    return ctx.frontend.writes_all_files() and f.encoding != "utf-8"


def _base(ctx: ToolContext, p: Path, path: str, served: str | None = None) -> TextFile:
    """What the change is made against: the editor's text (its LSP open buffer, or the `served` one)
    when it has the file and can apply edits (the change then goes through it); else the disk,
    refusing to write under unsaved work (a reload would lose it). An editor that writes all files
    gets the change whatever the base, unless the file is not UTF-8 (_written_here)."""
    disk = load(p)
    tracked = p in ctx.workspace.open_documents
    buffer = ctx.workspace.open_documents[p] if tracked else served
    if not tracked and buffer is not None and (not disk.exists or unsaved_text(buffer, disk.text) is None):
        # a served text is the base only when it really differs from the disk's: a path the disk
        # lacks is a new file (CodeCompanion serves "" for it: it would become an overwrite, and
        # undo leave an empty file), and a text equal but for the final newline or CRLF (avante
        # drops the newline) would lose them on disk
        buffer = None
    here = _written_here(ctx, disk)
    can_edit = ctx.frontend.can_apply_edit() and not here
    if buffer is None:
        disk.in_editor = can_edit and ctx.frontend.writes_all_files()
        disk.editor_bom = disk.in_editor and disk.bom
        return disk
    if can_edit:
        return TextFile(buffer[1:] if buffer.startswith(BOM) else buffer, disk.encoding, disk.bom, in_editor=True,
                        tracked=tracked, editor_bom=not tracked and buffer.startswith(BOM))
    if disk.exists and unsaved_text(buffer, disk.text) is not None:
        also = f" (or the editor reads its {disk.encoding} text differently)" if here else ""
        raise ToolError(f"{path} has unsaved changes in the editor{also}; ask the user to save or discard them first")
    return disk


def _check_unchanged(ctx: ToolContext, p: Path, f: TextFile) -> None:
    """The file is still the one the change was computed from: same inode, size, mtime and hash."""
    read = _read(p)
    if (read[1] if read is not None else None) != f.identity:
        raise ToolError(f"{ctx.workspace.relative(p)} changed while it was being edited; read it again")


def _check_approved(ctx: ToolContext, p: Path, f: TextFile) -> None:
    """What was approved is what is written: the base must be the one the preview showed."""
    shown = ctx.approved.get(p)
    if shown is not None and shown != (f.exists, f.text):
        raise ToolError(f"{ctx.workspace.relative(p)} changed while waiting for approval; read it again")


def _encode(f: TextFile, text: str) -> bytes:
    return ((BOM if f.bom else "") + text).encode(f.encoding, errors="replace")


def _record(ctx: ToolContext, p: Path, when: str, content: bytes | None = None) -> str | None:
    """Checkpoint `p` before (or after) the write; the problem undo will have with it, if any."""
    if ctx.checkpoints is None:
        return None
    if ctx.workspace.root_of(p) != ctx.workspace.root:  # checkpoints key paths by the workspace root
        return f"{p} is in an additional directory: undo does not cover it"
    record = ctx.checkpoints.record_before_write if when == "before" else ctx.checkpoints.record_after_write
    return record(ctx.checkpoint_turn, p, content=content).problem


Plan = Callable[[bool], tuple[Path, TextFile, str]]
"""(re)computes a change: (path, its base, the new text); the flag says to check the approval."""


async def _commit(ctx: ToolContext, plan: Plan) -> tuple[Path, TextFile, str, str]:
    """Land a change: re-plan it against the current base, check that base is the approved one,
    checkpoint it, then write the disk (on a thread) or send it through the editor. Returns the
    plan and a note for the result ("" when there is nothing to add)."""

    def on_disk() -> tuple[Path, TextFile, str, str]:
        p, f, text = plan(True)
        if f.in_editor:
            return p, f, text, ""
        try:
            with path_lock(p):  # every file tool and restore, in every daemon, takes it to write p
                p, f, text = plan(True)  # again, under the lock: the base no other writer can move
                if f.in_editor:
                    return p, f, text, ""
                problem = _record(ctx, p, "before")
                try:
                    _check_unchanged(ctx, p, f)  # a writer without the lock (an editor, a build)
                    save(p, f, text)
                finally:
                    _record(ctx, p, "after")  # whatever is there now, even after a failure
        except PathBusy:
            raise ToolError(f"{ctx.workspace.relative(p)} is being written by another session; try again") from None
        if ctx.changed is not None:
            ctx.changed.append(str(p))
        note = f"\nnote: {problem}" if problem else ""
        if _written_here(ctx, f):
            note += (f"\nnote: written by the daemon in the file's {f.encoding} encoding, not through the "
                     "editor (it writes files as UTF-8); it may need to reload the file")
        return p, f, text, note

    async def in_editor(p: Path, f: TextFile, text: str) -> str:
        if f.tracked and ctx.workspace.open_documents.get(p) not in (f.text, BOM + f.text):  # typed since the plan
            raise ToolError(f"{ctx.workspace.relative(p)} changed while waiting for approval; read it again")
        # the editor's text, unsaved work included (a new file: its absence, from the disk)
        problem = _record(ctx, p, "before", _encode(f, f.text) if f.exists else None)
        sent = ctx.workspace.document_state(p)
        lead = BOM if f.editor_bom else ""
        result = await ctx.frontend.apply_edit(p, lead + f.text, lead + text)
        if not result.applied:
            why = result.reason or "no reason given"
            # an editor refusing a stale edit (its buffer version) reports the change before its answer
            if f.tracked and ctx.workspace.document_state(p) != sent:
                raise ToolError(f"{ctx.workspace.relative(p)} changed in the editor while waiting; read it again "
                                f"(the editor did not apply the change: {why})")
            raise ToolError(f"the editor did not apply the change to {ctx.workspace.relative(p)}: {why}")
        if f.tracked:
            ctx.workspace.open_documents[p] = text  # until its didChange arrives
        _record(ctx, p, "after", _encode(f, text))
        where = " in the editor's buffer" if f.tracked else " through the editor"
        return where + (f"\nnote: {problem}" if problem else "")

    p, f, text, note = await _to_completion(on_disk)
    if f.in_editor:
        note = await _to_completion(in_editor(p, f, text))
    return p, f, text, note


# ---- write_file -------------------------------------------------------------------------------

def _plan_write(ctx: ToolContext, path: str, content: str, check: bool = False,
                served: str | None = None) -> tuple[Path, TextFile, str]:
    p = _target(ctx, path)
    f = _base(ctx, p, path, served)
    if check:
        _check_approved(ctx, p, f)
    if f.exists and f.newline == "\r\n" and "\r\n" not in content:
        content = content.replace("\n", "\r\n")  # keep the file's line endings
    return p, f, content


async def _write_preview(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    served = await _served(ctx, args["path"])
    p, f, content = await asyncio.to_thread(_plan_write, ctx, args["path"], args["content"], False, served)
    ctx.approved[p] = (f.exists, f.text)
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
    served = await _served(ctx, path)
    p, f, text, note = await _commit(ctx, lambda check: _plan_write(ctx, path, content, check, served))
    n = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    verb = "overwrote" if f.exists else "created"
    return f"{verb} {ctx.workspace.relative(p)} ({n} lines){note}"


# ---- edit_file --------------------------------------------------------------------------------

def _closest(text: str, needle: str, n: int = 3) -> str:
    import difflib

    lines = text.splitlines()
    first = next((ln for ln in needle.splitlines() if ln.strip()), needle).strip()
    scored = sorted(
        ((difflib.SequenceMatcher(None, first, ln.strip()).ratio(), i) for i, ln in enumerate(lines)), reverse=True
    )[:n]
    shown = [f"{i + 1:6}\t{lines[i]}" for score, i in sorted(scored, key=lambda s: s[1]) if score > 0.4]
    return "\n".join(shown)


def _plan_edit(ctx: ToolContext, path: str, old: str, new: str, replace_all: bool,
               check: bool = False, served: str | None = None) -> tuple[Path, TextFile, str, int]:
    p = _target(ctx, path)
    f = _base(ctx, p, path, served)
    if check:
        _check_approved(ctx, p, f)
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
    served = await _served(ctx, args["path"])
    p, f, text, _ = await asyncio.to_thread(
        _plan_edit, ctx, args["path"], args["old_string"], args["new_string"], bool(args.get("replace_all")), False,
        served,
    )
    ctx.approved[p] = (f.exists, f.text)
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

    count = 0
    served = await _served(ctx, path)

    def plan(check: bool) -> tuple[Path, TextFile, str]:
        nonlocal count
        p, f, text, count = _plan_edit(ctx, path, old_string, new_string, replace_all, check, served)
        return p, f, text

    p, _, _, note = await _commit(ctx, plan)
    where, _, more = note.partition("\n")
    tail = f"\n{more}" if more else ""
    return f"edited {ctx.workspace.relative(p)}{where}: replaced {count} occurrence{'s' if count != 1 else ''}{tail}"
