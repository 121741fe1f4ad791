"""The ACP client's `mcpServers`: started for that session with the config servers' manager, its
tools offered in that session only (and asked for like any MCP tool), stopped with the session and
the daemon; acp and unknown transports refused with -32602 (sse is served: tests/unit/tools/mcp/test_mcp_sse.py); a failing server reported.
In-process tests drive the App (the per-session tool source) and the face; one test goes through
`python -m toycoder_daemon --acp` with the ACP SDK's client."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block
from acp.schema import EnvVariable, HttpHeader, HttpMcpServer, McpServerStdio, SseMcpServer
from acp_client import acp_daemon, acp_face
from helpers import TOY_MCP_SERVER, processes_with, unique_marker
from inproc_app import InProc
from waiting import wait_until_async

from toycoder_daemon.app.session_mcp import ClientServer
from toycoder_daemon.faces.acp.mcp import check_raw, specs
from toycoder_daemon.testing.fake_llm import FakeLLM


def toy(tag: str) -> ClientServer:
    return ClientServer(command=sys.executable, args=(TOY_MCP_SERVER, "--tag", tag))


def toy_stdio(name: str, tag: str) -> McpServerStdio:
    return McpServerStdio(name=name, command=sys.executable, args=[TOY_MCP_SERVER, "--tag", tag], env=[])


class Statuses:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def __call__(self, server: str, status: str, message: str) -> None:
        self.seen.append((server, status, message))


async def gone(tag: str, what: str) -> None:
    await wait_until_async(lambda: processes_with(tag) == [], 15, what)


# ---- the App: one session's servers ----------------------------------------------------------------

async def test_client_servers_are_offered_in_their_session_only(inproc: Any) -> None:
    tag, config_tag = unique_marker("toycoder-client-mcp"), unique_marker("toycoder-config-mcp")
    p: InProc = inproc({"mcp_servers": {"toy": {"command": sys.executable, "args": [TOY_MCP_SERVER, "--tag", config_tag],
                                                "permission": "safe"}}})
    await p.app.start()
    mine, other = p.new_session(), p.new_session()
    await p.app.mcp.set_session_servers(mine, {"toy": toy(tag)}, Statuses())
    await p.app.mcp.settle(mine)
    await wait_until_async(lambda: p.app.mcp.shared.tools(), 15, "the config server's tools")
    names = p.app.session(mine).tools.names()
    client = [n for n in names if n.endswith("__add") and n != "mcp__toy__add"]  # the config's name is kept
    assert "mcp__toy__add" in names and len(client) == 1
    assert p.app.session(mine).tools.get(client[0]).source == "client-mcp:toy"
    assert p.app.session(mine).tools.get("mcp__toy__add").source == "mcp:toy"
    assert "mcp__toy__add" in p.app.session(other).tools.names()
    assert client[0] not in p.app.session(other).tools.names()

    # a turn: the client server's tool asks (sensitive), runs, and its result reaches the model
    p.frontend.decisions = ["allow"]
    p.script.add({"tool_calls": [{"name": client[0], "arguments": {"a": 2, "b": 40}}]},
                 {"text": "42 it is", "expect": {"last_tool_contains": "42"}})
    out = await p.prompt(mine, "add")
    assert out.result.text == "42 it is" and [r.tool for r in p.frontend.requests] == [client[0]]
    assert client[0] in [t["function"]["name"] for t in p.script.calls[0]["tools"]]
    p.script.add({"text": "no client tools here"})
    await p.prompt(other, "hello")
    assert client[0] not in [t["function"]["name"] for t in p.script.calls[-1]["tools"]]

    listing = (await p.command(mine, "/mcp")).result.text
    assert "(stdio, from the client)" in listing and listing.count("ready") == 2
    assert "from the client" not in (await p.command(other, "/mcp")).result.text
    assert "[client-mcp:toy]" in (await p.command(mine, "/tools")).result.text

    assert processes_with(tag)
    await p.app.close_session(mine)
    await gone(tag, "the session's client server to stop with the session")
    assert processes_with(config_tag)  # the config's servers stay for the other sessions


async def test_the_same_servers_again_start_nothing_and_other_servers_replace_them(inproc: Any) -> None:
    first, second = unique_marker("toycoder-client-mcp"), unique_marker("toycoder-client-mcp")
    p: InProc = inproc()
    sid = p.new_session()
    await p.app.mcp.set_session_servers(sid, {"toy": toy(first)}, Statuses())
    await p.app.mcp.settle(sid)
    pids = processes_with(first)
    assert len(pids) == 1
    await p.app.mcp.set_session_servers(sid, {"toy": toy(first)}, Statuses())  # a second load
    await p.app.mcp.settle(sid)
    assert processes_with(first) == pids and p.app.mcp.pids(sid) == {"toy": os.getpgid(pids[0])}
    await p.app.mcp.set_session_servers(sid, {"toy": toy(second)}, Statuses())
    await gone(first, "the replaced server to stop")
    await p.app.mcp.settle(sid)
    assert len(processes_with(second)) == 1
    await p.app.mcp.set_session_servers(sid, {}, Statuses())
    await gone(second, "the servers to stop when the client gives none")
    assert p.app.mcp_status(sid) is None


async def test_an_http_client_server_gets_its_headers(inproc: Any, http_server: Any) -> None:  # noqa: F811
    url, _ = http_server("--require-header", "X-Toy-Auth=letmein")
    p: InProc = inproc()
    sid = p.new_session()
    statuses = Statuses()
    await p.app.mcp.set_session_servers(sid, {"web": ClientServer(url=url, headers={"X-Toy-Auth": "letmein"}),
                                              "noauth": ClientServer(url=url)}, statuses)
    await p.app.mcp.settle(sid)
    add = p.app.session(sid).tools.get("mcp__web__add")
    assert add is not None and add.level == "sensitive" and await add.func(None, a=20, b=22) == "42"
    await wait_until_async(lambda: [(s, st) for s, st, _ in statuses.seen if st != "ready"] == [("noauth", "failed")],
                           10, "the server refusing us reported failed", describe=lambda: str(statuses.seen))
    rows = {r["name"]: r for r in p.app.mcp_status(sid) or []}
    assert rows["web"] == {"name": "web", "status": "ready", "tools": 13, "transport": "http", "origin": "client"}


async def test_switching_away_stops_the_sessions_servers(inproc: Any) -> None:
    tag = unique_marker("toycoder-client-mcp")
    p: InProc = inproc()
    sid = p.new_session()
    await p.app.mcp.set_session_servers(sid, {"toy": toy(tag)}, Statuses())
    await p.app.mcp.settle(sid)
    assert processes_with(tag)
    out = await p.command(sid, "/new")
    assert out.action and out.action["kind"] == "switch"
    await gone(tag, "the server to stop when /new leaves the session")


async def test_deleting_a_session_stops_its_servers(inproc: Any) -> None:
    tag, kept = unique_marker("toycoder-client-mcp"), unique_marker("toycoder-client-mcp")
    p: InProc = inproc()
    sid, other = p.new_session("doomed"), p.new_session("kept")
    for session, marker in ((sid, tag), (other, kept)):
        await p.app.mcp.set_session_servers(session, {"toy": toy(marker)}, Statuses())
        await p.app.mcp.settle(session)
    assert processes_with(tag) and processes_with(kept)
    p.app.delete_session(sid)  # synchronous: the stop runs in a task (McpHub.close_later)
    await gone(tag, "the deleted session's client server to stop")
    assert p.app.mcp.pids(sid) == {} and p.app.mcp_status(sid) is None
    assert processes_with(kept)  # another session's servers are not touched


async def test_a_failing_client_server_is_reported_and_the_session_goes_on(inproc: Any) -> None:
    p: InProc = inproc()
    sid = p.new_session()
    statuses = Statuses()
    await p.app.mcp.set_session_servers(sid, {"broken": ClientServer(command="/nonexistent/mcp-server")}, statuses)
    p.script.add({"text": "still fine"})
    assert (await p.prompt(sid, "hi")).result.text == "still fine"
    await wait_until_async(lambda: statuses.seen, 10, "the failure reported")  # told after it settles
    [(server, status, message)] = statuses.seen
    assert (server, status) == ("broken", "failed") and "/nonexistent/mcp-server" in message
    [row] = p.app.mcp_status(sid) or []
    assert row["status"] == "failed" and row["origin"] == "client"


async def test_daemon_shutdown_stops_every_sessions_servers(inproc: Any) -> None:
    tag = unique_marker("toycoder-client-mcp")
    p: InProc = inproc()
    a, b = p.new_session(), p.new_session()
    for sid in (a, b):
        await p.app.mcp.set_session_servers(sid, {"toy": toy(tag)}, Statuses())
        await p.app.mcp.settle(sid)
    assert len(processes_with(tag)) == 2
    await p.app.shutdown()
    await gone(tag, "every client server to stop at shutdown")


# ---- the face: what the client sends -------------------------------------------------------------

@pytest.mark.parametrize("item, says", [
    ({"type": "sse", "name": "events", "headers": []}, ["'events'", "url"]),
    ({"type": "websocket", "name": "ws", "url": "ws://x"}, ["'ws'", "'websocket'"]),
    ({"type": "acp", "name": "inner", "serverId": "x"}, ["'inner'", "'acp'"]),
    ({"name": "half", "command": "/bin/true"}, ["'half'", "args"]),
    ({"type": "http", "name": "web", "headers": []}, ["'web'", "url"]),
    ("not a server", ["not an object"]),
    ({"type": ["stdio"], "name": "listed", "command": "/bin/true", "args": []}, ["'listed'", "type must be a string"]),
    ({"type": {"t": 1}, "name": "mapped", "command": "/bin/true", "args": []}, ["'mapped'", "type must be a string"]),
])
def test_unsupported_or_malformed_servers_are_refused(item: Any, says: list[str]) -> None:
    with pytest.raises(RequestError) as e:
        check_raw({"cwd": "/", "mcpServers": [item]})
    assert e.value.code == -32602 and all(s in str(e.value) for s in says), str(e.value)


def test_stdio_and_http_servers_pass_and_names_must_differ() -> None:
    stdio = {"name": "a", "command": "/bin/x", "args": ["-v"], "env": [{"name": "TOKEN", "value": "t"}]}
    http = {"type": "http", "name": "b", "url": "http://127.0.0.1:9/mcp", "headers": []}
    check_raw({"mcpServers": [stdio, {**stdio, "type": "stdio", "name": "c"}, http]})
    with pytest.raises(RequestError) as e:
        check_raw({"mcpServers": [stdio, {**http, "name": "a"}]})
    assert "'a'" in str(e.value) and "two servers" in str(e.value)
    parsed = specs([McpServerStdio(name="a", command="/bin/x", args=["-v"], env=[EnvVariable(name="TOKEN", value="t")]),
                    HttpMcpServer(type="http", name="b", url="http://h/mcp", headers=[HttpHeader(name="X", value="1")])])
    assert parsed == {"a": ClientServer(command="/bin/x", args=("-v",), env={"TOKEN": "t"}),
                      "b": ClientServer(url="http://h/mcp", headers={"X": "1"})}
    assert specs([SseMcpServer(type="sse", name="s", url="http://h/sse", headers=[])]) == {
        "s": ClientServer(url="http://h/sse", transport="sse")}


async def test_an_unknown_transport_is_answered_minus_32602_before_the_sdk_drops_it(tmp_path: Path, llm: FakeLLM,
                                                                                   workspace: Path) -> None:
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        with pytest.raises(RequestError) as e:
            await conn._conn.send_request("session/new", {"cwd": str(workspace), "mcpServers": [
                {"type": "websocket", "name": "ws", "url": "ws://127.0.0.1:1"}]})
        assert e.value.code == -32602 and "'ws'" in str(e.value) and "websocket" in str(e.value)
        listed = await conn.list_sessions(cwd=str(workspace))
        assert listed.sessions == []


async def test_new_on_the_acp_face_leaves_the_session_open_with_its_servers(tmp_path: Path, llm: FakeLLM,
                                                                          workspace: Path) -> None:
    """/new answers with a note to open the new session: the client still holds this one, so its
    servers keep running and a later prompt there is offered their tools; session/close stops them."""
    tag = unique_marker("toycoder-acp-client-mcp")
    llm.add({"text": "still here"})
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[toy_stdio("toy", tag)])).session_id
        await wait_until_async(lambda: processes_with(tag), 15, "the client's server started")
        pids = processes_with(tag)
        assert (await conn.prompt(session_id=sid, prompt=[text_block("/new")])).stop_reason == "end_turn"
        assert "open session" in editor.text()
        assert (await conn.prompt(session_id=sid, prompt=[text_block("again")])).stop_reason == "end_turn"
        assert "mcp__toy__add" in [t["function"]["name"] for t in llm.requests[-1]["body"]["tools"]]
        assert processes_with(tag) == pids  # the same server, never stopped and started again
        await conn.close_session(session_id=sid)
        await gone(tag, "the client's server to stop on session/close")


# ---- through the daemon ---------------------------------------------------------------------------

def thoughts(editor: Any) -> str:
    return editor.text("agent_thought_chunk")


async def test_client_mcp_servers_through_the_daemon(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    tag = unique_marker("toycoder-acp-client-mcp")
    llm.add({"tool_calls": [{"name": "mcp__toy__add", "arguments": {"a": 2, "b": 40}}]},
            {"text": "2 + 40 = 42", "expect": {"last_tool_contains": "42"}},
            {"text": "nothing from the client here"})
    async with acp_daemon(tmp_path, llm) as (conn, editor, _):
        assert editor.frames[0]["result"]["agentCapabilities"]["mcpCapabilities"] == {"http": True, "sse": True}

        broken = McpServerStdio(name="broken", command="/nonexistent/mcp-server", args=[], env=[])
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[toy_stdio("toy", tag), broken])).session_id
        other = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        await wait_until_async(lambda: "'broken' (from the client) failed" in thoughts(editor), 20,
                               "the failing server reported to the client", describe=lambda: thoughts(editor))
        resp = await conn.prompt(session_id=sid, prompt=[text_block("add 2 and 40")])
        assert resp.stop_reason == "end_turn"
        [asked] = editor.requests("session/request_permission")
        assert asked["toolCall"]["title"] == "mcp toy/add"
        done = [u for u in editor.updates("tool_call_update") if u.get("status") == "completed"]
        assert "42" in done[-1]["content"][0]["content"]["text"]
        assert "mcp__toy__add" in [t["function"]["name"] for t in llm.requests[0]["body"]["tools"]]
        await conn.prompt(session_id=other, prompt=[text_block("hello")])
        assert not [t for t in llm.requests[2]["body"]["tools"] if t["function"]["name"].startswith("mcp__toy")]
        assert llm.violations == []

        await conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[toy_stdio("toy", tag), broken])
        assert len(processes_with(tag)) == 1  # loaded again with the same servers: still the one
        await conn.close_session(session_id=sid)
        await gone(tag, "the client's server to stop on session/close")

        await conn.resume_session(cwd=str(workspace), session_id=sid, mcp_servers=[toy_stdio("toy", tag)])
        await wait_until_async(lambda: processes_with(tag), 15, "the server started again on resume")
    await gone(tag, "the client's server to stop with the daemon")
