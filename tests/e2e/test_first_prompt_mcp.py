"""The first prompt of a new process sees the MCP tools later prompts see: the config's servers (both
faces; the LSP one early path or not) and those an ACP client gives in session/new. The first turn waits for
them to be ready or to fail (each bounded by its start_timeout); a server that fails does not hang
it and is reported as it is later. Real daemons that get initialize, session/new and the prompt at
once, with the scripted model server recording each request; the App in-process as well."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from acp_daemon import AcpDaemon
from helpers import TOY_MCP_SERVER, processes_with, unique_marker, write_config
from inproc_app import InProc, eventually
from rpc import Daemon
from waiting import DEFAULT_TIMEOUT, wait_until

from toycoder_daemon.testing.fake_llm import FakeLLM

ADD = {"tool_calls": [{"name": "mcp__toy__add", "arguments": {"a": 2, "b": 40}}]}
SUM = {"text": "2 + 40 = 42", "expect": {"last_tool_contains": "42"}}


def servers(tag: str) -> str:
    """A safe toy server, one that cannot start, and one that never answers its handshake."""
    return ("mcp_servers:\n"
            f"  toy: {{command: {sys.executable}, args: [{TOY_MCP_SERVER}, --tag, {tag}], permission: safe}}\n"
            "  broken: {command: /nonexistent/mcp-server, start_timeout: 5}\n"
            f"  mute: {{command: {sys.executable}, args: [{TOY_MCP_SERVER}, --tag, {tag}, --start-delay, '60'],"
            " start_timeout: 1}\n")


def offered(request: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in request["body"].get("tools", [])}


def first_turn_had_the_tools(llm: FakeLLM) -> None:
    assert "mcp__toy__add" in offered(llm.requests[0]) and "write_file" in offered(llm.requests[0])
    assert not [n for n in offered(llm.requests[0]) if n.startswith(("mcp__broken", "mcp__mute"))]
    assert llm.violations == []  # the second request saw the tool's result, 42


# ---- the LSP face --------------------------------------------------------------------------------

async def test_lsp_first_prompt_offers_and_calls_the_config_mcp_tools(
        tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    tag = unique_marker("toycoder-first-mcp")
    config = write_config(tmp_path / "config.yaml", llm, extra=servers(tag))
    llm.add(ADD, SUM)
    d = await Daemon.start("--config", str(config))
    try:
        _, answered = d.request_future("initialize", {"processId": None, "rootUri": workspace.as_uri(),
                                                      "capabilities": {}})
        d.notify("initialized", {})
        sid = (await d.call("toycoder/session/new", {}))["sessionId"]
        assert "result" in await answered
        assert (await d.call("toycoder/prompt", {"sessionId": sid, "text": "add 2 and 40"}, timeout=60))["text"] \
            == "2 + 40 = 42"
        first_turn_had_the_tools(llm)
        results = [u["update"] for u in d.updates(sid) if u["update"]["kind"] == "tool_result"]
        assert results[0]["status"] == "completed" and results[0]["output"] == "42"
        for name in ("broken", "mute"):  # the failures are shown, a warning each
            shown = await d.wait_for(lambda name=name: [n for n in d.notifications if n["method"] == "window/showMessage"
                                                        and f"'{name}'" in n["params"]["message"]])
            assert shown[0]["params"]["type"] == 2 and "failed" in shown[0]["params"]["message"]
    finally:
        assert await d.close() == 0
    wait_until(lambda: processes_with(tag) == [], what="the MCP servers to exit with the daemon")


# ---- the ACP face --------------------------------------------------------------------------------

def acp_first_prompt(tmp_path: Path, workspace: Path, llm: FakeLLM, *, config_servers: bool,
                     client_servers: bool) -> None:
    tag = unique_marker("toycoder-first-mcp")
    config = write_config(tmp_path / "config.yaml", llm, extra=servers(tag) if config_servers else "")
    given = [{"name": "toy", "command": sys.executable, "args": [TOY_MCP_SERVER, "--tag", tag], "env": []}]
    llm.add(ADD, SUM)  # the client's server is named as the config's would be: nothing clashes
    d = AcpDaemon(config)
    try:
        d.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
            "clientInfo": {"name": "test", "version": "1"}}})
        d.send({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                "params": {"cwd": str(workspace), "mcpServers": given if client_servers else []}})
        sid = d.answer(2)["result"]["sessionId"]
        d.prompt(3, sid, "add 2 and 40")
        if client_servers:  # their tools ask first, as any sensitive tool
            d.allow(d.request("session/request_permission"))
        assert d.answer(3)["result"]["stopReason"] == "end_turn"
        first_turn_had_the_tools(llm)
        done = [u for u in d.updates("tool_call_update") if u.get("status") == "completed"]
        assert "42" in done[-1]["content"][0]["content"]["text"]
        if not config_servers:
            return
        # ACP has no message to show for the config's servers: the failures are logged (stderr is
        # not kept here), and the turn went on without them; /mcp says what became of them
        d.prompt(4, sid, "/mcp")
        assert d.answer(4)["result"]["stopReason"] == "end_turn"
        listing = "".join(u["content"]["text"] for u in d.updates("agent_message_chunk"))
        assert "broken" in listing and "mute" in listing and listing.count("failed") >= 2
    finally:
        assert d.close() == 0
    wait_until(lambda: processes_with(tag) == [], what="the MCP servers to exit with the daemon")


def test_acp_first_prompt_offers_and_calls_the_config_mcp_tools(
        tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    acp_first_prompt(tmp_path, workspace, llm, config_servers=True, client_servers=False)


def test_acp_first_prompt_offers_the_mcp_tools_the_client_gave_in_session_new(
        tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    acp_first_prompt(tmp_path, workspace, llm, config_servers=False, client_servers=True)


# ---- the App in-process ------------------------------------------------------------------------

async def test_the_first_turn_of_an_app_not_started_waits_for_the_config_servers(inproc: Any) -> None:
    """No App.start before the turn (the early paths start it only after their first turn): the turn
    starts the config's servers itself, offers the ready one's tools, and reports the failed ones
    (one that cannot start, one that never answers its handshake) before it asks the model."""
    tag, mute = unique_marker("toycoder-first-mcp"), unique_marker("toycoder-first-mcp")
    p: InProc = inproc({"mcp_servers": {
        "toy": {"command": sys.executable, "args": [TOY_MCP_SERVER, "--tag", tag], "permission": "safe"},
        "broken": {"command": "/nonexistent/mcp-server", "start_timeout": 5},
        "mute": {"command": sys.executable, "args": [TOY_MCP_SERVER, "--tag", mute, "--start-delay", "60"], "start_timeout": 1}}})
    notices: list[tuple[str, str]] = []
    p.app.on_notice = lambda level, message: notices.append((level, message))
    sid = p.new_session()
    p.script.add(ADD, SUM)

    class Calls(list[dict[str, Any]]):
        def append(self, call: dict[str, Any]) -> None:
            notices.append(("model", "asked"))
            super().append(call)

    p.script.calls = Calls()
    out = await p.prompt(sid, "add 2 and 40")
    assert out.result.text == "2 + 40 = 42"
    assert "mcp__toy__add" in [t["function"]["name"] for t in p.script.calls[0]["tools"]]
    asked = notices.index(("model", "asked"))
    for name in ("broken", "mute"):  # each reported once, before the model was asked
        assert [level for level, m in notices[:asked] if f"'{name}'" in m] == ["warning"]
    await p.app.start()  # what the faces do after the first turn: nothing starts twice
    assert len(processes_with(tag)) == 1


async def test_tools_as_the_first_prompt_lists_the_config_servers_tools(inproc: Any) -> None:
    """/tools lists what the model is offered: as the first prompt of an App not started it waits for
    the config's servers as a turn does, so their tools are listed too."""
    tag = unique_marker("toycoder-first-mcp")
    p: InProc = inproc({"mcp_servers": {
        "toy": {"command": sys.executable, "args": [TOY_MCP_SERVER, "--tag", tag], "permission": "safe"}}})
    listing = (await p.command(p.new_session(), "/tools")).result.text
    assert "mcp__toy__add" in listing and "[mcp:toy]" in listing


async def test_a_turn_waiting_for_a_server_that_never_answers_can_be_cancelled(inproc: Any) -> None:
    """The wait is the turn's: toycoder/cancel (App.cancel) ends it at once, the model never asked;
    the prompt is kept (a reload shows it, the next turn's request carries it), as a later cancel keeps it."""
    tag = unique_marker("toycoder-first-mcp")
    p: InProc = inproc({"mcp_servers": {"mute": {
        "command": sys.executable, "args": [TOY_MCP_SERVER, "--tag", tag, "--start-delay", "60"], "start_timeout": 60}}})
    sid = p.new_session()
    turn = p.start_prompt(sid, "hello")
    await eventually(lambda: bool(processes_with(tag)) and p.app.peek(sid).busy, "the turn waiting for the server")
    assert p.app.cancel(sid)
    out = await asyncio.wait_for(turn, DEFAULT_TIMEOUT)
    assert out.result.stop_reason == "cancelled" and p.script.calls == []
    s = p.app.peek(sid)
    assert [m["content"] for m in s.messages if m["role"] == "user"] == ["hello"]
    assert "hello" in [e.text for e in p.app.transcript(s) if e.role == "user"]
