"""ACP `session/delete` (SDK 0.12.1 does not route it; acp_sessions.route_delete does): advertised in
`initialize`, the same semantics as `toycoder/session/delete` (refused while a turn runs, here or in
another daemon) except that an unknown id succeeds silently (the spec's rule), bad params -32602. The client side sends it raw: the SDK's
client has no method for it. In-process faces here; a delete through the real daemon of what another
daemon runs: e2e/test_acp_delete_e2e.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from acp import RequestError, text_block
from acp_client import acp_face, delete, new_session, streaming

from toycoder_daemon.testing.fake_llm import FakeLLM


async def test_delete_removes_the_session_unknown_ones_silently_and_refuses_busy_ones(tmp_path: Path, llm: FakeLLM,
                                                                               workspace: Path) -> None:
    llm.add({"text": "kept"}, {"text": "word " * 2000, "chunk_size": 5, "chunk_delay": 0.05})  # until cancelled
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        assert editor.frames[0]["result"]["agentCapabilities"]["sessionCapabilities"]["delete"] == {}
        gone, busy = await new_session(conn, workspace), await new_session(conn, workspace)
        await conn.prompt(session_id=gone, prompt=[text_block("first")])
        assert await delete(conn, gone) == {}
        assert gone not in [s.session_id for s in (await conn.list_sessions(cwd=str(workspace))).sessions]
        with pytest.raises(RequestError) as after:
            await conn.prompt(session_id=gone, prompt=[text_block("still there?")])
        assert after.value.code == -32002
        assert await delete(conn, gone) == {}  # deleted already: unknown now, and that is done too
        assert await delete(conn, "never-was") == {}
        assert await delete(conn, "../../etc/passwd") == {}  # no id of ours: nothing looked up
        with pytest.raises(RequestError) as bad:
            await delete(conn, 42)
        assert bad.value.code == -32602

        turn = asyncio.ensure_future(conn.prompt(session_id=busy, prompt=[text_block("talk")]))
        await editor.wait_for(streaming(busy))
        with pytest.raises(RequestError) as refused:
            await delete(conn, busy)
        assert refused.value.code == -32011 and "running a turn" in str(refused.value)
        await conn.cancel(session_id=busy)
        assert (await turn).stop_reason == "cancelled"
        assert await delete(conn, busy) == {}
        assert (await conn.list_sessions(cwd=str(workspace))).sessions == []


async def test_delete_in_a_fresh_connection_finds_the_session_in_the_data_dir(tmp_path: Path, llm: FakeLLM,
                                                                              workspace: Path) -> None:
    llm.add({"text": "kept"})
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        sid = await new_session(conn, workspace)
        await conn.prompt(session_id=sid, prompt=[text_block("first")])
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        assert await delete(conn, sid) == {}  # no cwd in session/delete: found in its workspace's directory
        assert (await conn.list_sessions()).sessions == []
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        assert (await conn.list_sessions(cwd=str(workspace))).sessions == []  # gone on disk, not only there


async def test_a_refused_delete_leaves_the_session_open_here(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    """Two in-process faces (two Apps: their session locks conflict as two daemons' do). The refusal
    changes nothing on the deleting side: it still hears the other side's turn."""
    llm.add({"text": "word " * 2000, "chunk_size": 5, "chunk_delay": 0.05})  # runs until cancelled
    async with acp_face(tmp_path, llm) as (a, a_editor, _), acp_face(tmp_path, llm) as (b, b_editor, _):
        sid = await new_session(a, workspace)
        await b.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
        turn = asyncio.ensure_future(a.prompt(session_id=sid, prompt=[text_block("talk")]))
        await a_editor.wait_for(streaming(sid))
        with pytest.raises(RequestError) as elsewhere:
            await delete(b, sid)
        assert elsewhere.value.code == -32011
        await a.cancel(session_id=sid)
        assert (await turn).stop_reason == "cancelled"
        await b_editor.wait_for(lambda f: f.get("params", {}).get("update", {}).get("content", {}).get("text")
                                == "talk")  # a's turn, replayed to b: b still has the session open
        assert await delete(b, sid) == {}
