"""The ports between the core and its faces: typed events the core emits, the permission request,
and the Frontend it talks to the person through.

agent/ and tools/ both import this module and it imports nothing of ours, so neither package
needs the other for these types. The LSP face, the ACP face and the tests each implement `Frontend`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Decision = Literal["allow_once", "allow_always", "reject"]
ToolStatus = Literal["completed", "failed", "denied", "cancelled"]
Level = Literal["safe", "sensitive", "dangerous"]


@dataclass(frozen=True)
class TextDelta:
    text: str
    parent_tool_call_id: str | None = None
    kind: str = field(default="text_delta", init=False)


@dataclass(frozen=True)
class ToolCallStarted:
    tool_call_id: str
    name: str
    title: str
    arguments: Any
    permission: Level
    parent_tool_call_id: str | None = None
    kind: str = field(default="tool_call", init=False)


@dataclass(frozen=True)
class ToolCallFinished:
    tool_call_id: str
    status: ToolStatus
    output: str
    changed_paths: tuple[str, ...] = ()
    """Absolute paths of the files the call wrote."""
    parent_tool_call_id: str | None = None
    kind: str = field(default="tool_result", init=False)


@dataclass(frozen=True)
class UsageReport:
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    parent_tool_call_id: str | None = None
    kind: str = field(default="usage", init=False)


@dataclass(frozen=True)
class RetryScheduled:
    attempt: int
    delay_seconds: float
    reason: str
    parent_tool_call_id: str | None = None
    kind: str = field(default="retry", init=False)


@dataclass(frozen=True)
class Compacted:
    strategy: Literal["summary", "truncate"]
    before: int
    after: int
    parent_tool_call_id: str | None = None
    kind: str = field(default="compaction", init=False)


Event = TextDelta | ToolCallStarted | ToolCallFinished | UsageReport | RetryScheduled | Compacted


@dataclass(frozen=True)
class PermissionRequest:
    tool_call_id: str
    tool: str
    level: Level
    title: str
    arguments: Any
    preview: dict[str, Any] | None = None
    """{kind: diff, path, diff} or {kind: command, command, cwd}."""


class Frontend(Protocol):
    def emit(self, event: Event) -> None:
        """Fire-and-forget: show the event to the person."""

    async def confirm(self, request: PermissionRequest) -> Decision:
        """Ask the person; anything but an explicit allow must come back as "reject"."""

    async def ask(self, question: str, options: list[str] | None) -> str | None:
        """Ask the person a question; None when it cannot be asked or was dismissed."""


# ---- what the core reports about its tools and models (the faces map these to their wire) ----

@dataclass(frozen=True)
class ToolSummary:
    name: str
    description: str
    level: str
    enabled: bool
    source: str


@dataclass(frozen=True)
class ProviderSummary:
    name: str
    base_url: str | None
    models: dict[str, str]
    key_count: int
    """How many API keys are configured (the keys themselves never leave the daemon)."""


@dataclass(frozen=True)
class ModelsInfo:
    provider: str
    model: str
    """The current choice (of the session, or the default)."""
    providers: list[ProviderSummary]
