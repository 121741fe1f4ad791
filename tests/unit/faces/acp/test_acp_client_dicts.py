"""The ACP face builds what it sends as plain dicts (acp_client.py), not SDK models: every dict a
rich turn emits must be what the SDK's own models make of it (validated, then dumped as the SDK's
connection dumps params), key order included, so the dicts cannot drift from the schema. Replies
are read from dicts: malformed ones are a refusal, not a crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from acp import schema
from acp.utils import serialize_params
from inproc_app import InProc

from toycoder_daemon.core.ports import (
    ChangedFile,
    CommandRequest,
    Compacted,
    FilesChanged,
    PermissionRequest,
    PermissionResolved,
    PlanEntry,
    PlanUpdated,
    RetryScheduled,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    UsageReport,
)
from toycoder_daemon.faces.acp import fs as acp_fs
from toycoder_daemon.faces.acp import sessions as acp_sessions
from toycoder_daemon.faces.acp.content import commands_update, replay
from toycoder_daemon.faces.acp.frontend import AcpFrontend
from toycoder_daemon.faces.acp.terminal import Terminals
from toycoder_daemon.sessions.session import TranscriptEntry

MODELS: dict[str, type[Any]] = {
    "session/update": schema.SessionNotification,
    "session/request_permission": schema.RequestPermissionRequest,
    "elicitation/create": schema.CreateFormSessionElicitationRequest,
    "fs/read_text_file": schema.ReadTextFileRequest,
    "fs/write_text_file": schema.WriteTextFileRequest,
    "terminal/create": schema.CreateTerminalRequest,
    "terminal/output": schema.TerminalOutputRequest,
    "terminal/wait_for_exit": schema.WaitForTerminalExitRequest,
    "terminal/kill": schema.KillTerminalRequest,
    "terminal/release": schema.ReleaseTerminalRequest,
}

DIFF = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n+y = 3\n"
ANSWERS: dict[str, Any] = {
    "session/request_permission": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
    "elicitation/create": {"action": "accept", "content": {"answer": "blue"}},
    "fs/read_text_file": {"content": "x = 1\n"},
    "terminal/create": {"terminalId": "term-1"},
    "terminal/output": {"output": "ran\n", "truncated": False, "exitStatus": {"exitCode": 0}},
    "terminal/wait_for_exit": {"exitCode": 0},
}


class Recorder:
    """acp_client.RawClient: records every (method, params); answers from ANSWERS (or `answers`)."""

    def __init__(self, answers: dict[str, Any] | None = None) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.answers = answers or ANSWERS

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        self.sent.append((method, params))

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.sent.append((method, params))
        return self.answers.get(method)


def as_the_sdk_dumps(method: str, params: dict[str, Any]) -> str:
    return json.dumps(serialize_params(MODELS[method].model_validate(params)))


async def test_every_dict_of_a_rich_turn_is_what_the_sdk_models_make_of_it(tmp_path: Path, workspace: Path) -> None:
    p = InProc(workspace, tmp_path / "data")
    try:
        client = Recorder()
        f = AcpFrontend(client, p.app, "s1", can_elicit=True, can_read=True, can_write=True,
                        terminals=Terminals(usable=True))
        f.emit(TextDelta("thinking "))
        f.emit(TextDelta("aloud", parent_tool_call_id="sub"))
        f.emit(ToolCallStarted("c1", "edit_file", "edit_file calc.py", {"path": "calc.py", "n": None}, "sensitive",
                               will_ask=True))
        f.emit(ToolCallStarted("c2", "run_command", "run_command ls", {"command": "ls"}, "sensitive",
                               parent_tool_call_id="c1"))
        assert await f.confirm(PermissionRequest("c1", "edit_file", "sensitive", "edit_file calc.py",
                                                 {"path": "calc.py"}, {"kind": "diff", "path": "calc.py",
                                                                       "diff": DIFF})) == "allow_once"
        assert await f.confirm(PermissionRequest("c2", "run_command", "sensitive", "run ls", {"command": "ls"},
                                                 {"kind": "command", "command": "ls", "cwd": "."})) == "allow_once"
        assert await f.editor_text(workspace / "calc.py") == "x = 1\n"
        assert (await f.apply_edit(workspace / "calc.py", "x = 1\n", "x = 2\n")).applied
        runner = f.command_runner()
        assert runner is not None
        ran = await runner.run(CommandRequest("c2", ("/bin/sh", "-c", "ls"), {"PATH": "/bin"}, "/", 5.0, 100))
        assert ran.output == "ran\n" and ran.exit_code == 0
        f.emit(PermissionResolved("c1", "allow_once", "Neovim"))
        f.emit(PermissionResolved("c2", "reject", "another editor"))
        f.emit(ToolCallFinished("c2", "completed", "ran\n"))
        f.emit(ToolCallFinished("c1", "completed", "edited"))
        f.emit(ToolCallFinished("c3", "failed", "no such file"))
        f.emit(PlanUpdated((PlanEntry("read", "high", "completed"), PlanEntry("write", "low", "pending"))))
        f.emit(UsageReport(10, 5, 15))
        f.emit(RetryScheduled(1, 0.5, "HTTP 500"))
        f.emit(Compacted("summary", 40, 3))
        f.emit(FilesChanged("t1", (ChangedFile("calc.py", "file:///calc.py", "modified", 1, 1),)))
        assert await f.ask("colour?", ["blue", "red"]) == "blue"
        assert await f.ask("name?", None) == "blue"
        f.emit(TextDelta("done"))
        await f.drain()
        s = p.app.new_session("a title")
        for update in replay([TranscriptEntry("user", "hi"), TranscriptEntry("assistant", "hello"),
                              TranscriptEntry("tool_call", '{"path": "calc.py"}', name="read_file",
                                              tool_call_id="c9"),
                              TranscriptEntry("tool", "x = 1", tool_call_id="c9", status="completed")], p.app) \
                + [commands_update(p.app.command_rows(s.id)[0])] + acp_sessions.opened({}, s):
            await client.notify("session/update", {"sessionId": "s1", "update": update})
    finally:
        await p.close()
    kinds = {params["update"]["sessionUpdate"] for method, params in client.sent if method == "session/update"}
    assert kinds == {"agent_message_chunk", "agent_thought_chunk", "user_message_chunk", "tool_call",
                     "tool_call_update", "plan", "usage_update", "available_commands_update",
                     "session_info_update"}
    assert {m for m, _ in client.sent} == set(MODELS) - {"terminal/kill"}
    contents = [c["type"] for _, params in client.sent for c in params.get("update", {}).get("content", [])
                if isinstance(c, dict) and "type" in c and params["update"]["sessionUpdate"] == "tool_call_update"]
    assert {"diff", "terminal", "content"} <= set(contents)
    for method, params in client.sent:
        assert as_the_sdk_dumps(method, params) == json.dumps(params), method


@pytest.mark.parametrize("answer, decision", [
    ({"outcome": {"outcome": "selected", "optionId": "allow_always"}}, "allow_always"),
    ({"outcome": {"outcome": "selected", "optionId": "reject_once"}}, "reject"),
    ({"outcome": {"outcome": "cancelled"}}, "reject"),
    ({"outcome": {"outcome": "selected"}}, "reject"),  # no optionId
    ({"outcome": {"outcome": "maybe"}}, "reject"),
    ({"outcome": "selected"}, "reject"),
    ([], "reject"),
    (None, "reject"),
])
async def test_a_permission_answer_is_read_from_its_dict_and_a_malformed_one_is_no(
        tmp_path: Path, answer: Any, decision: str) -> None:
    from types import SimpleNamespace

    app = SimpleNamespace(config=SimpleNamespace(permissions=SimpleNamespace(timeout_seconds=30.0)),
                          tools={}, workspace=SimpleNamespace(root=tmp_path))
    f = AcpFrontend(Recorder({"session/request_permission": answer, "elicitation/create": answer}), app,  # type: ignore[arg-type]
                    "s1", can_elicit=True)
    assert await f.confirm(PermissionRequest("c1", "write_file", "sensitive", "write f", {"path": "f"})) == decision
    assert await f.ask("q?", None) is None  # none of these is an accepted elicitation


@pytest.mark.parametrize("answer", [{"content": None}, {"content": ["x"]}, "x", None])
async def test_a_read_answer_without_text_is_unknown(answer: Any) -> None:
    from toycoder_daemon.core.ports import EditorTextUnknown

    with pytest.raises(EditorTextUnknown, match="no text"):
        await acp_fs.read_text(Recorder({"fs/read_text_file": answer}), "s1", Path("/w/a.py"))

