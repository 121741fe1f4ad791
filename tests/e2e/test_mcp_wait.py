"""A turn (or /tools) that waits for MCP servers to start says so: an McpWaiting "waiting" once the
wait lasts SHOW_WAIT_AFTER, "done" (naming the failed ones) when they settle, and nothing when
there are none or they are settled. On the LSP face a toycoder/update `mcp_wait`, on the ACP face a
tool call of its own. Slow toy servers (`--start-delay`) make the wait certain to be long: a server
cannot be ready before its delay is over, and the delay is many times SHOW_WAIT_AFTER."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from acp_daemon import AcpDaemon
from helpers import SLOW_MCP_START, TOY_MCP_SERVER, processes_with, slow_and_mute_mcp_servers, unique_marker, write_config
from inproc_app import InProc, eventually
from waiting import DEFAULT_TIMEOUT

from toycoder_daemon.core.ports import McpWaiting
from toycoder_daemon.testing.fake_llm import FakeLLM

"""The slow server's seconds before it answers anything (six times SHOW_WAIT_AFTER)."""


def slow(tag: str, **kw: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [TOY_MCP_SERVER, "--tag", tag, "--start-delay", SLOW_MCP_START], "permission": "safe", **kw}


def mute(tag: str, *extra: str, timeout: float = 1) -> dict[str, Any]:
    """Never answers its handshake (60 s asleep): it fails at its start_timeout."""
    return {"command": sys.executable, "args": [TOY_MCP_SERVER, "--tag", tag, *extra, "--start-delay", "60"],
            "start_timeout": timeout}


def waits(p: InProc, sid: str) -> list[McpWaiting]:
    return [e for e in p.frontend.of(sid, "mcp_wait") if isinstance(e, McpWaiting)]


class AskedAt(list[dict[str, Any]]):
    """The scripted model's calls, noting what `probe` says when the model is first asked."""

    def __init__(self, probe: Any) -> None:
        super().__init__()
        self.probe, self.seen = probe, None

    def append(self, call: dict[str, Any]) -> None:
        if self.seen is None:
            self.seen = self.probe()
        super().append(call)


# ---- the App in-process ------------------------------------------------------------------------

async def test_a_turn_waiting_for_starting_servers_shows_the_wait_then_its_end_before_the_model(inproc: Any) -> None:
    tag, stuck = unique_marker("toycoder-mcp-wait"), unique_marker("toycoder-mcp-wait")
    p: InProc = inproc({"mcp_servers": {"toy": slow(tag), "mute": mute(stuck)}})
    notices: list[str] = []
    p.app.on_notice = lambda level, message: notices.append(message)
    sid = p.new_session()
    p.script.add({"text": "hi"})
    p.script.calls = AskedAt(lambda: (list(waits(p, sid)), list(notices)))
    assert (await p.prompt(sid, "hello")).result.text == "hi"
    assert "mcp__toy__add" in [t["function"]["name"] for t in p.script.calls[0]["tools"]]
    shown, told = p.script.calls.seen
    assert shown == [McpWaiting("waiting", ("toy", "mute")), McpWaiting("done", ("toy", "mute"), ("mute",))]
    assert [m for m in told if "'mute'" in m]  # the failure's own report, with its reason, as before
    # settled now: the next turn shows nothing
    p.script.add({"text": "again"})
    assert (await p.prompt(sid, "again")).result.text == "again"
    assert waits(p, sid) == shown


async def test_no_servers_or_servers_already_settled_show_nothing(inproc: Any) -> None:
    p: InProc = inproc()
    sid = p.new_session()
    p.script.add({"text": "hi"})
    assert (await p.prompt(sid, "hello")).result.text == "hi"
    tag = unique_marker("toycoder-mcp-wait")
    q: InProc = inproc({"mcp_servers": {"toy": {"command": sys.executable, "args": [TOY_MCP_SERVER, "--tag", tag]}}})
    await q.app.start()
    assert q.app.mcp.shared is not None and await q.app.mcp.shared.wait_ready(DEFAULT_TIMEOUT)
    other = q.new_session()
    q.script.add({"text": "hi"})
    assert (await q.prompt(other, "hello")).result.text == "hi"
    assert p.frontend.of(sid) and not waits(p, sid) and not waits(q, other)


async def test_a_short_wait_is_not_shown(inproc: Any) -> None:
    """Below SHOW_WAIT_AFTER nothing is said; set it out of reach to make any wait a short one."""
    tag = unique_marker("toycoder-mcp-wait")
    p: InProc = inproc({"mcp_servers": {"toy": slow(tag)}})
    p.app.mcp.show_wait_after = DEFAULT_TIMEOUT * 10
    sid = p.new_session()
    p.script.add({"text": "hi"})
    assert (await p.prompt(sid, "hello")).result.text == "hi"
    assert "mcp__toy__add" in [t["function"]["name"] for t in p.script.calls[0]["tools"]] and not waits(p, sid)


