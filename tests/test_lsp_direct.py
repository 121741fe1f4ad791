"""Our own requests answered without pygls' dispatch (lsp_direct.py) and frames handed over on the
event loop (rpc_io.serve): the answers are byte for byte pygls' (results, errors, cancels), an
instant handler is answered in the step its request arrives in but never ahead of an earlier
request's first step, and frames lsp_early hands over on the loop are dispatched at once, in order.
No timing is asserted: bench/peers.py's 20-session table measures the latency."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import write_config
from inproc_app import eventually
from test_lsp_early import Capture, body  # frames as written, answers by id

from toycoder_daemon import protocol as wire
from toycoder_daemon import server as server_module
from toycoder_daemon.app import App
from toycoder_daemon.lsp_calls import instant
from toycoder_daemon.rpc_io import Dispatcher, serve
from toycoder_daemon.server import make_server
from toycoder_daemon.stdio import FrameWriter, Inbox
from toycoder_daemon.testing.fake_llm import FakeLLM


def req(msg_id: Any, method: str, params: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": {} if params is None else params}


def initialize(workspace: Path, config: Path) -> dict[str, Any]:
    return req(0, "initialize", {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {},
                                 "initializationOptions": {"configPath": str(config)}})


def started(workspace: Path, config: Path, *, direct: bool) -> tuple[Dispatcher, Capture]:
    server = make_server()
    out = Capture()
    writer = FrameWriter(out)  # type: ignore[arg-type]
    server.protocol.set_writer(writer)
    d = Dispatcher(server, writer, lambda: None, direct=direct)
    d.frame(body(initialize(workspace, config)), None)
    d.frame(body({"jsonrpc": "2.0", "method": "initialized", "params": {}}), None)
    return d, out


async def both_ways(workspace: Path, config: Path, frames: list[dict[str, Any]]) -> list[dict[Any, bytes]]:
    """The same frames through pygls' dispatch and through lsp_direct, each on a fresh server."""
    got = []
    for direct in (False, True):
        d, out = started(workspace, config, direct=direct)
        for msg in frames:
            d.frame(body(msg), None)
        await eventually(lambda o=out: all(m["id"] in o.answers() for m in frames if "id" in m), "the answers")
        got.append(out.answers())
        assert d.server.app is not None
        await d.server.app.shutdown()
    return got


@pytest.fixture
def config(tmp_path: Path, llm: FakeLLM) -> Path:
    return write_config(tmp_path / "config.yaml", llm)


async def test_direct_answers_are_pygls_answers_byte_for_byte(workspace: Path, config: Path) -> None:
    app = App.open(workspace, str(config))
    sid = app.new_session("stored").id
    await app.shutdown()
    frames = [
        req(1, wire.TOOLS_LIST, {"sessionId": sid}),  # instant
        req(2, wire.COMMANDS_LIST, []),  # Lua's empty object
        req(3, wire.TOOLS_LIST, {"sessionId": "nope"}),  # a core error (session not found)
        req("four", wire.TOOLS_LIST, {"sessionId": 5}),  # bad params
        req(5, wire.TOOLS_SET_ENABLED, {"sessionId": sid, "name": "no_such_tool", "enabled": False}),  # a handler's JsonRpcException
        req(6, wire.SESSION_SET_MODE, {"sessionId": sid, "mode": "no-such-mode"}),
        req(7, wire.SESSION_LIST),  # a task (a thread reads the store)
        req(8, wire.SESSION_LOAD, {"sessionId": "nope"}),  # a task's error
        req(9, wire.CANCEL, {"sessionId": sid}),
        req(10, wire.CHECKPOINT_LIST, {"sessionId": sid}),
    ]
    through_pygls, direct = await both_ways(workspace, config, frames)
    assert direct == through_pygls
    assert json.loads(direct[1].partition(b"\r\n\r\n")[2])["result"]["tools"]  # a real answer, not two errors


