"""The ports between the core and its faces: typed events the core emits, the permission request,
and the Frontend it talks to the person through.

agent/ and tools/ both import this module and it imports nothing of ours, so neither package
needs the other for these types. The LSP face, the ACP face and the tests each implement `Frontend`.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

Decision = Literal["allow_once", "allow_always", "reject"]
ToolStatus = Literal["completed", "failed", "denied", "cancelled"]
Level = Literal["safe", "sensitive", "dangerous"]
StopReason = Literal["end_turn", "max_steps", "max_tokens", "cancelled", "error", "command"]
"""How a turn ended (agent/react.py). `command`: the prompt was a slash command (App answers it
without the engine). `max_tokens`: the reply was still cut by the output limit after
MAX_CONTINUATIONS requests to continue it."""


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
    will_ask: bool = False
    """The permission gate will ask the person before it runs (the tool's level alone does not say:
    modes, rules, "always" and refusals decide)."""
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
class McpWaiting:
    """A turn (or /tools) waits for MCP servers to start ("waiting", sent only once the wait has
    lasted a short moment), then stopped waiting ("done", sent only after a "waiting")."""

    state: Literal["waiting", "done"]
    servers: tuple[str, ...]
    """The servers waited for (the same names in both)."""
    failed: tuple[str, ...] = ()
    """done: those that failed or stopped (each is also reported as before, with its reason)."""
    parent_tool_call_id: str | None = None
    kind: str = field(default="mcp_wait", init=False)


@dataclass(frozen=True)
class Compacted:
    strategy: Literal["summary", "truncate"]
    before: int
    after: int
    parent_tool_call_id: str | None = None
    kind: str = field(default="compaction", init=False)


@dataclass(frozen=True)
class ChangedFile:
    path: str
    """Relative to the workspace root."""
    uri: str
    status: Literal["created", "modified", "deleted"]
    added: int | None
    """Lines added and removed; None when either side is not text."""
    removed: int | None
    in_editor: bool = False
    """The change went into the editor's buffer, not to disk (nothing to reload)."""


@dataclass(frozen=True)
class FilesChanged:
    """The net file changes of a turn (or of a restore), sent once at its end."""

    turn_id: str
    """The turn's checkpoint id (what a restore takes)."""
    files: tuple[ChangedFile, ...]
    parent_tool_call_id: str | None = None
    restore_of: str | None = None
    """For a restore: the turn it restored (clients show "Restored … Redo", never an Undo)."""
    kind: str = field(default="changes", init=False)


@dataclass(frozen=True)
class PlanEntry:
    content: str
    priority: Literal["high", "medium", "low"]
    status: Literal["pending", "in_progress", "completed"]


@dataclass(frozen=True)
class PlanUpdated:
    """The model's plan (update_plan), whole each time."""

    entries: tuple[PlanEntry, ...]
    parent_tool_call_id: str | None = None
    kind: str = field(default="plan", init=False)


@dataclass(frozen=True)
class HookRan:
    """One hook command ran (agent/hooks/): what it decided, or why it failed."""

    event: str
    """Its event (PreToolUse, Stop, ...)."""
    command: str
    outcome: Literal["ok", "blocked", "failed", "timeout"]
    duration_ms: int
    reason: str | None = None
    """Why it blocked or failed; for `ok`, the text it printed for the person (if any)."""
    source: Literal["user", "workspace"] = "user"
    parent_tool_call_id: str | None = None
    kind: str = field(default="hook", init=False)


Resolution = Literal["allow_once", "allow_always", "reject", "answered", "dismissed"]
"""How a question to the person ended: a permission's decision, or an ask_user question's."""


@dataclass(frozen=True)
class PermissionResolved:
    """A permission request or an ask_user question of the turn was answered (in any editor that has
    the session open, sessions/live.py): every client closes its prompt for it."""

    tool_call_id: str
    """The call asked about (for a question: the ask_user call)."""
    decision: Resolution
    by: str
    """The answering client's name (its clientInfo.name)."""
    parent_tool_call_id: str | None = None
    kind: str = field(default="permission_resolved", init=False)


Event = (TextDelta | ToolCallStarted | ToolCallFinished | UsageReport | RetryScheduled | Compacted | FilesChanged
         | PlanUpdated | McpWaiting | HookRan | PermissionResolved)


@dataclass(frozen=True)
class PermissionRequest:
    tool_call_id: str
    tool: str
    level: Level
    title: str
    arguments: Any
    preview: dict[str, Any] | None = None
    """{kind: diff, path, diff} or {kind: command, command, cwd}."""


@dataclass(frozen=True)
class FileDiagnostics:
    """One file's diagnostics as the editor reports them (toycoder/diagnostics)."""

    uri: str
    diagnostics: tuple[dict[str, Any], ...]
    """LSP `Diagnostic`s."""


@dataclass(frozen=True)
class EditApplied:
    """The editor's answer to an edit sent through it (workspace/applyEdit)."""

    applied: bool
    reason: str | None = None
    """Why it was not applied (the editor's failure reason, a timeout, an error reply)."""


@dataclass(frozen=True)
class CommandRequest:
    """A command for a CommandRunner: `argv` (argv[0] the program) run with exactly `env` in `cwd`."""

    tool_call_id: str
    argv: tuple[str, ...]
    env: dict[str, str]
    """The whole environment the command sees (already without secrets)."""
    cwd: str
    timeout: float
    """Seconds before the runner kills the command."""
    head_bytes: int
    """How much of the output's start the caller shows (the runner keeps at least that much)."""


