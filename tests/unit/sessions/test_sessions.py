"""Sessions across Apps on one store, in-process: a torn last line, a tool result lost mid-file,
settings and grants that survive. test_sessions_e2e.py keeps the process-level cases (restart,
kill -9 mid-turn, two daemons and their lock)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from inproc_app import InProc, SharedScript


def session_file(tmp_path: Path) -> Path:
    [path] = (tmp_path / "data" / "sessions").glob("*/*.jsonl")
    return path


def reopen(workspace: Path, tmp_path: Path, script: SharedScript, extra: dict[str, Any] | None = None) -> InProc:
    return InProc(workspace, tmp_path / "data", extra, script)


async def test_torn_last_line_is_skipped(tmp_path: Path, workspace: Path, caplog: pytest.LogCaptureFixture) -> None:
    script = SharedScript([{"text": "one"}])
    a = reopen(workspace, tmp_path, script)
    sid = a.new_session()
    await a.prompt(sid, "first")
    await a.close()
    with session_file(tmp_path).open("ab") as f:
        f.write(b'{"t": "msg", "m": {"role": "user", "content": "half wri')
    b = reopen(workspace, tmp_path, script)
    with caplog.at_level(logging.WARNING):
        assert [e.text for e in (await b.app.load(sid)).transcript()] == ["first", "one"]
    assert "torn last line" in caplog.text
    script.add({"text": "two"})
    await b.prompt(sid, "second")
    await b.close()
    c = reopen(workspace, tmp_path, script)
    assert [e.text for e in c.app.peek(sid).transcript()] == ["first", "one", "second", "two"]
    await c.close()


async def test_an_unanswered_tool_call_in_the_middle_is_repaired(tmp_path: Path, workspace: Path) -> None:
    script = SharedScript([{"tool_calls": [{"name": "list_directory", "arguments": {}}]}, {"text": "one"},
                           {"text": "two"}])
    a = reopen(workspace, tmp_path, script)
    sid = a.new_session()
    await a.prompt(sid, "look")
    await a.prompt(sid, "again")
    await a.close()
    path = session_file(tmp_path)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(line for line in lines if '"role": "tool"' not in line))  # a result lost mid-file
    b = reopen(workspace, tmp_path, script)
    script.add({"text": "three"})
    assert (await b.prompt(sid, "go on")).result.text == "three"
    roles = [m["role"] for m in script.calls[-1]["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user", "assistant", "user"]
    assert "interrupted" in script.calls[-1]["messages"][3]["content"]
    assert '"role": "tool"' in path.read_text()  # the repair was written back
    await b.close()


async def test_settings_and_grants_are_persisted(tmp_path: Path, workspace: Path) -> None:
    script = SharedScript()
    a = reopen(workspace, tmp_path, script)
    a.frontend.default_decision = "allow_always"
    sid = a.new_session()
    a.app.set_tool_enabled(sid, "run_command", True)
    a.app.set_tool_enabled(sid, "list_directory", False)
    a.app.set_model(sid, None, "fast")
    script.add({"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "1"}}]},
               {"text": "ok"})
    await a.prompt(sid, "write")
    assert len(a.frontend.requests) == 1
    await a.close()

    b = reopen(workspace, tmp_path, script)
    s = b.app.peek(sid)
    assert s.tools.is_enabled("run_command") and not s.tools.is_enabled("list_directory")
    assert b.app.models_info(sid).model == "fake-fast"
    script.add({"tool_calls": [{"name": "write_file", "arguments": {"path": "b.txt", "content": "2"}}]},
               {"text": "ok"})
    await b.prompt(sid, "write again")
    assert b.frontend.requests == []  # "always allow" survived the restart
    assert (workspace / "b.txt").read_text() == "2"
    assert script.calls[-1]["model"] == "fake-fast"
    await b.close()
