"""Turns end to end through the LSP face, in-process (tests/inproc.py): the real App, server and frame
reader, against the scripted model server. The subprocess layer is test_lsp_client.py and co."""

from __future__ import annotations

import asyncio

import pytest
from helpers import new_session
from rpc import Daemon, RpcError
from waiting import scaled

from toycoder_daemon.testing.fake_llm import FakeLLM


async def test_initialize_announces_protocol(daemon: Daemon) -> None:
    # initialize already happened in the fixture; a second look at the capability through a new daemon
    # would be redundant, so check the session round trip works and the daemon is alive.
    sid = await new_session(daemon, title="first")
    # a session without messages is never listed, not even by the daemon that has it open
    assert (await daemon.call("toycoder/session/list", {}))["sessions"] == []
    loaded = await daemon.call("toycoder/session/load", {"sessionId": sid})
    assert loaded["session"]["title"] == "first"


async def test_initialize_result(start_daemon, workspace) -> None:
    d = await start_daemon(init=False)
    result = await d.initialize(workspace)
    toycoder = result["capabilities"]["experimental"]["toycoder"]
    assert toycoder["protocolVersion"] == 1
    assert [m["id"] for m in toycoder["availableModes"]] == ["ask", "accept-edits", "read-only"]
    assert result["serverInfo"]["name"] == "toycoder-daemon"


async def test_streamed_text_equals_final_text(daemon: Daemon, llm: FakeLLM) -> None:
    answer = "Hello there! This answer arrives in several pieces over the stream."
    llm.add({"text": answer, "chunk_size": 5, "chunk_delay": 0.01})
    sid = await new_session(daemon)
    result = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "hi"})
    assert result["stopReason"] == "end_turn"
    assert result["text"] == answer
    deltas = [u["update"]["text"] for u in daemon.updates(sid) if u["update"]["kind"] == "text_delta"]
    assert len(deltas) > 1, "the reply should stream in more than one notification"
    assert "".join(deltas) == answer
    assert result["usage"]["totalTokens"] > 0
    kinds = [u["update"]["kind"] for u in daemon.updates(sid)]
    assert kinds[-1] == "usage"
    # the model was sent the system prompt, then the user's text
    messages = llm.requests[0]["body"]["messages"]
    assert messages[0]["role"] == "system" and "ToyCoder" in messages[0]["content"]
    assert messages[-1] == {"role": "user", "content": "hi"}
    assert llm.requests[0]["body"]["stream"] is True


async def test_tool_call_round_trip(daemon: Daemon, llm: FakeLLM, workspace) -> None:
    llm.add(
        {"text": "Let me read it.", "tool_calls": [{"name": "read_file", "arguments": {"path": "src/app.py"}}]},
        {"text": "It defines add()."},
    )
    sid = await new_session(daemon)
    result = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "what does app.py do?"})
    assert result["text"] == "It defines add()."
    second = llm.requests[1]["body"]["messages"]
    call = second[-2]
    assert call["role"] == "assistant" and call["tool_calls"][0]["function"]["name"] == "read_file"
    tool_msg = second[-1]
    assert tool_msg["role"] == "tool" and tool_msg["tool_call_id"] == call["tool_calls"][0]["id"]
    assert set(tool_msg) == {"role", "tool_call_id", "content"}  # our bookkeeping never reaches the provider
    assert "return a + b" in tool_msg["content"]
    updates = [u["update"] for u in daemon.updates(sid)]
    started = [u for u in updates if u["kind"] == "tool_call"]
    finished = [u for u in updates if u["kind"] == "tool_result"]
    assert started[0]["name"] == "read_file" and started[0]["arguments"] == {"path": "src/app.py"}
    assert started[0]["permission"] == "safe" and started[0]["title"] == "read_file src/app.py"
    assert finished[0]["status"] == "completed" and finished[0]["toolCallId"] == started[0]["toolCallId"]
    assert daemon.streamed_text(sid) == "Let me read it.It defines add()."
    assert llm.violations == []
    # the tools the model was offered come from the registry's schemas
    offered = {t["function"]["name"] for t in llm.requests[0]["body"]["tools"]}
    assert {"read_file", "list_directory"} <= offered


