"""The message shapes of a conversation (OpenAI chat format, plus our `status` on tool results).

A leaf module: the engine (agent/), the conversation store (sessions/) and the model adapters
(llm/) share these shapes without importing each other.
"""

from __future__ import annotations

from typing import Literal, TypedDict


class FunctionCall(TypedDict):
    name: str
    arguments: str
    """The raw JSON text the model sent (may be invalid)."""


class ToolCallEntry(TypedDict):
    id: str
    type: Literal["function"]
    function: FunctionCall


class SystemMessage(TypedDict):
    role: Literal["system"]
    content: str


# Optional keys through total=False subclasses: typing.NotRequired is 3.11+, and we support 3.10.
class _UserBase(TypedDict):
    role: Literal["user"]
    content: str


class UserMessage(_UserBase, total=False):
    turn: str
    """The checkpoint id of the turn this prompt started (transcripts show its file changes after it)."""
    note: bool
    """A note from ToyCoder to the model (e.g. files were restored), not something the person typed."""


class _AssistantBase(TypedDict):
    role: Literal["assistant"]
    content: str | None


class AssistantMessage(_AssistantBase, total=False):
    tool_calls: list[ToolCallEntry]
    interrupted: bool
    """A reply cut short by a cancel: `content` ends with INTERRUPTED_MARK, which transcripts drop."""


INTERRUPTED_MARK = "\n[interrupted by the user]"
"""Appended to a cut-short reply for the model's sake (it sees that it was stopped); never shown."""


class _ToolBase(TypedDict):
    role: Literal["tool"]
    tool_call_id: str
    content: str


class ToolMessage(_ToolBase, total=False):
    status: str
    """completed | failed | denied | cancelled: our bookkeeping, stripped before the model's API."""


Message = SystemMessage | UserMessage | AssistantMessage | ToolMessage
