"""ACP `session/delete` through the real daemon: it deletes a session in which another daemon (the
in-process face) runs a turn only once that turn has ended. The rest of its semantics in-process:
unit/faces/acp/test_acp_delete.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from acp import RequestError, text_block
from acp_client import acp_daemon, acp_face, delete, new_session, streaming

from toycoder_daemon.testing.fake_llm import FakeLLM


async def test_delete_of_a_session_running_a_turn_in_another_daemon_is_refused(tmp_path: Path, llm: FakeLLM,
                                                                               workspace: Path) -> None:
    """Through the real daemon: it deletes what another daemon (the in-process face) is running a turn in
    only once that turn has ended."""
    llm.add({"text": "word " * 2000, "chunk_size": 5, "chunk_delay": 0.05})  # runs until cancelled
    async with acp_face(tmp_path, llm) as (other, other_editor, _), acp_daemon(tmp_path, llm) as (conn, editor, _):
        assert editor.frames[0]["result"]["agentCapabilities"]["sessionCapabilities"]["delete"] == {}
        await conn.list_sessions(cwd=str(workspace))  # the workspace is open on this connection
        sid = await new_session(other, workspace)
        turn = asyncio.ensure_future(other.prompt(session_id=sid, prompt=[text_block("talk")]))
        await other_editor.wait_for(streaming(sid))
        with pytest.raises(RequestError) as elsewhere:
            await delete(conn, sid)
        assert elsewhere.value.code == -32011 and "another ToyCoder daemon" in str(elsewhere.value)
        await other.cancel(session_id=sid)
        assert (await turn).stop_reason == "cancelled"
        assert await delete(conn, sid) == {}
        assert await delete(conn, "no-such-session") == {}  # the spec: an unknown id succeeds silently
