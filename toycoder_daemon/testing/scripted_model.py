"""An in-process ChatModel that plays a script in the fake server's dialect (testing/script.py,
documented in fake_llm.py): for engine and App tests without HTTP or the SDK.

How the HTTP-level fields play in-process: `status` raises the ProviderError the OpenAI adapter
would raise for that status once its retries are spent (there are no retries here); `drop_after`
streams that many deltas, then raises a ProviderError (a cut stream); `delay` waits before the
first delta and `chunk_delay` between deltas (await points, so a turn can be cancelled there);
`expect` failures are collected in `violations`, like the fake server's.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Sequence
from typing import Any

from toycoder_daemon.core.errors import ProviderError
from toycoder_daemon.core.messages import Message
from toycoder_daemon.llm.base import ChatResponse, RetryNotice, ToolCall, Usage
from toycoder_daemon.testing import script as steps


class ScriptedModel:
    """Each stream_chat call takes the next reply. It records a deep copy of the messages and tools
    it was sent in `calls`."""

    def __init__(self, script: Sequence[dict[str, Any]] = (), *, provider: str = "scripted",
                 model: str = "scripted-model"):
        self.provider, self.model = provider, model
        self.script: list[dict[str, Any]] = []
        self.calls: list[dict[str, Any]] = []
        self.violations: list[str] = []
        self._ids = 0
        self.add(*script)

    def add(self, *replies: dict[str, Any]) -> None:
        """Append replies (checked now: a bad field fails the test that wrote it)."""
        self.script.extend(steps.check_reply(r) for r in replies)

    def _new_call_id(self) -> str:
        self._ids += 1
        return f"call_{self._ids}"

    async def stream_chat(
        self,
        messages: Sequence[Message],
        tools: list[dict[str, Any]] | None = None,
        on_delta: Callable[[str], None] | None = None,
        on_retry: Callable[[RetryNotice], None] | None = None,
    ) -> ChatResponse:
        sent = copy.deepcopy(list(messages))
        self.calls.append({"messages": sent, "tools": copy.deepcopy(tools), "model": self.model})
        if not self.script:
            self.violations.append(f"script exhausted ({len(self.calls)} requests)")
            raise ProviderError(self.provider, f"fake_llm: script exhausted ({len(self.calls)} requests)", 500)
        reply = self.script.pop(0)
        n = len(self.calls)
        for problem in steps.expect_problems(reply.get("expect") or {}, sent, tools, self.model):
            self.violations.append(f"request {n}: {problem}")
        if reply.get("delay"):
            await asyncio.sleep(float(reply["delay"]))
        fault = steps.fault(reply)
        if fault is not None:
            raise ProviderError(self.provider, fault.message, fault.status)
        pieces = steps.text_pieces(reply)
        calls = steps.tool_calls(reply, self._new_call_id)
        drop = reply.get("drop_after")
        for i, piece in enumerate(pieces):
            if drop is not None and i >= int(drop):
                raise ProviderError(self.provider, f"stream cut after {drop} deltas")
            if i and reply.get("chunk_delay"):
                await asyncio.sleep(float(reply["chunk_delay"]))
            if on_delta:
                on_delta(piece)
            await asyncio.sleep(0)  # a real stream yields between deltas
        if drop is not None:
            raise ProviderError(self.provider, f"stream cut after {drop} deltas")
        prompt, completion = steps.usage(reply, sum(len(steps.text_of(m.get("content"))) for m in sent),
                                         len(pieces) + len(calls))
        return ChatResponse("".join(pieces), [ToolCall(*c) for c in calls],
                            Usage(prompt, completion, prompt + completion), steps.finish_reason(reply, bool(calls)))
