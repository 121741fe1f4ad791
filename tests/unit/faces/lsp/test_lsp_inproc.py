"""The LSP face in-process: the frame reader on bytes, what pygls' loop is given to read (rpc_io.Frames)
on a fresh server, and the protocol-level errors through the whole face (tests/inproc.py). The
subprocess layer (test_wire_errors_e2e.py, test_lsp_client.py) keeps startup, framing on a real
stdin, EOF exit and a real turn."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import write_call
from inproc import start_lsp
from pygls.exceptions import JsonRpcException
from rpc import Daemon, RpcError, frame
from waiting import scaled, wait_until_async

from toycoder_daemon.faces.lsp import server as server_module
from toycoder_daemon.faces.lsp.server import make_server
from toycoder_daemon.faces.lsp.transport import Frames
from toycoder_daemon.rpc.lsp_framing import MAX_CONTENT_LENGTH, FrameWriter, read_frames
from toycoder_daemon.testing.fake_llm import FakeLLM
from toycoder_daemon.wire import protocol as wire

# ---- read_frames on bytes --------------------------------------------------------------------


def frames_of(data: bytes) -> list[tuple[Any, Any]]:
    got: list[tuple[Any, Any]] = []
    read_frames(io.BytesIO(data), lambda body, problem: got.append((body, problem)))
    return got


def test_read_frames_reads_bodies_in_order_and_ends_with_eof() -> None:
    data = frame({"a": 1}) + b"\r\n" + frame({"b": 2})  # a stray blank line between frames is fine
    assert frames_of(data) == [(b'{"a": 1}', None), (b'{"b": 2}', None), (None, None)]


def test_read_frames_accepts_other_headers_and_odd_spacing() -> None:
    body = b'{"x": "\xc3\xa9"}'
    data = b"Content-Type: application/vscode-jsonrpc\r\ncontent-length:  %d \r\n\r\n%s" % (len(body), body)
    assert frames_of(data) == [(body, None), (None, None)]


def test_read_frames_refuses_oversized_and_bad_lengths_then_resynchronises() -> None:
    big = MAX_CONTENT_LENGTH + 1
    data = (b"Content-Length: %d\r\n\r\n" % big + b"x" * big + frame({"after": "big"})
            + b"Content-Length: banana\r\n\r\n{\"half\": " + frame({"after": "banana"})
            + b"Content-Length: -5\r\n\r\n" + frame({"after": "negative"}))
    got = frames_of(data)
    assert [b for b, _ in got] == [None, b'{"after": "big"}', None, b'{"after": "banana"}', None,
                                   b'{"after": "negative"}', None]
    problems = [p for _, p in got if p]
    assert "over the limit" in problems[0] and "banana" in problems[1] and "negative" in problems[2]


def test_read_frames_refuses_a_header_block_without_a_length_then_resynchronises() -> None:
    data = b"X-Foo: 1\r\n\r\n{\"lost\": 1}" + frame({"after": "missing"})
    got = frames_of(data)
    assert [b for b, _ in got] == [None, b'{"after": "missing"}', None]
    assert got[0][1] == "no Content-Length header"


def test_read_frames_stops_at_a_truncated_body() -> None:
    assert frames_of(b"Content-Length: 10\r\n\r\n{\"a\"") == [(None, None)]


# ---- what pygls' loop reads: rpc_io.Frames on a fresh server ------------------------------------


class Recorder:
    """A FrameWriter target: every frame written, parsed."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        for chunk in data.split(b"Content-Length: ")[1:]:
            self.frames.append(json.loads(chunk.split(b"\r\n\r\n", 1)[1]))

    def flush(self) -> None:
        pass


async def read_by_pygls(*items: tuple[Any, Any]) -> tuple[list[bytes], Recorder]:
    """What pygls' loop reads when the reader thread delivers `items` then EOF: the bodies, each
    checked to come in the one header form pygls parses; and what was answered instead."""
    out = Recorder()
    frames = Frames(make_server().protocol, FrameWriter(out))  # type: ignore[arg-type]
    for body, problem in [*items, (None, None)]:
        frames.put(json.dumps(body).encode() if isinstance(body, dict) else body, problem)
    bodies = []
    while header := await frames.readline():
        assert re.fullmatch(rb"Content-Length: (\d+)\r\n", header) and await frames.readline() == b"\r\n"
        bodies.append(await frames.readexactly(int(header.split(b": ")[1])))
    assert await frames.readline() == b""  # the end stays the end
    return bodies, out


