"""The ACP client of a turn that starts before the SDK is in (acp_early.py): frames written as the
SDK's connection writes them, and the client's responses to its requests routed back here by id,
before and after the hand-over (the SDK never knew those ids; its own start after them)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from .acp_client import ClientError, RawClient
from .ndjson import MAX_LINE
from .rpc_checks import refusal

log = logging.getLogger(__name__)


class EarlyClient:
    """acp_client.RawClient: frames go to `write` until the SDK is in (`sdk`), then through it."""

    def __init__(self, write: Callable[[dict[str, Any]], None]):
        self._write = write
        self.sdk: RawClient | None = None
        """The SDK path's client, once it is in: later frames go through it (one writer, its ids)."""
        self.next_id = 0
        """The id of the next request sent here; the SDK's own ids start after the last one."""
        self.pending: dict[int, asyncio.Future[Any]] = {}

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        if self.sdk is not None:
            return await self.sdk.notify(method, params)
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        if self.sdk is not None:
            return await self.sdk.request(method, params)
        msg_id, self.next_id = self.next_id, self.next_id + 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[msg_id] = fut
        self._write({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        try:
            return await fut
        finally:
            self.pending.pop(msg_id, None)

    def response(self, msg: dict[str, Any]) -> bool:
        """A response from the client: True if its id is one of ours (a late one is dropped here).
        One the SDK's path would refuse (rpc_checks) is not taken: that path refuses it as it does."""
        msg_id = msg.get("id")
        if not isinstance(msg_id, int) or isinstance(msg_id, bool) or not 0 <= msg_id < self.next_id \
                or "method" in msg or refusal(msg) is not None:
            return False
        fut = self.pending.pop(msg_id, None)
        if fut is None or fut.done():
            log.debug("late response %s dropped", msg_id)
            return True
        if "result" in msg:  # as the SDK's connection reads a response: the result first
            fut.set_result(msg["result"])
        else:
            error = msg["error"]  # rpc_checks: an object with an integer code, if any
            fut.set_exception(ClientError(error.get("code", -32603), error.get("message", "Error"), error.get("data")))
        return True


def response_to(client: EarlyClient, line: bytes) -> bool:
    """`line` is a response to one of the early client's requests (and was given to it)."""
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(msg, dict) and "method" not in msg and "id" in msg and client.response(msg)


class Replies:
    """The input as the SDK reads it after the hand-over: the client's responses to the early
    client's requests are taken out on the way and given to it. Lines are looked at only while one
    of those requests waits (none is sent after the hand-over, so that ends; the SDK drops a late
    response: its ids never match ours); then chunks pass as they come. A line that grows past
    MAX_LINE is not held: its bytes pass (to its newline), and the SDK's transport refuses it."""

    def __init__(self, read: Callable[[], Awaitable[bytes]], client: EarlyClient):
        self._read = read
        self.client = client
        self._buf = bytearray()
        """The start of a line not yet whole, while lines are looked at."""
        self._passing = False
        """Inside a line over MAX_LINE: its bytes pass untouched up to its newline."""

    async def read(self) -> bytes:
        while True:
            chunk = await self._read()
            if not self.client.pending or not chunk:
                out, self._buf = bytes(self._buf) + chunk, bytearray()
                if out or not chunk:
                    return out
                continue
            if self._passing:
                end = chunk.find(b"\n") + 1
                if not end:
                    return chunk
                self._passing = False
                return chunk[:end] + self._filtered(chunk[end:])
            if lines := self._filtered(chunk):
                return lines

    def _filtered(self, chunk: bytes) -> bytes:
        """The whole lines of what came so far, less the early client's responses."""
        self._buf += chunk
        end = self._buf.rfind(b"\n") + 1
        lines, self._buf = bytes(self._buf[:end]), self._buf[end:]
        kept = b"".join(line for line in lines.splitlines(keepends=True) if not response_to(self.client, line))
        if len(self._buf) > MAX_LINE:
            kept, self._buf, self._passing = kept + bytes(self._buf), bytearray(), True
        return kept