async def test_a_broken_result_is_the_same_internal_error(workspace: Path, config: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(server_module.HANDLERS, wire.COMMANDS_LIST, instant(lambda ls, p: wire.CancelResult(cancelled=True)))

    async def wrong(ls: Any, p: Any) -> wire.Wire:
        return wire.CancelResult(cancelled=True)

    monkeypatch.setitem(server_module.HANDLERS, wire.SESSION_LIST, wrong)
    through_pygls, direct = await both_ways(workspace, config, [req(1, wire.COMMANDS_LIST), req(2, wire.SESSION_LIST)])
    assert direct == through_pygls
    assert {json.loads(direct[i].partition(b"\r\n\r\n")[2])["error"]["code"] for i in (1, 2)} == {wire.INTERNAL_ERROR}


async def test_an_instant_request_is_answered_in_the_step_it_arrives_in(workspace: Path, config: Path) -> None:
    d, out = started(workspace, config, direct=True)
    d.frame(body(req(1, wire.COMMANDS_LIST)), None)
    assert 1 in out.answers()  # no loop pass in between: beside 20 streams a pass is milliseconds
    p, pout = started(workspace, config, direct=False)
    p.frame(body(req(1, wire.COMMANDS_LIST)), None)
    assert 1 not in pout.answers()  # pygls' way: a task, then a done callback
    await eventually(lambda: 1 in pout.answers(), "pygls' answer")
    for server in (d.server, p.server):
        await server.app.shutdown()


async def test_an_instant_request_waits_for_the_first_step_of_one_before_it(
        workspace: Path, config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[str] = []
    release = asyncio.Event()

    async def slow_list(ls: Any, p: Any) -> wire.Wire:
        order.append("list started")
        await release.wait()
        return wire.SessionList(sessions=[])

    def commands(ls: Any, p: Any) -> wire.Wire:
        order.append("commands")
        return wire.CommandList(commands=[])

    monkeypatch.setitem(server_module.HANDLERS, wire.SESSION_LIST, slow_list)
    monkeypatch.setitem(server_module.HANDLERS, wire.COMMANDS_LIST, instant(commands))
    d, out = started(workspace, config, direct=True)
    d.frame(body(req(1, wire.SESSION_LIST)), None)
    d.frame(body(req(2, wire.COMMANDS_LIST)), None)
    assert order == [] and list(out.answers()) == [0]  # the list has not started: the instant one waits its turn
    await eventually(lambda: 2 in out.answers(), "the commands answer")
    assert order == ["list started", "commands"] and 1 not in out.answers()  # after its start, not its end
    d.frame(body(req(3, wire.COMMANDS_LIST)), None)
    assert 3 in out.answers()  # nothing before it waits to start any more
    release.set()
    await eventually(lambda: 1 in out.answers(), "the list answer")
    assert d.server.app is not None
    await d.server.app.shutdown()


async def test_cancels_are_answered_as_pygls_answers_them(workspace: Path, config: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    running: list[Any] = []

    async def forever(ls: Any, p: Any) -> wire.Wire:
        running.append(p)
        await asyncio.Event().wait()
        raise AssertionError("never")

    monkeypatch.setitem(server_module.HANDLERS, wire.SESSION_LIST, forever)
    cancel = {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 1}}
    # cancelled before its task's first step, then one cancelled while it waits
    answers: list[dict[Any, bytes]] = []
    for direct in (False, True):
        d, out = started(workspace, config, direct=direct)
        d.frame(body(req(1, wire.SESSION_LIST)), None)
        d.frame(body(cancel), None)
        await eventually(lambda o=out: 1 in o.answers(), "the first cancel's answer")
        running.clear()
        d.frame(body(req(2, wire.SESSION_LIST)), None)
        await eventually(lambda: bool(running), "the second request's handler waiting")
        d.frame(body({**cancel, "params": {"id": 2}}), None)
        await eventually(lambda o=out: 2 in o.answers(), "the second cancel's answer")
        answers.append(out.answers())
        assert d.server.app is not None
        await d.server.app.shutdown()
    assert answers[1] == answers[0]
    assert json.loads(answers[1][2].partition(b"\r\n\r\n")[2])["error"]["code"] == -32800


async def test_frames_handed_over_on_the_loop_are_dispatched_at_once_in_order(
        workspace: Path, config: Path) -> None:
    server = make_server()
    out = Capture()

    class HandOver(Inbox):
        """As lsp_early's: frames come on the loop, one even as serve attaches (behind the held ones)."""

        def attach(self, target: Any) -> None:
            super().attach(target)
            self.put(body(req(2, wire.COMMANDS_LIST)), None)
            self.handed_at_attach = 2 in out.answers()

    inbox = HandOver()
    for msg in (initialize(workspace, config), {"jsonrpc": "2.0", "method": "initialized", "params": {}},
                req(1, wire.COMMANDS_LIST)):
        inbox.put(body(msg), None)  # held before serve attaches: dispatched in their own callbacks
    serving = asyncio.ensure_future(serve(server, inbox, out))  # type: ignore[arg-type]
    await eventually(lambda: 2 in out.answers(), "the answer of the frame handed over at attach")
    assert not inbox.handed_at_attach  # it waited for the held frames' callbacks: no overtaking
    assert list(out.answers()) == [0, 1, 2]
    inbox.put(body(req(3, wire.COMMANDS_LIST)), None)  # nothing waits: dispatched (and answered) at once
    assert list(out.answers()) == [0, 1, 2, 3]
    inbox.put(None, None)  # the end of input
    assert await asyncio.wait_for(serving, 10) == 0
