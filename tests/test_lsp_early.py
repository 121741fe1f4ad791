"""A new LSP process answers its first session requests while pygls loads (lsp_early.py): the early
answers are byte for byte pygls' answers (in-process, the same requests through both paths), frames
after the first one left for pygls wait in order, and through a real daemon a session/new is
answered while the lsprotocol import is held. No timing is asserted: bench/cold_start.py measures it."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from conftest import write_config
from helpers import held_import
from inproc_app import eventually
from waiting import DEFAULT_TIMEOUT, wait_until

from toycoder_daemon.app import App
from toycoder_daemon.lsp_early import EarlyHost, EarlyLsp, pygls_frame
from toycoder_daemon.lsp_early_link import app_params
from toycoder_daemon.rpc_io import Dispatcher
from toycoder_daemon.server import make_server
from toycoder_daemon.stdio import FrameWriter, Inbox, encode_frame
from toycoder_daemon.testing.fake_llm import FakeLLM

ROOT = Path(__file__).resolve().parent.parent


class Capture:
    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.frames.append(bytes(data))

    def flush(self) -> None:
        pass

    def answers(self) -> dict[Any, bytes]:
        """Responses by id, as written (header and body)."""
        out = {}
        for f in self.frames:
            msg = json.loads(f.partition(b"\r\n\r\n")[2])
            if "method" not in msg:
                out[msg.get("id")] = f
        return out


def body(msg: dict[str, Any]) -> bytes:
    return json.dumps(msg).encode()


def initialize(workspace: Path, config: Path) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "processId": None, "rootUri": workspace.as_uri(), "capabilities": {},
        "initializationOptions": {"configPath": str(config)}}}


INITIALIZED = {"jsonrpc": "2.0", "method": "initialized", "params": {}}


async def through_pygls(workspace: Path, config: Path, requests: list[dict[str, Any]]) -> tuple[Capture, App]:
    server = make_server()
    out = Capture()
    writer = FrameWriter(out)  # type: ignore[arg-type]
    server.protocol.set_writer(writer)
    dispatcher = Dispatcher(server, writer, lambda: None, direct=False)  # pygls' own dispatch, not lsp_direct
    for msg in [initialize(workspace, config), INITIALIZED, *requests]:
        dispatcher.frame(body(msg), None)
    await eventually(lambda: all(r["id"] in out.answers() for r in requests), "pygls' answers")
    assert server.app is not None
    return out, server.app


async def early(workspace: Path, config: Path, requests: list[dict[str, Any]]) -> tuple[Capture, EarlyLsp, Inbox]:
    opened = app_params(initialize(workspace, config)["params"])
    assert opened is not None
    host = EarlyHost(App.open(*opened))
    out, later = Capture(), Inbox()
    e = EarlyLsp(host, out.write, later)
    for msg in [initialize(workspace, config), INITIALIZED, *requests]:
        e.frame(body(msg), None)
    await eventually(lambda: all(r["id"] in out.answers() for r in requests if "id" in r), "the early answers")
    return out, e, later


def queued(inbox: Inbox) -> list[Any]:
    got: list[Any] = []
    inbox.attach(lambda b, p: got.append(json.loads(b) if b is not None else (b, p)))
    return got


async def test_early_answers_are_pygls_answers_byte_for_byte(workspace: Path, tmp_path: Path, llm: FakeLLM) -> None:
    config = write_config(tmp_path / "config.yaml", llm)
    stored = App.open(workspace, str(config))
    s = stored.new_session("a stored one")
    s.messages.append({"role": "user", "content": "hello ü \U0001f600"})
    await stored.shutdown()
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "toycoder/session/list", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "toycoder/session/load", "params": {"sessionId": s.id}},
        {"jsonrpc": "2.0", "id": "three", "method": "toycoder/session/load", "params": {"sessionId": "nope"}},
        {"jsonrpc": "2.0", "id": 4, "method": "toycoder/session/new", "params": {"title": 5}},
        {"jsonrpc": "2.0", "id": 5, "method": "toycoder/session/list", "params": []},  # Lua's empty object
    ]
    full, full_app = await through_pygls(workspace, config, requests)
    ours, e, later = await early(workspace, config, requests)
    assert e.host.app.workspace.root == full_app.workspace.root
    assert ours.answers() == {k: v for k, v in full.answers().items() if k != 0}  # 0: pygls' initialize answer
    assert json.loads(ours.answers()[1].partition(b"\r\n\r\n")[2])["result"]["sessions"][0]["sessionId"] == s.id
    assert [m["method"] for m in queued(later)] == ["initialize"]  # only the answered initialize is left
    # a new session's answer: the same shape and framing (its id and times are its own)
    new = {"jsonrpc": "2.0", "id": 9, "method": "toycoder/session/new", "params": {"title": "t"}}
    full2, _ = await through_pygls(workspace, config, [new])
    ours2, e2, _ = await early(workspace, config, [new])
    a, b = (json.loads(c.answers()[9].partition(b"\r\n\r\n")[2]) for c in (full2, ours2))
    assert a["result"].keys() == b["result"].keys() and a["result"]["title"] == b["result"]["title"] == "t"
    b["result"].update({k: a["result"][k] for k in ("sessionId", "createdAt", "updatedAt")})
    assert pygls_frame(b) == full2.answers()[9]
    for app in (full_app, e.host.app, e2.host.app):
        await app.shutdown()


async def test_frames_after_one_left_for_pygls_wait_in_order(workspace: Path, tmp_path: Path, llm: FakeLLM) -> None:
    config = write_config(tmp_path / "config.yaml", llm)
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "toycoder/session/new", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "toycoder/commands/list", "params": {}},  # pygls' business
        {"jsonrpc": "2.0", "id": 3, "method": "toycoder/session/new", "params": {}},  # after it: waits
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
    ]
    out, e, later = await early(workspace, config, requests[:1])
    for msg in requests[1:]:
        e.frame(body(msg), None)
    e.frame(None, None)
    assert list(out.answers()) == [1]
    left = queued(later)
    assert [m.get("id") if isinstance(m, dict) else m for m in left] == [0, 2, 3, None, (None, None)]
    assert not e.ended.is_set()  # the end of input is pygls' to handle, after what it waits for
    await e.host.app.shutdown()


async def test_messages_and_start_up_wait_for_the_server(workspace: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("providers: [not, a, mapping]\n")
    host = EarlyHost(App.open(workspace, str(bad)))
    e = EarlyLsp(host, Capture().write, Inbox())
    e.frame(body(initialize(workspace, bad)), None)
    e.frame(body(INITIALIZED), None)
    host.app.on_notice("warning", "an MCP server failed")
    assert host.held and not host.background.due.is_set()  # a held message is no reason to start
    assert host.needed.is_set()  # what is held asks for pygls at once (lsp_early.py: "needed")

    class Server:
        shown: list[tuple[str, str]] = []

        def __init__(self) -> None:
            self.app = host.app

        def show_message(self, level: str, message: str) -> None:
            self.shown.append((level, message))

    server = Server()
    host.app.on_notice = server.show_message  # what server.on_initialize sets
    host.release(server)
    assert [lvl for lvl, _ in Server.shown] == ["error", "warning"] and "config" in Server.shown[0][1]
    assert host.background.due.is_set() and host.held == []  # pygls is in: start-up work is due
    await host.app.shutdown()


def test_odd_initialize_params_leave_the_app_to_pygls(workspace: Path) -> None:
    assert app_params({"rootUri": workspace.as_uri()}) == (str(workspace), None)
    assert app_params({"rootPath": str(workspace), "initializationOptions": {"configPath": "/c.yaml"}}) == (
        str(workspace), "/c.yaml")
    assert app_params({"rootUri": None, "workspaceFolders": [{"uri": workspace.as_uri(), "name": "w"}]}) == (
        str(workspace), None)
    for odd in ({"rootUri": 5}, {"workspaceFolders": [{"uri": 1, "name": "w"}]}, {"workspaceFolders": "x"},
                {"initializationOptions": {"configPath": ["x"]}}, [1]):
        assert app_params(odd) is None


QUIET_DAEMON = ("import functools, runpy; from toycoder_daemon import lsp_early; "
                "lsp_early.serve_lsp = functools.partial(lsp_early.serve_lsp, quiet={quiet}); "
                "runpy.run_module('toycoder_daemon', run_name='__main__')")
"""`python -c` that runs the daemon as `-m` does, with serve_lsp's quiet period set (its only seam)."""


