"""Stdio transport: our own framing in front of pygls' dispatcher.

pygls' reader answers nothing to unparsable JSON and trusts any Content-Length. Ours reads frames
on a thread (bounded header lines, bounded bodies), answers -32700/-32600/-32002 itself, and hands
well-formed messages to the pygls protocol on the event loop. EOF on stdin ends the daemon.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import Any, BinaryIO, Callable

from pygls.exceptions import JsonRpcException

from . import protocol as wire

log = logging.getLogger(__name__)

MAX_CONTENT_LENGTH = 32 * 1024 * 1024
MAX_HEADER_LINE = 8192
LIFECYCLE = {"initialize", "exit"}


def raw_converter():
    """lsprotocol's converter, but custom-method params/results stay plain dicts (pygls would
    turn them into namedtuples); the handlers validate them with pydantic."""
    from lsprotocol import converters
    from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage

    c = converters.get_converter()
    c.register_structure_hook(
        JsonRPCRequestMessage,
        lambda o, cls: cls(id=o["id"], method=o["method"], jsonrpc=o["jsonrpc"], params=o.get("params")),
    )
    c.register_structure_hook(
        JsonRPCNotification, lambda o, cls: cls(method=o["method"], jsonrpc=o["jsonrpc"], params=o.get("params"))
    )
    c.register_structure_hook(
        JsonRPCResponseMessage, lambda o, cls: cls(id=o["id"], jsonrpc=o["jsonrpc"], result=o.get("result"))
    )
    return c


class FrameWriter:
    """pygls writer over the protocol channel (a dup of the original fd 1)."""

    def __init__(self, out: BinaryIO):
        self._out = out

    def write(self, data: bytes) -> None:
        self._out.write(data)
        self._out.flush()

    def close(self) -> None:
        try:
            self._out.close()
        except OSError:
            pass


def read_frames(stdin: BinaryIO, deliver: Callable[[bytes | None, str | None], None]) -> None:
    """Blocking loop (run on a thread): deliver(body, None) per frame, deliver(None, problem) for a
    refused frame, and deliver(None, None) once at EOF."""
    try:
        while True:
            length: int | None = None
            refused: str | None = None
            while True:  # headers
                line = stdin.readline(MAX_HEADER_LINE)
                if not line:
                    return
                if not line.endswith(b"\n"):
                    refused = "header line too long"
                    continue
                stripped = line.strip()
                if not stripped:
                    if length is not None or refused:
                        break
                    continue  # stray blank line between frames
                name, _, value = stripped.partition(b":")
                if name.strip().lower() == b"content-length":
                    try:
                        length = int(value.strip())
                    except ValueError:
                        refused = f"bad Content-Length {value.strip()[:40]!r}"
                        continue
                    if length < 0 or length > MAX_CONTENT_LENGTH:
                        refused = f"Content-Length {length} is over the limit of {MAX_CONTENT_LENGTH} bytes"
            if refused or length is None:
                # The body cannot be trusted to have that length: skip to the next header.
                deliver(None, refused or "missing Content-Length")
                continue
            body = stdin.read(length)
            if len(body) < length:
                return
            deliver(body, None)
    except (OSError, ValueError) as e:
        log.info("stdin closed: %s", e)
    finally:
        deliver(None, None)


class Dispatcher:
    """Runs on the event loop: validate a frame, answer what pygls would not, pass the rest on."""

    def __init__(self, server: Any, on_exit: Callable[[], None]):
        self.server = server
        self.protocol = server.protocol
        self.on_exit = on_exit
        self.initialize_seen = False

    def error(self, msg_id: Any, code: int, message: str) -> None:
        self.protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})

    def frame(self, body: bytes | None, problem: str | None) -> None:
        if body is None:
            if problem is None:
                self.on_exit()
            else:
                log.warning("refused frame: %s", problem)
                self.error(None, wire.INVALID_REQUEST, f"Invalid Request: {problem}")
            return
        try:
            obj = json.loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            self.error(None, wire.PARSE_ERROR, f"Parse error: {e}")
            return
        if not isinstance(obj, dict):
            self.error(None, wire.INVALID_REQUEST, "Invalid Request: expected a JSON object (batches are not supported)")
            return
        msg_id = obj.get("id")
        if obj.get("jsonrpc") != "2.0":
            self.error(msg_id, wire.INVALID_REQUEST, "Invalid Request: jsonrpc must be \"2.0\"")
            return
        method = obj.get("method")
        if "method" in obj and not isinstance(method, str):
            self.error(msg_id, wire.INVALID_REQUEST, "Invalid Request: method must be a string")
            return
        if isinstance(msg_id, bool) or (msg_id is not None and not isinstance(msg_id, (str, int))):
            self.error(None, wire.INVALID_REQUEST, "Invalid Request: id must be a string or a number")
            return
        if method is None and not ("id" in obj and ("result" in obj or "error" in obj)):
            self.error(msg_id, wire.INVALID_REQUEST, "Invalid Request: neither a request, a notification nor a response")
            return
        if method == "exit":
            self.on_exit()
            return
        if method == "initialize":
            self.initialize_seen = True
        elif method is not None and not self.initialize_seen:
            if "id" in obj:
                self.error(msg_id, wire.SERVER_NOT_INITIALIZED, f"Server not initialized: send initialize before {method}")
            return
        try:
            message = self.protocol.structure_message(obj)
        except JsonRpcException as e:
            if "id" in obj and method is not None:
                self.error(msg_id, e.code, e.message or "Invalid params")
            return
        try:
            self.protocol.handle_message(message)
        except Exception:
            log.exception("unhandled error while dispatching %s", method)
            if "id" in obj and method is not None:
                self.error(msg_id, wire.INTERNAL_ERROR, "Internal error (see the daemon log)")


async def serve(server: Any, stdin: BinaryIO, stdout: BinaryIO) -> int:
    """Serve until stdin closes or `exit` arrives; returns the process exit code."""
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    server.protocol.set_writer(FrameWriter(stdout))
    dispatcher = Dispatcher(server, stopped.set)

    def deliver(body: bytes | None, problem: str | None) -> None:
        try:
            loop.call_soon_threadsafe(dispatcher.frame, body, problem)
        except RuntimeError:  # loop already closed
            pass

    threading.Thread(target=read_frames, args=(stdin, deliver), name="stdin-reader", daemon=True).start()
    await stopped.wait()
    log.info("shutting down")
    if server.app is not None:
        await server.app.shutdown()
    return 0
