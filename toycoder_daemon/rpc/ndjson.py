"""The ACP face's stdio, wrapped for the ACP SDK's connection: the StreamReader it reads and the
StreamWriter it writes (`open_stdio`). Nothing here looks at what a message means.

Why wrap them: SDK 0.12.1's connection has no hook for input it cannot use. Its line reader holds a
line of any length, answers a line that is not JSON with nothing (a logged traceback), and stops
serving at one that is JSON but not an object (`[]`, `42`); its stdio helper reads stdin with
connect_read_pipe, which refuses a regular file. So:

- stdin is read on a thread ("acp-stdin"), whatever it is (pipe, file, pty, socket), and before each
  read the backpressure gate may hold it (Outbox.wait_input, docs/protocol.md "Backpressure");
- `Lines` cuts it into lines and refuses what the LSP face refuses, the connection serving on: a line
  over MAX_LINE is dropped while it is read (never held) and answered -32600, unparsable JSON
  -32700, anything that is not a JSON-RPC 2.0 message -32600 (checks.py), with id null unless
  the message had a usable id; blank lines are dropped (the SDK skips them too);
- every other line goes on as it came, byte for byte, into a pipe whose read end is the SDK's
  StreamReader (connect_read_pipe, as its own stdio helper reads stdin): the pipe and the reader's
  limit bound what is read ahead of the SDK;
- the SDK's StreamWriter writes each frame whole through FrameTransport to the protocol stream (the
  daemon's Outbox), and so do the refusals.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
from collections.abc import Callable, Collection
from typing import Any, BinaryIO

from toycoder_daemon.rpc.checks import refusal
from toycoder_daemon.rpc.lsp_framing import MAX_CONTENT_LENGTH
from toycoder_daemon.wire import codes as wire

log = logging.getLogger(__name__)

MAX_LINE = MAX_CONTENT_LENGTH
"""The same cap as the LSP face's Content-Length (32 MiB)."""
READ_LIMIT = 1 << 20
"""The SDK's StreamReader stops reading the pipe above twice this (a longer line still passes)."""
CHUNK = 1 << 16


