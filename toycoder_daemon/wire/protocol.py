"""The wire contract: method names, error codes and every params/result type (camelCase on the wire).

`REQUESTS`, `NOTIFICATIONS` and `DAEMON_REQUESTS` at the end bind every method to its types; that
one table drives the LSP face's handler registration and its params/result validation, the JSON
Schema export (`python -m toycoder_daemon.wire.protocol`), the generated TypeScript types
(typescript.py) and the docs drift test. The shared base (`Wire`) comes first, then the types of
checkpoints (issue 11) and of sessions as clients show them (issue 15), then the methods'. Golden
fixtures under tests/golden lock the shapes. docs/protocol.md explains them. A new method: add its
types and one row to the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool
from pydantic.alias_generators import to_camel

# the error codes live in codes.py (no pydantic: all the ACP face needs); re-exported here, so `wire.X`
# names every wire type and code
from toycoder_daemon.core.errors import MAX_SESSION_ID
from toycoder_daemon.wire.codes import CONFIG_ERROR as CONFIG_ERROR
from toycoder_daemon.wire.codes import INTERNAL_ERROR as INTERNAL_ERROR
from toycoder_daemon.wire.codes import INVALID_PARAMS as INVALID_PARAMS
from toycoder_daemon.wire.codes import INVALID_REQUEST as INVALID_REQUEST
from toycoder_daemon.wire.codes import METHOD_NOT_FOUND as METHOD_NOT_FOUND
from toycoder_daemon.wire.codes import PARSE_ERROR as PARSE_ERROR
from toycoder_daemon.wire.codes import PROVIDER_ERROR as PROVIDER_ERROR
from toycoder_daemon.wire.codes import REQUEST_CANCELLED as REQUEST_CANCELLED
from toycoder_daemon.wire.codes import SERVER_NOT_INITIALIZED as SERVER_NOT_INITIALIZED
from toycoder_daemon.wire.codes import SESSION_BUSY as SESSION_BUSY
from toycoder_daemon.wire.codes import SESSION_NOT_FOUND as SESSION_NOT_FOUND
from toycoder_daemon.wire.codes import iso_time as iso_time

# ---- what every wire type shares ---------------------------------------------------------------------

Level = Literal["safe", "sensitive", "dangerous"]
ToolStatus = Literal["completed", "failed", "denied", "cancelled"]
StopReason = Literal["end_turn", "max_steps", "max_tokens", "cancelled", "error", "command"]
Decision = Literal["allow_once", "allow_always", "reject"]
SessionId = Annotated[str, Field(min_length=1, max_length=MAX_SESSION_ID)]
"""A session id in params: a longer one is -32602 (it could name no file)."""


class Wire(BaseModel):
    # field docstrings become descriptions in the generated schema only (field_docs.document): reading
    # them at class creation (use_attribute_docstrings) costs every new process ~15 ms
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True)

    def dump(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


def build_all() -> None:
    """Build every wire type defined so far now, not at its first use (defer_build): the fork
    server does it once before it forks, so no launch pays for it (the
    eight a first LSP turn uses took ~3 ms of CPU)."""
    pending = Wire.__subclasses__()
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        cls.model_rebuild()


# ---- checkpoints: toycoder/checkpoint/list and /restore, the `changes` update ------------------------

FileStatus = Literal["created", "modified", "deleted"]


class CheckpointFile(Wire):
    path: str
    """Relative to the workspace root."""
    status: FileStatus
    added: int | None = None
    """Lines added; absent when either side is not text (binary, too large to keep, a symlink)."""
    removed: int | None = None
    """Lines removed; absent like `added`."""
    in_editor: bool | None = None
    """True: the change went into the editor's open buffer (workspace/applyEdit), not to disk, so
    there is nothing to reload and no "changed on disk" to warn about."""


class ChangedFileInfo(CheckpointFile):
    uri: str
    """The file's absolute file:// URI."""


class CheckpointInfo(Wire):
    turn_id: str
    """The turn's id (the `turnId` of its toycoder/prompt answer and updates); restore takes it."""
    created_at: str
    prompt: str
    """The first line of the turn's prompt ("restore <turn>" for a restore)."""
    files: list[CheckpointFile]
    restore_of: str | None = None
    """For a restore: the turn it restored."""


