"""A session: its conversation (written through to disk by the Conversation) and its settings."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, get_args

from toycoder_daemon.core.messages import INTERRUPTED_MARK, Message, UserMessage, calls_before
from toycoder_daemon.core.modes import MODES
from toycoder_daemon.core.ports import ChangedFile, PlanEntry, StopReason, ToolStatus
from toycoder_daemon.llm.base import Usage
from toycoder_daemon.sessions.context import SUMMARY_PREFIX
from toycoder_daemon.sessions.conversation import Conversation, Mark, Stored
from toycoder_daemon.sessions.store import SessionFile, SessionSummary
from toycoder_daemon.sessions.titles import prompt_title
from toycoder_daemon.tools.plan.tool import answers_plan, session_plan
from toycoder_daemon.tools.registry import ToolRegistry


@dataclass(frozen=True)
class TranscriptEntry:
    """One render-ready line of history: role is user, assistant, tool_call, tool, changes, compaction
    (where earlier turns were summarised for the model; `text` is the summary) or plan."""

    role: str
    text: str
    tool_call_id: str | None = None
    name: str | None = None
    status: str | None = None
    """For role "tool": how the call ended."""
    turn_id: str | None = None
    """For role "changes": the checkpoint id (what toycoder/checkpoint/restore takes)."""
    files: tuple[ChangedFile, ...] = ()
    """For role "changes": the turn's net change per file."""
    interrupted: bool = False
    """For role "assistant": the reply was cut short by a cancel (`text` is what had arrived)."""
    stop_reason: str | None = None
    """For role "user": how the turn this prompt started ended (end_turn, max_steps, cancelled, error)."""
    usage: Usage | None = None
    """For role "user": that turn's tokens, sub-agents included."""
    plan: tuple[PlanEntry, ...] = ()
    """For role "plan" (last, once): the session's plan as the history ends, whole."""
    restore_of: str | None = None
    """For role "changes" of a restore: the turn it restored (clients offer Redo, not Undo)."""
    context: tuple[dict[str, Any], ...] = ()
    """For role "user": what was attached to the prompt, as chips."""


class Attachment(Protocol):
    """What a prompt brought besides its text (app/attachments.Attached)."""

    chips: list[dict[str, Any]]
    images: list[dict[str, str]]

    def content(self, text: str) -> str:
        """The prompt as the model reads it: the text, then each attached block."""


def _typed(m: Message) -> str:
    """A prompt as the person typed it (its stored content also holds what was attached)."""
    typed = m.get("typed")
    return typed if isinstance(typed, str) else (m.get("content") or "")


def _chips(m: Message) -> tuple[dict[str, Any], ...]:
    chips = m.get("context")
    return tuple(c for c in chips if isinstance(c, dict)) if isinstance(chips, list) else ()


ChangesOf = Callable[[str], "TranscriptEntry | None"]
"""A turn's checkpoint id -> its `changes` entry (None when it changed no file)."""

log = logging.getLogger(__name__)


def _known_status(value: Any) -> str | None:
    """A stored tool result's status as the faces know them: one this version does not know (a
    hand-edited file, another version's) reads as "completed", the call did return."""
    if not value:
        return None
    if value in get_args(ToolStatus):
        return str(value)
    log.debug("a tool result's unknown status %.80r read as 'completed'", value)
    return "completed"


def _stored_usage(value: Any) -> Usage:
    """Stored token counts ([prompt, completion, total, unreported], a prefix of it; counts a newer
    version adds after those are ignored, not lost by reading all as none); anything else
    (hand-edited) reads as none rather than failing the load."""
    if isinstance(value, list) and all(type(n) is int for n in value):
        return Usage(*value[:4])
    log.debug("unreadable stored usage %.80r read as none", value)
    return Usage()


def _known_stop(value: Any) -> str | None:
    """A stored turn end's stop reason; one this version does not know reads as unrecorded."""
    if value in get_args(StopReason):
        return str(value)
    if value is not None:
        log.debug("a turn's unknown stop reason %.80r left out", value)
    return None


class FileSink:
    """A Conversation's sink on an open session file: appends on the loop (one short write),
    rewrites in a thread with the session's settings of the moment."""

    def __init__(self, file: SessionFile, meta: Callable[[], dict[str, Any]]):
        self.file = file
        self.meta = meta

    def append(self, messages: list[Message]) -> None:
        self.file.append(messages)

    def mark(self, mark: Mark) -> None:
        self.file.mark(mark)

    async def rewrite(self, records: list[Stored]) -> None:
        meta = self.meta()  # read on the loop, where the session changes
        await asyncio.to_thread(self.file.rewrite, meta, records)