def encode_line(message: Any) -> bytes:
    return (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8")


def _error(msg_id: Any, code: int, message: str) -> bytes:
    return encode_line({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})


class Lines:
    """stdin's bytes -> the lines to pass on and the refusals to answer (no I/O here)."""

    def __init__(self, *, notifications: Collection[str] = (), requests: Collection[str] = (),
                 max_line: int = MAX_LINE):
        self._notifications = notifications
        """Methods without an answer: a request (with an id) to one is refused."""
        self._requests = requests
        """Methods with an answer: a notification (no id) to one is dropped."""
        self._max_line = max_line
        self._buf = bytearray()
        """The start of a line not yet whole (never more than max_line)."""
        self._scanned = 0
        """How much of _buf is known to have no newline."""
        self._dropping = False
        """Inside a line over the limit: its bytes are thrown away until its newline."""

    def feed(self, chunk: bytes) -> tuple[bytes, list[bytes]]:
        """(the lines `chunk` completes that pass, each with its newline; the refusals to write)."""
        passed, refusals = bytearray(), []
        if self._dropping:
            end = chunk.find(b"\n")
            if end < 0:
                return b"", []
            self._dropping = False
            refusals.append(self._too_long())
            chunk = chunk[end + 1:]
        buf = self._buf
        buf += chunk
        start = 0
        while (end := buf.find(b"\n", max(start, self._scanned))) >= 0:
            self._sort(bytes(buf[start:end]), passed, refusals)
            start = end + 1
        del buf[:start]
        self._scanned = len(buf)
        if len(buf) > self._max_line:
            buf.clear()
            self._scanned = 0
            self._dropping = True
        return bytes(passed), refusals

    def end(self) -> tuple[bytes, list[bytes]]:
        """At the end of the input: a last line without its newline still counts."""
        passed, refusals = bytearray(), []
        if self._dropping:
            refusals.append(self._too_long())
        elif self._buf:
            self._sort(bytes(self._buf), passed, refusals)
        self._buf.clear()
        self._scanned = 0
        self._dropping = False
        return bytes(passed), refusals

    def _too_long(self) -> bytes:
        log.info("refused line: over the limit of %d bytes", self._max_line)
        return _error(None, wire.INVALID_REQUEST, f"Invalid Request: line over the limit of {self._max_line} bytes")

    def _sort(self, line: bytes, passed: bytearray, refusals: list[bytes]) -> None:
        if len(line) > self._max_line:
            refusals.append(self._too_long())
            return
        if not line.strip():
            return
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
            log.info("unparsable line: %s", e)
            refusals.append(_error(None, wire.PARSE_ERROR, f"Parse error: {e}"))
            return
        refused = refusal(obj, self._notifications, self._requests)
        if refused is None:
            passed += line
            passed += b"\n"
            return
        log.info("refused message: %s", refused.message)
        if refused.code is not None:
            refusals.append(_error(refused.msg_id, refused.code, refused.message))


class FrameTransport(asyncio.WriteTransport):
    """The SDK's frames (and the refusals) to the protocol stream only (like the LSP face's FrameWriter)."""

    def __init__(self, out: BinaryIO):
        super().__init__()
        self._out = out
        self._closing = False

    def write(self, data: bytes) -> None:  # type: ignore[override]
        if self._closing:
            return
        try:
            self._out.write(data)
            self._out.flush()
        except (OSError, ValueError) as e:  # the client closed its end
            log.info("protocol stream closed: %s", e)
            self._closing = True

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True  # the stream itself belongs to the caller

    def can_write_eof(self) -> bool:
        return False


class Stdio:
    """The SDK's two streams (`reader`, `writer`); `close` when the connection is done."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pipe: asyncio.BaseTransport):
        self.reader = reader
        self.writer = writer
        self._pipe = pipe

    def close(self) -> None:
        """The pipe's read end closes (a reader thread still writing to it ends) and writing stops."""
        self._pipe.close()
        self.writer.close()


async def open_stdio(out: BinaryIO, stdin: int = 0, *, notifications: Collection[str] = (),
                     requests: Collection[str] = (), gate: Callable[[int], object] | None = None,
                     max_line: int = MAX_LINE) -> Stdio:
    """The StreamReader (stdin's lines that pass) and StreamWriter (to `out`) for the SDK's connection.
    `gate` is called with the fd before each read of stdin, on the reading thread."""
    loop = asyncio.get_running_loop()
    frames = FrameTransport(out)
    # The writer's protocol only serves drain(); this one never pauses (outbox.py bounds the queue).
    writer = asyncio.StreamWriter(frames, asyncio.StreamReaderProtocol(asyncio.StreamReader()), None, loop)
    reader = asyncio.StreamReader(limit=READ_LIMIT)
    r, w = os.pipe()
    pipe, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(r, "rb", buffering=0))

    def refuse(frame: bytes) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is served any more
            loop.call_soon_threadsafe(frames.write, frame)  # written on the loop, as the SDK's frames are

    lines = Lines(notifications=notifications, requests=requests, max_line=max_line)
    threading.Thread(target=_pump, args=(stdin, w, lines, refuse, gate), name="acp-stdin", daemon=True).start()
    return Stdio(reader, writer, pipe)


def _pump(fd: int, sink: int, lines: Lines, refuse: Callable[[bytes], None],
          gate: Callable[[int], object] | None) -> None:
    """The reading thread: stdin -> `lines` -> the pipe to the SDK, until EOF (then the pipe closes)."""
    try:
        while True:
            if gate is not None:
                gate(fd)
            try:
                chunk = os.read(fd, CHUNK)
            except OSError as e:
                log.info("stdin: %s", e)
                chunk = b""
            passed, refusals = lines.feed(chunk) if chunk else lines.end()
            for frame in refusals:
                refuse(frame)
            view = memoryview(passed)
            while view:
                view = view[os.write(sink, view):]
            if not chunk:
                return
    except OSError as e:  # the connection is closed (the pipe's read end with it)
        log.debug("stdin reader: %s", e)
    finally:
        os.close(sink)
