"""The daemon as a subprocess, spoken to over LSP-framed JSON-RPC on its stdio (standard library only).

One reader thread parses frames into a queue; the caller's thread does everything else: `call()`
sends a request and serves what arrives until its answer does (updates to `on_notification`,
daemon->client requests to `on_request`, whose return value is sent back as the result).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from toycoder_daemon.core.util.visible import visible, visible_tree
from toycoder_daemon.wire import codes

Handler = Callable[[str, Any, Any], Any]
"""on_request(method, params, request id) -> result (raise RpcError to answer an error)."""


class RpcError(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class DaemonExited(Exception):
    """The daemon closed its stdout (it exited or crashed); `log` is the tail of its stderr."""

    def __init__(self, log: str):
        super().__init__("the daemon exited" + (f":\n{log}" if log else ""))
        self.log = log


class DaemonNotStarted(Exception):
    """The daemon command could not be run at all (not found, not executable): exit status 127."""

    def __init__(self, argv: list[str], reason: str):
        super().__init__(f"cannot start the daemon `{argv[0] if argv else ''}`: {reason}")
        self.argv = argv


_WITHOUT_CWD = ("import sys; del sys.path[0]; import runpy; "
                "runpy.run_module('toycoder_daemon', run_name='__main__', alter_sys=True)")
"""`-m` for Pythons without -P: the current directory ('' at sys.path[0]) is dropped first."""


def default_daemon_command(python: tuple[int, int] = sys.version_info[:2]) -> list[str]:
    """The daemon of this very installation (works without the console script on PATH). Not a bare
    `-m`: that puts the current directory (usually the workspace) first on sys.path, and a json.py
    there would run inside the daemon, keys and all."""
    if python >= (3, 11):
        return [sys.executable, "-P", "-m", "toycoder_daemon"]
    return [sys.executable, "-c", _WITHOUT_CWD]


_OPEN: set[Connection] = set()
"""Daemons started and not yet closed: a Ctrl-C anywhere (even mid-start) ends them (close_all)."""


def close_all(timeout: float = 2) -> None:
    """Close every daemon this client started (its stdin closed, killed if it lingers)."""
    for conn in list(_OPEN):
        conn.close(timeout)


@contextlib.contextmanager
def _holding_sigint() -> Iterator[None]:
    """A SIGINT that arrives inside the block is held, and handled as it would have been at its end
    (KeyboardInterrupt, with the default handler). Only the main thread hears signals: elsewhere a no-op.
    Not by blocking the signal: a blocked mask would be inherited by the daemon and its commands."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[FrameType | None] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)  # None: not set from Python
        if held:
            if callable(previous):
                previous(signal.SIGINT, held[0])
            elif previous == signal.SIG_DFL:
                signal.raise_signal(signal.SIGINT)


