"""Closing and resuming sessions, and empty prompts, on both faces (in-process). The App side
(/new and /switch close the previous session) is in test_shared_sessions.py."""

from __future__ import annotations

import pytest
from acp import RequestError, text_block
from acp_client import acp_face
from acp_client import new_session as acp_new_session
from helpers import new_session
from rpc import RpcError

from toycoder_daemon.testing.fake_llm import FakeLLM


async def test_lsp_close_then_prompt_reopens_and_empty_prompts_are_refused(start_daemon, llm: FakeLLM) -> None:
    a = await start_daemon()
    sid = await new_session(a)
    for text in ("", "  \n "):
        with pytest.raises(RpcError) as e:
            await a.call("toycoder/prompt", {"sessionId": sid, "text": text})
        assert e.value.code == -32602 and "empty" in e.value.message
    assert llm.requests == []
    assert await a.call("toycoder/session/close", {"sessionId": sid}) == {}
    assert await a.call("toycoder/session/close", {"sessionId": sid}) == {}  # closing twice is fine
    llm.add({"text": "still here"})
    assert (await a.call("toycoder/prompt", {"sessionId": sid, "text": "hello?"}))["text"] == "still here"
    listed = (await a.call("toycoder/session/list", {}))["sessions"]
    assert [(s["sessionId"], s["messageCount"]) for s in listed] == [(sid, 2)]


async def test_acp_close_resume_and_empty_prompts(tmp_path, llm: FakeLLM, workspace) -> None:
    llm.add({"text": "First answer."})
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        init = editor.frames[0]["result"]["agentCapabilities"]["sessionCapabilities"]
        assert init["close"] == {} and init["resume"] == {}
        sid = await acp_new_session(conn, workspace)
        for prompt in ([], [text_block(" ")]):
            with pytest.raises(RequestError) as e:
                await conn.prompt(session_id=sid, prompt=prompt)
            assert e.value.code == -32602
        await conn.prompt(session_id=sid, prompt=[text_block("first")])
        await conn.close_session(session_id=sid)
        with pytest.raises(RequestError) as e:
            await conn.prompt(session_id=sid, prompt=[text_block("after close")])
        assert e.value.code == -32002
        before = len(editor.updates())
        await conn.resume_session(cwd=str(workspace), session_id=sid)
        answered = max(i for i, f in enumerate(editor.frames) if "result" in f)
        assert not [f for f in editor.frames[:answered] if f.get("method") == "session/update"][before:]
        llm.add({"text": "Resumed.", "expect": {"last_user_contains": "again"}})
        assert (await conn.prompt(session_id=sid, prompt=[text_block("again")])).stop_reason == "end_turn"
        sent = [m["content"] for m in llm.requests[-1]["body"]["messages"][1:]]
        assert sent == ["first", "First answer.", "again"]
