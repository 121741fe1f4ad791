"""The LSP face on stdio: pygls' own message loop (`pygls.io_.run_async`) reads every frame,
dispatches every message and writes every answer; we wrap the two streams it reads and writes.

The reader (`Frames`), because pygls' loop trusts any Content-Length (a client could make it
allocate anything), answers nothing to a body that is not JSON or not a JSON-RPC message, and
dispatches requests before `initialize` and a second `initialize`. Frames are read by our bounded
reader (rpc/lsp_framing.read_frames, on a thread that the Outbox holds back over its hard limit), and pygls
gets only well-formed messages, each as `Content-Length: N\\r\\n\\r\\n<body>` (the one header form
it parses). The rest is answered here, through the writer pygls writes to, with docs/protocol.md's
codes: -32700 a body that is not JSON; -32600 a refused frame, a body that is no JSON-RPC message,
a request to a notification method, a second `initialize`; -32002 a request before `initialize`
(notifications then are dropped). Params pygls cannot structure are answered by `Frames.refused`,
run_async's error handler (converter.Refused).

The writer (rpc/lsp_framing.FrameWriter), because the frames go to the Outbox (one writer thread, the
backpressure rule) and pygls closes its writer on `exit`: the stream stays open until what is
queued is written. pygls gives it bare bodies (`set_writer`'s `include_headers=False`) and it adds
the header, so pygls' frames and the answers written here have one header form.

`exit`: pygls' handler calls sys.exit; the SystemExit ends run_async here, as the end of input
does. Either way `on_end` (the exit timer) runs at once, the App shuts down, and what is queued is
written.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from lsprotocol.types import METHOD_TO_TYPES
from pygls.io_ import run_async

from toycoder_daemon.core.ports import OUTPUT
from toycoder_daemon.faces.lsp.converter import PlainMessages, Refused, install
from toycoder_daemon.faces.lsp.server import ToyCoderServer
from toycoder_daemon.rpc.checks import refusal
from toycoder_daemon.rpc.lsp_framing import FrameWriter, Stream, read_frames
from toycoder_daemon.rpc.outbox import Outbox, written
from toycoder_daemon.wire import protocol as wire

log = logging.getLogger(__name__)
loop_log = logging.getLogger(__name__ + ".pygls")
"""The logger pygls' loop logs on (a message that raised): `Refused` is logged here, once, quietly."""

ANSWER_WAIT = 2.0
"""Seconds the end of input waits for the answers of requests in flight (the daemon's exit timer,
faces.main.EXIT_GRACE, may end it sooner)."""

LSP_NOTIFICATIONS = frozenset(
    [m for m, types in METHOD_TO_TYPES.items() if types[1] is None] + [n.method for n in wire.NOTIFICATIONS])
"""Methods that take no id: a request (with an id) to one of them is refused with an answer."""
LSP_REQUESTS = frozenset(
    [m for m, types in METHOD_TO_TYPES.items() if types[1] is not None] + [r.method for r in wire.REQUESTS])
"""Methods that take an id: a notification to one of them is dropped (logged)."""


