"""The client's file system for the ACP face's tools (the ACP twin of the LSP face's open
documents and workspace/applyEdit), used when the client declared it in `initialize`:

- `fs.readTextFile`: read_file and the edit tools ask `fs/read_text_file` for a workspace file and
  so see the client's unsaved buffer (tools/files/editor_text.py). "Resource not found" (-32002) means the
  client has no such file: the disk is the truth. Any other error reply, a malformed answer or no
  answer within READ_TIMEOUT is EditorTextUnknown: read_file then reads the disk, but an edit is
  refused (its base would be the disk, and the whole-file write below would replace the client's
  unsaved buffer).
- `fs.writeTextFile`: the client is the source of truth for the files (as Zed and Claude Code's ACP
  adapter have it): every write_file/edit_file goes out as `fs/write_text_file`, and the client
  writes the disk (AcpFrontend.apply_edit, `write_text`); a refusal is told to the model with the
  client's message and data.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

from toycoder_daemon.core.ports import EditorTextUnknown
from toycoder_daemon.faces.acp.client import RESOURCE_NOT_FOUND, ClientError, RawClient
from toycoder_daemon.rpc.reply_wait import reply_within

log = logging.getLogger(__name__)

READ_TIMEOUT = 5.0
"""Seconds a client gets to answer fs/read_text_file (it reads a buffer or a local file)."""


def declared(caps: Any) -> tuple[bool, bool]:
    """(can read, can write): what the client declared of fs/read_text_file and fs/write_text_file
    (`caps`: the SDK's ClientCapabilities, or None)."""
    fs = caps.fs if caps else None
    if isinstance(fs, dict):  # the SDK's defaults, put where the client sent an fs it cannot read
        fs = None
    return bool(fs and fs.read_text_file), bool(fs and fs.write_text_file)


async def read_text(client: RawClient, session_id: str, path: Path, timeout: float = READ_TIMEOUT) -> str | None:
    """The client's text of `path` (an absolute path); None when it says it has no such file;
    EditorTextUnknown when it could not tell us (the caller decides whether the disk will do)."""
    try:
        answer = await reply_within(client.request("fs/read_text_file", {"sessionId": session_id, "path": str(path)}),
                                    timeout)
    except asyncio.CancelledError:
        raise
    except ClientError as e:
        if e.code == RESOURCE_NOT_FOUND:
            return None
        log.debug("fs/read_text_file %s: error %s: %s", path, e.code, said(e))
        raise EditorTextUnknown(f"the client answered with an error: {said(e):.200}", replied=True) from None
    except asyncio.TimeoutError:  # (TimeoutError on 3.11+)
        log.debug("fs/read_text_file %s: no answer within %gs", path, timeout)
        raise EditorTextUnknown(f"the client did not answer within {timeout:g}s", replied=False) from None
    except Exception as e:  # the client gone
        log.debug("fs/read_text_file %s: %s: %s", path, type(e).__name__, e)
        raise EditorTextUnknown(f"no usable answer from the client ({type(e).__name__})", replied=False) from None
    content = answer.get("content") if isinstance(answer, dict) else None
    if not isinstance(content, str):
        log.debug("fs/read_text_file %s: an answer without content", path)
        raise EditorTextUnknown("the client's answer had no text", replied=False)
    return content


async def write_text(client: RawClient, session_id: str, path: Path, content: str, timeout: float) -> str | None:
    """`fs/write_text_file`: None once the client wrote it; else why not, as the model reads it."""
    try:
        await reply_within(client.request("fs/write_text_file", {"sessionId": session_id, "path": str(path),
                                                                 "content": content}), timeout)
    except asyncio.CancelledError:
        raise
    except ClientError as e:
        log.debug("fs/write_text_file %s: error %s: %s", path, e.code, said(e))
        return f"the client refused the write: {said(e):.200}"
    except asyncio.TimeoutError:
        return f"the client did not answer within {timeout:g}s"
    except Exception as e:  # the client gone
        return f"no usable answer from the client ({type(e).__name__})"
    return None


def said(e: ClientError) -> str:
    """The client's error: its message, and its data (what the client says went wrong) as it sent it."""
    return f"{e}: {json.dumps(e.data, ensure_ascii=False, default=str)}" if e.data else str(e)
