"""The permission gate in-process: diff previews, decisions, allow-always per session, rejection,
an edit that cannot apply, cancel while asking. test_permission_e2e.py keeps the wire round trip
(the editor's request, fallbacks, late replies)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from helpers import AllowAll, write_call
from inproc_app import InProc, eventually

from toycoder_daemon.core.ports import ToolCallFinished
from toycoder_daemon.tools.base import ToolContext
from toycoder_daemon.tools.files.edit import edit_file
from toycoder_daemon.tools.files.read import read_file
from toycoder_daemon.tools.registry import ToolRegistry
from toycoder_daemon.tools.workspace import Workspace


def results(p: InProc, sid: str) -> list[ToolCallFinished]:
    return [e for e in p.frontend.of(sid) if isinstance(e, ToolCallFinished)]


async def test_write_asks_with_a_diff_and_allow_once_asks_again(inproc, workspace: Path) -> None:
    p: InProc = inproc()
    p.frontend.default_decision = "allow_once"
    p.script.add(write_call("README.md", "# Demo\nA bigger project.\n"), write_call("notes/new.txt", "hi\n"),
                 {"text": "done"})
    sid = p.new_session()
    assert (await p.prompt(sid, "edit")).result.text == "done"
    asked = p.frontend.requests
    assert len(asked) == 2
    assert asked[0].tool == "write_file" and asked[0].level == "sensitive"
    assert asked[0].preview is not None and asked[0].preview["kind"] == "diff"
    assert "-A tiny project." in asked[0].preview["diff"] and "+A bigger project." in asked[0].preview["diff"]
    assert asked[1].preview is not None and asked[1].preview["diff"].startswith("--- /dev/null")
    assert (workspace / "README.md").read_text() == "# Demo\nA bigger project.\n"
    assert (workspace / "notes" / "new.txt").read_text() == "hi\n"
    assert [r.status for r in results(p, sid)] == ["completed", "completed"]
    assert [r.changed_paths for r in results(p, sid)] == [(str((workspace / "README.md").resolve()),),
                                                          (str((workspace / "notes" / "new.txt").resolve()),)]


async def test_allow_always_covers_the_tool_for_this_session_only(inproc, workspace: Path) -> None:
    p: InProc = inproc()
    p.frontend.default_decision = "allow_always"
    p.script.add(write_call("a.txt", "1"), write_call("b.txt", "2"), {"text": "ok"})
    sid = p.new_session()
    await p.prompt(sid, "go")
    assert len(p.frontend.requests) == 1 and (workspace / "b.txt").read_text() == "2"
    p.script.add(write_call("c.txt", "3"), {"text": "ok"})
    await p.prompt(p.new_session(), "go")
    assert len(p.frontend.requests) == 2


async def test_reject_is_an_observation_and_nothing_is_written(inproc, workspace: Path) -> None:
    p: InProc = inproc()
    p.script.add(write_call("src/app.py", "deleted"), {"text": "understood"})
    sid = p.new_session()
    await p.prompt(sid, "go")
    assert (workspace / "src" / "app.py").read_text().startswith("def add")
    assert results(p, sid)[0].status == "denied" and results(p, sid)[0].changed_paths == ()
    tool_msg = [m for m in p.script.calls[1]["messages"] if m["role"] == "tool"][0]
    assert "did not allow" in tool_msg["content"]


async def test_allow_rule_answers_without_asking(inproc, workspace: Path) -> None:
    p: InProc = inproc({"permissions": {"allow": ["write_file(docs/**)"], "deny": ["write_file(secret*)"]}})
    p.script.add(write_call("docs/a.md", "a"), write_call("secret.txt", "s"), {"text": "ok"})
    sid = p.new_session()
    await p.prompt(sid, "go")
    assert p.frontend.requests == []
    assert (workspace / "docs" / "a.md").read_text() == "a" and not (workspace / "secret.txt").exists()
    assert [r.status for r in results(p, sid)] == ["completed", "denied"]


async def test_edit_that_cannot_apply_fails_without_asking(inproc) -> None:
    p: InProc = inproc()
    p.script.add({"tool_calls": [{"name": "edit_file", "arguments": {
        "path": "src/app.py", "old_string": "def add(a,b):", "new_string": "def plus(a, b):"}}]}, {"text": "retrying"})
    sid = p.new_session()
    await p.prompt(sid, "rename")
    assert p.frontend.requests == []
    out = results(p, sid)[0]
    assert out.status == "failed" and "not found" in out.output and "def add(a, b):" in out.output


async def test_cancel_while_waiting_for_permission(inproc, workspace: Path) -> None:
    p: InProc = inproc()
    p.frontend.hold = asyncio.Event()  # the person never answers
    p.script.add(write_call("late.txt", "late"))
    sid = p.new_session()
    turn = p.start_prompt(sid, "go")
    await eventually(lambda: bool(p.frontend.requests), "the permission question")
    assert p.app.cancel(sid)
    assert (await asyncio.wait_for(turn, 10)).result.stop_reason == "cancelled"
    assert not (workspace / "late.txt").exists()
    assert results(p, sid)[0].status == "cancelled"
    p.script.add({"text": "still alive"})
    assert (await p.prompt(sid, "again")).result.text == "still alive"
    assert p.script.violations == []


async def test_a_run_command_call_is_judged_once(inproc, monkeypatch) -> None:
    # The gate's analysis of a call (a deny rule on run_command judges the programs the command runs;
    # the sandbox escalation check) ran for every question about one call: announcing it
    # (will_ask), before its preview and in the gate's check, twice each. One call is judged once.
    from toycoder_daemon.tools import permission
    from toycoder_daemon.tools.shell import programs as shell_programs

    analysed: list[str] = []
    escalations: list[dict[str, object]] = []
    real_invocations, real_escalates = shell_programs.invocations, permission._escalates

    def counted_invocations(line, cwd=None, depth=0):  # type: ignore[no-untyped-def]
        if depth == 0:
            analysed.append(line)
        return real_invocations(line, cwd, depth)

    def counted_escalates(args, ctx):  # type: ignore[no-untyped-def]
        escalations.append(args)
        return real_escalates(args, ctx)

    monkeypatch.setattr(shell_programs, "invocations", counted_invocations)
    monkeypatch.setattr(permission, "_escalates", counted_escalates)
    p: InProc = inproc({"tools": {"enabled": ["run_command"]}, "permissions": {"deny": ["run_command(rm *)"]}})
    p.script.add({"tool_calls": [{"name": "run_command", "arguments": {"command": "echo hi"}}]}, {"text": "ok"})
    sid = p.new_session()
    await p.prompt(sid, "say hi")
    assert [r.tool for r in p.frontend.requests] == ["run_command"]  # asked once, rejected
    assert [r.status for r in results(p, sid)] == ["denied"]
    assert analysed == ["echo hi"]
    assert escalations == [{"command": "echo hi"}]


async def test_the_registry_reads_its_tool_sources_once_per_question(tmp_path: Path) -> None:
    # the tools on offer (each model step) and one call's look-up each take one table of the tools,
    # not one per tool or per check: an MCP server's tools could change between two
    reg = ToolRegistry()
    reg.register(edit_file)
    asked: list[int] = []
    reg.add_source(lambda: asked.append(1) or [read_file])
    assert [s["function"]["name"] for s in reg.schemas()] == ["edit_file", "read_file"]
    assert len(asked) == 1
    (tmp_path / "a.txt").write_text("a\n")
    asked.clear()
    args = json.dumps({"path": "a.txt", "old_string": "a", "new_string": "b"})
    out = await reg.dispatch("edit_file", args, ToolContext(Workspace(tmp_path), AllowAll(), "c1"))
    assert out.status == "completed" and (tmp_path / "a.txt").read_text() == "b\n"
    assert len(asked) == 1
