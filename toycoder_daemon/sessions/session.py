"""A conversation: its messages (written through to disk as they are appended) and its settings."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..llm.base import Usage
from ..tools.registry import ToolRegistry
from .store import SessionSummary

TITLE_MAX = 60


@dataclass(frozen=True)
class TranscriptEntry:
    """One render-ready line of history: role is user, assistant, tool_call or tool."""

    role: str
    text: str
    tool_call_id: str | None = None
    name: str | None = None
    status: str | None = None
    """For role "tool": how the call ended."""


class MessageLog(list):
    """The message list the engine appends to; every append is handed to `sink` (the session
    file) at once, so a crash loses at most the message being written."""

    def __init__(self, items: Iterable[dict[str, Any]] = (), sink: Callable[[list[dict[str, Any]]], None] | None = None):
        super().__init__(items)
        self.sink = sink

    def append(self, item: dict[str, Any]) -> None:  # type: ignore[override]
        super().append(item)
        if self.sink:
            self.sink([item])

    def extend(self, items: Iterable[dict[str, Any]]) -> None:  # type: ignore[override]
        items = list(items)
        super().extend(items)
        if self.sink and items:
            self.sink(items)


@dataclass
class Session:
    id: str
    title: str
    tools: ToolRegistry
    messages: MessageLog = field(default_factory=MessageLog)
    """The conversation as the model sees it; messages[0] is the system prompt (never stored)."""
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    provider: str | None = None
    model: str | None = None
    usage: Usage = field(default_factory=Usage)
    tool_overrides: dict[str, bool] = field(default_factory=dict)
    """Tools the person enabled or disabled in this session."""
    context_mark: tuple[int, int] = (0, 0)
    """(tokens the model last reported for the whole conversation, message count at that time)."""
    turn: asyncio.Task | None = None
    turn_seq: int = 0
    file: Any = None
    """The open SessionFile messages and settings are written to."""
    on_meta_change: Callable[[Session], None] | None = None

    @property
    def busy(self) -> bool:
        return self.turn is not None and not self.turn.done()

    @property
    def message_count(self) -> int:
        return sum(1 for m in self.messages if m.get("role") != "system")

    def summary(self) -> SessionSummary:
        return SessionSummary(self.id, self.title, self.created_at, self.updated_at, self.message_count)

    def meta(self) -> dict[str, Any]:
        return {
            "id": self.id, "title": self.title, "createdAt": self.created_at, "provider": self.provider,
            "model": self.model, "toolOverrides": self.tool_overrides, "always": sorted(self.tools.gate.always),
            "usage": [self.usage.prompt_tokens, self.usage.completion_tokens, self.usage.total_tokens],
        }

    def changed(self) -> None:
        self.updated_at = time.time()
        if self.on_meta_change:
            self.on_meta_change(self)

    def title_from(self, text: str) -> None:
        if not self.title:
            line = " ".join(text.split())
            self.title = line if len(line) <= TITLE_MAX else line[: TITLE_MAX - 1] + "…"
            self.changed()

    def set_tool_enabled(self, name: str, enabled: bool) -> None:
        self.tools.set_enabled(name, enabled)
        self.tool_overrides[name] = enabled
        self.changed()

    def transcript(self) -> list[TranscriptEntry]:
        """Render-ready history: what a client shows when it resumes this session."""
        out: list[TranscriptEntry] = []
        names: dict[str, str] = {}
        for m in self.messages:
            role = m.get("role")
            if role == "system":
                continue
            if role == "assistant":
                if m.get("content"):
                    out.append(TranscriptEntry("assistant", m["content"]))
                for c in m.get("tool_calls") or ():
                    names[c["id"]] = c["function"]["name"]
                    out.append(TranscriptEntry("tool_call", c["function"]["arguments"], c["id"], c["function"]["name"]))
            elif role == "tool":
                cid = m.get("tool_call_id", "")
                out.append(TranscriptEntry("tool", m.get("content") or "", cid, names.get(cid), m.get("status") or None))
            else:
                out.append(TranscriptEntry(role, m.get("content") or ""))
        return out
