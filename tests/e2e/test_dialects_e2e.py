"""Server dialects and the messages a person reads (issue 18), through the real daemon against the
scripted server playing what real servers do: no usage, a 500 on `content: null`, tools ignored
without `tool_choice`, tool calls left unparsed in the text, a server that takes no tools (told as the
session opens); refused and dropped connections; TOYCODER_MODEL without a config file."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import new_session
from rpc import Daemon, RpcError

from toycoder_daemon.llm.tools_ignored import MARK
from toycoder_daemon.testing.dialects import Dialect
from toycoder_daemon.testing.fake_llm import FakeLLM

READ = {"name": "read_file", "arguments": {"path": "src/app.py"}}


def chat_requests(llm: FakeLLM) -> list[dict]:
    return [r for r in llm.requests if r["path"].endswith("/chat/completions")]


async def test_usage_the_server_never_sends_is_unknown_not_zero(daemon: Daemon, llm: FakeLLM) -> None:
    llm.dialect = Dialect(usage=False)
    llm.add({"text": "Hi."})
    sid = await new_session(daemon)
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "hello"})
    shown = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "/usage"})
    assert "tokens this session: unknown (the server reports no usage)" in shown["text"]
    assert "0 prompt" not in shown["text"]


async def test_a_uvicorn_server_gets_empty_content_instead_of_null(daemon: Daemon, llm: FakeLLM) -> None:
    # llama-cpp-python (uvicorn) answers 500 to an assistant message with content null
    llm.dialect = Dialect(null_content_500=True, server="uvicorn")
    llm.add({"tool_calls": [READ]}, {"text": "It adds."})
    sid = await new_session(daemon)
    result = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "what is app.py?"})
    assert result["text"] == "It adds."
    first, second = chat_requests(llm)  # no 500, no retry
    assert second["body"]["messages"][-2]["content"] == "" and second["body"]["messages"][-2]["tool_calls"]


async def test_a_server_error_reads_as_one_line(daemon: Daemon, llm: FakeLLM) -> None:
    llm.dialect = Dialect(null_content_500=True)  # no Server header: the kind is unknown, null is sent
    llm.add({"tool_calls": [READ]})
    sid = await new_session(daemon)
    with pytest.raises(RpcError) as failed:
        await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "what is app.py?"})
    message = failed.value.message
    assert "\n" not in message
    assert "HTTP 500: 1 validation error for ChatCompletionRequestAssistantMessage (+2 more lines" in message


async def test_tools_are_offered_with_tool_choice_auto(daemon: Daemon, llm: FakeLLM) -> None:
    llm.dialect = Dialect(tools_need_choice=True)  # llama-cpp-python ignores tools without tool_choice
    llm.add({"tool_calls": [READ]}, {"text": "It adds."})
    sid = await new_session(daemon)
    result = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "what is app.py?"})
    assert result["text"] == "It adds."
    assert chat_requests(llm)[0]["body"]["tool_choice"] == "auto"
    assert "return a + b" in chat_requests(llm)[1]["body"]["messages"][-1]["content"]  # the call was run


async def test_a_server_that_leaves_tool_calls_in_the_text_is_named_once(daemon: Daemon, llm: FakeLLM) -> None:
    llm.dialect = Dialect(tools_as_text=True)  # e.g. llama.cpp without a tool-capable chat template
    llm.add({"text": "Hello! I can read your files."}, {"tool_calls": [READ]}, {"tool_calls": [READ]})
    sid = await new_session(daemon)
    plain = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "hi"})
    assert MARK not in plain["text"]  # ordinary text: no alarm
    first = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "what is app.py?"})
    url = f"{llm.base_url}/chat/completions"
    assert first["stopReason"] == "end_turn" and first["text"].startswith("<tool_call>")
    assert f"{MARK} the server at {url} (provider 'openai') sent a tool call as plain text (a <tool_call> tag)" \
           in first["text"]
    again = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "and now?"})
    assert MARK not in again["text"] and daemon.streamed_text(sid).count(MARK) == 1  # once per session
    assert not [u for u in daemon.updates(sid) if u["update"]["kind"] == "tool_call"]  # nothing ran
    await daemon.close()
    assert (await daemon.stderr_text()).count(f"WARNING toycoder_daemon.agent.react: tools ignored: the server at {url}") == 1


@pytest.mark.parametrize("server", ["llama.cpp", "ollama"])
async def test_a_server_without_tools_is_told_as_the_session_opens(start_daemon, llm: FakeLLM, server: str) -> None:
    """The daemon process, brand new: the session's opening asks the server (llama.cpp's /props, Ollama's
    /api/show), the person reads why and the fix before any prompt (window/showMessage), and the first
    request goes without tools. In-process, both faces: unit/agent/test_local_models.py, unit/faces/acp/test_acp.py."""
    llm.dialect = (Dialect(server="llama.cpp", n_ctx=32768, supports_tools=False) if server == "llama.cpp"
                   else Dialect(ollama_capabilities=["completion"]))
    d = await start_daemon()
    sid = await new_session(d)

    def told() -> list[str]:
        return [n["params"]["message"] for n in d.notifications
                if n["method"] == "window/showMessage" and MARK in n["params"]["message"]]

    [notice] = await d.wait_for(told, what="the no-tools notice")
    assert chat_requests(llm) == []  # before any prompt
    fix = "--chat-template-file" if server == "llama.cpp" else "ollama show MODEL"
    assert fix in notice and "runs without tools" in notice
    llm.add({"text": "I cannot look."})
    result = await d.call("toycoder/prompt", {"sessionId": sid, "text": "read src/app.py"})
    assert result["text"] == "I cannot look."
    [request] = chat_requests(llm)
    assert "tools" not in request["body"] and llm.violations == []


async def test_quirks_from_the_config_win(start_daemon, llm: FakeLLM, tmp_path: Path) -> None:
    cfg = tmp_path / "quirky.yaml"
    cfg.write_text(f"providers:\n  local:\n    api_keys: [k]\n    base_url: {llm.base_url}\n"
                   "    models: {default: m, fast: m}\n    quirks: [no_tool_choice, empty_content]\n"
                   "    max_tokens: 64\n    model_max_tokens: {m: 32}\n"
                   "default_provider: local\nagent: {auto_title: false}\n")
    d = await Daemon.start("--config", str(cfg))
    try:
        await d.initialize(tmp_path)
        llm.add({"tool_calls": [{"name": "list_directory", "arguments": {}}]}, {"text": "ok"})
        sid = await new_session(d)
        await d.call("toycoder/prompt", {"sessionId": sid, "text": "list"})
    finally:
        await d.close()
    first, second = chat_requests(llm)
    assert "tool_choice" not in first["body"] and first["body"]["max_tokens"] == 32
    assert second["body"]["messages"][-2]["content"] == ""


async def test_a_refused_connection_names_the_url(daemon: Daemon, llm: FakeLLM) -> None:
    url = llm.base_url + "/chat/completions"
    llm.stop()  # nothing listens there any more
    sid = await new_session(daemon)
    with pytest.raises(RpcError) as failed:
        await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "hello"})
    assert f"cannot connect to {url} (connection refused: is the server running?)" in failed.value.message


async def test_a_reply_dropped_mid_stream_says_so(daemon: Daemon, llm: FakeLLM) -> None:
    llm.add(*({"text": "a long answer that breaks", "drop_after": 2} for _ in range(3)))
    sid = await new_session(daemon)
    with pytest.raises(RpcError) as failed:
        await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "hello"})
    assert f"the connection to {llm.base_url}/chat/completions was dropped mid-reply" in failed.value.message


async def test_toycoder_model_is_honoured_without_a_config_file(llm: FakeLLM, workspace: Path) -> None:
    env = {"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "k", "TOYCODER_MODEL": "smollm2-135m"}
    d = await Daemon.start(env=env)
    try:
        await d.initialize(workspace)
        llm.add({"text": "Hi."})
        sid = await new_session(d)
        await d.call("toycoder/prompt", {"sessionId": sid, "text": "hello"})
    finally:
        await d.close()
    assert chat_requests(llm)[0]["body"]["model"] == "smollm2-135m"


async def test_models_list_shows_what_the_server_serves(daemon: Daemon, llm: FakeLLM) -> None:
    listed = await daemon.call("toycoder/models/list", {})
    current = next(p for p in listed["providers"] if p["name"] == listed["current"]["provider"])
    assert current["servedModels"] == ["fake-model"]  # the scripted server's /v1/models
    assert current["models"] == {"default": "fake-model", "fast": "fake-fast"}  # the configured roles still there


async def test_model_of_a_name_the_server_does_not_list_warns_but_switches(daemon: Daemon, llm: FakeLLM) -> None:
    sid = await new_session(daemon)
    known = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "/model fake-model"})
    assert "warning" not in known["text"] and "its server lists: fake-model" in known["text"]
    odd = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "/model no-such-model"})
    assert odd["text"].startswith("warning: the server of 'openai' does not list 'no-such-model' (it lists: fake-model)")
    assert "current: openai:no-such-model" in odd["text"]  # allowed: some servers accept aliases
    llm.add({"text": "Hi."})
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "hello"})
    assert chat_requests(llm)[-1]["body"]["model"] == "no-such-model"
