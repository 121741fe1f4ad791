"""The model port: what the engine needs from any chat model."""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from toycoder_daemon.core.errors import ProviderError
from toycoder_daemon.core.messages import Message
from toycoder_daemon.core.util import safejson

API_FIELDS = frozenset({"role", "content", "tool_calls", "tool_call_id", "name"})


def for_api(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The messages without our bookkeeping fields (e.g. a tool result's `status`), which the
    conversation keeps for transcripts but a strict provider would reject. Strings are scrubbed of
    lone surrogates (safejson), which the SDK's UTF-8 encoding of the request would fail on."""
    return [_with_images(safejson.scrub_tree({k: v for k, v in m.items() if k in API_FIELDS}), m) for m in messages]


def _with_images(out: dict[str, Any], m: Message) -> dict[str, Any]:
    """A prompt with attached images (stored in the data dir, referenced by the message: never inline
    in the session file) as OpenAI content parts: its text, then each image as an `image_url`. An
    image gone from the data dir is said in the text instead."""
    images = m.get("images")
    if not images or not isinstance(images, list):
        return out
    parts: list[dict[str, Any]] = [{"type": "text", "text": out.get("content") or ""}]
    for image in images:
        try:
            data = Path(image["path"]).read_bytes()
        except (OSError, KeyError, TypeError):
            parts[0]["text"] += "\n[an attached image is no longer stored]"
            continue
        url = f"data:{image.get('mimeType', 'image/png')};base64,{base64.b64encode(data).decode('ascii')}"
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return {**out, "content": parts}


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str
    """Raw JSON text as the model produced it (may be invalid; the registry reports that)."""


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    unreported: int = 0
    """Replies whose server sent no usage (their tokens are unknown, not 0)."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
            self.unreported + other.unreported,
        )


@dataclass
class ChatResponse:
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage | None = None
    finish_reason: str | None = None
    tools_ignored: str | None = None
    """The notice to show when this reply says the server ignored the tools offered (tools_ignored.py)."""


class ContextOverflow(ProviderError):
    """The prompt does not fit the model's context window. `context_tokens`: the window, when the
    server said it. The engine makes room (compaction, or trimming) and tries once more."""

    def __init__(self, provider: str, reason: str, status: int | None = None, context_tokens: int | None = None):
        super().__init__(provider, reason, status)
        self.context_tokens = context_tokens


@dataclass
class RetryNotice:
    attempt: int
    delay_seconds: float
    reason: str


class ChatModel(Protocol):
    provider: str
    model: str

    async def stream_chat(
        self,
        messages: Sequence[Message],
        tools: list[dict[str, Any]] | None = None,
        on_delta: Callable[[str], None] | None = None,
        on_retry: Callable[[RetryNotice], None] | None = None,
    ) -> ChatResponse:
        """Stream one reply. Text goes to on_delta as it arrives; a retry after partial output
        is announced through on_retry so the caller can drop that partial text.
        Raises ProviderError when the provider fails for good."""
        ...
