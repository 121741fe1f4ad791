"""Every slash command through toycoder/prompt, with its action."""

from __future__ import annotations

import pytest
from helpers import new_session
from rpc import Daemon, RpcError

from toycoder_daemon.testing.fake_llm import FakeLLM


async def run(d: Daemon, sid: str, text: str) -> dict:
    result = await d.call("toycoder/prompt", {"sessionId": sid, "text": text})
    assert result["stopReason"] == "command"
    return result


async def test_commands_list_serves_completion(daemon: Daemon) -> None:
    commands = {c["name"]: c for c in (await daemon.call("toycoder/commands/list", {}))["commands"]}
    expected = {"help", "new", "clear", "sessions", "switch", "tools", "tool", "model", "compact", "usage", "title", "quit"}
    assert expected <= set(commands)
    assert commands["quit"]["aliases"] == ["exit", "q"]
    assert commands["tool"]["usage"] == "/tool enable|disable <name>"


async def test_session_commands_and_actions(daemon: Daemon, llm: FakeLLM) -> None:
    sid = await new_session(daemon)
    help_text = (await run(daemon, sid, "/help"))["text"]
    assert "/switch <id>" in help_text and "/compact" in help_text
    assert "Resume a session" in (await run(daemon, sid, "/help switch"))["text"]

    new = await run(daemon, sid, "/new refactoring work")
    assert new["action"]["kind"] == "switch" and new["action"]["sessionId"] != sid
    second = new["action"]["sessionId"]
    listed = (await run(daemon, sid, "/sessions"))["text"]
    assert second in listed and "refactoring work" in listed and f"* {sid}" in listed

    switched = await run(daemon, second, f"/switch {sid[:6]}")
    assert switched["action"] == {"kind": "switch", "sessionId": sid}
    missing = await run(daemon, sid, "/switch zzzz")
    assert "no session starts with" in missing["text"] and "action" not in missing

    clear = await run(daemon, sid, "/clear")
    assert clear["action"]["kind"] == "switch" and clear["action"]["sessionId"] not in (sid, second)

    assert (await run(daemon, sid, "/title my chat"))["text"] == "renamed to: my chat"
    info = await daemon.call("toycoder/session/load", {"sessionId": sid})
    assert info["session"]["title"] == "my chat"

    assert (await run(daemon, sid, "/quit"))["action"] == {"kind": "quit"}
    assert (await run(daemon, sid, "/exit"))["action"] == {"kind": "quit"}
    assert llm.requests == []  # no command went to the model


async def test_tool_commands(daemon: Daemon) -> None:
    sid = await new_session(daemon)
    tools = (await run(daemon, sid, "/tools"))["text"]
    assert "run_command" in tools and "dangerous" in tools and "disabled" in tools
    enabled = (await run(daemon, sid, "/tool enable run_command"))["text"]
    assert "enabled for this session" in enabled and "still ask" in enabled
    listed = {t["name"]: t["enabled"] for t in (await daemon.call("toycoder/tools/list", {"sessionId": sid}))["tools"]}
    assert listed["run_command"] is True
    assert "usage: /tool enable|disable <name>" in (await run(daemon, sid, "/tool frobnicate x"))["text"]
    assert "no tool 'nope'" in (await run(daemon, sid, "/tool disable nope"))["text"]


async def test_model_and_usage_commands(daemon: Daemon, llm: FakeLLM) -> None:
    sid = await new_session(daemon)
    assert "current: openai:fake-model" in (await run(daemon, sid, "/model"))["text"]
    assert "current: openai:fake-fast" in (await run(daemon, sid, "/model fast"))["text"]
    assert "current: openai:other-model" in (await run(daemon, sid, "/model openai:other-model"))["text"]
    llm.add({"text": "hi", "usage": {"prompt_tokens": 40, "completion_tokens": 2}})
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "hello"})
    assert llm.requests[-1]["body"]["model"] == "other-model"
    assert "40 prompt, 2 completion, 42 total" in (await run(daemon, sid, "/usage"))["text"]
    with pytest.raises(RpcError) as e:
        await run(daemon, sid, "/model nosuch:x")
    assert e.value.code == -32013 and "unknown provider" in e.value.message


async def test_unknown_command_suggests_the_closest(daemon: Daemon) -> None:
    sid = await new_session(daemon)
    text = (await run(daemon, sid, "/sesions"))["text"]
    assert text == "unknown command /sesions; did you mean /sessions? (/help lists them)"
    assert "did you mean" not in (await run(daemon, sid, "/xyzzy"))["text"]
