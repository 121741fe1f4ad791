"""The ACP face's fast start: stdin read from the first moment, and `initialize` answered before the
ACP SDK is imported (importing it costs ~0.7-1 s, `acp.schema` most of it).

Only the standard library here. `StdinPump` reads stdin on a thread and holds the chunks, in order,
until the SDK's transport reads them; `fast_initialize` answers a plain, well-formed first
`initialize` with the capabilities the agent always has (tests check it equals the SDK path's answer).
acp.py then records that request's client capabilities without a wire message.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import __version__

if TYPE_CHECKING:  # asyncio itself (~30-80 ms) is imported after the answer, with the SDK
    import asyncio

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
"""acp.PROTOCOL_VERSION (a test checks they agree)."""
FIRST_LINE_LIMIT = 1 << 20
"""A first line longer than this is not looked at here: the SDK path answers it."""


def initialize_result() -> dict[str, Any]:
    """What ToyCoderAgent.initialize answers, as it goes on the wire (key order included)."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True, "promptCapabilities": {"embeddedContext": True},
            "mcpCapabilities": {"http": True, "sse": False},
            "sessionCapabilities": {"list": {}, "delete": {}, "resume": {}, "close": {}},
        },
        "agentInfo": {"name": "toycoder-daemon", "title": "ToyCoder", "version": __version__},
    }


def fast_initialize(line: bytes) -> tuple[bytes, dict[str, Any]] | None:
    """(the answer line, the request's params) for a plain, well-formed `initialize`; None leaves
    the line to the SDK (which validates it and answers, with an error if it must)."""
    if os.environ.get("TOYCODER_NO_FAST_START"):
        return None
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(msg, dict):
        return None
    params, msg_id = msg.get("params"), msg.get("id")
    if not (msg.get("jsonrpc") == "2.0" and msg.get("method") == "initialize" and isinstance(params, dict)
            and isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool)):
        return None
    version = params.get("protocolVersion")
    if not isinstance(version, int) or isinstance(version, bool) or not 0 <= version <= 65535:
        return None  # the SDK refuses it with -32602
    for key in ("clientCapabilities", "clientInfo"):
        if params.get(key) is not None and not isinstance(params[key], dict):
            return None
    reply = {"jsonrpc": "2.0", "id": msg_id, "result": initialize_result()}
    return (json.dumps(reply, separators=(",", ":")) + "\n").encode(), params


def _settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class StdinPump:
    """stdin (fd 0) read on a thread from the start; at most `ahead` chunks are held, so a client that
    writes faster than we parse is held back by the pipe, not by our memory. `read` is the async
    chunk source for the SDK's transport (b"" at EOF)."""

    def __init__(self, fd: int = 0, *, ahead: int = 4):
        self._fd = fd
        self._ahead = ahead
        self._cond = threading.Condition()
        self._chunks: deque[bytes] = deque()
        self._eof = False
        self._waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[None]] | None = None
        self.gate: Callable[[int | None], object] | None = None
        """Called (on the pump's thread) with the fd before each read: blocks while the output queue
        is over its hard limit (Outbox.wait_input), so a client that does not read is held back by
        its own pipe; it lets the pump read on once stdin is closed, so EOF is still seen."""
        threading.Thread(target=self._pump, name="acp-stdin", daemon=True).start()

    def _pump(self) -> None:
        try:
            while True:
                if self.gate is not None:
                    self.gate(self._fd)
                chunk = os.read(self._fd, 1 << 16)
                if not chunk:
                    break
                with self._cond:
                    self._cond.wait_for(lambda: len(self._chunks) < self._ahead)
                    self._chunks.append(chunk)
                    self._wake()
        except OSError as e:
            log.info("stdin: %s", e)
        finally:
            with self._cond:
                self._eof = True
                self._wake()

    def _wake(self) -> None:
        """Under the lock: tell the blocked first_line and the waiting `read` that input came."""
        self._cond.notify_all()
        if self._waiter is not None:
            loop, fut = self._waiter
            self._waiter = None
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                loop.call_soon_threadsafe(_settle, fut)

    def first_line(self) -> bytes | None:
        """Block until the first line is here and return it, leaving it unread; None at EOF before
        a newline or when the line is over FIRST_LINE_LIMIT."""
        with self._cond:
            buf = bytearray()
            while True:
                self._cond.wait_for(lambda: bool(self._chunks) or self._eof)
                while self._chunks:  # gathered into one chunk: the pump may read on meanwhile
                    buf += self._chunks.popleft()
                self._cond.notify_all()
                end = buf.find(b"\n")
                if end >= 0 or self._eof or len(buf) > FIRST_LINE_LIMIT:
                    if buf:
                        self._chunks.appendleft(bytes(buf))
                    return bytes(buf[:end]) if 0 <= end <= FIRST_LINE_LIMIT else None

    def drop_first_line(self) -> None:
        """The first line was answered here: the SDK never sees it."""
        with self._cond:
            head = self._chunks.popleft()
            rest = head[head.index(b"\n") + 1:]
            if rest:
                self._chunks.appendleft(rest)

    def unread(self, data: bytes) -> None:
        """Put bytes read ahead back in front (acp_early.py hands what it did not answer to the SDK)."""
        if data:
            with self._cond:
                self._chunks.appendleft(data)
                self._wake()

    async def read(self) -> bytes:
        import asyncio

        while True:
            with self._cond:
                if self._chunks:
                    chunk = self._chunks.popleft()
                    self._cond.notify_all()
                    return chunk
                if self._eof:
                    return b""
                loop = asyncio.get_running_loop()
                fut: asyncio.Future[None] = loop.create_future()
                self._waiter = (loop, fut)
            await fut
