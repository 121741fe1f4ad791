"""The input gate of the backpressure rule (docs/protocol.md, "Backpressure"), in-process on real
pipes: above the hard limit only the thread that reads stdin waits (never the event loop), and a
stdin the client closed is still read to EOF, so the face ends (on_end: the exit timer) although
the client reads nothing. The daemon-level check is in test_backpressure.py."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Any

from helpers import write_config
from waiting import scaled, wait_until

from toycoder_daemon.faces.acp.agent import serve_acp
from toycoder_daemon.faces.lsp.server import make_server
from toycoder_daemon.faces.lsp.transport import serve
from toycoder_daemon.rpc.lsp_framing import encode_frame
from toycoder_daemon.rpc.outbox import Outbox, hung_up
from toycoder_daemon.testing.fake_llm import FakeLLM


def drain(r: int) -> None:
    """The client reads again: everything written to `r` from now on is read (until it closes)."""
    def run() -> None:
        try:
            while os.read(r, 1 << 20):
                pass
        except OSError:
            pass
    threading.Thread(target=run, daemon=True).start()


class WatchedOutbox(Outbox):
    """Records which threads wait at the gate and whether one was held there."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.gated_threads: set[str] = set()
        self.held = threading.Event()

    def wait_input(self, fd: int | None = None) -> bool:
        self.gated_threads.add(threading.current_thread().name)
        if self.queued >= self.hard_limit:
            self.held.set()
        return super().wait_input(fd)


def stuck_outbox(cls: type[Outbox] = Outbox) -> tuple[int, Any]:
    """An Outbox over a pipe nobody reads (the read end returned), over its hard limit: the pipe
    takes 64 KiB, the writer blocks on the rest."""
    r, w = os.pipe()
    box = cls(os.fdopen(w, "wb"), limit=1024, hard_limit=4096)
    box.write(b"x" * (1 << 17))
    return r, box


def test_hung_up_sees_a_closed_pipe_even_with_unread_data() -> None:
    r, w = os.pipe()
    os.write(w, b"unread")
    assert not hung_up(r)
    os.close(w)
    assert hung_up(r)  # the data is still there: reading it, then EOF, does not block
    assert os.read(r, 100) == b"unread" and os.read(r, 100) == b""
    os.close(r)


def test_the_gate_lets_the_reader_go_when_its_input_closes_or_the_client_reads_again() -> None:
    r, box = stuck_outbox()
    rfd, wfd = os.pipe()
    results: list[bool] = []
    t = threading.Thread(target=lambda: results.append(box.wait_input(rfd)), daemon=True)
    t.start()
    os.close(wfd)  # the client closes stdin, still reading nothing
    wait_until(lambda: results, 10, "the gate to let the reader go at the hangup")
    assert results == [False] and box.queued >= box.hard_limit
    rfd2, wfd2 = os.pipe()  # an input still open
    t = threading.Thread(target=lambda: results.append(box.wait_input(rfd2)), daemon=True)
    t.start()
    drain(r)  # the client reads again: the queue goes below the hard limit
    wait_until(lambda: len(results) == 2, 10, "the gate to open as the queue drains")
    assert results == [False, True] and box.queued < box.hard_limit
    for fd in (rfd, rfd2, wfd2):
        os.close(fd)


def test_lsp_gate_holds_the_reader_thread_not_the_loop_and_sees_stdin_close(
        workspace: Path, tmp_path: Path, llm: FakeLLM) -> None:
    config = write_config(tmp_path / "config.yaml", llm)
    r, box = stuck_outbox(WatchedOutbox)
    rfd, wfd = os.pipe()
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "processId": None, "rootUri": workspace.as_uri(), "capabilities": {},
        "initializationOptions": {"configPath": str(config)}}}
    os.write(wfd, encode_frame(init))
    ended = threading.Event()
    loop = asyncio.new_event_loop()
    done: list[int] = []

    def daemon() -> None:  # its own loop and thread: a loop stuck in the gate must not hang the test
        done.append(loop.run_until_complete(serve(make_server(str(config)), os.fdopen(rfd, "rb"), box,
                                                  on_end=ended.set)))

    server = threading.Thread(target=daemon, name="daemon-loop", daemon=True)
    server.start()
    try:
        requests = [{"jsonrpc": "2.0", "method": "initialized", "params": {}},
                    {"jsonrpc": "2.0", "id": 1, "method": "toycoder/session/list", "params": {}},
                    {"jsonrpc": "2.0", "id": 2, "method": "toycoder/commands/list", "params": {}}]
        os.write(wfd, b"".join(encode_frame(m) for m in requests))
        wait_until(box.held.is_set, 10, "the reader to be held at the gate")
        beat = threading.Event()
        loop.call_soon_threadsafe(beat.set)
        assert beat.wait(scaled(10)), "the event loop is stuck (in the gate?)"
        assert box.gated_threads == {"stdin-reader"}
        os.close(wfd)  # the client closes stdin and still reads nothing
        assert ended.wait(scaled(10)), "stdin closed, yet on_end was not called"
    finally:
        drain(r)
        server.join(scaled(20))
    assert done == [0]
    assert box.gated_threads == {"stdin-reader"}


def test_acp_gate_holds_the_reader_thread_not_the_loop_and_sees_stdin_close(
        workspace: Path, tmp_path: Path, llm: FakeLLM) -> None:
    config = write_config(tmp_path / "config.yaml", llm)
    r, box = stuck_outbox(WatchedOutbox)
    rfd, wfd = os.pipe()
    ended = threading.Event()
    loop = asyncio.new_event_loop()
    done: list[int] = []

    def daemon() -> None:  # its own loop and thread: a loop stuck in the gate must not hang the test
        done.append(loop.run_until_complete(serve_acp(box, str(config), stdin=rfd, on_end=ended.set)))

    server = threading.Thread(target=daemon, name="daemon-loop", daemon=True)
    server.start()
    try:
        requests = [{"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}},
                    {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "x"}}]
        os.write(wfd, b"".join(json.dumps(m).encode() + b"\n" for m in requests))
        wait_until(box.held.is_set, 10, "the reader to be held at the gate")
        beat = threading.Event()
        loop.call_soon_threadsafe(beat.set)
        assert beat.wait(scaled(10)), "the event loop is stuck (in the gate?)"
        assert box.gated_threads == {"acp-stdin"}
        os.close(wfd)  # the client's last lines, then it closes stdin, still reading nothing
        assert ended.wait(scaled(10)), "stdin closed, yet on_end was not called"
        assert box.queued >= box.hard_limit  # EOF came while the client read nothing
    finally:
        drain(r)
        server.join(scaled(20))
        os.close(rfd)
    assert done == [0]
    assert box.gated_threads == {"acp-stdin"}
