"""Slash commands in-process (App + scripted model + recording frontend); the subprocess e2e test
in test_commands_e2e.py keeps the wire path."""

from __future__ import annotations

from inproc_app import InProc


async def text(p: InProc, sid: str, command: str) -> str:
    return (await p.command(sid, command)).result.text


async def test_session_commands_and_actions(inproc) -> None:
    p: InProc = inproc()
    sid = p.new_session()
    help_text = await text(p, sid, "/help")
    assert "/switch <id>" in help_text and "/compact" in help_text
    assert "Resume a session" in await text(p, sid, "/help switch")
    assert "no command /nope" in await text(p, sid, "/help nope")

    new = await p.command(sid, "/new refactoring work")
    assert new.action is not None and new.action["kind"] == "switch" and new.action["sessionId"] != sid
    second = new.action["sessionId"]
    assert "no sessions yet" in await text(p, sid, "/sessions")  # neither has messages: not listed
    for s in (sid, second):  # a message of its own each, as a turn leaves (no model needed)
        (await p.app.load(s)).messages.append({"role": "user", "content": "hi", "turn": "t"})
    listed = await text(p, sid, "/sessions")
    assert second in listed and "refactoring work" in listed and f"* {sid}" in listed

    switched = await p.command(second, f"/switch {sid[:6]}")
    assert switched.action == {"kind": "switch", "sessionId": sid}
    missing = await p.command(sid, "/switch zzzz")
    assert "no session starts with" in missing.result.text and missing.action is None
    assert "usage: /switch <id>" in await text(p, sid, "/switch")

    clear = await p.command(sid, "/clear")
    assert clear.action is not None and clear.action["sessionId"] not in (sid, second)

    assert await text(p, sid, "/title my chat") == "renamed to: my chat"
    assert p.app.peek(sid).title == "my chat"
    assert "give the new title" in await text(p, sid, "/title")

    assert (await p.command(sid, "/quit")).action == {"kind": "quit"}
    assert (await p.command(sid, "/exit")).action == {"kind": "quit"}
    assert p.script.calls == []  # no command went to the model


async def test_switch_loads_a_stored_session_off_the_loop(inproc) -> None:
    p: InProc = inproc()
    sid = p.new_session("stored one")
    other = p.new_session()
    await p.app.close_session(sid)  # as if a previous daemon had written it
    out = await p.command(other, f"/switch {sid}")
    assert out.action == {"kind": "switch", "sessionId": sid} and "stored one" in out.result.text
    assert sid in p.app.live  # loaded (and locked) now


async def test_tool_commands(inproc) -> None:
    p: InProc = inproc()
    sid = p.new_session()
    tools = await text(p, sid, "/tools")
    assert "run_command" in tools and "dangerous" in tools and "disabled" in tools and "[agent]" in tools
    enabled = await text(p, sid, "/tool enable run_command")
    assert "enabled for this session" in enabled and "still ask" in enabled
    assert p.app.session(sid).tools.is_enabled("run_command")
    assert "usage: /tool enable|disable <name>" in await text(p, sid, "/tool frobnicate x")
    assert "no tool 'nope'" in await text(p, sid, "/tool disable nope")
    assert "disabled for this session" in await text(p, sid, "/tool disable read_file")
    assert not p.app.session(sid).tools.is_enabled("read_file")


async def test_model_and_usage_commands(inproc) -> None:
    p: InProc = inproc()
    sid = p.new_session()
    assert "current: openai:fake-model" in await text(p, sid, "/model")
    assert "current: openai:fake-fast" in await text(p, sid, "/model fast")
    assert "current: openai:other-model" in await text(p, sid, "/model openai:other-model")
    p.script.add({"text": "hi", "usage": {"prompt_tokens": 40, "completion_tokens": 2}})
    assert (await p.prompt(sid, "hello")).result.text == "hi"
    assert p.script.calls[-1]["model"] == "other-model"
    assert "40 prompt, 2 completion, 42 total" in await text(p, sid, "/usage")
    typo = await text(p, sid, "/model nosuch:x")
    assert "unknown provider 'nosuch'" in typo and "usage: /model" in typo
    assert "current: openai:other-model" in await text(p, sid, "/model")  # unchanged


async def test_unknown_command_suggests_the_closest(inproc) -> None:
    p: InProc = inproc()
    sid = p.new_session()
    assert await text(p, sid, "/sesions") == "unknown command /sesions; did you mean /sessions? (/help lists them)"
    assert "did you mean" not in await text(p, sid, "/xyzzy")


async def test_mcp_command_without_servers(inproc) -> None:
    p: InProc = inproc()
    sid = p.new_session()
    assert "no MCP servers configured" in await text(p, sid, "/mcp")


async def test_one_message_is_1_msg(inproc) -> None:
    p: InProc = inproc()
    sid = p.new_session()
    p.app.session(sid).messages.append({"role": "user", "content": "hello"})
    listed = (await p.command(sid, "/sessions")).result.text
    assert "   1 msg   (untitled)" in listed and "1 msgs" not in listed, listed  # the title column stays put
    assert "1 message)" in (await p.command(sid, f"/switch {sid}")).result.text