class Frames:
    """pygls' reader (an `io_.AsyncReader`, read on the event loop): the next well-formed message
    as a header line, a blank line and the body; b"" at the end of input. The reader thread `put`s
    what it read; whatever pygls must not get is answered here."""

    def __init__(self, protocol: PlainMessages, writer: FrameWriter):
        self.protocol = protocol
        self.writer = writer
        self._frames: asyncio.Queue[tuple[bytes | None, str | None]] = asyncio.Queue()
        self._body = b""
        self._inner = 0
        self._blank = False
        self.initialize_seen = False
        self.shutdown_seen = False
        """After `shutdown` only `exit` is taken: every other request is answered -32600."""

    def put(self, body: bytes | None, problem: str | None) -> None:
        self._frames.put_nowait((body, problem))

    async def readline(self) -> bytes:
        if self._blank:
            self._blank = False
            return b"\r\n"
        # The handler of the message pygls just took runs its first step before the next message is
        # taken: a `$/cancelRequest` read with its request then reaches a started handler (a prompt
        # answers it as a cancelled turn) instead of a task pygls cancels before any of our code runs
        # (answered -32800, which docs/protocol.md says prompts never get).
        await asyncio.sleep(0)
        while True:
            body, problem = await self._frames.get()
            if body is not None:
                if self._admit(body):
                    self._body, self._blank = body, True
                    return b"Content-Length: %d\r\n" % len(body)
            elif problem is not None:
                log.info("refused frame: %s", problem)
                self.error(None, wire.INVALID_REQUEST, f"Invalid Request: {problem}")
            else:
                self._frames.put_nowait((None, None))  # the end stays the end
                return b""

    async def readexactly(self, n: int) -> bytes:
        body, self._body = self._body, b""
        self.protocol.inner_messages = self._inner  # pygls parses it right away
        return body

    def error(self, msg_id: Any, code: int, message: str) -> None:
        self.writer.send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})

    def _admit(self, body: bytes) -> bool:
        """Whether pygls gets this body; if not, it is answered (or dropped, as a notification
        before `initialize`)."""
        carriers = 0

        def count(o: dict[str, Any]) -> dict[str, Any]:
            nonlocal carriers
            carriers += "jsonrpc" in o
            return o

        try:
            obj = json.loads(body, object_hook=count)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            log.info("unparsable frame: %s", e)
            self.error(None, wire.PARSE_ERROR, f"Parse error: {e}")
            return False
        refused = refusal(obj, LSP_NOTIFICATIONS, LSP_REQUESTS)
        if refused is not None:
            log.info("refused message: %s", refused.message)
            if refused.code is not None:
                self.error(refused.msg_id, refused.code, refused.message)
            return False
        method = obj.get("method")
        if self.shutdown_seen and method not in (None, "exit"):
            log.info("%s after shutdown refused", method)
            if "id" in obj:
                self.error(obj["id"], wire.INVALID_REQUEST,
                           f"Invalid Request: {method} after shutdown: only exit is accepted now")
            return False
        if method == "shutdown":
            self.shutdown_seen = True
        elif method == "initialize":
            if self.initialize_seen:  # a second App would orphan the first one's turns and locks
                self.error(obj.get("id"), wire.INVALID_REQUEST, "Invalid Request: initialize was already done")
                return False
            self.initialize_seen = True
        elif method not in (None, "exit") and not self.initialize_seen:
            if "id" in obj:
                self.error(obj["id"], wire.SERVER_NOT_INITIALIZED,
                           f"Server not initialized: send initialize before {method}")
            return False
        self._inner = carriers - 1  # all but the message itself, the last object pygls structures
        return True

    def refused(self, error: Exception, source: Any) -> None:
        """run_async's error handler: a message that raised while pygls took it."""
        if not isinstance(error, Refused):
            return  # a fault of ours: pygls' loop logged it with its traceback
        log.info("%s refused: %s", error.method or "a response", error.reason)
        if error.request:
            self.error(error.msg_id, error.error.code, error.error.message or "Invalid params")


async def serve(server: ToyCoderServer, stdin: BinaryIO, stdout: Stream, *, on_end: Callable[[], None] | None = None) -> int:
    """Serve until stdin closes or `exit` arrives; returns the process exit code. `on_end` is
    called as soon as the input ends (from the reader thread at EOF: even a stuck loop cannot
    delay it), e.g. to bound how long the process may take to exit. With an Outbox (the daemon's
    stdout) frames are written by its thread and the backpressure rule applies; a plain stream
    (in-process tests) is written on the loop."""
    loop = asyncio.get_running_loop()
    outbox = stdout if isinstance(stdout, Outbox) else None
    writer = FrameWriter(stdout)
    writer.attach(server.protocol)
    install(loop_log)
    frames = Frames(server.protocol, writer)
    if outbox is not None:
        server.answer_written = outbox.all_written  # the App opens once initialize's answer is out
        OUTPUT.set(outbox)  # pygls runs each message in a copy of this task's context: turns see it
    try:
        fd: int | None = stdin.fileno()
    except (OSError, ValueError):  # io.UnsupportedOperation is both: an in-memory stream
        fd = None

    def deliver(body: bytes | None, problem: str | None) -> None:  # on the reader thread
        if body is None and problem is None and on_end is not None:
            on_end()
        with contextlib.suppress(RuntimeError):  # the loop is already closed
            loop.call_soon_threadsafe(frames.put, body, problem)

    def gate() -> None:
        if outbox is not None:
            outbox.wait_input(fd)

    threading.Thread(target=read_frames, args=(stdin, deliver, gate), name="stdin-reader", daemon=True).start()
    with contextlib.suppress(SystemExit):  # pygls' `exit` handler calls sys.exit
        await run_async(threading.Event(), frames, server.protocol, loop_log, frames.refused)
    if on_end is not None:  # `exit` ends the input too
        on_end()
    log.info("shutting down")
    if server.app is not None:
        await server.app.shutdown()  # every turn ends: a prompt's answer is its cancelled turn
    await server.answered(ANSWER_WAIT)  # requests in flight are answered (the client may still read)
    await written(stdout)  # what is queued goes out (the client may still read) within the exit grace
    return 0