class Connection:
    def __init__(self, argv: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None):
        # The daemon's stderr (logs) must not scribble over the terminal UI: keep it aside and show
        # its tail if the daemon dies.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the connection; closed in close())
        # start_new_session: Ctrl-C in the terminal signals the client only; the client cancels the
        # turn over the wire and the daemon lives on.
        with _holding_sigint():  # a Ctrl-C inside Popen (the child runs already) would leave it unknown to close_all
            try:
                self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                             env=env, cwd=cwd, start_new_session=True)
            except OSError as e:
                self._stderr.close()
                raise DaemonNotStarted(argv, e.strerror or str(e)) from None
            _OPEN.add(self)
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.cancelled_requests: set[Any] = set()
        """Ids of daemon->client requests the daemon withdrew ($/cancelRequest)."""
        self._ids = itertools.count(1)
        self._responses: dict[Any, dict[str, Any]] = {}
        self._write = threading.Lock()
        threading.Thread(target=self._read, name="toycoder-rpc-reader", daemon=True).start()

    # ---- wire -----------------------------------------------------------------------------------

    def _read(self) -> None:
        stream = self.proc.stdout
        assert stream is not None
        try:
            while True:
                length = None
                while True:
                    line = stream.readline()
                    if not line:
                        return
                    if not line.strip():
                        break
                    name, _, value = line.decode("ascii", "replace").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                if length is None:
                    continue
                # Every string the daemon sends (the model's streamed text, titles, diffs, names)
                # with control characters as escapes: nothing from the daemon or the model can
                # drive the terminal (colours and cursor moves are Rich's own, added later).
                msg = visible_tree(json.loads(stream.read(length)))
                if msg.get("method") == "$/cancelRequest":
                    self.cancelled_requests.add((msg.get("params") or {}).get("id"))
                self.inbox.put(msg)
        except (OSError, ValueError):
            return
        finally:
            self.inbox.put(None)

    def send(self, msg: dict[str, Any]) -> None:
        body = json.dumps(msg).encode()
        with self._write:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                pass  # the reader notices the exit and reports it

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request_nowait(self, method: str, params: Any) -> int:
        msg_id = next(self._ids)
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return msg_id

    def call(self, method: str, params: Any, *, on_notification: Callable[[dict[str, Any]], None] | None = None,
             on_request: Handler | None = None, on_idle: Callable[[], None] | None = None,
             timeout: float | None = None) -> Any:
        """Send a request and serve everything that arrives until its answer; raise RpcError on an error."""
        msg_id = self.request_nowait(method, params)
        waited = 0.0
        while msg_id not in self._responses:
            if on_idle:
                on_idle()  # after every message too: a steady stream must not starve Ctrl-C handling
            try:
                msg = self.inbox.get(timeout=0.1)
            except queue.Empty:
                waited += 0.1
                if timeout is not None and waited > timeout:
                    raise RpcError(codes.INTERNAL_ERROR, f"{method}: no answer from the daemon in {timeout:.0f}s") from None
                continue
            self.dispatch(msg, on_notification, on_request)
        reply = self._responses.pop(msg_id)
        if "error" in reply:
            err = reply["error"] or {}
            raise RpcError(err.get("code", codes.INTERNAL_ERROR), err.get("message", "unknown error"))
        return reply.get("result")

    def dispatch(self, msg: dict[str, Any] | None, on_notification: Callable[[dict[str, Any]], None] | None,
                 on_request: Handler | None) -> None:
        if msg is None:
            self.inbox.put(None)  # stay closed for later calls
            raise DaemonExited(self.stderr_tail())
        if "method" in msg and "id" in msg:
            try:
                if on_request is None:
                    raise RpcError(codes.METHOD_NOT_FOUND, f"unhandled method {msg['method']}")
                reply: dict[str, Any] = {"result": on_request(msg["method"], msg.get("params") or {}, msg["id"])}
            except RpcError as e:
                reply = {"error": {"code": e.code, "message": e.message}}
            self.send({"jsonrpc": "2.0", "id": msg["id"], **reply})
        elif "method" in msg:
            if on_notification:
                on_notification(msg)
        else:
            self._responses[msg.get("id")] = msg

    # ---- lifecycle ------------------------------------------------------------------------------

    def stderr_tail(self, lines: int = 20) -> str:
        try:
            self._stderr.seek(0)
            text = self._stderr.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""
        return visible("\n".join(text.strip().splitlines()[-lines:]), lines=True)

    def close(self, timeout: float = 5) -> None:
        """Close the daemon's stdin (it ends running turns and exits); kill it if it lingers."""
        if self not in _OPEN:
            return
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        finally:  # a second Ctrl-C while waiting: the daemon is killed all the same, never left behind
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            _OPEN.discard(self)
            self._stderr.close()


def initialize(conn: Connection, workspace: str, *, on_notification: Callable[[dict[str, Any]], None] | None = None
               ) -> dict[str, Any]:
    from pathlib import Path

    result: dict[str, Any] = conn.call("initialize", {
        "processId": os.getpid(),
        "clientInfo": {"name": "toycoder"},
        "rootUri": Path(workspace).resolve().as_uri(),
        "capabilities": {"experimental": {"toycoder": {"permissionRequest": True, "askUser": True,
                                                       "workspaceTrust": True}}},
    }, on_notification=on_notification, timeout=60)
    conn.notify("initialized", {})
    return result