def init(msg_id: Any = 0) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "initialize", "params": {"capabilities": {}}}


async def test_malformed_messages_are_answered_and_never_reach_pygls() -> None:
    bodies, out = await read_by_pygls(
        (b"{not json", None), (b"[1, 2]", None), ({"id": 3, "method": "x"}, None),
        ({"jsonrpc": "2.0", "id": True, "method": "x"}, None), ({"jsonrpc": "2.0", "id": 4}, None),
        (None, "Content-Length 5 is over the limit"), (init(), None),
        ({"jsonrpc": "2.0", "id": 5, "method": "initialized", "params": {}}, None))
    assert [json.loads(b)["id"] for b in bodies] == [0]
    codes = [(f["id"], f["error"]["code"]) for f in out.frames]
    assert codes == [(None, -32700), (None, -32600), (3, -32600), (None, -32600), (4, -32600), (None, -32600),
                     (5, -32600)]


async def test_before_initialize_requests_are_refused_notifications_dropped_exit_passes() -> None:
    exit_ = {"jsonrpc": "2.0", "method": "exit"}
    bodies, out = await read_by_pygls(
        ({"jsonrpc": "2.0", "method": "toycoder/whatever"}, None),
        ({"jsonrpc": "2.0", "id": 1, "method": wire.SESSION_LIST}, None),
        ({"jsonrpc": "2.0", "id": "r", "result": None}, None),  # a response: pygls' to judge
        (init(2), None), (init(3), None), ({"jsonrpc": "2.0", "id": 4, "method": wire.SESSION_LIST}, None),
        (exit_, None))
    assert [json.loads(b).get("id") for b in bodies] == ["r", 2, 4, None]
    assert [(f["id"], f["error"]["code"]) for f in out.frames] == [(1, wire.SERVER_NOT_INITIALIZED),
                                                                     (3, wire.INVALID_REQUEST)]
    assert "already" in out.frames[1]["error"]["message"]


async def test_a_body_is_handed_over_as_read_with_its_inner_jsonrpc_objects_counted() -> None:
    body = b'{"jsonrpc": "2.0", "method": "toycoder/x", "params": {"a": {"jsonrpc": 1}, "b": [{"jsonrpc": 2}]}}'
    frames = Frames(make_server().protocol, FrameWriter(Recorder()))  # type: ignore[arg-type]
    frames.put(json.dumps(init()).encode(), None)
    frames.put(body, None)
    for expected in (None, body):
        header = await frames.readline()
        await frames.readline()
        got = await frames.readexactly(int(header.split(b": ")[1]))
        assert expected is None or got == expected
    assert frames.protocol.inner_messages == 2


# ---- through the whole face, in-process --------------------------------------------------------


async def test_the_face_runs_in_this_process(daemon: Daemon) -> None:
    assert daemon.proc.pid == os.getpid()
    assert (await daemon.call(wire.SESSION_LIST, {})) == {"sessions": []}


async def test_invalid_requests(daemon: Daemon) -> None:
    daemon.send_raw(frame([1, 2, 3]))
    daemon.send_raw(frame({"id": 5, "method": "toycoder/session/list"}))  # no jsonrpc
    daemon.send_raw(frame({"jsonrpc": "2.0", "id": 6, "method": 42}))
    await daemon.wait_for(lambda: len([o for o in daemon.orphans if o["error"]["code"] == -32600]) == 3)
    ids = sorted(str(o["id"]) for o in daemon.orphans)
    assert ids == ["5", "6", "None"]
    with pytest.raises(RpcError) as e:
        await daemon.call("toycoder/no/such/method", {})
    assert e.value.code == -32601


@pytest.mark.parametrize(
    "method, params, field",
    [
        ("toycoder/prompt", {"text": "hi"}, "sessionId"),
        ("toycoder/prompt", {"sessionId": "x", "text": 5}, "text"),
        ("toycoder/tools/setEnabled", {"sessionId": "x", "name": "read_file", "enabled": "maybe"}, "enabled"),
        ("toycoder/session/load", "abc", "object"),
        ("toycoder/session/load", [], "sessionId"),  # [] is an empty object (Lua clients send it)
    ],
)
async def test_bad_params_name_the_field(daemon: Daemon, method: str, params: Any, field: str) -> None:
    with pytest.raises(RpcError) as e:
        await daemon.call(method, params)
    assert e.value.code == -32602
    assert field in e.value.message


