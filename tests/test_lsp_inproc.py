"""The LSP face in-process: the frame reader on bytes, the dispatcher on a fresh server, and the
protocol-level errors through the whole face (tests/inproc.py). The subprocess layer
(test_wire_errors_e2e.py, test_fast_start.py, test_lsp_client.py) keeps startup, framing on a real
stdin, EOF exit and a real turn."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from inproc import start_daemon_inproc, start_lsp  # noqa: F401  (in-process LSP face)
from rpc import Daemon, RpcError, frame

from toycoder_daemon import protocol as wire
from toycoder_daemon import server as server_module
from toycoder_daemon.rpc_io import Dispatcher
from toycoder_daemon.server import make_server
from toycoder_daemon.stdio import MAX_CONTENT_LENGTH, FrameWriter, read_frames

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


# ---- the dispatcher on a fresh server ----------------------------------------------------------


class Recorder:
    """A FrameWriter target: every frame the dispatcher or pygls writes, parsed."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        for chunk in data.split(b"Content-Length: ")[1:]:
            self.frames.append(json.loads(chunk.split(b"\r\n\r\n", 1)[1]))

    def flush(self) -> None:
        pass


def dispatcher() -> tuple[Dispatcher, Recorder, list[bool]]:
    out = Recorder()
    ls = make_server()
    writer = FrameWriter(out)  # type: ignore[arg-type]
    ls.protocol.set_writer(writer)
    exits: list[bool] = []
    return Dispatcher(ls, writer, lambda: exits.append(True)), out, exits


def test_dispatcher_answers_malformed_messages_itself() -> None:
    d, out, exits = dispatcher()
    d.frame(b"{not json", None)
    d.frame(b"[1, 2]", None)
    d.frame(json.dumps({"id": 3, "method": "x"}).encode(), None)
    d.frame(json.dumps({"jsonrpc": "2.0", "id": True, "method": "x"}).encode(), None)
    d.frame(json.dumps({"jsonrpc": "2.0", "id": 4}).encode(), None)
    d.frame(None, "Content-Length 5 is over the limit")
    codes = [(f["id"], f["error"]["code"]) for f in out.frames]
    assert codes == [(None, -32700), (None, -32600), (3, -32600), (None, -32600), (4, -32600), (None, -32600)]
    assert exits == []
    d.frame(None, None)  # EOF
    assert exits == [True]


def test_dispatcher_refuses_requests_before_initialize_and_ignores_notifications() -> None:
    d, out, _ = dispatcher()
    d.frame(json.dumps({"jsonrpc": "2.0", "method": "toycoder/whatever"}).encode(), None)
    d.frame(json.dumps({"jsonrpc": "2.0", "id": 1, "method": wire.SESSION_LIST}).encode(), None)
    assert [(f["id"], f["error"]["code"]) for f in out.frames] == [(1, wire.SERVER_NOT_INITIALIZED)]


def test_dispatcher_exit_notification_stops() -> None:
    d, _, exits = dispatcher()
    d.frame(json.dumps({"jsonrpc": "2.0", "method": "exit"}).encode(), None)
    assert exits == [True]


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