class CheckpointList(Wire):
    checkpoints: list[CheckpointInfo]
    """Turns that changed files, oldest first."""


class CheckpointDiffParams(Wire):
    session_id: SessionId
    turn_id: str = Field(min_length=1)
    """A turn id (or a unique prefix of one, or its number), as restore takes it."""
    path: str = Field(min_length=1)
    """A file the turn changed (relative to the workspace root, as its `changes` list it, or absolute)."""


class CheckpointDiff(Wire):
    path: str
    """Relative to the workspace root."""
    status: FileStatus
    diff: str | None
    """The unified diff of the turn's net change to the file (before its first write, after its
    last; `/dev/null` for the side where it did not exist); null when a side is not text (binary,
    too large to keep, a symlink)."""
    in_editor: bool | None = None
    """As in CheckpointFile: the change went into the editor's buffer."""


class RestoreParams(Wire):
    session_id: SessionId
    turn_id: str = Field(min_length=1)
    """A turn id (or a unique prefix of one, or its number)."""
    paths: list[str] | None = None
    """Only these files (relative to the workspace root, or absolute); default: every file."""
    force: StrictBool | None = None
    """Overwrite files changed outside the agent since its last write (default: they are conflicts)."""


class RestoreConflict(Wire):
    path: str
    reason: str


class RestoreResult(Wire):
    restored: list[str]
    """Paths (relative to the workspace root) now as they were before the turn."""
    conflicts: list[RestoreConflict]
    """Paths left as they are, each with the reason."""
    in_editor: list[str] | None = None
    """Those of `restored` whose change went into the editor's open buffer (workspace/applyEdit),
    not to disk: nothing to reload, and no "restored on disk" to warn about."""
    turn_id: str | None = None
    """The restore's own checkpoint (restore it to undo this restore); absent when nothing was written."""
    note: str
    """What undo cannot track (files changed by run_command or outside ToyCoder)."""


class ChangesUpdate(Wire):
    kind: Literal["changes"] = "changes"
    files: list[ChangedFileInfo]
    """The turn's net change per file (sent once, at the end of a turn or restore that changed files)."""
    restore_of: str | None = None
    """For a restore: the turn it restored (undid; for a restore of a restore, redid). Clients show
    "Restored …" with Redo (restoring this restore), never an Undo that re-applies."""


# ---- the editor as context (issue 29): a prompt's context items, the transcript's chips ---------------

class Position(Wire):
    line: int = Field(ge=0)
    """0-based, as LSP."""
    character: int = Field(default=0, ge=0)


class Range(Wire):
    start: Position
    end: Position


class FileContext(Wire):
    """A workspace file, read when the prompt is sent (the editor's open buffer when there is one),
    with its path and line numbers; only `range`'s lines when given."""

    type: Literal["file"] = "file"
    uri: str = Field(min_length=1)
    """file:// URI, or a path relative to the workspace root."""
    range: Range | None = None


class SelectionContext(Wire):
    type: Literal["selection"] = "selection"
    uri: str = Field(min_length=1)
    range: Range
    text: str


class DiagnosticsContext(Wire):
    type: Literal["diagnostics"] = "diagnostics"
    uri: str = Field(min_length=1)
    items: list[dict[str, Any]]
    """LSP `Diagnostic`s."""


class ImageContext(Wire):
    type: Literal["image"] = "image"
    mime_type: str
    """image/png, image/jpeg, image/gif or image/webp."""
    data: str
    """Base64, at most 5 MiB decoded."""


class ResourceContext(Wire):
    """An MCP resource (what `@server:uri` names), read with resources/read when the prompt is sent."""

    type: Literal["resource"] = "resource"
    server: str = Field(min_length=1)
    uri: str = Field(min_length=1)


ContextItem = Annotated[FileContext | SelectionContext | DiagnosticsContext | ImageContext | ResourceContext,
                        Field(discriminator="type")]


class ContextChip(Wire):
    """What was attached to a prompt, as the transcript keeps it (an image by its content address,
    never its bytes)."""

    type: Literal["file", "selection", "diagnostics", "image", "resource"]
    label: str
    """What a client shows on the chip: `calc.py`, `calc.py:10-20`, `image.png`..."""
    uri: str | None = None
    mime_type: str | None = None
    image: str | None = None
    """For an image: its sha256 (stored once in the data dir's images/)."""