async def test_unknown_session(daemon: Daemon) -> None:
    for method, params in [
        ("toycoder/prompt", {"sessionId": "nope", "text": "hi"}),
        ("toycoder/cancel", {"sessionId": "nope"}),
        ("toycoder/session/load", {"sessionId": "nope"}),
        ("toycoder/session/delete", {"sessionId": "nope"}),
        ("toycoder/tools/list", {"sessionId": "nope"}),
    ]:
        with pytest.raises(RpcError) as e:
            await daemon.call(method, params)
        assert e.value.code == -32010, method
        assert "nope" in e.value.message


async def test_requests_before_initialize(start_daemon: Any, workspace: Path) -> None:
    d = await start_daemon(init=False)
    with pytest.raises(RpcError) as e:
        await d.call("toycoder/session/new", {})
    assert e.value.code == -32002
    await d.initialize(workspace)
    assert (await d.call("toycoder/session/new", {}))["sessionId"]


async def test_deep_nesting_and_a_second_initialize(daemon: Daemon, workspace: Path) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    daemon.send_raw(b"Content-Length: %d\r\n\r\n" % len(deep) + deep)
    err = await daemon.wait_for(lambda: next((o for o in daemon.orphans if o["error"]["code"] == -32700), None))
    assert err["id"] is None
    with pytest.raises(RpcError) as e:
        await daemon.call("initialize", {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {}})
    assert e.value.code == -32600 and "already" in e.value.message
    assert (await daemon.call("toycoder/session/list", {})) == {"sessions": []}


async def test_a_result_that_breaks_the_contract_is_an_internal_error(
        monkeypatch: pytest.MonkeyPatch, start_daemon: Any) -> None:
    async def wrong(ls: Any, p: Any) -> wire.Wire:
        return wire.CancelResult(cancelled=True)  # session/list must answer a SessionList

    monkeypatch.setitem(server_module.HANDLERS, wire.SESSION_LIST, wrong)
    d = await start_daemon()
    with pytest.raises(RpcError) as e:
        await d.call(wire.SESSION_LIST, {})
    assert e.value.code == wire.INTERNAL_ERROR and wire.SESSION_LIST in e.value.message
    assert (await d.call(wire.SESSION_NEW, {}))["sessionId"]  # and it goes on serving


async def test_broken_config_gives_config_error_naming_file_and_field(tmp_path: Path, workspace: Path) -> None:
    cfg = tmp_path / "broken.yaml"
    cfg.write_text("agent:\n  max_steps: lots\n")
    d = await start_lsp(cfg)
    try:
        await d.initialize(workspace)
        shown = await d.wait_for(lambda: [n for n in d.notifications if n["method"] == "window/showMessage"])
        assert "agent.max_steps" in shown[0]["params"]["message"]
        sid = (await d.call("toycoder/session/new", {}))["sessionId"]
        with pytest.raises(RpcError) as e:
            await d.call("toycoder/prompt", {"sessionId": sid, "text": "hi"})
        assert e.value.code == -32013
        assert str(cfg) in e.value.message and "agent.max_steps" in e.value.message
        assert "integer" in e.value.message
    finally:
        assert await d.close() == 0


async def test_missing_api_key_is_a_clear_provider_error(workspace: Path) -> None:
    d = await start_lsp()  # built-in defaults, no OPENAI_API_KEY in the environment
    try:
        await d.initialize(workspace)
        sid = (await d.call("toycoder/session/new", {}))["sessionId"]
        with pytest.raises(RpcError) as e:
            await d.call("toycoder/prompt", {"sessionId": sid, "text": "hi"})
        assert e.value.code == -32012 and "OPENAI_API_KEY" in e.value.message
    finally:
        assert await d.close() == 0


async def test_odd_client_capabilities_do_not_break_the_start(start_daemon: Any, workspace: Path) -> None:
    d = await start_daemon(init=False)
    result = await d.call("initialize", {"processId": None, "rootUri": workspace.as_uri(),
                                         "capabilities": {"textDocument": {"synchronization": "yes"}}})
    assert result["serverInfo"]["name"] == "toycoder-daemon"
    assert result["capabilities"]["experimental"]["toycoder"]["protocolVersion"] == wire.PROTOCOL_VERSION
    d.notify("initialized", {})
    assert (await d.call("toycoder/session/new", {}))["sessionId"]


async def test_an_object_in_the_params_with_a_jsonrpc_key_is_just_data(daemon: Daemon) -> None:
    info = await daemon.call("toycoder/session/new", {"title": "t", "meta": {"jsonrpc": "2.0", "id": 1},
                                                      "more": [{"jsonrpc": "2.0", "method": "x"}]})
    assert info["title"] == "t"