async def test_tool_error_is_an_observation(daemon: Daemon, llm: FakeLLM) -> None:
    llm.add(
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "../../etc/passwd"}},
                        {"name": "read_file", "arguments": "{not json"},
                        {"name": "no_such_tool", "arguments": {}}]},
        {"text": "I could not read those."},
    )
    sid = await new_session(daemon)
    result = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "read secrets"})
    assert result["stopReason"] == "end_turn"
    tool_msgs = [m for m in llm.requests[1]["body"]["messages"] if m["role"] == "tool"]
    assert "outside the workspace" in tool_msgs[0]["content"]
    assert "not valid JSON" in tool_msgs[1]["content"]
    assert "unknown tool" in tool_msgs[2]["content"]
    statuses = [u["update"]["status"] for u in daemon.updates(sid) if u["update"]["kind"] == "tool_result"]
    assert statuses == ["failed", "failed", "failed"]


async def test_max_steps_stops_the_turn(daemon: Daemon, llm: FakeLLM) -> None:
    d = daemon  # config: agent.max_steps = 16
    llm.add(*[{"tool_calls": [{"name": "list_directory", "arguments": {}}]} for _ in range(20)])
    sid = await new_session(d)
    result = await d.call("toycoder/prompt", {"sessionId": sid, "text": "loop forever"})
    assert result["stopReason"] == "max_steps"
    assert "max_steps" in result["text"]
    assert len(llm.requests) == 16
    # the conversation stays valid: the next turn is accepted by the invariant check
    llm.add({"text": "ok"})
    again = await d.call("toycoder/prompt", {"sessionId": sid, "text": "stop"})
    assert again["stopReason"] == "end_turn" and llm.violations == []


async def test_cancel_mid_stream_keeps_session_usable(daemon: Daemon, llm: FakeLLM) -> None:
    llm.add({"text": "x" * 400, "chunk_size": 2, "chunk_delay": 0.02})
    sid = await new_session(daemon)
    _, fut = daemon.request_future("toycoder/prompt", {"sessionId": sid, "text": "long answer"})
    await daemon.wait_for(lambda: any(u["update"]["kind"] == "text_delta" for u in daemon.updates(sid)))
    assert (await daemon.call("toycoder/cancel", {"sessionId": sid})) == {"cancelled": True}
    reply = await asyncio.wait_for(fut, scaled(10))
    assert reply["result"]["stopReason"] == "cancelled"
    assert (await daemon.call("toycoder/cancel", {"sessionId": sid})) == {"cancelled": False}
    llm.add({"text": "fine"})
    again = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "again"})
    assert again["text"] == "fine"
    assert llm.violations == []
    # the interrupted partial reply is kept in the conversation the model sees next
    sent = llm.requests[-1]["body"]["messages"]
    assert any(m["role"] == "assistant" and "[interrupted by the user]" in (m["content"] or "") for m in sent)


async def test_cancel_request_ends_turn_as_cancelled(daemon: Daemon, llm: FakeLLM) -> None:
    llm.add({"text": "y" * 300, "chunk_size": 2, "chunk_delay": 0.02})
    sid = await new_session(daemon)
    msg_id, fut = daemon.request_future("toycoder/prompt", {"sessionId": sid, "text": "long"})
    await daemon.wait_for(lambda: daemon.updates(sid))
    daemon.notify("$/cancelRequest", {"id": msg_id})
    reply = await asyncio.wait_for(fut, scaled(10))
    assert "error" not in reply, reply
    assert reply["result"]["stopReason"] == "cancelled"
    llm.add({"text": "still here"})
    assert (await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "x"}))["text"] == "still here"


async def test_cancel_during_tool_batch_answers_every_call(daemon: Daemon, llm: FakeLLM) -> None:
    # Two tool calls, then a reply that hangs; cancelling leaves a conversation the model accepts.
    llm.add(
        {"tool_calls": [{"name": "list_directory", "arguments": {}}, {"name": "read_file", "arguments": {"path": "README.md"}}]},
        {"text": "z" * 200, "chunk_size": 1, "chunk_delay": 0.05},
    )
    sid = await new_session(daemon)
    _, fut = daemon.request_future("toycoder/prompt", {"sessionId": sid, "text": "go"})
    await daemon.wait_for(lambda: len(llm.requests) >= 2)
    await daemon.call("toycoder/cancel", {"sessionId": sid})
    cancelled = (await asyncio.wait_for(fut, scaled(10)))["result"]
    assert cancelled["stopReason"] == "cancelled"
    assert cancelled["usage"]["totalTokens"] > 0  # the first, finished model call still counts
    llm.add({"text": "done"})
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "next"})
    assert llm.violations == []


