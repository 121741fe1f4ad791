"""Golden JSON fixtures lock the wire shapes; pydantic wire types must accept what the daemon sends.

Regenerate after a deliberate protocol change with UPDATE_GOLDEN=1 (and update docs/protocol.md).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from toycoder_daemon.core.ports import (
    Compacted,
    HookRan,
    McpWaiting,
    RetryScheduled,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    UsageReport,
)
from toycoder_daemon.faces.lsp.mapping import transcript_entry, update_payload
from toycoder_daemon.sessions.conversation import Conversation
from toycoder_daemon.sessions.session import Session
from toycoder_daemon.tools.registry import ToolRegistry
from toycoder_daemon.wire import protocol as wire

GOLDEN = Path(__file__).parent

EVENTS = {
    "update_text_delta": TextDelta("Hello"),
    "update_tool_call": ToolCallStarted("call_1", "read_file", "read_file src/app.py", {"path": "src/app.py"}, "safe"),
    "update_tool_result": ToolCallFinished("call_1", "denied", "denied: the user did not allow it"),
    "update_tool_result_changed": ToolCallFinished("call_2", "completed", "edited src/app.py: replaced 1 occurrence",
                                                   ("/work/project/src/app.py",)),
    "update_usage": UsageReport(120, 30, 150),
    "update_retry": RetryScheduled(1, 0.5, "HTTP 429: slow down"),
    "update_compaction": Compacted("summary", 52, 9),
    "update_mcp_wait": McpWaiting("waiting", ("github", "db")),
    "update_mcp_wait_done": McpWaiting("done", ("github", "db"), ("db",)),
    "update_subagent_text": TextDelta("step 1", parent_tool_call_id="call_9"),
    "update_hook": HookRan("PreToolUse", "ruff check", "failed", 12, "exit code 127: ruff: not found", "workspace"),
}


def check(name: str, value: dict) -> None:
    path = GOLDEN / f"{name}.json"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")
    assert path.exists(), f"missing golden file {path}; run with UPDATE_GOLDEN=1 once"
    assert value == json.loads(path.read_text())


@pytest.mark.parametrize("name", sorted(EVENTS))
def test_update_notifications(name: str) -> None:
    event = EVENTS[name]
    params = wire.UpdateParams(session_id="s1", turn_id="s1-1", parent_tool_call_id=event.parent_tool_call_id,
                               update=update_payload(event)).dump()
    check(name, params)
    assert wire.UpdateParams.model_validate(params).dump() == params


def test_permission_request_params() -> None:
    params = wire.PermissionParams(
        session_id="s1", turn_id="s1-2", tool_call_id="call_3", tool="edit_file", level="sensitive",
        title="edit_file src/app.py", arguments={"path": "src/app.py", "old_string": "a", "new_string": "b"},
        preview=wire.DiffPreview(path="src/app.py", diff="--- a/src/app.py\n+++ b/src/app.py\n"),
    ).dump()
    check("permission_request", params)
    assert wire.PermissionResult.model_validate({"decision": "allow_always"}).decision == "allow_always"
    with pytest.raises(ValueError):
        wire.PermissionResult.model_validate({"decision": "sure"})


def test_workspace_trust_params() -> None:
    from toycoder_daemon.core.ports import TrustRequest
    from toycoder_daemon.faces.lsp.mapping import trust_params

    params = trust_params(TrustRequest("/work/project", "/work/project/.toycoder/settings.yaml", ("make lint",),
                                       ("srv: npx srv; env NODE_OPTIONS=--inspect",), ("run_command(make *)",),
                                       ("repo_planner: tools read_file; model fast",))).dump()
    check("workspace_trust", params)
    assert wire.WorkspaceTrustResult.model_validate({"decision": "once"}).decision == "once"
    with pytest.raises(ValueError):
        wire.WorkspaceTrustResult.model_validate({"decision": "sure"})


def test_session_transcript_shape() -> None:
    s = Session(id="abc", title="t", tools=ToolRegistry())
    s.messages = Conversation("sys", [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"a\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "1\thello", "status": "completed"},
        {"role": "assistant", "content": "It says hello."},
    ])
    transcript = [transcript_entry(e).dump() for e in s.transcript()]
    check("transcript", {"transcript": transcript})


def test_json_schema_export_covers_the_contract() -> None:
    schema = wire.json_schema()
    assert {"PromptParams", "UpdateParams", "PermissionParams", "AskUserParams", "PromptResult"} <= set(schema)
    assert schema["PromptParams"]["required"] == ["sessionId", "text"]
    assert schema["methods"]["toycoder/prompt"] == {"direction": "client->daemon", "params": "PromptParams",
                                                    "result": "PromptResult"}