# ---- sessions as clients show them: SessionInfo, TranscriptEntry, their updates ----------------------

class SetModeParams(Wire):
    session_id: SessionId
    mode: str = Field(min_length=1)


class SessionInfo(Wire):
    session_id: str
    title: str
    created_at: str
    updated_at: str
    message_count: int
    mode: str | None = None
    """The permission mode (an id of `availableModes`), for an open session; lists leave it out."""
    cwd: str | None = None
    """The session's workspace, in lists of other workspaces than the daemon's (`all`, `cwd`)."""
    additional_directories: list[str] | None = None
    """Extra roots the tools, search and sandbox treat like the workspace (absent: none)."""


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
    restore_of: str | None = None
    """For role "changes" of a restore: the turn it restored (as the `changes` update has it)."""
    context: list[ContextChip] | None = None
    """For role "user": what was attached to the prompt (`context` items and mentions), as chips."""


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


class SessionDeletedUpdate(Wire):
    """Another daemon (another editor) deleted this session while this client had it open: this
    daemon has closed it and will not write it again; a prompt in it answers -32010. `turnId` is ""."""

    kind: Literal["session_deleted"] = "session_deleted"
    message: str
    """One line for the person ("This session was deleted in another editor.")."""


class TurnElsewhereUpdate(Wire):
    """A turn runs in another daemon (another editor) in this session: sent when it starts
    (`running: true`, then its updates follow live, with its `turnId`) and when it ends or this
    daemon stops hearing it (`running: false`). Clients show "running in <client>" meanwhile."""

    kind: Literal["turn_elsewhere"] = "turn_elsewhere"
    client: str
    """The other daemon's client (its `clientInfo.name`; "another editor" when it gave none)."""
    running: bool
    prompt: str | None = None
    """`running: true`: the prompt that started it (clients show it as the person's line)."""


class SessionInfoUpdate(Wire):
    """The session's title or mode changed: the fast model's title after the first turn, /title,
    /mode, setMode (not the first prompt's line). `turnId`: the turn that changed it (sent as it
    ends), or ""."""

    kind: Literal["session_info"] = "session_info"
    session: SessionInfo


PROTOCOL_VERSION = 1

# client -> daemon
SESSION_NEW = "toycoder/session/new"
SESSION_LIST = "toycoder/session/list"
SESSION_LOAD = "toycoder/session/load"
SESSION_DELETE = "toycoder/session/delete"
SESSION_CLOSE = "toycoder/session/close"
SESSION_SET_MODE = "toycoder/session/setMode"
SESSION_FORK = "toycoder/session/fork"
PROMPT = "toycoder/prompt"
CANCEL = "toycoder/cancel"
TOOLS_LIST = "toycoder/tools/list"
TOOLS_SET_ENABLED = "toycoder/tools/setEnabled"
COMMANDS_LIST = "toycoder/commands/list"
MODELS_LIST = "toycoder/models/list"
MODELS_SET = "toycoder/models/set"
CHECKPOINT_LIST = "toycoder/checkpoint/list"
CHECKPOINT_RESTORE = "toycoder/checkpoint/restore"
CHECKPOINT_DIFF = "toycoder/checkpoint/diff"
MENTIONS_COMPLETE = "toycoder/mentions/complete"
RESOURCES_LIST = "toycoder/resources/list"
# daemon -> client
UPDATE = "toycoder/update"
COMMANDS_CHANGED = "toycoder/commands/changed"
REQUEST_PERMISSION = "toycoder/requestPermission"
ASK_USER = "toycoder/askUser"
WORKSPACE_TRUST = "toycoder/workspace/trust"
DIAGNOSTICS = "toycoder/diagnostics"


# ---- params ---------------------------------------------------------------------------------

class SessionNewParams(Wire):
    title: str | None = None
    additional_directories: list[str] | None = None
    """Absolute directories treated like the workspace in this session (its file tools, search, sandbox)."""


class EmptyParams(Wire):
    pass


class SessionListParams(Wire):
    cwd: str | None = None
    """List that workspace's sessions (an absolute path) instead of the daemon's."""
    all: bool = False
    """List every workspace's sessions in the data dir (each with its `cwd`)."""
    cursor: str | None = None
    """The `nextCursor` of the previous page."""


class SessionIdParams(Wire):
    session_id: SessionId