async def test_tools_as_the_first_prompt_shows_the_wait(inproc: Any) -> None:
    tag = unique_marker("toycoder-mcp-wait")
    p: InProc = inproc({"mcp_servers": {"toy": slow(tag)}})
    sid = p.new_session()
    listing = (await p.command(sid, "/tools")).result.text
    assert "mcp__toy__add" in listing
    assert waits(p, sid) == [McpWaiting("waiting", ("toy",)), McpWaiting("done", ("toy",))]


async def test_a_turn_cancelled_while_it_waits_ends_the_wait(inproc: Any) -> None:
    tag = unique_marker("toycoder-mcp-wait")
    p: InProc = inproc({"mcp_servers": {"mute": mute(tag, timeout=60)}})
    sid = p.new_session()
    turn = p.start_prompt(sid, "hello")
    await eventually(lambda: bool(waits(p, sid)), "the wait to be shown")
    assert p.app.cancel(sid)
    assert (await asyncio.wait_for(turn, DEFAULT_TIMEOUT)).result.stop_reason == "cancelled"
    assert waits(p, sid) == [McpWaiting("waiting", ("mute",)), McpWaiting("done", ("mute",))]
    assert p.script.calls == []


async def test_a_timed_out_server_does_not_hold_the_turn_while_it_is_stopped(inproc: Any) -> None:
    """One that ignores SIGTERM takes EXIT_GRACE + TERM_GRACE (4 s) to stop after its timeout: the
    model is asked while it still runs, and it is killed all the same."""
    tag = unique_marker("toycoder-mcp-wait")
    p: InProc = inproc({"mcp_servers": {"stuck": mute(tag, "--stubborn")}})
    sid = p.new_session()
    p.script.add({"text": "hi"})
    p.script.calls = AskedAt(lambda: (processes_with(tag), p.app.mcp_status(sid)))
    assert (await p.prompt(sid, "hello")).result.text == "hi"
    running, status = p.script.calls.seen
    assert running and status is not None and status[0]["status"] == "failed"
    assert "no answer to the MCP handshake within 1s" in status[0]["error"]
    await eventually(lambda: processes_with(tag) == [], "the stuck server to be killed")


# ---- through the real daemon -------------------------------------------------------------------

async def test_lsp_the_wait_is_an_mcp_wait_update_before_the_reply(start_daemon: Any, llm: FakeLLM) -> None:
    d = await start_daemon(extra=slow_and_mute_mcp_servers(unique_marker("toycoder-mcp-wait")), progress=True)
    sid = (await d.call("toycoder/session/new", {}))["sessionId"]
    llm.add({"text": "hi"})
    assert (await d.call("toycoder/prompt", {"sessionId": sid, "text": "hello"}))["text"] == "hi"
    kinds = [u["update"]["kind"] for u in d.updates(sid)]
    shown = [u["update"] for u in d.updates(sid) if u["update"]["kind"] == "mcp_wait"]
    assert shown == [{"kind": "mcp_wait", "state": "waiting", "servers": ["toy", "mute"]},
                     {"kind": "mcp_wait", "state": "done", "servers": ["toy", "mute"], "failed": ["mute"]}]
    assert kinds.index("mcp_wait") < kinds.index("text_delta")
    reports = [n["params"]["value"].get("message") for n in d.notifications if n["method"] == "$/progress"
               and n["params"]["value"]["kind"] == "report"]
    assert reports[:2] == ["starting MCP servers: toy, mute", "thinking"]  # $/progress says it too
    assert "mcp__toy__add" in {t["function"]["name"] for t in llm.requests[0]["body"]["tools"]}
    llm.add({"text": "again"})
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "again"})  # settled: nothing more shown
    assert [u["update"] for u in d.updates(sid) if u["update"]["kind"] == "mcp_wait"] == shown


def test_acp_the_wait_is_a_tool_call_of_its_own(tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    tag = unique_marker("toycoder-mcp-wait")
    config = write_config(tmp_path / "config.yaml", llm, extra=slow_and_mute_mcp_servers(tag))
    llm.add({"text": "hi"})
    d = AcpDaemon(config)
    try:
        sid = d.start(workspace)
        d.prompt(3, sid, "hello")
        assert d.answer(3)["result"]["stopReason"] == "end_turn"
        started = d.updates("tool_call")
        assert [(u["title"], u["kind"], u["status"]) for u in started] == [
            ("Starting MCP servers: toy, mute", "other", "in_progress")]
        ended = [u for u in d.updates("tool_call_update") if u["toolCallId"] == started[0]["toolCallId"]]
        assert [u["status"] for u in ended] == ["failed"]
        said = ended[0]["content"][0]["content"]["text"]
        assert "mute failed: no answer to the MCP handshake within 1s" in said and "toy" not in said
        texts = [u["sessionUpdate"] for u in d.updates()]
        assert texts.index("tool_call_update") < texts.index("agent_message_chunk")
    finally:
        assert d.close() == 0
