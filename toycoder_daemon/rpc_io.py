"""Stdio transport: our own framing in front of pygls' dispatcher.

pygls' reader answers nothing to unparsable JSON and trusts any Content-Length. Ours reads frames
on a thread (bounded header lines, bounded bodies), answers -32700/-32600/-32002 itself through
the same FrameWriter pygls writes to, starts our own `toycoder/*` requests itself (lsp_direct.py:
answered as pygls answers them, a loop pass sooner and without its per-message work) and hands
the other well-formed messages to the pygls protocol (`structure_message`, `handle_message`) on
the event loop. EOF on stdin ends the daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from lsprotocol.types import METHOD_TO_TYPES
from pygls.exceptions import JsonRpcException

from . import protocol as wire
from .coalesce import OUTPUT
from .lsp_direct import DirectRequests
from .outbox import Outbox, written
from .pygls_adapter import initialize_without_reply
from .rpc_checks import refusal
from .server import HANDLERS
from .stdio import FrameWriter, Inbox

log = logging.getLogger(__name__)

LSP_NOTIFICATIONS = frozenset(
    [m for m, types in METHOD_TO_TYPES.items() if types[1] is None] + [n.method for n in wire.NOTIFICATIONS])
"""Methods that take no id: a request (with an id) to one of them is refused with an answer."""


class Dispatcher:
    """Runs on the event loop: validate a frame, answer what pygls would not, pass the rest on."""

    def __init__(self, server: Any, writer: FrameWriter, on_exit: Callable[[], None],
                 answered_initialize: bool = False, *, direct: bool = True):
        self.server = server
        self.protocol = server.protocol
        self.writer = writer
        self.direct = DirectRequests(server, writer.write, HANDLERS) if direct else None
        """Our own requests, started here (False: through pygls, for tests comparing the two)."""
        self.on_exit = on_exit
        self.initialize_seen = False
        self.answered_initialize = answered_initialize
        """The client already has our fast answer to its initialize: pygls is only set up for it."""

    def error(self, msg_id: Any, code: int, message: str) -> None:
        self.writer.send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})

    def frame(self, body: bytes | None, problem: str | None) -> None:
        if body is None:
            if problem is None:
                self.on_exit()
            else:
                log.info("refused frame: %s", problem)
                self.error(None, wire.INVALID_REQUEST, f"Invalid Request: {problem}")
            return
        try:
            obj = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            log.info("unparsable frame: %s", e)
            self.error(None, wire.PARSE_ERROR, f"Parse error: {e}")
            return
        refused = refusal(obj, LSP_NOTIFICATIONS)
        if refused is not None:
            log.info("refused message: %s", refused.message)
            if refused.code is not None:
                self.error(refused.msg_id, refused.code, refused.message)
            return
        msg_id = obj.get("id")
        method = obj.get("method")
        if method == "exit":
            self.on_exit()
            return
        if method == "initialize":
            if self.initialize_seen:  # a second App would orphan the first one's turns and locks
                self.error(msg_id, wire.INVALID_REQUEST, "Invalid Request: initialize was already done")
                return
            self.initialize_seen = True
            if self.answered_initialize:
                self.answered_initialize = False
                try:
                    initialize_without_reply(self.protocol, self.server.converter, obj.get("params") or {})
                except Exception:  # the client has its answer; requests will say "not initialized"
                    log.exception("setting up for the already answered initialize failed")
                return
        elif method is not None and not self.initialize_seen:
            if "id" in obj:
                self.error(msg_id, wire.SERVER_NOT_INITIALIZED,
                           f"Server not initialized: send initialize before {method}")
            return
        if self.direct is not None and self.direct.takes(obj):
            self.direct.start(msg_id, method, obj.get("params"))
            return
        try:
            message = self.protocol.structure_message(obj)
        except JsonRpcException as e:  # params pygls cannot structure: the client's mistake
            cause = (str(e.__cause__ or e).splitlines() or [""])[0]
            log.info("%s refused: %s", method, cause)
            if "id" in obj and method is not None:
                self.error(msg_id, e.code, e.message or "Invalid params")
            return
        try:
            self.protocol.handle_message(message)
        except Exception:
            log.exception("unhandled error while dispatching %s", method)
            if "id" in obj and method is not None:
                self.error(msg_id, wire.INTERNAL_ERROR, "Internal error (see the daemon log)")


async def serve(server: Any, inbox: Inbox, stdout: BinaryIO | Outbox, *, answered_initialize: bool = False,
                on_end: Callable[[], None] | None = None) -> int:
    """Serve until stdin closes or `exit` arrives; returns the process exit code. `on_end` is
    called as soon as the input ends (from the reader thread at EOF: even a stuck loop cannot
    delay it), e.g. to bound how long the process may take to exit. With an Outbox (the daemon's
    stdout) frames are written by its thread and the backpressure rule applies; a plain stream
    (in-process tests) is written on the loop. `deliver` may run on the loop (lsp_early hands
    frames over from there), so it never waits: the reader thread's gate is serve_lsp's.

    `inbox` is fed by one thread: the reader (each frame a loop callback) or the loop itself
    (lsp_early, once pygls is in). On the loop a frame is dispatched at once, without a second loop
    callback (a pass's wait beside streaming turns), unless frames handed over before are still
    waiting for theirs, which keeps the order; the ones `inbox` held before serve started keep
    their callbacks (queued ahead of lsp_early's hand-over work, as they were)."""
    loop = asyncio.get_running_loop()
    loop_thread = threading.get_ident()
    stopped = asyncio.Event()
    outbox = stdout if isinstance(stdout, Outbox) else None
    writer = FrameWriter(stdout)  # type: ignore[arg-type]  # an Outbox is the file-like FrameWriter needs
    server.protocol.set_writer(writer)
    dispatcher = Dispatcher(server, writer, stopped.set, answered_initialize)
    if outbox is not None:
        OUTPUT.set(outbox)
    context = contextvars.copy_context()  # the reader thread's callbacks (and the tasks they start) see OUTPUT

    waiting = 0
    """Frames the loop handed over that wait for their callback (only the loop touches this)."""
    at_once = False

    def queued(body: bytes | None, problem: str | None) -> None:
        nonlocal waiting
        waiting -= 1
        dispatcher.frame(body, problem)

    def deliver(body: bytes | None, problem: str | None) -> None:
        nonlocal waiting
        if body is None and problem is None and on_end is not None:
            on_end()
        if threading.get_ident() != loop_thread:
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                loop.call_soon_threadsafe(dispatcher.frame, body, problem, context=context.copy())
        elif at_once and not waiting:
            context.copy().run(dispatcher.frame, body, problem)
        else:
            waiting += 1
            loop.call_soon(queued, body, problem, context=context.copy())

    def from_now_on() -> None:
        nonlocal at_once
        at_once = True

    inbox.attach(deliver)
    loop.call_soon(from_now_on)  # after the callbacks of what `inbox` held (and lsp_early's release)
    await stopped.wait()
    if on_end is not None:  # `exit` ends the input too
        on_end()
    log.info("shutting down")
    if server.app is not None:
        await server.app.shutdown()
    await written(stdout)  # what is queued goes out (the client may still read) within the exit grace
    return 0