class SessionForkParams(Wire):
    session_id: str = Field(min_length=1)
    at_turn: str | int | None = None
    """Branch before this turn: its id (a `changes` entry's `turnId`, toycoder/checkpoint/list's) or
    its index (0 = the first); absent: after the last turn (the whole history)."""


class PromptParams(Wire):
    session_id: SessionId
    text: str
    context: list[ContextItem] | None = None
    """What the editor attaches: files, selections, diagnostics, images, MCP resources. `@path`,
    `@path#L10-20` and `@server:uri` in `text` attach too."""


class MentionsCompleteParams(Wire):
    session_id: str | None = None
    """For the session's MCP resources too (else the config's servers')."""
    prefix: str
    """What follows the `@` so far."""
    limit: int = Field(default=50, ge=1, le=1000)


class SetEnabledParams(Wire):
    session_id: SessionId
    name: str
    enabled: StrictBool
    """true or false only: a lax "yes" or 1 must not enable a tool."""


class CommandsListParams(Wire):
    session_id: str | None = None
    """With it, the MCP prompts of the session's servers too (else the config's)."""


class ModelsListParams(Wire):
    session_id: SessionId | None = None


class ModelsSetParams(Wire):
    session_id: SessionId
    provider: str | None = None
    model: str


# ---- results --------------------------------------------------------------------------------

class SessionList(Wire):
    sessions: list[SessionInfo]
    """Sessions with messages, newest first, a page at a time."""
    next_cursor: str | None = None
    """More follow: pass it as `cursor` for the next page."""


class EmptyResult(Wire):
    pass


class SessionLoadResult(Wire):
    session: SessionInfo
    transcript: list[TranscriptEntry]


class SwitchAction(Wire):
    kind: Literal["switch"] = "switch"
    session_id: str


class QuitAction(Wire):
    kind: Literal["quit"] = "quit"


Action = Annotated[SwitchAction | QuitAction, Field(discriminator="kind")]


class PromptResult(Wire):
    turn_id: str
    stop_reason: StopReason
    text: str
    usage: UsageInfo
    action: Action | None = None
    """What a slash command asks the client to do next."""


class CancelResult(Wire):
    cancelled: bool


class ToolInfo(Wire):
    name: str
    description: str
    permission: Level
    enabled: bool
    source: str


class ToolList(Wire):
    tools: list[ToolInfo]


class CommandInfo(Wire):
    name: str
    usage: str
    help: str
    aliases: list[str] = []
    source: str = "builtin"
    """builtin, workspace (.toycoder/commands), user ($XDG_CONFIG_HOME/toycoder/commands), a
    `commands.paths` folder, or mcp:<server> (an MCP prompt)."""


class CommandList(Wire):
    """toycoder/commands/list's answer; also the params of toycoder/commands/changed: the whole list
    `toycoder/commands/list {}` answers now, sent when it changed."""

    commands: list[CommandInfo]


class MentionItem(Wire):
    label: str
    """What follows the `@` when picked: a workspace-relative path (a folder ends with /) or server:uri."""
    kind: Literal["file", "folder", "resource"]
    uri: str


class MentionsResult(Wire):
    items: list[MentionItem]


class ResourceInfo(Wire):
    server: str
    uri: str
    name: str
    mime_type: str | None = None


class ResourcesResult(Wire):
    resources: list[ResourceInfo]


class ModelRef(Wire):
    provider: str
    model: str


class ProviderInfo(Wire):
    name: str
    base_url: str | None = None
    models: dict[str, str]
    key_count: int
    """How many API keys are configured (the keys themselves never leave the daemon)."""
    served_models: list[str] | None = None
    """The models the provider's server lists (its /v1/models; the current provider only), when it can."""


class ModelsResult(Wire):
    current: ModelRef
    providers: list[ProviderInfo]


# ---- notifications --------------------------------------------------------------------------

class TextDeltaUpdate(Wire):
    kind: Literal["text_delta"] = "text_delta"
    text: str


class ToolCallUpdate(Wire):
    kind: Literal["tool_call"] = "tool_call"
    tool_call_id: str
    name: str
    title: str
    arguments: Any
    permission: Level


class ToolResultUpdate(Wire):
    kind: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    status: ToolStatus
    output: str
    changed_paths: list[str] | None = None
    """Absolute paths of files the call wrote (editors reload them)."""


