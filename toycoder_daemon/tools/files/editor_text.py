"""What the editor shows of a workspace file, for read_file and the edit tools' base.

The LSP face's open buffers arrive as textDocument/did* (`workspace.open_documents`). An editor that
serves files (ACP fs/read_text_file) is asked through the frontend instead: once per file per phase
of a tool call (the preview, then the call once allowed, so a buffer typed in while the person was
asked is noticed). It is not asked about what it could only answer with a large or binary file.
When it serves files but cannot answer (EditorTextUnknown), a read uses the disk; an edit is refused,
since a change made against the disk would replace the unsaved buffer it could not see.
"""

from __future__ import annotations

import logging
import stat
from pathlib import Path

from toycoder_daemon.core.ports import EditorTextUnknown
from toycoder_daemon.tools.base import ToolContext, ToolError
from toycoder_daemon.tools.files.safe_fs import lstat, off_loop, open_regular

ASK_LIMIT = 8 << 20
"""Files bigger than this on disk are not asked for: the answer would carry the whole file."""
PROBE = 8192

log = logging.getLogger(__name__)


def _askable(p: Path) -> tuple[bool, bool]:
    """(a file the editor may hold a buffer of: absent (a new, unsaved one) or a small text file,
    whether the disk has it)."""
    st = lstat(p)
    if st is None:
        return True, False
    if not stat.S_ISREG(st.st_mode) or st.st_size > ASK_LIMIT:
        return False, True
    try:
        with open_regular(p) as f:
            return b"\x00" not in f.read(PROBE), True
    except (OSError, ToolError):
        return False, True


async def served_text(ctx: ToolContext, p: Path, *, editing: bool = False) -> str | None:
    """The editor's text of `p` (resolved, in the workspace) when it serves files and is not an LSP
    buffer (those are read from open_documents, live); None: the disk is the truth. `editing`: the
    text is an edit's base, and an editor that could not answer refuses the edit (ToolError)."""
    if p in ctx.workspace.open_documents:
        return None
    askable, on_disk = await off_loop(_askable, p)
    if not askable:
        return None
    try:
        return await ctx.frontend.editor_text(p)
    except EditorTextUnknown as e:
        if e.replied and not on_disk:
            return None  # an error about a file the disk has not either: it has none (else it would serve it)
        if not editing:
            log.debug("the editor's text of %s unknown (%s); the disk is read", p, e)
            return None
        raise ToolError(f"could not get the editor's text of {ctx.workspace.relative(p)} ({e}); try again") from None
