"""The ACP client as a turn sees it: JSON-RPC notifications and requests with plain-dict params,
and the dicts a turn sends, without the SDK's models (no pydantic work per update: a turn sends
many).

The dicts are what the SDK's connection sends for its models (`model_dump(mode="json",
by_alias=True, exclude_none=True, exclude_defaults=True)`), key order included; a test validates
every one through the SDK's own models. Replies are read from dicts: a malformed one raises
MalformedReply (a ValueError), an error reply ClientError.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from toycoder_daemon.core.ports import PlanEntry

SESSION_UPDATE = "session/update"
RESOURCE_NOT_FOUND = -32002
"""ACP's "resource not found": what we answer for an unknown session, what a client answers for a file it lacks."""


class RawClient(Protocol):
    """A JSON-RPC connection to the client: agent.SdkClient (over the SDK's Connection)."""

    async def notify(self, method: str, params: dict[str, Any]) -> None: ...

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """The reply's result; ClientError for an error reply."""
        ...


class ClientError(Exception):
    """The client answered a request with a JSON-RPC error (str() is its message)."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(message)
        self.code = code
        self.data = data


class MalformedReply(ValueError):
    """A success reply without what the request asks for."""


# ---- what a turn sends --------------------------------------------------------------------------

def text(value: str) -> dict[str, Any]:
    """A text content block."""
    return {"text": value, "type": "text"}


def chunk(value: str, kind: str = "agent_message_chunk") -> dict[str, Any]:
    """A text update: agent_message_chunk, agent_thought_chunk or user_message_chunk."""
    return {"content": text(value), "sessionUpdate": kind}


def text_content(value: str) -> dict[str, Any]:
    """Text as tool call content."""
    return {"content": text(value), "type": "content"}


def diff(path: str, old_text: str | None, new_text: str) -> dict[str, Any]:
    out: dict[str, Any] = {"path": path}
    if old_text is not None:
        out["oldText"] = old_text
    out["newText"] = new_text
    out["type"] = "diff"
    return out


def terminal(terminal_id: str) -> dict[str, Any]:
    return {"terminalId": terminal_id, "type": "terminal"}


def location(path: str, line: int | None = None) -> dict[str, Any]:
    return {"path": path} if line is None else {"path": path, "line": line}


def tool_call(tool_call_id: str, title: str, kind: str, status: str, raw_input: Any = None,
              locations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A `tool_call` update (the SDK's start_tool_call)."""
    out: dict[str, Any] = {"toolCallId": tool_call_id, "title": title, "kind": kind, "status": status}
    if locations is not None:
        out["locations"] = locations
    if raw_input is not None:
        out["rawInput"] = raw_input
    out["sessionUpdate"] = "tool_call"
    return out


def plan(entries: Iterable[PlanEntry]) -> dict[str, Any]:
    """A `plan` update: the whole plan (a turn's update_plan, or a replay's last entry)."""
    return {"entries": [{"content": e.content, "priority": e.priority, "status": e.status} for e in entries],
            "sessionUpdate": "plan"}


def tool_call_update(tool_call_id: str, status: str, content: list[dict[str, Any]] | None = None,
                     raw_output: Any = None) -> dict[str, Any]:
    """A `tool_call_update` (the SDK's update_tool_call)."""
    out: dict[str, Any] = {"toolCallId": tool_call_id, "status": status}
    if content is not None:
        out["content"] = content
    if raw_output is not None:
        out["rawOutput"] = raw_output
    out["sessionUpdate"] = "tool_call_update"
    return out


def permission_call(tool_call_id: str, title: str, kind: str, raw_input: Any, content: list[dict[str, Any]],
                    locations: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The `toolCall` of session/request_permission (a ToolCallUpdate, status pending)."""
    out: dict[str, Any] = {"toolCallId": tool_call_id, "kind": kind, "status": "pending", "title": title}
    if content:
        out["content"] = content
    if locations is not None:
        out["locations"] = locations
    if raw_input is not None:
        out["rawInput"] = raw_input
    return out


# ---- what the client answers --------------------------------------------------------------------

def field(result: Any, key: str, kinds: type | tuple[type, ...], what: str, *, optional: bool = False) -> Any:
    """result[key] when it is of `kinds` (bool is not an int); MalformedReply otherwise."""
    if not isinstance(result, dict):
        raise MalformedReply(f"{what}: the result is not an object: {str(result)[:100]}")
    value = result.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in _tuple(kinds)):
        raise MalformedReply(f"{what}: {key} is not a {_names(kinds)}: {str(value)[:100]}")
    return value


def _tuple(kinds: type | tuple[type, ...]) -> tuple[type, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def _names(kinds: type | tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in _tuple(kinds))


def permission_choice(result: Any) -> str:
    """The optionId chosen in a session/request_permission answer, or "cancelled"."""
    outcome = field(result, "outcome", dict, "session/request_permission")
    kind = outcome.get("outcome")
    if kind == "cancelled":
        return "cancelled"
    if kind == "selected":
        return str(field(outcome, "optionId", str, "session/request_permission outcome"))
    raise MalformedReply(f"session/request_permission: unknown outcome {str(kind)[:100]}")
