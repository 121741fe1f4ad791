"""Slash commands over the wire: completion from toycoder/commands/list, a command through
toycoder/prompt with its action, and a command error's code. Each command's behaviour is tested
in-process (test_commands.py)."""

from __future__ import annotations

from rpc import Daemon

from toycoder_daemon.testing.fake_llm import FakeLLM


async def run(d: Daemon, sid: str, text: str) -> dict:
    result = await d.call("toycoder/prompt", {"sessionId": sid, "text": text})
    assert result["stopReason"] == "command"
    return result


async def test_commands_list_serves_completion(daemon: Daemon) -> None:
    commands = {c["name"]: c for c in (await daemon.call("toycoder/commands/list", {}))["commands"]}
    expected = {"help", "new", "clear", "sessions", "switch", "tools", "tool", "model", "compact", "usage", "title",
                "quit"}
    assert expected <= set(commands)
    assert commands["quit"]["aliases"] == ["exit", "q"]
    assert commands["tool"]["usage"] == "/tool enable|disable <name>"


async def test_commands_over_the_wire(daemon: Daemon, llm: FakeLLM) -> None:
    sid = (await daemon.call("toycoder/session/new", {}))["sessionId"]
    assert "current: openai:fake-model" in (await run(daemon, sid, "/model"))["text"]
    assert "current: openai:fake-fast" in (await run(daemon, sid, "/model fast"))["text"]
    assert "current: openai:other-model" in (await run(daemon, sid, "/model openai:other-model"))["text"]
    llm.add({"text": "hi", "usage": {"prompt_tokens": 40, "completion_tokens": 2}})
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "hello"})
    assert llm.requests[-1]["body"]["model"] == "other-model"
    assert "40 prompt, 2 completion, 42 total" in (await run(daemon, sid, "/usage"))["text"]
    typo = (await run(daemon, sid, "/model nosuch:x"))["text"]  # a typo is text, not a config error
    assert "unknown provider 'nosuch'" in typo and "usage: /model" in typo
    new = await run(daemon, sid, "/new side quest")
    assert new["action"]["kind"] == "switch" and new["action"]["sessionId"] != sid
    assert (await run(daemon, sid, "/quit"))["action"] == {"kind": "quit"}
    assert "did you mean /sessions?" in (await run(daemon, sid, "/sesions"))["text"]