@dataclass(frozen=True)
class CommandOutput:
    output: str
    """The output (stdout and stderr together); only its end when `truncated`."""
    truncated: bool
    head: str = ""
    """The start of the output as first seen, when `truncated` (may be shorter than asked, or empty)."""
    exit_code: int | None = None
    signal: str | None = None
    timed_out: bool = False


class CommandNotStarted(Exception):
    """The runner could not start the command (it did not run): run it locally instead."""


class EditorTextUnknown(Exception):
    """The editor serves files but could not say what it has of one (an error reply, no answer in
    time, a malformed answer): its buffer may hold unsaved work the disk has not."""

    def __init__(self, reason: str, *, replied: bool):
        super().__init__(reason)
        self.replied = replied
        """It answered (with an error): for a path the disk has not either, it has no such file."""


class CommandRunner(Protocol):
    """Somewhere else to run a command (the ACP client's terminal), offered by a Frontend."""

    where: str
    """Said in the observation, e.g. "the client's terminal"."""

    async def run(self, request: CommandRequest) -> CommandOutput:
        """Run it to the end, kill it on timeout or cancel, leak nothing; raises CommandNotStarted."""


class Frontend(Protocol):
    def emit(self, event: Event) -> None:
        """Fire-and-forget: show the event to the person."""

    async def confirm(self, request: PermissionRequest) -> Decision:
        """Ask the person; anything but an explicit allow must come back as "reject"."""

    async def ask(self, question: str, options: list[str] | None) -> str | None:
        """Ask the person a question; None when it cannot be asked or was dismissed."""

    def can_apply_edit(self) -> bool:
        """Whether edits to files open in the editor can go through it (LSP workspace.applyEdit)."""

    async def apply_edit(self, path: Path, before: str, after: str) -> EditApplied:
        """Change the editor's buffer of `path` from `before` (its current text) to `after`."""

    async def editor_text(self, path: Path) -> str | None:
        """The editor's text of `path` as the person sees it (unsaved changes included) when the editor
        serves files (ACP fs/read_text_file): asked once per file per tool call phase. None when it
        does not serve files or says it has no such file (the disk is the truth); EditorTextUnknown
        when it serves files but fails or is too slow (a read may use the disk, an edit may not)."""

    def writes_all_files(self) -> bool:
        """Every edit goes through apply_edit, not only those of files open in the editor: the editor
        is the source of truth for the workspace's files (an ACP client with fs.writeTextFile)."""

    def command_runner(self) -> CommandRunner | None:
        """Where run_command runs instead of a local child process (None: locally)."""

    async def diagnostics(self, uris: list[str], wait_ms: int) -> list[FileDiagnostics] | None:
        """The editor's diagnostics of `uris` (empty: of every file it has some for), waiting up to
        `wait_ms` for fresh ones (after an edit). None when the editor does not report them (no
        capability), fails, or is too slow: then there are none to show."""


TrustDecision = Literal["trust", "once", "deny", "unanswered"]
"""unanswered: no answer (a timeout, an error, a client that cannot ask, a cancelled question): nothing
applies this time, and the next turn asks again; only an explicit "deny" is remembered."""


@dataclass(frozen=True)
class TrustRequest:
    """Whether to apply a workspace's `.toycoder/settings.yaml` (app/trust.py): what it would add."""

    root: str
    settings_path: str
    hooks: tuple[str, ...]
    """The hook commands it would run."""
    mcp_servers: tuple[str, ...]
    """The MCP server commands (or URLs) it would start."""
    allow: tuple[str, ...]
    """The allow rules it would add."""
    agents: tuple[str, ...] = ()
    """The sub-agents it would add (name, tools, model)."""


@runtime_checkable
class WorkspaceTruster(Protocol):
    """A Frontend whose client can answer the workspace trust question (a frontend without it: "deny")."""

    async def trust_workspace(self, request: TrustRequest) -> TrustDecision:
        """"trust" (remembered), "once" (this daemon), "deny" (the person said no), or "unanswered"."""


class Recorded(Protocol):
    @property
    def problem(self) -> str | None:
        """Why undo cannot bring this path back (e.g. too large to checkpoint); None when kept."""


class CheckpointRecorder(Protocol):
    """What the writing tools need of the session's checkpoint store (checkpoints.CheckpointStore)."""

    def record_before_write(self, turn_id: str, path: Path | str, *, content: bytes | None = None) -> Recorded: ...

    def record_after_write(self, turn_id: str, path: Path | str, *, content: bytes | None = None) -> Recorded: ...


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
    served: tuple[str, ...] | None = None
    """The models the provider's server lists (/v1/models); None when not asked or it cannot list them."""


@dataclass(frozen=True)
class ModelsInfo:
    provider: str
    model: str
    """The current choice (of the session, or the default)."""
    providers: list[ProviderSummary]


# ---- the outgoing queue -----------------------------------------------------------------------
# The face's outgoing queue (rpc/outbox.py), which a streaming turn waits on while it is full, so a
# client that stops reading holds back the turn, not the daemon (docs/protocol.md, "Backpressure").

class Output(Protocol):
    def full(self) -> bool:
        """Over the limit: a producing turn should await `room()` before taking more of its stream."""

    async def room(self) -> None: ...


OUTPUT: ContextVar[Output | None] = ContextVar("toycoder_output", default=None)
"""Set by a face for every task it runs; None (in-process tests, the terminal) means no limit."""
