"""Text deltas coalesced for the wire: buffered, then sent when the event loop next gets control
(i.e. when the model stream actually waits on the network), when the stream they belong to
changes, or before any other event. A burst of chunks from one network read becomes one message;
a slow stream still shows each chunk at once. Both faces (LSP and ACP) use it.

The other half of writing to the wire, the outgoing queue a streaming turn waits on while it is full,
is the port `core.ports.OUTPUT`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from typing import Any


class TextCoalescer:
    def __init__(self, send: Callable[[Any, str], None]):
        self._send = send
        """send(key, text): one wire message for the buffered text of one stream."""
        self._parts: list[str] = []
        self._key: Hashable = None
        self._scheduled = False

    def add(self, key: Hashable, text: str) -> None:
        if self._parts and key != self._key:
            self.flush()
        self._key = key
        self._parts.append(text)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self._scheduled = False
        if self._parts:
            text, self._parts = "".join(self._parts), []
            self._send(self._key, text)