async def test_second_prompt_on_busy_session_is_refused(daemon: Daemon, llm: FakeLLM) -> None:
    llm.add({"text": "slow " * 40, "chunk_delay": 0.02})
    sid = await new_session(daemon)
    _, fut = daemon.request_future("toycoder/prompt", {"sessionId": sid, "text": "one"})
    await daemon.wait_for(lambda: daemon.updates(sid))
    with pytest.raises(RpcError) as e:
        await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "two"})
    assert e.value.code == -32011 and "already running" in e.value.message
    # another session runs concurrently
    llm.add({"text": "other"})
    other = await new_session(daemon)
    assert (await daemon.call("toycoder/prompt", {"sessionId": other, "text": "hi"}))["text"] == "other"
    assert (await asyncio.wait_for(fut, scaled(10)))["result"]["stopReason"] == "end_turn"


async def test_retry_on_429_honours_retry_after_and_rotates_keys(start_daemon, llm: FakeLLM) -> None:
    d = await start_daemon(keys=["key-one", "key-two"])
    llm.add({"status": 429, "retry_after": 0.3, "error": "slow down"}, {"text": "after the retry"})
    sid = await new_session(d)
    result = await d.call("toycoder/prompt", {"sessionId": sid, "text": "hi"})
    assert result["text"] == "after the retry"
    auth = [r["headers"]["authorization"] for r in llm.requests]
    assert auth == ["Bearer key-one", "Bearer key-two"]
    retries = [u["update"] for u in d.updates(sid) if u["update"]["kind"] == "retry"]
    assert len(retries) == 1 and retries[0]["attempt"] == 1
    assert retries[0]["delaySeconds"] == 0  # key-two is free: no wait for key-one (issue 13 item 12)
    assert "429" in retries[0]["reason"]


async def test_cut_stream_mid_tool_call_is_retried_without_running_the_tool_twice(daemon: Daemon, llm: FakeLLM) -> None:
    call = {"name": "read_file", "arguments": {"path": "README.md"}, "id": "call_same"}
    llm.add(
        {"text": "Reading", "tool_calls": [call], "arg_chunks": 6, "drop_after": 4},
        {"text": "Reading", "tool_calls": [call]},
        {"text": "Done."},
    )
    sid = await new_session(daemon)
    result = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "read"})
    assert result["text"] == "Done."
    updates = [u["update"] for u in daemon.updates(sid)]
    assert [u["kind"] for u in updates].count("tool_call") == 1
    retries = [u for u in updates if u["kind"] == "retry"]
    assert len(retries) == 1 and retries[0]["attempt"] == 1, retries
    tool_msgs = [m for m in llm.requests[2]["body"]["messages"] if m["role"] == "tool"]
    assert len(tool_msgs) == 1
    assert daemon.streamed_text(sid) == "ReadingDone."


async def test_provider_error_after_retries(start_daemon, llm: FakeLLM) -> None:
    d = await start_daemon()
    llm.add(*[{"status": 503, "error": "overloaded"} for _ in range(3)])
    sid = await new_session(d)
    with pytest.raises(RpcError) as e:
        await d.call("toycoder/prompt", {"sessionId": sid, "text": "hi"})
    assert e.value.code == -32012
    assert "openai" in e.value.message and "503" in e.value.message and "overloaded" in e.value.message
    assert len(llm.requests) == 3  # 1 + max_retries
    # no retry on 400, and the daemon is still fine afterwards
    llm.add({"status": 400, "error": "bad request body"})
    with pytest.raises(RpcError) as e2:
        await d.call("toycoder/prompt", {"sessionId": sid, "text": "again"})
    assert e2.value.code == -32012 and "400" in e2.value.message
    assert len(llm.requests) == 4
    llm.add({"text": "recovered"})
    assert (await d.call("toycoder/prompt", {"sessionId": sid, "text": "x"}))["text"] == "recovered"


async def test_unauthorized_key_is_dropped_and_the_next_one_used(start_daemon, llm: FakeLLM) -> None:
    d = await start_daemon(keys=["bad-key", "good-key"])
    llm.add({"status": 401, "error": "invalid api key"}, {"text": "hi"}, {"text": "again"})
    sid = await new_session(d)
    assert (await d.call("toycoder/prompt", {"sessionId": sid, "text": "a"}))["text"] == "hi"
    assert (await d.call("toycoder/prompt", {"sessionId": sid, "text": "b"}))["text"] == "again"
    auth = [r["headers"]["authorization"] for r in llm.requests]
    assert auth == ["Bearer bad-key", "Bearer good-key", "Bearer good-key"]
    assert not any(u["update"]["kind"] == "retry" for u in d.updates(sid))


