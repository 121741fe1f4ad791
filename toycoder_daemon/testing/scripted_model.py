"""An in-process ChatModel that plays a script: for engine unit tests (no HTTP, no SDK)."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from typing import Any

from ..errors import ProviderError
from ..llm.base import ChatResponse, RetryNotice, ToolCall, Usage


class ScriptedModel:
    """Each stream_chat call takes the next reply: {"text": str, "tool_calls": [{name, arguments, id?}],
    "chunks": int, "error": str, "delay": seconds, "hang": true}. It records a deep copy of the messages
    and tools it was sent."""

    provider = "scripted"
    model = "scripted-model"

    def __init__(self, script: list[dict[str, Any]]):
        self.script = list(script)
        self.calls: list[dict[str, Any]] = []
        self._ids = 0

    async def stream_chat(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        on_delta: Callable[[str], None] | None = None,
        on_retry: Callable[[RetryNotice], None] | None = None,
    ) -> ChatResponse:
        self.calls.append({"messages": copy.deepcopy(messages), "tools": copy.deepcopy(tools)})
        if not self.script:
            raise ProviderError(self.provider, "script exhausted")
        reply = self.script.pop(0)
        if reply.get("delay"):
            await asyncio.sleep(reply["delay"])
        if reply.get("error"):
            raise ProviderError(self.provider, reply["error"])
        text = reply.get("text", "")
        n = max(1, reply.get("chunks", 3))
        size = max(1, -(-len(text) // n))
        for i in range(0, len(text), size):
            if on_delta:
                on_delta(text[i:i + size])
            await asyncio.sleep(0)
        if reply.get("hang"):
            await asyncio.Event().wait()  # until cancelled
        calls = []
        for c in reply.get("tool_calls", []):
            self._ids += 1
            args = c.get("arguments", {})
            calls.append(ToolCall(c.get("id") or f"call_{self._ids}", c["name"],
                                  args if isinstance(args, str) else json.dumps(args)))
        return ChatResponse(text, calls, Usage(10, 5, 15), "tool_calls" if calls else "stop")
