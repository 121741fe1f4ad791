"""Streamed `chat.completion.chunk` events as small structs, and the reply they add up to.

A chunk is one dict from the JSON parser, read once into a `ChunkDelta` (no model object per
chunk: that was ~70% of a turn's CPU with the SDK). `ReplyAssembler` joins text and tool-call
fragments by index and only yields a reply once a finish_reason arrived, so a cut stream never
half-runs a tool call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toycoder_daemon.llm.base import ChatResponse, ToolCall, Usage


class StreamCut(Exception):
    """The stream ended before the model finished its reply."""


class EmptyReply(StreamCut):
    """A 200 whose stream carried no event at all: llama-cpp-python's answer to a prompt over its
    context window (and to some requests it cannot serve, e.g. streamed tool_choice)."""


class MalformedChunk(ValueError):
    """A chunk we cannot read (e.g. a delta's content that is neither text nor content parts)."""


class StreamErrorEvent(Exception):
    """The provider sent an error event in the middle of the stream."""

    def __init__(self, message: str, body: Any = None):
        super().__init__(message)
        self.message = message
        self.body = body


@dataclass(slots=True)
class ToolFragment:
    index: int
    id: str | None
    name: str | None
    arguments: str | None


@dataclass(slots=True)
class ChunkDelta:
    text: str | None = None
    tool_calls: list[ToolFragment] | None = None
    finish_reason: str | None = None
    usage: Usage | None = None


def _usage(u: Any) -> Usage | None:
    if not isinstance(u, dict):
        return None
    return Usage(u.get("prompt_tokens") or 0, u.get("completion_tokens") or 0, u.get("total_tokens") or 0)


def _content_parts(content: Any) -> str:
    """The text of a delta's `content` that is not a string: of a list of content parts (some
    OpenAI-compatible servers stream those), the text parts joined (other parts, e.g. "thinking",
    are not the reply). Anything else raises MalformedChunk: a number, say, would reach the clients
    and the history as a non-string."""
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif not isinstance(part, dict):
                break
            elif part.get("type", "text") == "text":
                if not isinstance(text := part.get("text"), str):
                    break
                texts.append(text)
        else:
            return "".join(texts)
    raise MalformedChunk(f"a chunk's delta content is {type(content).__name__} {str(content)[:60]!r}, "
                         "neither text nor a list of text parts")


def read_chunk(obj: Any) -> ChunkDelta:
    """One parsed chunk as a ChunkDelta; an error event raises StreamErrorEvent."""
    if not isinstance(obj, dict):
        raise StreamErrorEvent(f"unexpected stream event: {type(obj).__name__}")
    if obj.get("error"):
        err = obj["error"]
        message = err.get("message") if isinstance(err, dict) else None
        raise StreamErrorEvent(message or "An error occurred during streaming", err)
    delta = ChunkDelta(usage=_usage(obj.get("usage")))
    choices = obj.get("choices")
    if not choices:
        return delta
    choice = choices[0]
    delta.finish_reason = choice.get("finish_reason")
    d = choice.get("delta")
    if d:
        text = d.get("content")
        delta.text = text if text is None or type(text) is str else _content_parts(text)
        calls = d.get("tool_calls")
        if calls:
            frags = []
            for tc in calls:
                fn = tc.get("function") or {}
                frags.append(ToolFragment(tc.get("index", 0), tc.get("id"), fn.get("name"), fn.get("arguments")))
            delta.tool_calls = frags
    return delta


@dataclass
class _Slot:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ReplyAssembler:
    def __init__(self, on_delta: Callable[[str], None]):
        self._on_delta = on_delta
        self._text: list[str] = []
        self._calls: dict[int, _Slot] = {}
        self.usage: Usage | None = None
        self.finish: str | None = None
        self.events = 0

    def add(self, delta: ChunkDelta) -> None:
        self.events += 1
        if delta.usage is not None:
            self.usage = delta.usage
        if delta.text:
            self._text.append(delta.text)
            self._on_delta(delta.text)
        for tc in delta.tool_calls or ():
            slot = self._calls.get(tc.index)
            if slot is None:
                slot = self._calls[tc.index] = _Slot()
            if tc.id:
                slot.id = tc.id
            if tc.name:
                slot.name += tc.name
            if tc.arguments:
                slot.arguments.append(tc.arguments)
        if delta.finish_reason:
            self.finish = delta.finish_reason

    def reply(self) -> ChatResponse:
        if self.finish is None:
            if not self.events:
                raise EmptyReply("the server answered 200 with an empty stream")
            raise StreamCut("the reply ended without a finish_reason")
        tool_calls = [ToolCall(id=c.id or f"call_{i}", name=c.name, arguments="".join(c.arguments))
                      for i, c in sorted(self._calls.items())]
        return ChatResponse(content="".join(self._text), tool_calls=tool_calls, usage=self.usage,
                            finish_reason=self.finish)
