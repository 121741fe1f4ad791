"""Issue 13 items 1 (encoder part) and 8: strings with lone surrogates and deeply nested tool
arguments from the model never break a turn, a session file, a provider request or a later load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from acp import text_block
from acp_client import acp_face, new_session
from helpers import write_config

from toycoder_daemon.core.util import safejson
from toycoder_daemon.llm.base import for_api
from toycoder_daemon.sessions.store import SessionStore
from toycoder_daemon.testing.fake_llm import FakeLLM

DEEP = "[" * 10_000 + "]" * 10_000


def test_dumps_never_fails_on_lone_surrogates() -> None:
    value = {"path": "nope\udcff.txt", "k\udc80": ["\ud83d\ude00", "\ud800"]}
    with pytest.raises(UnicodeEncodeError):
        json.dumps(value, ensure_ascii=False).encode("utf-8")  # what the encoders did
    text = safejson.dumps_bytes(value).decode("utf-8")
    assert json.loads(text) == {"path": "nope\ufffd.txt", "k\ufffd": ["\U0001f600", "\ufffd"]}


def test_loads_refuses_deep_nesting_with_a_value_error() -> None:
    with pytest.raises(RecursionError):
        json.loads(DEEP)
    with pytest.raises(ValueError, match="nested 10000 levels"):
        safejson.loads(DEEP)
    assert safejson.loads('{"a": "[[[[[[", "b": [[1]]}') == {"a": "[[[[[[", "b": [[1]]}
    assert safejson.depth('{"a": "\\"[[[", "b": [{}]}') == 3


def test_provider_request_and_session_file_take_lone_surrogates(tmp_path: Path) -> None:
    msg = {"role": "tool", "tool_call_id": "c1", "content": "a\udcffb", "status": "completed"}
    sent = for_api([msg])  # type: ignore[list-item]
    assert json.dumps(sent, ensure_ascii=False).encode("utf-8")  # the SDK's encoding succeeds
    assert sent[0]["content"] == "a\ufffdb" and "status" not in sent[0]
    store = SessionStore(tmp_path, tmp_path / "ws")
    f = store.create("s1", {"title": "t\udcff"})
    f.append([msg])  # type: ignore[list-item]
    f.close()
    meta, messages, _ = store.read("s1")
    assert meta["title"] == "t\ufffd" and messages[0]["content"] == "a\ufffdb"


async def test_lone_surrogate_path_from_the_model_goes_on(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    # The model asks for a file whose name is not UTF-8: the result is stored, the session goes on.
    raw = '{"path": "nope\\udcff.txt"}'
    llm.add({"tool_calls": [{"name": "read_file", "arguments": raw}]}, {"text": "done"})
    llm.add({"text": "still here"})
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        sid = await new_session(conn, workspace)
        assert (await conn.prompt(session_id=sid, prompt=[text_block("read it")])).stop_reason == "end_turn"
        assert (await conn.prompt(session_id=sid, prompt=[text_block("again")])).stop_reason == "end_turn"
    sent = json.dumps(llm.requests[-1]["body"]["messages"])
    assert "still here" not in sent and "again" in sent


@pytest.mark.parametrize("face", ["acp", "lsp"])
async def test_deep_tool_arguments_fail_the_call_and_the_session_loads(
        tmp_path: Path, llm: FakeLLM, workspace: Path, face: str) -> None:
    llm.add({"tool_calls": [{"name": "read_file", "arguments": '{"path": ' + DEEP + "}"}]}, {"text": "ok"})
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        sid = await new_session(conn, workspace)
        assert (await conn.prompt(session_id=sid, prompt=[text_block("go")])).stop_reason == "end_turn"
        done = editor.updates("tool_call_update")
        assert done[-1]["status"] == "failed"
    result = [m for m in llm.requests[-1]["body"]["messages"] if m["role"] == "tool"]
    assert "nested" in result[0]["content"] and "limit" in result[0]["content"]
    if face == "acp":
        async with acp_face(tmp_path, llm) as (conn, editor, _):
            await conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
            assert [u["sessionUpdate"] for u in editor.updates()][:3] == [
                "user_message_chunk", "tool_call", "tool_call_update"]
    else:
        from inproc import start_lsp

        d = await start_lsp(write_config(tmp_path / "lsp.yaml", llm))
        try:
            await d.initialize(workspace)
            got = await d.call("toycoder/session/load", {"sessionId": sid})
            assert [e["role"] for e in got["transcript"]][:3] == ["user", "tool_call", "tool"]
        finally:
            assert await d.close() == 0


async def test_lone_surrogate_over_the_lsp_face_reaches_the_session_file(
        tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    from inproc import start_lsp

    llm.add({"tool_calls": [{"name": "read_file", "arguments": '{"path": "nope\\udcff.txt"}'}]}, {"text": "done"})
    llm.add({"text": "still here"})
    d = await start_lsp(write_config(tmp_path / "lsp.yaml", llm))
    try:
        await d.initialize(workspace)
        sid = (await d.call("toycoder/session/new", {}))["sessionId"]
        assert (await d.call("toycoder/prompt", {"sessionId": sid, "text": "read it"}))["stopReason"] == "end_turn"
        assert (await d.call("toycoder/prompt", {"sessionId": sid, "text": "again"}))["stopReason"] == "end_turn"
        results = [u["update"] for u in d.updates(sid) if u["update"]["kind"] == "tool_result"]
        assert results[0]["status"] == "failed" and "nope" in results[0]["output"]
    finally:
        assert await d.close() == 0
    [path] = (tmp_path / "data" / "sessions").glob(f"*/{sid}.jsonl")
    stored = path.read_bytes().decode("utf-8")  # valid UTF-8: the tool result was written
    assert "file not found: nope\\\\xff.txt" in stored  # the result was stored, its name shown escaped (JSON doubles the \\)