class UsageUpdate(Wire):
    kind: Literal["usage"] = "usage"
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class CompactionUpdate(Wire):
    kind: Literal["compaction"] = "compaction"
    strategy: Literal["summary", "truncate"]
    before: int
    after: int


class RetryUpdate(Wire):
    kind: Literal["retry"] = "retry"
    attempt: int
    delay_seconds: float
    reason: str


class McpWaitUpdate(Wire):
    """The turn (or /tools) waits for MCP servers to start: "waiting" once the wait has lasted a short
    moment (never when they are settled or there are none), then "done" when they are ready or failed."""

    kind: Literal["mcp_wait"] = "mcp_wait"
    state: Literal["waiting", "done"]
    servers: list[str]
    """The servers waited for (the same in both)."""
    failed: list[str] | None = None
    """done: those that failed (each also reported with its reason, as window/showMessage)."""


class HookUpdate(Wire):
    """A hook ran (docs/hooks.md): one line in a client, the reason on demand."""

    kind: Literal["hook"] = "hook"
    event: str
    """PreToolUse, PostToolUse, UserPromptSubmit, Stop, SubagentStop, SessionStart, SessionEnd or PreCompact."""
    command: str
    outcome: Literal["ok", "blocked", "failed", "timeout"]
    duration_ms: int
    reason: str | None = None
    """Why it blocked or failed; for ok, the text it printed for the person."""
    source: Literal["user", "workspace"] | None = None
    """Where the hook is configured: the user's config or the workspace's settings file."""


class PermissionResolvedUpdate(Wire):
    """A toycoder/requestPermission or toycoder/askUser of the turn was answered, in this client or
    in another editor that has the session open (every one is asked; the first answer decides).
    Clients close their prompt for `toolCallId`; one still open is also cancelled ($/cancelRequest)."""

    kind: Literal["permission_resolved"] = "permission_resolved"
    tool_call_id: str
    """The call asked about; for toycoder/askUser, the ask_user call."""
    decision: Literal["allow_once", "allow_always", "reject", "answered", "dismissed"]
    """A permission's decision, or how a question ended (`dismissed`: no answer)."""
    by: str
    """The answering client's `clientInfo.name` ("another editor" when it gave none)."""


Update = Annotated[
    TextDeltaUpdate | ToolCallUpdate | ToolResultUpdate | UsageUpdate | CompactionUpdate | RetryUpdate
    | McpWaitUpdate | ChangesUpdate | SessionChangedUpdate | SessionDeletedUpdate | SessionInfoUpdate | PlanUpdate
    | HookUpdate | TurnElsewhereUpdate | PermissionResolvedUpdate,
    Field(discriminator="kind"),
]


class UpdateParams(Wire):
    session_id: str
    turn_id: str
    parent_tool_call_id: str | None = None
    update: Update


# ---- daemon -> client requests --------------------------------------------------------------

class DiffPreview(Wire):
    kind: Literal["diff"] = "diff"
    path: str
    """Relative to the workspace root."""
    uri: str | None = None
    """The file's absolute file:// URI."""
    diff: str


class CommandPreview(Wire):
    kind: Literal["command"] = "command"
    command: str
    cwd: str | None = None


Preview = Annotated[DiffPreview | CommandPreview, Field(discriminator="kind")]


class PermissionParams(Wire):
    session_id: str
    turn_id: str
    tool_call_id: str
    tool: str
    level: Level
    title: str
    arguments: Any
    preview: Preview | None = None


class PermissionResult(Wire):
    decision: Decision


class AskUserParams(Wire):
    session_id: str
    turn_id: str
    question: str
    options: list[str] | None = None


class AskUserResult(Wire):
    answer: str | None = None
    cancelled: bool | None = None


class TrustAdds(Wire):
    hooks: list[str]
    """Hook commands the file would run."""
    mcp_servers: list[str]
    """MCP server commands (or URLs) it would start."""
    allow: list[str]
    """Allow rules it would add."""
    agents: list[str] = []
    """Sub-agents it would add: name, tools, model."""


class WorkspaceTrustParams(Wire):
    root: str
    settings_path: str
    adds: TrustAdds


class WorkspaceTrustResult(Wire):
    decision: Literal["trust", "once", "deny"]
    """trust: remembered for this file's content; once: this daemon; deny: none of it (deny rules still apply)."""