class HeldDaemon:
    """A real daemon whose `lsprotocol` import waits until the test creates `release` (so pygls
    cannot be in): its frames arrive in `frames`, read on a thread. `quiet`: the idle period instead
    of lsp_early.QUIET."""

    def __init__(self, tmp_path: Path, config: Path, quiet: float | None = None):
        env, self.entered, self.release = held_import(tmp_path, "lsprotocol")
        start = ["-m", "toycoder_daemon"] if quiet is None else ["-c", QUIET_DAEMON.format(quiet=quiet)]
        self.proc = subprocess.Popen([sys.executable, *start, "--config", str(config)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env={**os.environ, **env}, cwd=ROOT)
        self.frames: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = 0
            while line := out.readline():
                if not line.strip():
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not line:
                return
            self.frames.put(json.loads(out.read(length)))

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(encode_frame(msg))
        self.proc.stdin.flush()


def test_session_new_is_answered_while_lsprotocol_is_held(tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    """lsprotocol (what pygls is built on) cannot be imported until the test says so: initialize and
    session/new are answered meanwhile; a request for pygls waits, and is answered once it is in."""
    config = write_config(tmp_path / "config.yaml", llm)
    d = HeldDaemon(tmp_path, config)
    proc, send, entered, release = d.proc, d.send, d.entered, d.release

    def read() -> dict[str, Any]:
        return d.frames.get(timeout=DEFAULT_TIMEOUT)

    try:
        send(initialize(workspace, config))
        assert read()["result"]["serverInfo"]["name"] == "toycoder-daemon"
        send(INITIALIZED)
        send({"jsonrpc": "2.0", "id": 1, "method": "toycoder/session/new", "params": {}})
        first = read()
        assert first["id"] == 1 and first["result"]["sessionId"]
        wait_until(entered.exists, what="the daemon to start importing lsprotocol")
        assert not release.exists()  # the answer came while the import was held
        send({"jsonrpc": "2.0", "id": 2, "method": "toycoder/commands/list", "params": {}})
        send({"jsonrpc": "2.0", "id": 3, "method": "toycoder/session/list", "params": {}})
        release.touch()
        answers = sorted([read(), read()], key=lambda a: a["id"])  # both by pygls, once it is in
        assert [a["id"] for a in answers] == [2, 3] and answers[0]["result"]["commands"]
        assert [s["sessionId"] for s in answers[1]["result"]["sessions"]] == [first["result"]["sessionId"]]
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=DEFAULT_TIMEOUT)
    assert proc.returncode == 0



def test_input_ending_before_pygls_still_gets_its_answers(tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    """A client that sends initialize and a session request and closes its end at once (a script)
    gets both answers and the daemon exits 0, without waiting for pygls (its import stays held)."""
    env, entered, release = held_import(tmp_path, "lsprotocol")
    config = write_config(tmp_path / "config.yaml", llm)
    stored = App.open(workspace, str(config))
    sid = stored.new_session("kept").id
    listing = {"jsonrpc": "2.0", "id": 1, "method": "toycoder/session/list", "params": {}}
    proc = subprocess.run([sys.executable, "-m", "toycoder_daemon", "--config", str(config)], cwd=ROOT,
                          input=encode_frame(initialize(workspace, config)) + encode_frame(INITIALIZED)
                          + encode_frame(listing), capture_output=True, env={**os.environ, **env},
                          timeout=DEFAULT_TIMEOUT)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    bodies = [json.loads(b.partition(b"\r\n\r\n")[2]) for b in proc.stdout.split(b"Content-Length")[1:]]
    assert [b["id"] for b in bodies] == [0, 1]
    assert [s["sessionId"] for s in bodies[1]["result"]["sessions"]] == [sid]
    assert not release.exists()
