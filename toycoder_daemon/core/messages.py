"""The message shapes of a conversation (OpenAI chat format, plus our `status` on tool results).

A leaf module: the engine (agent/), the conversation store (sessions/) and the model adapters
(llm/) share these shapes without importing each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypedDict


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
    typed: str
    """What the person typed, when `content` also holds attached context (transcripts show this)."""
    context: list[dict[str, Any]]
    """What was attached, as the transcript's chips (wire ContextChip shapes)."""
    images: list[dict[str, str]]
    """Attached images: {"path" (in the data dir, by sha256), "mimeType", "sha256"}."""


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


# ---- pairing tool results with their calls, read leniently: a stored message may be hand-edited
# or another version's, and a read must not fail on it

def calls_made(m: Message) -> dict[str, Any]:
    """tool call id -> call, of an assistant message's readable calls (with an id and a name)."""
    out: dict[str, Any] = {}
    made = m.get("tool_calls") if m.get("role") == "assistant" else None
    for c in made if isinstance(made, list) else ():
        f = c.get("function") if isinstance(c, dict) else None
        if isinstance(f, dict) and isinstance(f.get("name"), str) and isinstance(c.get("id"), str):
            out[c["id"]] = c
    return out


def answered_id(m: Message) -> str:
    """The call a tool result answers ("" when it does not say)."""
    cid = m.get("tool_call_id")
    return cid if isinstance(cid, str) else ""


def calls_before(conversation: Sequence[Message], new: Sequence[Message]) -> dict[str, Any]:
    """tool call id -> call, for the tool results in `new` (the end of `conversation`) whose call is
    not made in `new` before them: the latest call of that id before `new`. A second daemon's poll
    can read a call and, in a later poll, its result; a model may reuse an id in a later turn."""
    made: set[str] = set()
    wanted: set[str] = set()
    for m in new:
        made.update(calls_made(m))
        if m.get("role") == "tool" and (cid := answered_id(m)) not in made:
            wanted.add(cid)
    found: dict[str, Any] = {}
    for i in reversed(range(max(0, len(conversation) - len(new)))):  # from the end: a call is just before
        if not wanted:
            break
        for cid, call in calls_made(conversation[i]).items():
            if cid in wanted:
                wanted.discard(cid)
                found[cid] = call
    return found