class DiagnosticsParams(Wire):
    uris: list[str]
    """The files asked about; empty: every file the editor has diagnostics for."""
    wait_ms: int
    """How long the client may wait for fresh diagnostics (after an edit) before answering."""


class FileDiagnostics(Wire):
    uri: str
    diagnostics: list[dict[str, Any]]
    """LSP `Diagnostic`s."""


class DiagnosticsResult(Wire):
    items: list[FileDiagnostics] = []


# ---- the method table -------------------------------------------------------------------------

@dataclass(frozen=True)
class Request:
    method: str
    params: type[Wire]
    result: type[Wire]


@dataclass(frozen=True)
class Notification:
    method: str
    params: type[Wire]


REQUESTS: tuple[Request, ...] = (
    Request(SESSION_NEW, SessionNewParams, SessionInfo),
    Request(SESSION_LIST, SessionListParams, SessionList),
    Request(SESSION_LOAD, SessionIdParams, SessionLoadResult),
    Request(SESSION_DELETE, SessionIdParams, EmptyResult),
    Request(SESSION_CLOSE, SessionIdParams, EmptyResult),
    Request(SESSION_SET_MODE, SetModeParams, SessionInfo),
    Request(SESSION_FORK, SessionForkParams, SessionLoadResult),
    Request(PROMPT, PromptParams, PromptResult),
    Request(CANCEL, SessionIdParams, CancelResult),
    Request(TOOLS_LIST, SessionIdParams, ToolList),
    Request(TOOLS_SET_ENABLED, SetEnabledParams, EmptyResult),
    Request(COMMANDS_LIST, CommandsListParams, CommandList),
    Request(MODELS_LIST, ModelsListParams, ModelsResult),
    Request(MODELS_SET, ModelsSetParams, ModelsResult),
    Request(CHECKPOINT_LIST, SessionIdParams, CheckpointList),
    Request(CHECKPOINT_RESTORE, RestoreParams, RestoreResult),
    Request(CHECKPOINT_DIFF, CheckpointDiffParams, CheckpointDiff),
    Request(MENTIONS_COMPLETE, MentionsCompleteParams, MentionsResult),
    Request(RESOURCES_LIST, SessionIdParams, ResourcesResult),
)
"""client -> daemon requests."""
NOTIFICATIONS: tuple[Notification, ...] = (Notification(UPDATE, UpdateParams), Notification(COMMANDS_CHANGED, CommandList))
"""daemon -> client notifications."""
DAEMON_REQUESTS: tuple[Request, ...] = (
    Request(REQUEST_PERMISSION, PermissionParams, PermissionResult),
    Request(ASK_USER, AskUserParams, AskUserResult),
    Request(WORKSPACE_TRUST, WorkspaceTrustParams, WorkspaceTrustResult),
    Request(DIAGNOSTICS, DiagnosticsParams, DiagnosticsResult),
)
"""daemon -> client requests (sent only when the client announced the capability)."""


def wire_models() -> list[type[Wire]]:
    """Every params/result type of the table, in table order, each once."""
    seen: dict[type[Wire], None] = {}
    for n in NOTIFICATIONS:
        seen[n.params] = None
    for r in (*REQUESTS, *DAEMON_REQUESTS):
        seen[r.params] = None
        seen[r.result] = None
    return list(seen)


def json_schema() -> dict[str, Any]:
    """JSON Schema of every wire type (by name), and under "methods" which types each method takes."""
    from toycoder_daemon.config.field_docs import document

    document(wire_models())
    out: dict[str, Any] = {m.__name__: m.model_json_schema(by_alias=True) for m in wire_models()}
    methods: dict[str, Any] = {}
    for r in REQUESTS:
        methods[r.method] = {"direction": "client->daemon", "params": r.params.__name__, "result": r.result.__name__}
    for n in NOTIFICATIONS:
        methods[n.method] = {"direction": "daemon->client", "params": n.params.__name__}
    for r in DAEMON_REQUESTS:
        methods[r.method] = {"direction": "daemon->client", "params": r.params.__name__, "result": r.result.__name__}
    out["methods"] = methods
    return out


if __name__ == "__main__":
    import json
    import sys

    json.dump(json_schema(), sys.stdout, indent=2)
    sys.stdout.write("\n")