async def test_exit_ends_the_face(daemon: Daemon) -> None:
    daemon.notify("exit")
    assert await asyncio.wait_for(daemon.proc.wait(), scaled(10)) == 0


async def test_every_frame_of_a_session_has_the_one_header_form(daemon: Daemon, llm: FakeLLM, workspace: Path) -> None:
    """pygls' frames (answers, streamed notifications, a request to the editor) and the answers the
    face writes itself (a body that is not JSON, one that is no JSON-RPC message) are headed alike."""
    daemon.handlers["toycoder/requestPermission"] = lambda p: {"decision": "allow_once"}
    llm.add(write_call("headed.txt", "x"), {"text": "written"})
    daemon.send_raw(b"Content-Length: 9\r\n\r\n{not json")
    daemon.send_raw(frame({"id": 5, "method": "toycoder/session/list"}))
    sid = (await daemon.call("toycoder/session/new", {}))["sessionId"]
    assert (await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "write"}))["stopReason"] == "end_turn"
    await daemon.wait_for(lambda: len(daemon.orphans) == 2)
    assert (workspace / "headed.txt").read_text() == "x" and daemon.notifications
    assert [m["method"] for m in daemon.requests_seen] == ["toycoder/requestPermission"]
    assert {re.sub(rb"\d+", b"N", b) for b in daemon.header_blocks} == {b"Content-Length: N\r\n\r\n"}


