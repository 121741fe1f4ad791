"""Issue 33, fork: ACP `session/fork` (sessionCapabilities.fork) makes a new session with the same
history, which then goes its own way while the original is unchanged; `_meta.toycoder.atTurn`
branches before an earlier turn (its id or index), as `toycoder/session/fork {sessionId, atTurn}`
does on the LSP face. Both faces in-process."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import RequestError, text_block
from acp_client import acp_face, new_session
from rpc import RpcError

from toycoder_daemon.testing.fake_llm import FakeLLM


def prompts(editor, session_id: str) -> list[str]:
    return [f["params"]["update"]["content"]["text"] for f in editor.frames
            if f.get("method") == "session/update" and f["params"]["sessionId"] == session_id
            and f["params"]["update"]["sessionUpdate"] == "user_message_chunk"]


async def test_acp_fork_whole_and_at_an_earlier_turn(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    llm.add({"text": "answer one"}, {"text": "answer two"},
            {"text": "answer three", "expect": {"last_user_contains": "three"}})
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        assert editor.frames[0]["result"]["agentCapabilities"]["sessionCapabilities"]["fork"] == {}
        sid = await new_session(conn, workspace)
        for text in ("one", "two"):
            await conn.prompt(session_id=sid, prompt=[text_block(text)])
        whole = await conn.fork_session(session_id=sid, cwd=str(workspace), mcp_servers=[])
        assert whole.session_id != sid and whole.modes and whole.config_options
        await conn.prompt(session_id=whole.session_id, prompt=[text_block("three")])
        sent = [m["content"] for m in llm.requests[-1]["body"]["messages"][1:]]
        assert sent == ["one", "answer one", "two", "answer two", "three"]  # the fork has the history
        early = await conn.fork_session(session_id=sid, cwd=str(workspace), mcp_servers=[], toycoder={"atTurn": 1})
        for bad in ({"atTurn": 9}, {"atTurn": "no-such-turn"}, {"atTurn": [1]}):
            with pytest.raises(RequestError) as refused:
                await conn.fork_session(session_id=sid, cwd=str(workspace), mcp_servers=[], toycoder=bad)
            assert refused.value.code == -32602 and "atTurn" in str(refused.value.data)
        with pytest.raises(RequestError) as unknown:
            await conn.fork_session(session_id="no-such", cwd=str(workspace), mcp_servers=[])
        assert unknown.value.code == -32002
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        for s in (sid, whole.session_id, early.session_id):
            await conn.load_session(cwd=str(workspace), session_id=s, mcp_servers=[])
        assert prompts(editor, sid) == ["one", "two"]  # the original is unchanged
        assert prompts(editor, whole.session_id) == ["one", "two", "three"]
        assert prompts(editor, early.session_id) == ["one"]  # branched before the second turn
        listed = {s.session_id: s.title for s in (await conn.list_sessions()).sessions}
        assert listed[whole.session_id] == "one (fork)" and listed[sid] == "one"


async def test_lsp_fork_at_a_turn_id(start_daemon, llm: FakeLLM) -> None:
    llm.add({"text": "answer one"}, {"text": "answer two"}, {"text": "other way", "expect": {"last_user_contains": "again"}})
    d = await start_daemon()
    sid = (await d.call("toycoder/session/new", {}))["sessionId"]
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "one"})
    second = (await d.call("toycoder/prompt", {"sessionId": sid, "text": "two"}))["turnId"]
    fork = await d.call("toycoder/session/fork", {"sessionId": sid, "atTurn": second})
    fid = fork["session"]["sessionId"]
    assert fid != sid and [(e["role"], e["text"]) for e in fork["transcript"]] == [
        ("user", "one"), ("assistant", "answer one")]
    await d.call("toycoder/prompt", {"sessionId": fid, "text": "again"})
    sent = [m["content"] for m in llm.requests[-1]["body"]["messages"][1:]]
    assert sent == ["one", "answer one", "again"]
    original = await d.call("toycoder/session/load", {"sessionId": sid})
    assert [e["text"] for e in original["transcript"] if e["role"] == "user"] == ["one", "two"]
    whole = await d.call("toycoder/session/fork", {"sessionId": sid})
    assert [e["text"] for e in whole["transcript"] if e["role"] == "user"] == ["one", "two"]
    with pytest.raises(RpcError) as bad:
        await d.call("toycoder/session/fork", {"sessionId": sid, "atTurn": "nope"})
    assert bad.value.code == -32602 and "atTurn" in bad.value.message
    with pytest.raises(RpcError) as unknown:
        await d.call("toycoder/session/fork", {"sessionId": "no-such"})
    assert unknown.value.code == -32010