@dataclass
class Session:
    id: str
    title: str
    tools: ToolRegistry
    messages: Conversation = field(default_factory=lambda: Conversation(""))
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
    turn: asyncio.Task[Any] | None = None
    turn_seq: int = 0
    turn_usage: Usage = field(default_factory=Usage)
    """Tokens of the current (or last) turn, sub-agents included."""
    file: SessionFile | None = None
    """The open SessionFile messages and settings are written to (None: a read-only copy)."""
    turn_ends: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Checkpoint id -> {"stopReason", "usage": [prompt, completion, total]} of each turn (each stored
    as a record of its own when it ends: the meta record stays the same size)."""
    title_by: str = ""
    """Who wrote the title: "prompt" (its first line), "model" (after the first turn) or "user" (/title)."""
    planners: frozenset[str] = frozenset({"planner"})
    """Its plan-seeding sub-agents by tool name (the app's config): their results may seed its plan."""
    asked_turn: str = ""
    """The checkpoint id of the last turn whose prompt is in the conversation (`ask`)."""
    additional_directories: tuple[str, ...] = ()
    """Absolute directories its tools, search and sandbox treat like the workspace (the client's)."""

    @classmethod
    def restore(cls, session_id: str, meta: dict[str, Any], mtime: float, tools: ToolRegistry) -> Session:
        """A session from its stored settings (the last meta record), with `tools` as its registry."""
        s = cls(id=session_id, title="", tools=tools, created_at=meta.get("createdAt", mtime), updated_at=mtime)
        s.apply_meta(meta)
        return s

    def apply_meta(self, meta: dict[str, Any]) -> None:
        """Take stored settings (on restore, or what another daemon wrote since)."""
        self.title = meta.get("title") or self.title
        self.title_by = meta.get("titleBy") or self.title_by
        self.provider, self.model = meta.get("provider", self.provider), meta.get("model", self.model)
        if meta.get("usage"):
            self.usage = _stored_usage(meta["usage"])
        for name, enabled in (meta.get("toolOverrides") or {}).items():
            if self.tools.get(name):
                self.tools.set_enabled(name, bool(enabled))
                self.tool_overrides[name] = bool(enabled)
        if meta.get("mode") in MODES:
            self.tools.gate.mode = meta["mode"]
        if "always" in meta:
            self.tools.gate.always = {n for n in meta.get("always") or () if self.tools.get(n)}
        dirs = meta.get("additionalDirectories")
        if isinstance(dirs, list) and all(isinstance(d, str) for d in dirs):
            self.additional_directories = tuple(dirs)
        if isinstance(meta.get("turnEnds"), dict):  # on restore all of them; later, the new ones
            self.turn_ends.update(meta["turnEnds"])

    @property
    def busy(self) -> bool:
        return self.turn is not None and not self.turn.done()

    @property
    def message_count(self) -> int:
        """Messages the person saw (compacted ones included), as the session list counts them."""
        return len(self.messages.history())

    def summary(self) -> SessionSummary:
        return SessionSummary(self.id, self.title, self.created_at, self.updated_at, self.message_count, self.mode,
                              self.additional_directories)

    def meta(self, *, ends: bool = False) -> dict[str, Any]:
        """The settings; with `ends`, every turn's end too (a rewritten file starts with them)."""
        return {
            "id": self.id, "title": self.title, "titleBy": self.title_by, "createdAt": self.created_at,
            "provider": self.provider, "mode": self.mode,
            "model": self.model, "toolOverrides": self.tool_overrides, "always": sorted(self.tools.gate.always),
            "additionalDirectories": list(self.additional_directories),
            "usage": [self.usage.prompt_tokens, self.usage.completion_tokens, self.usage.total_tokens,
                      self.usage.unreported],
            **({"turnEnds": self.turn_ends} if ends else {}),
        }

    def end_turn(self, turn_id: str, stop_reason: str, usage: Usage) -> None:
        """Record how a turn ended (one record of its own), with the session's settings."""
        end = self.turn_ends[turn_id] = {"stopReason": stop_reason,
                                         "usage": [usage.prompt_tokens, usage.completion_tokens, usage.total_tokens]}
        self.updated_at = time.time()
        if self.file:
            self.file.end_turn(turn_id, end, self.meta())

    def add_usage(self, u: Usage) -> None:
        self.usage = self.usage + u
        self.turn_usage = self.turn_usage + u

    def record_usage(self, u: Usage) -> None:
        """A reply of the session's own turn (run_turn's `on_usage`): its tokens, and the size of the
        conversation the model reported (compaction estimates from there)."""
        self.add_usage(u)
        if u.total_tokens:
            self.context_mark = (u.prompt_tokens + u.completion_tokens, len(self.messages) + 1)

    def changed(self) -> None:
        """Its settings changed: they are written to its file (a read-only copy has none)."""
        self.updated_at = time.time()
        if self.file:
            self.file.write_meta(self.meta())

    def ask(self, text: str, turn: str, attached: Attachment | None = None, typed: str | None = None) -> None:
        """The turn's prompt into the conversation (and the title from what was typed), once per
        turn; with what was attached (its text for the model, its chips, its images by reference),
        and `typed` when the person typed something else (a custom command `text` expands)."""
        if self.asked_turn != turn:
            self.asked_turn = turn
            typed = text if typed is None else typed
            self.title_from(typed)
            message: UserMessage = {"role": "user", "content": text, "turn": turn}
            if attached is not None and attached.chips:
                message["content"], message["context"] = attached.content(text), attached.chips
                if attached.images:
                    message["images"] = attached.images
            if message["content"] != typed:
                message["typed"] = typed
            self.messages.append(message)

    def title_from(self, text: str) -> None:
        if not self.title and (line := prompt_title(text)):
            self.title, self.title_by = line, "prompt"
            self.changed()

    @property
    def mode(self) -> str:
        return self.tools.gate.mode

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}: one of {', '.join(MODES)}")
        self.tools.gate.mode = mode
        self.changed()

    def set_title(self, title: str, by: str) -> None:
        self.title, self.title_by = title, by
        self.changed()

    def set_additional_directories(self, dirs: tuple[str, ...]) -> None:
        self.additional_directories = dirs
        self.changed()

    def set_tool_enabled(self, name: str, enabled: bool) -> None:
        self.tools.set_enabled(name, enabled)
        self.tool_overrides[name] = enabled
        self.changed()

    def transcript(self, changes_of: ChangesOf | None = None,
                   messages: Sequence[Stored] | None = None, before_turn: str | None = None) -> list[TranscriptEntry]:
        """Render-ready history, whole (compacted turns included, a `compaction` entry where the
        model's context was compacted): what a client shows when it resumes this session. With
        `changes_of`, each turn that changed files is followed by a `changes` entry (a restore's
        note to the model shows as the restore's `changes` entry). `messages`: render only these
        (what another daemon added, already in this conversation). It ends with the session's plan,
        when it has one (with `messages`, only when a result in them answers a plan call), so a
        client shows it again. `before_turn`: end before the prompt of that turn (one running in
        another daemon, which the client hears live from its start)."""
        out: list[TranscriptEntry] = []
        history = self.messages.history()
        added = None if messages is None else [r for r in messages if not isinstance(r, Mark)]
        # a result in `records` whose call came in an earlier batch is named as if they came together
        names = {} if added is None else {
            cid: c["function"]["name"] for cid, c in calls_before(history, added).items()}
        pending: str | None = None  # the checkpoint id of the turn being read

        def close_turn() -> None:
            nonlocal pending
            entry = changes_of(pending) if changes_of and pending else None
            if entry is not None:
                out.append(entry)
            pending = None

        for m in self.messages.records() if messages is None else messages:
            if isinstance(m, Mark):
                if m.compaction:
                    close_turn()
                    out.append(TranscriptEntry("compaction", m.summary))
                continue
            if m["role"] == "system":
                continue
            if m["role"] == "user" and (m.get("content") or "").startswith(SUMMARY_PREFIX):
                # what an older version wrote when it compacted: the summary in place of the turns
                close_turn()
                out.append(TranscriptEntry("compaction", str(m.get("content")).removeprefix(SUMMARY_PREFIX)))
                continue
            if m["role"] == "user" and before_turn is not None and m.get("turn") == before_turn:
                break
            if m["role"] == "user":
                close_turn()
                pending = m.get("turn")
                if m.get("note"):
                    close_turn()
                    continue
            if m["role"] == "assistant":
                text = m.get("content") or ""
                # The flag is stored; older sessions only have the marker at the end of the text.
                cut = bool(m.get("interrupted")) or text.endswith(INTERRUPTED_MARK)
                text = text.removesuffix(INTERRUPTED_MARK) if cut else text
                if text or cut:
                    out.append(TranscriptEntry("assistant", text, interrupted=cut))
                for c in m.get("tool_calls") or ():
                    names[c["id"]] = c["function"]["name"]
                    out.append(TranscriptEntry("tool_call", c["function"]["arguments"], c["id"], c["function"]["name"]))
            elif m["role"] == "tool":
                cid = m.get("tool_call_id", "")
                out.append(TranscriptEntry("tool", m.get("content") or "", cid, names.get(cid), _known_status(m.get("status"))))
            elif m["role"] == "user" and isinstance(end := self.turn_ends.get(pending or ""), dict):
                out.append(TranscriptEntry("user", _typed(m), stop_reason=_known_stop(end.get("stopReason")),
                                           usage=_stored_usage(end.get("usage") or []), context=_chips(m)))
            elif m["role"] == "user":
                out.append(TranscriptEntry("user", _typed(m), context=_chips(m)))
            else:
                out.append(TranscriptEntry(m["role"], m.get("content") or ""))
        close_turn()
        # After a poll's batch, the plan is news when a result in it answers a plan call, which
        # may be in an earlier batch (the assistant's calls are stored before they run).
        news = added is None or answers_plan(history, added, self.planners)
        plan = session_plan(history, self.planners) if news else None
        if plan and plan.entries:
            out.append(TranscriptEntry("plan", "", plan=plan.entries))
        return out
