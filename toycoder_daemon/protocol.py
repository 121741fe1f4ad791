"""The wire contract: method names, error codes and every params/result type (camelCase on the wire).

Clients in other languages read `python -m toycoder_daemon.protocol` (the JSON Schema export);
golden fixtures under tests/golden lock the shapes. docs/protocol.md explains them.
"""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

PROTOCOL_VERSION = 1

# client -> daemon
SESSION_NEW = "toycoder/session/new"
SESSION_LIST = "toycoder/session/list"
SESSION_LOAD = "toycoder/session/load"
SESSION_DELETE = "toycoder/session/delete"
PROMPT = "toycoder/prompt"
CANCEL = "toycoder/cancel"
TOOLS_LIST = "toycoder/tools/list"
TOOLS_SET_ENABLED = "toycoder/tools/setEnabled"
COMMANDS_LIST = "toycoder/commands/list"
MODELS_LIST = "toycoder/models/list"
MODELS_SET = "toycoder/models/set"
# daemon -> client
UPDATE = "toycoder/update"
REQUEST_PERMISSION = "toycoder/requestPermission"
ASK_USER = "toycoder/askUser"

# error codes (JSON-RPC, LSP, then ours)
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_NOT_INITIALIZED = -32002
REQUEST_CANCELLED = -32800
SESSION_NOT_FOUND = -32010
SESSION_BUSY = -32011
PROVIDER_ERROR = -32012
CONFIG_ERROR = -32013


def iso_time(ts: float) -> str:
    """Timestamps on the wire: ISO 8601, UTC, seconds."""
    import datetime

    return datetime.datetime.fromtimestamp(ts, tz=datetime.timezone.utc).isoformat(timespec="seconds")


class Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    def dump(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


# ---- params ---------------------------------------------------------------------------------

class SessionNewParams(Wire):
    title: str | None = None


class EmptyParams(Wire):
    pass


class SessionIdParams(Wire):
    session_id: str = Field(min_length=1)


class PromptParams(Wire):
    session_id: str = Field(min_length=1)
    text: str


class SetEnabledParams(Wire):
    session_id: str = Field(min_length=1)
    name: str
    enabled: bool


class ModelsListParams(Wire):
    session_id: str | None = None


class ModelsSetParams(Wire):
    session_id: str = Field(min_length=1)
    provider: str | None = None
    model: str


# ---- results --------------------------------------------------------------------------------

class SessionInfo(Wire):
    session_id: str
    title: str
    created_at: str
    updated_at: str
    message_count: int


class SessionList(Wire):
    sessions: list[SessionInfo]


class TranscriptEntry(Wire):
    role: str
    text: str
    tool_call_id: str | None = None
    name: str | None = None
    status: Literal["completed", "failed", "denied", "cancelled"] | None = None
    """For role "tool": how the call ended."""


class SessionLoadResult(Wire):
    session: SessionInfo
    transcript: list[TranscriptEntry]


class UsageInfo(Wire):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class Action(Wire):
    kind: Literal["switch", "quit"]
    session_id: str | None = None


class PromptResult(Wire):
    turn_id: str
    stop_reason: Literal["end_turn", "max_steps", "cancelled", "error", "command"]
    text: str
    usage: UsageInfo
    action: Action | None = None


class CancelResult(Wire):
    cancelled: bool


class ToolInfo(Wire):
    name: str
    description: str
    permission: Literal["safe", "sensitive", "dangerous"]
    enabled: bool
    source: str


class ToolList(Wire):
    tools: list[ToolInfo]


class CommandInfo(Wire):
    name: str
    usage: str
    help: str
    aliases: list[str] = []


class CommandList(Wire):
    commands: list[CommandInfo]


class ModelRef(Wire):
    provider: str
    model: str


class ProviderInfo(Wire):
    name: str
    base_url: str | None = None
    models: dict[str, str]
    key_count: int
    """How many API keys are configured (the keys themselves never leave the daemon)."""


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
    permission: Literal["safe", "sensitive", "dangerous"]


class ToolResultUpdate(Wire):
    kind: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    status: Literal["completed", "failed", "denied", "cancelled"]
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


Update = Union[TextDeltaUpdate, ToolCallUpdate, ToolResultUpdate, UsageUpdate, CompactionUpdate, RetryUpdate]


class UpdateParams(Wire):
    session_id: str
    turn_id: str
    parent_tool_call_id: str | None = None
    update: Update = Field(discriminator="kind")


# ---- daemon -> client requests --------------------------------------------------------------

class Preview(Wire):
    kind: Literal["diff", "command"]
    path: str | None = None
    uri: str | None = None
    """For diffs: the file's absolute file:// URI (path is relative to the workspace root)."""
    diff: str | None = None
    command: str | None = None
    cwd: str | None = None


class PermissionParams(Wire):
    session_id: str
    turn_id: str
    tool_call_id: str
    tool: str
    level: Literal["safe", "sensitive", "dangerous"]
    title: str
    arguments: Any
    preview: Preview | None = None


class PermissionResult(Wire):
    decision: Literal["allow_once", "allow_always", "reject"]


class AskUserParams(Wire):
    session_id: str
    turn_id: str
    question: str
    options: list[str] | None = None


class AskUserResult(Wire):
    answer: str | None = None
    cancelled: bool | None = None


def json_schema() -> dict[str, Any]:
    """JSON Schema of every wire type, for the Lua and TypeScript clients."""
    models = [
        SessionNewParams, SessionIdParams, PromptParams, SetEnabledParams, ModelsListParams, ModelsSetParams,
        SessionInfo, SessionList, SessionLoadResult, PromptResult, CancelResult, ToolList, CommandList,
        ModelsResult, UpdateParams, PermissionParams, PermissionResult, AskUserParams, AskUserResult,
    ]
    return {m.__name__: m.model_json_schema(by_alias=True) for m in models}


if __name__ == "__main__":
    import json
    import sys

    json.dump(json_schema(), sys.stdout, indent=2)
    sys.stdout.write("\n")
