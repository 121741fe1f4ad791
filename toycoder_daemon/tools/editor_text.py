"""What the editor shows of a workspace file, for read_file and the edit tools' base.

The LSP face's open buffers arrive as textDocument/did* (`workspace.open_documents`). An editor that
serves files (ACP fs/read_text_file) is asked through the frontend instead: once per file per phase
of a tool call (the preview, then the call once allowed, so a buffer typed in while the person was
asked is noticed). It is not asked about what it could only answer with a large or binary file.
"""

from __future__ import annotations

import stat
from pathlib import Path

from .base import ToolContext, ToolError
from .safe_fs import lstat, off_loop, open_regular

ASK_LIMIT = 8 << 20
"""Files bigger than this on disk are not asked for: the answer would carry the whole file."""
PROBE = 8192


def _askable(p: Path) -> bool:
    """A file the editor may hold a buffer of: absent (a new, unsaved one) or a small text file."""
    st = lstat(p)
    if st is None:
        return True
    if not stat.S_ISREG(st.st_mode) or st.st_size > ASK_LIMIT:
        return False
    try:
        with open_regular(p) as f:
            return b"\x00" not in f.read(PROBE)
    except (OSError, ToolError):
        return False


async def served_text(ctx: ToolContext, p: Path) -> str | None:
    """The editor's text of `p` (resolved, in the workspace) when it serves files and is not an LSP
    buffer (those are read from open_documents, live); None: the disk is the truth."""
    if p in ctx.workspace.open_documents or not await off_loop(_askable, p):
        return None
    return await ctx.frontend.editor_text(p)