async def test_a_prompt_cancelled_in_the_same_read_is_answered(daemon: Daemon) -> None:
    """Esc at once: $/cancelRequest is read with its prompt. Answered as docs/protocol.md promises, a
    normal result with stopReason "cancelled" (pygls answers -32800 for a handler it cancels before
    its first step: it was, when the cancel was taken before the handler had run)."""
    sid = (await daemon.call("toycoder/session/new", {}))["sessionId"]
    msg_id = 900
    fut = asyncio.get_running_loop().create_future()
    daemon._pending[msg_id] = fut
    daemon.send_raw(frame({"jsonrpc": "2.0", "id": msg_id, "method": "toycoder/prompt",
                           "params": {"sessionId": sid, "text": "hi"}})
                    + frame({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": msg_id}}))
    answer = await asyncio.wait_for(fut, scaled(10))
    assert answer["result"]["stopReason"] == "cancelled", answer


async def test_input_ending_answers_what_is_in_flight(daemon: Daemon, llm: FakeLLM, workspace: Path) -> None:
    """stdin closes while a turn waits for a permission nobody will give and a listing is under way:
    both are answered before the face ends (the turn as cancelled), and nothing was written."""
    asked = asyncio.Event()

    async def never(params: dict[str, Any]) -> dict[str, Any]:
        asked.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    daemon.handlers["toycoder/requestPermission"] = never
    llm.add(write_call("never.txt", "x"))
    sid = (await daemon.call("toycoder/session/new", {}))["sessionId"]
    _, turn = daemon.request_future("toycoder/prompt", {"sessionId": sid, "text": "write"})
    await asyncio.wait_for(asked.wait(), scaled(10))
    _, listing = daemon.request_future("toycoder/session/list", {})
    assert await daemon.close() == 0
    assert (await asyncio.wait_for(turn, scaled(5)))["result"]["stopReason"] == "cancelled"
    assert [s["sessionId"] for s in (await asyncio.wait_for(listing, scaled(5)))["result"]["sessions"]] == [sid]
    assert not (workspace / "never.txt").exists()


async def test_a_late_reply_to_a_cancelled_turns_request_is_ignored(
        daemon: Daemon, llm: FakeLLM, caplog: pytest.LogCaptureFixture) -> None:
    """pygls 2.1.1 (#621) raised InvalidStateError completing a request future a cancelled handler had
    cancelled; ours are awaited shielded, so a late reply completes a future nobody waits for."""
    caplog.set_level(logging.DEBUG)
    asked: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    release, replied = asyncio.Event(), asyncio.Event()

    async def late(params: dict[str, Any]) -> dict[str, Any]:
        asked.set_result(params)
        await release.wait()
        replied.set()  # rpc.Daemon writes the reply in this same step, before the test wakes
        return {"decision": "allow_once"}

    daemon.handlers["toycoder/requestPermission"] = late
    llm.add(write_call("late.txt", "x"))
    sid = (await daemon.call("toycoder/session/new", {}))["sessionId"]
    _, turn = daemon.request_future("toycoder/prompt", {"sessionId": sid, "text": "write"})
    await asyncio.wait_for(asked, scaled(10))
    assert (await daemon.call("toycoder/cancel", {"sessionId": sid}))["cancelled"] is True
    assert (await asyncio.wait_for(turn, scaled(10)))["result"]["stopReason"] == "cancelled"
    release.set()  # the reply, after the turn ended
    await asyncio.wait_for(replied.wait(), scaled(10))
    assert (await daemon.call("toycoder/session/list", {}))["sessions"]  # pygls took the reply, then this
    assert [r for r in caplog.records if r.levelno >= logging.WARNING or "InvalidState" in r.getMessage()] == []


async def test_params_pygls_cannot_structure_are_answered_even_with_a_null_id(daemon: Daemon) -> None:
    with pytest.raises(RpcError) as e:
        await daemon.call("textDocument/hover", {"textDocument": 5})
    assert e.value.code == -32602
    daemon.send_raw(frame({"jsonrpc": "2.0", "id": None, "method": "textDocument/hover", "params": {"x": 1}}))
    err = await daemon.wait_for(lambda: next((o for o in daemon.orphans if o["error"]["code"] == -32602), None))
    assert err["id"] is None
    assert (await daemon.call("toycoder/session/list", {})) == {"sessions": []}


@pytest.mark.parametrize("where", ["rootUri", "rootPath", "workspaceFolders"])
def test_the_workspace_root_and_config_come_from_initialize(where: str, workspace: Path, tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("agent:\n  max_steps: 5\n")
    params: dict[str, Any] = {"processId": None, "capabilities": {}, "rootUri": None,
                              "initializationOptions": {"configPath": str(config)}}
    if where == "workspaceFolders":
        params["workspaceFolders"] = [{"uri": workspace.as_uri(), "name": "w"}]
    else:
        params[where] = workspace.as_uri() if where == "rootUri" else str(workspace)
    ls = make_server()
    out = Recorder()
    FrameWriter(out).attach(ls.protocol)  # type: ignore[arg-type]
    ls.protocol.handle_message(ls.protocol.structure_message(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}))
    assert [f["id"] for f in out.frames] == [1] and "result" in out.frames[0]
    assert ls.app is not None and ls.app.workspace.root == workspace.resolve()
    assert ls.app.config_path == config


def initialize_by_hand(workspace: Path) -> tuple[server_module.ToyCoderServer, Recorder]:
    ls = make_server()
    out = Recorder()
    FrameWriter(out).attach(ls.protocol)  # type: ignore[arg-type]
    ls.protocol.handle_message(ls.protocol.structure_message(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"processId": None, "capabilities": {}, "rootUri": workspace.as_uri()}}))
    return ls, out


def test_initialize_is_answered_before_the_app_opens(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[int] = []  # how many frames were written when the App opened
    real = server_module.App.open

    def spy(root: str, config_path: str | None = None) -> server_module.App:
        opened.append(len(out.frames))
        return real(root, config_path)

    monkeypatch.setattr(server_module.App, "open", spy)
    ls, out = initialize_by_hand(workspace)
    assert [f["id"] for f in out.frames] == [1] and "result" in out.frames[0] and opened == []
    assert ls.get_app().workspace.root == workspace.resolve()  # the first use opens it, once
    assert ls.get_app() is ls.app and opened == [1]


def test_an_app_that_cannot_open_answers_each_request_after_initialize(workspace: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(root: str, config_path: str | None = None) -> server_module.App:
        raise PermissionError(13, "Permission denied", "/data")

    monkeypatch.setattr(server_module.App, "open", refuse)
    ls, out = initialize_by_hand(workspace)
    assert "result" in out.frames[0]
    for _ in range(2):  # opened once; every later use says why
        with pytest.raises(JsonRpcException) as e:
            ls.get_app()
        assert e.value.code == wire.INTERNAL_ERROR and "Permission denied" in str(e.value)
    assert ls.app is None


async def test_the_app_opens_on_the_loop_right_after_the_initialize_answer(workspace: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    real = server_module.App.open

    def spy(root: str, config_path: str | None = None) -> server_module.App:
        opened.append(root)
        return real(root, config_path)

    monkeypatch.setattr(server_module.App, "open", spy)
    initialize_by_hand(workspace)  # no message after it: nothing else would use the App
    assert opened == []
    # on the loop, with no other message: polled, since a fixed number of steps is not the promise
    await wait_until_async(lambda: opened, what="the App opened on the loop")
    assert opened == [str(workspace.resolve())]
