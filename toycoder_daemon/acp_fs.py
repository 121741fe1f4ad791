"""The client's file system for the ACP face's tools (the ACP twin of the LSP face's open
documents and workspace/applyEdit), used when the client declared it in `initialize`:

- `fs.readTextFile`: read_file and the edit tools ask `fs/read_text_file` for a workspace file and
  so see the client's unsaved buffer (tools/editor_text.py). An error reply, a malformed answer or
  no answer within READ_TIMEOUT falls back to the disk (logged at debug), never failing the tool.
- `fs.writeTextFile`: the client is the source of truth for the files (as Zed and Claude Code's ACP
  adapter have it): every write_file/edit_file goes out as `fs/write_text_file`, and the client
  writes the disk (AcpFrontend.apply_edit).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from acp.schema import ClientCapabilities

from .reply_wait import reply_within

log = logging.getLogger(__name__)

READ_TIMEOUT = 5.0
"""Seconds a client gets to answer fs/read_text_file (it reads a buffer or a local file)."""


def declared(caps: ClientCapabilities | None) -> tuple[bool, bool]:
    """(can read, can write): what the client declared of fs/read_text_file and fs/write_text_file."""
    fs = caps.fs if caps else None
    return bool(fs and fs.read_text_file), bool(fs and fs.write_text_file)


async def read_text(client: Any, session_id: str, path: Path, timeout: float = READ_TIMEOUT) -> str | None:
    """The client's text of `path` (an absolute path); None when it cannot give it in time."""
    try:
        answer = await reply_within(client.read_text_file(session_id=session_id, path=str(path)), timeout)
    except asyncio.CancelledError:
        raise
    except Exception as e:  # an error reply (no such file, say), a timeout, the client gone
        log.debug("fs/read_text_file %s: %s: %s; the disk is read instead", path, type(e).__name__, e)
        return None
    content = getattr(answer, "content", None)
    if not isinstance(content, str):
        log.debug("fs/read_text_file %s: an answer without content; the disk is read instead", path)
        return None
    return content
