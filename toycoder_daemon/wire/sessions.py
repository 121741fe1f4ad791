"""Wire types of sessions as clients show them (issue 15): SessionInfo and TranscriptEntry, the
`session_info`, `session_changed` and `plan` updates, toycoder/session/setMode's params. Rows in
protocol.py's method table; re-exported there."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from toycoder_daemon.wire.base import StopReason, ToolStatus, Wire
from toycoder_daemon.wire.checkpoints import ChangedFileInfo


class SetModeParams(Wire):
    session_id: str = Field(min_length=1)
    mode: str = Field(min_length=1)


class SessionInfo(Wire):
    session_id: str
    title: str
    created_at: str
    updated_at: str
    message_count: int
    mode: str | None = None
    """The permission mode (an id of `availableModes`), for an open session; lists leave it out."""


class UsageInfo(Wire):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class PlanEntryInfo(Wire):
    content: str
    priority: Literal["high", "medium", "low"]
    status: Literal["pending", "in_progress", "completed"]


class TranscriptEntry(Wire):
    role: str
    """user, assistant, tool_call, tool, changes (after a turn that changed files), compaction (where
    earlier turns were summarised for the model: `text` is the summary, "" when they were cut), or plan (last)."""
    text: str
    tool_call_id: str | None = None
    name: str | None = None
    status: ToolStatus | None = None
    """For role "tool": how the call ended."""
    turn_id: str | None = None
    """For role "changes": the turn's checkpoint id (what toycoder/checkpoint/restore takes)."""
    files: list[ChangedFileInfo] | None = None
    """For role "changes": the turn's net change per file."""
    interrupted: bool | None = None
    """For role "assistant": true when a cancel cut the reply short (`text` is what had arrived)."""
    stop_reason: StopReason | None = None
    """For role "user": how the turn this prompt started ended (absent while it runs, or if unrecorded)."""
    usage: UsageInfo | None = None
    """For role "user": that turn's tokens, sub-agents included (with `stopReason`)."""
    entries: list[PlanEntryInfo] | None = None
    """For role "plan": the session's plan as the history ends (as the `plan` update has it)."""


class PlanUpdate(Wire):
    """The model's plan (its update_plan tool), whole each time: clients replace what they show."""

    kind: Literal["plan"] = "plan"
    entries: list[PlanEntryInfo]


class SessionChangedUpdate(Wire):
    """Another daemon (another editor, a script) added to this session while this client had it
    open; `turnId` of the notification is "" (the turn was not this daemon's)."""

    kind: Literal["session_changed"] = "session_changed"
    transcript: list[TranscriptEntry]
    """The new history entries, in order (the same shapes session/load answers)."""
    reset: bool = False
    """True: the other daemon rewrote the session (a repair of tool calls a killed turn left open):
    `transcript` is the whole history. A compaction is an addition: a `compaction` entry."""


class SessionInfoUpdate(Wire):
    """The session's title or mode changed: the fast model's title after the first turn, /title,
    /mode, setMode (not the first prompt's line). `turnId`: the turn that changed it (sent as it
    ends), or ""."""

    kind: Literal["session_info"] = "session_info"
    session: SessionInfo
