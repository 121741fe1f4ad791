"""The ACP face's transport: newline-delimited JSON-RPC with the LSP face's guarantees.

The SDK's own stdio transport lets one line grow without limit and stops the connection on a line
that is JSON but not an object. This one is handed to the SDK as its message-level `Transport`:
a line longer than `MAX_LINE` is dropped while it is read (never held) and refused with -32600,
unparsable JSON gets -32700, anything that is not a JSON-RPC 2.0 message -32600 (rpc_checks.py),
all with id null unless the message had a usable id; the connection keeps serving.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Any, BinaryIO

from . import protocol_codes as wire
from .rpc_checks import refusal
from .stdio import MAX_CONTENT_LENGTH

log = logging.getLogger(__name__)

MAX_LINE = MAX_CONTENT_LENGTH
"""The same cap as the LSP face's Content-Length (32 MiB)."""


def encode_line(message: Any) -> bytes:
    return (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8")


class LineTransport:
    """acp's `Transport` (send, receive, close) over a chunk reader and a line writer."""

    def __init__(self, read: Callable[[], Awaitable[bytes]], write: Callable[[bytes], None], *,
                 notifications: Collection[str] = (), max_line: int = MAX_LINE):
        self._read = read
        """The next chunk of input (b"" at its end)."""
        self._write = write
        self._notifications = notifications
        self._max_line = max_line
        self._buf = bytearray()
        self._scanned = 0
        self._dropping = False
        """Inside a line over the limit: its bytes are thrown away until its newline."""

    async def send(self, message: dict[str, Any]) -> None:
        self._write(encode_line(message))  # one whole line per write: lines never interleave

    async def close(self) -> None:
        pass  # the output stream belongs to the caller

    def _error(self, msg_id: Any, code: int, message: str) -> None:
        self._write(encode_line({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}))

    async def receive(self) -> dict[str, Any] | None:
        """The next acceptable message; None at the end of the input."""
        while True:
            line = await self._next_line()
            if line is None:
                return None
            if line is _TOO_LONG:
                log.info("refused line: over the limit of %d bytes", self._max_line)
                self._error(None, wire.INVALID_REQUEST,
                            f"Invalid Request: line over the limit of {self._max_line} bytes")
                continue
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
                log.info("unparsable line: %s", e)
                self._error(None, wire.PARSE_ERROR, f"Parse error: {e}")
                continue
            refused = refusal(obj, self._notifications)
            if refused is None:
                return obj  # type: ignore[no-any-return]
            log.info("refused message: %s", refused.message)
            if refused.code is not None:
                self._error(refused.msg_id, refused.code, refused.message)

    async def _next_line(self) -> bytes | None:
        while True:
            end = self._buf.find(b"\n", self._scanned)
            if end >= 0:
                line = bytes(self._buf[:end])
                del self._buf[:end + 1]
                self._scanned = 0
                if self._dropping or end > self._max_line:
                    self._dropping = False
                    return _TOO_LONG
                return line
            if len(self._buf) > self._max_line:
                self._dropping = True
            if self._dropping:
                self._buf.clear()
            self._scanned = len(self._buf)
            chunk = await self._read()
            if not chunk:  # EOF: a last line without its newline still counts
                line, dropping = bytes(self._buf), self._dropping
                self._buf.clear()
                self._dropping = False
                if dropping:
                    return _TOO_LONG
                return line if line.strip() else None
            self._buf += chunk


class FrameTransport(asyncio.WriteTransport):
    """Writes the SDK's frames to the protocol stream only (like the LSP face's FrameWriter)."""

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
        self._closing = True

    def can_write_eof(self) -> bool:
        return False


_TOO_LONG = b"\0too long"
"""Marker (compared by identity) for a refused line."""