async def test_tools_list_and_set_enabled(daemon: Daemon, llm: FakeLLM) -> None:
    sid = await new_session(daemon)
    tools = {t["name"]: t for t in (await daemon.call("toycoder/tools/list", {"sessionId": sid}))["tools"]}
    assert tools["read_file"]["permission"] == "safe" and tools["read_file"]["enabled"] is True
    assert tools["read_file"]["source"] == "builtin"
    await daemon.call("toycoder/tools/setEnabled", {"sessionId": sid, "name": "read_file", "enabled": False})
    tools = {t["name"]: t for t in (await daemon.call("toycoder/tools/list", {"sessionId": sid}))["tools"]}
    assert tools["read_file"]["enabled"] is False
    llm.add({"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]}, {"text": "ok"})
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "read"})
    offered = {t["function"]["name"] for t in llm.requests[0]["body"]["tools"]}
    assert "read_file" not in offered
    result = [u["update"] for u in daemon.updates(sid) if u["update"]["kind"] == "tool_result"][0]
    assert result["status"] == "denied" and "disabled" in result["output"]
    # other sessions are not affected
    other = await new_session(daemon)
    tools = {t["name"]: t for t in (await daemon.call("toycoder/tools/list", {"sessionId": other}))["tools"]}
    assert tools["read_file"]["enabled"] is True


async def test_models_list_never_shows_keys(start_daemon) -> None:
    d = await start_daemon(keys=["sk-secret-value-123"])
    models = await d.call("toycoder/models/list", {})
    assert models["current"] == {"provider": "openai", "model": "fake-model"}
    assert models["providers"][0]["keyCount"] == 1
    assert "sk-secret-value-123" not in str(models)
    sid = await new_session(d)
    switched = await d.call("toycoder/models/set", {"sessionId": sid, "model": "fast"})
    assert switched["current"]["model"] == "fake-fast"


async def test_session_load_returns_transcript(daemon: Daemon, llm: FakeLLM) -> None:
    llm.add({"tool_calls": [{"name": "list_directory", "arguments": {}}]}, {"text": "Two entries."})
    sid = await new_session(daemon)
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "what is here?"})
    loaded = await daemon.call("toycoder/session/load", {"sessionId": sid})
    assert loaded["session"]["title"] == "what is here?"
    roles = [e["role"] for e in loaded["transcript"]]
    assert roles == ["user", "tool_call", "tool", "assistant"]
    assert loaded["transcript"][2]["name"] == "list_directory"
    assert loaded["transcript"][-1]["text"] == "Two entries."
    await daemon.call("toycoder/session/delete", {"sessionId": sid})
    with pytest.raises(RpcError) as e:
        await daemon.call("toycoder/session/load", {"sessionId": sid})
    assert e.value.code == -32010


async def test_cancel_sent_together_with_the_prompt(daemon: Daemon, llm: FakeLLM) -> None:
    """The cancel may be handled before the turn's first step; the prompt still answers normally."""
    sid = await new_session(daemon)
    for _ in range(3):
        llm.add({"delay": 1.0, "text": "late"})  # if the cancel comes second, it still lands mid-turn
        _, fut = daemon.request_future("toycoder/prompt", {"sessionId": sid, "text": "go"})
        _, cancel = daemon.request_future("toycoder/cancel", {"sessionId": sid})  # same write burst
        reply = await asyncio.wait_for(fut, scaled(10))
        assert "error" not in reply, reply
        assert reply["result"]["stopReason"] == "cancelled"
        await asyncio.wait_for(cancel, scaled(10))
    usage = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "/usage"})
    assert usage["stopReason"] == "command"  # not busy: the session is usable
    assert llm.violations == []


async def test_tool_calls_cut_by_the_length_limit_are_not_run(daemon: Daemon, llm: FakeLLM, workspace) -> None:
    daemon.handlers["toycoder/requestPermission"] = lambda p: {"decision": "allow_once"}
    llm.add({"tool_calls": [{"name": "write_file", "arguments": '{"path": "half.txt", "content": "abc'}],
             "finish_reason": "length"},
            {"text": "I will write it in parts."})
    sid = await new_session(daemon)
    result = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "write a big file"})
    assert result["text"] == "I will write it in parts."
    assert not (workspace / "half.txt").exists() and daemon.requests_seen == []
    tool_msg = [m for m in llm.requests[1]["body"]["messages"] if m["role"] == "tool"][0]
    assert "length limit" in tool_msg["content"]
    assert llm.violations == []
