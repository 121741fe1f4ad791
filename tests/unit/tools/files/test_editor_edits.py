"""Edits through the editor and "what was approved is what is written", in-process (issue 11): a
file open in an editor that can apply edits is changed through it (applied, refused), one that
cannot keeps the refusal under unsaved work; a base that changes while the permission question is
open fails the call and leaves the file alone. Versioned edits (documentChanges) run through the
LSP face in-process (tests/inproc.py). test_undo_e2e.py keeps the wire round trips."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from helpers import new_session, tool_results
from inproc_app import InProc, eventually
from rpc import Daemon

from toycoder_daemon.core.ports import EditApplied, PermissionRequest, ToolCallFinished
from toycoder_daemon.faces.lsp.mapping import workspace_edit
from toycoder_daemon.testing.fake_llm import FakeLLM
from toycoder_daemon.tools.workspace import Workspace

CALC = "def add(a, b):\n    return a + b\n"


def edit(path: str, old: str, new: str) -> dict:
    return {"tool_calls": [{"name": "edit_file", "arguments": {"path": path, "old_string": old, "new_string": new}}]}


def results(p: InProc, sid: str) -> list[ToolCallFinished]:
    return [e for e in p.frontend.of(sid) if isinstance(e, ToolCallFinished)]


async def one_call(p: InProc, call: dict) -> ToolCallFinished:
    p.script.add(call, {"text": "ok"})
    sid = p.new_session()
    await p.prompt(sid, "change it")
    [r] = results(p, sid)
    return r


def setup(inproc, workspace: Path, buffer: str | None = None, editor: EditApplied | None = None) -> tuple[InProc, Path]:
    p: InProc = inproc()
    p.frontend.default_decision = "allow_once"
    calc = (workspace / "calc.py").resolve()
    calc.write_text(CALC)
    if buffer is not None:
        p.app.workspace.open_documents[calc] = buffer
    p.frontend.editor = editor
    return p, calc


async def test_a_file_changed_while_approval_was_pending_is_not_written(inproc, workspace: Path) -> None:
    p, calc = setup(inproc, workspace)

    def person_edits(_: PermissionRequest) -> None:
        calc.write_text(CALC + "# typed meanwhile\n")

    p.frontend.on_confirm = person_edits
    r = await one_call(p, edit("calc.py", "a + b", "b + a"))
    assert r.status == "failed" and "calc.py changed while waiting for approval; read it again" in r.output
    assert calc.read_text() == CALC + "# typed meanwhile\n" and r.changed_paths == ()


async def test_a_write_file_over_a_file_created_meanwhile_is_not_written(inproc, workspace: Path) -> None:
    p, _ = setup(inproc, workspace)
    new = workspace / "new.py"
    p.frontend.on_confirm = lambda _: new.write_text("someone else's\n")
    r = await one_call(p, {"tool_calls": [{"name": "write_file", "arguments": {"path": "new.py", "content": "x\n"}}]})
    assert r.status == "failed" and "changed while waiting for approval" in r.output
    assert new.read_text() == "someone else's\n"


async def test_an_open_file_is_edited_through_the_editor_from_its_buffer(inproc, workspace: Path) -> None:
    unsaved = CALC + "# unsaved note\n"
    p, calc = setup(inproc, workspace, buffer=unsaved, editor=EditApplied(True))
    r = await one_call(p, edit("calc.py", "a + b", "b + a"))
    assert r.status == "completed" and "in the editor's buffer" in r.output
    assert p.frontend.edits == [(calc, unsaved, unsaved.replace("a + b", "b + a"))]
    assert p.app.workspace.open_documents[calc] == unsaved.replace("a + b", "b + a")
    assert calc.read_text() == CALC  # the daemon did not write the disk: the editor owns the buffer
    assert r.changed_paths == ()  # nothing for editors to reload from disk
    diff = p.frontend.requests[0].preview
    assert diff is not None and "+# unsaved note" not in diff["diff"] and "+    return b + a" in diff["diff"]
    # the checkpoint started from the buffer (the person's unsaved note included)
    [cp] = p.app.checkpoint_list(p.app.list_sessions()[0].id)
    assert cp["files"] == [{"path": "calc.py", "status": "modified", "added": 1, "removed": 1, "inEditor": True}]


async def test_a_refused_apply_edit_is_a_failed_call_with_the_reason(inproc, workspace: Path) -> None:
    p, calc = setup(inproc, workspace, buffer=CALC, editor=EditApplied(False, "the buffer is read-only"))
    r = await one_call(p, edit("calc.py", "a + b", "b + a"))
    assert r.status == "failed" and "the buffer is read-only" in r.output and "did not apply" in r.output
    assert p.app.workspace.open_documents[calc] == CALC and calc.read_text() == CALC


async def test_a_buffer_changed_while_approval_was_pending_is_not_edited(inproc, workspace: Path) -> None:
    p, calc = setup(inproc, workspace, buffer=CALC, editor=EditApplied(True))
    p.frontend.on_confirm = lambda _: p.app.workspace.open_documents.__setitem__(calc, CALC + "# typing\n")
    r = await one_call(p, edit("calc.py", "a + b", "b + a"))
    assert r.status == "failed" and "changed while waiting for approval" in r.output
    assert p.frontend.edits == [] and calc.read_text() == CALC


async def test_without_the_capability_unsaved_buffers_are_refused_and_clean_ones_written(
        inproc, workspace: Path) -> None:
    p, calc = setup(inproc, workspace, buffer=CALC + "# unsaved\n")
    r = await one_call(p, edit("calc.py", "a + b", "b + a"))
    assert r.status == "failed" and "unsaved changes" in r.output and calc.read_text() == CALC
    p.app.workspace.open_documents[calc] = CALC
    p.script.add(edit("calc.py", "a + b", "b + a"), {"text": "ok"})
    sid = p.new_session()
    await p.prompt(sid, "again")
    [r] = results(p, sid)
    assert r.status == "completed" and "editor" not in r.output and "b + a" in calc.read_text()
    assert r.changed_paths == (str(calc),)


async def test_cancelling_while_the_editor_applies_still_records_the_edit(inproc, workspace: Path) -> None:
    p, calc = setup(inproc, workspace, buffer=CALC, editor=EditApplied(True))
    p.frontend.edit_hold = asyncio.Event()
    p.script.add(edit("calc.py", "a + b", "b + a"), {"text": "ok"})
    sid = p.new_session()
    turn = p.start_prompt(sid, "edit")
    await eventually(lambda: bool(p.frontend.edits), "the edit to reach the editor")
    p.app.cancel(sid)
    p.frontend.edit_hold.set()  # the editor applies it after the cancel
    assert (await asyncio.wait_for(turn, 10)).result.stop_reason == "cancelled"
    assert p.app.workspace.open_documents[calc] == CALC.replace("a + b", "b + a")
    [cp] = p.app.checkpoint_list(sid)
    assert cp["files"][0]["status"] == "modified"


def test_the_workspace_edit_replaces_only_what_differs_in_utf16_positions() -> None:
    before = "héllo 😀 wörld\nline two\nend\n"
    after = "héllo 😀 there\nline two\nend\n"
    edit = workspace_edit("file:///x.py", before, after)
    [change] = edit["changes"]["file:///x.py"]
    # "héllo 😀 " is 9 UTF-16 units (the emoji takes two)
    assert change == {"range": {"start": {"line": 0, "character": 9}, "end": {"line": 0, "character": 14}},
                      "newText": "there"}
    whole = workspace_edit("file:///x.py", "a\n", "a\nb\n")["changes"]["file:///x.py"][0]
    assert whole == {"range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 0}},
                     "newText": "b\n"}


# ---- versioned edits: documentChanges with the buffer's version, over the LSP face -----------------

async def editor(start_daemon: Any, workspace: Path, document_changes: bool) -> Daemon:
    """A daemon initialized by an editor that applies edits, declaring documentChanges or not."""
    d: Daemon = await start_daemon(init=False)
    caps: dict[str, Any] = {"experimental": {"toycoder": {"permissionRequest": True}},
                            "workspace": {"applyEdit": True, "workspaceEdit": {"documentChanges": document_changes}}}
    await d.call("initialize", {"processId": os.getpid(), "rootUri": workspace.resolve().as_uri(),
                                "capabilities": caps, "initializationOptions": {}})
    d.notify("initialized", {})
    d.handlers["toycoder/requestPermission"] = lambda p: {"decision": "allow_once"}
    return d


def change(d: Daemon, path: Path, version: int, text: str) -> None:
    d.notify("textDocument/didChange", {"textDocument": {"uri": path.as_uri(), "version": version},
                                        "contentChanges": [{"text": text}]})


async def edit_over_the_wire(d: Daemon, llm: FakeLLM, call: dict) -> dict:
    llm.add(call, {"text": "ok"})
    sid = await new_session(d)
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "change it"})
    [r] = tool_results(d, sid)
    return r


async def test_a_client_declaring_document_changes_gets_the_buffer_version_it_was_read_at(
        start_daemon, llm: FakeLLM, workspace: Path) -> None:
    calc = (workspace / "calc.py").resolve()
    calc.write_text(CALC)
    d = await editor(start_daemon, workspace, document_changes=True)
    sent: list[dict] = []

    def apply(params: dict) -> dict:  # an editor: applies it, then reports the change (version 5)
        sent.append(params["edit"])
        change(d, calc, 5, CALC.replace("a + b", "b + a"))
        return {"applied": True}

    d.handlers["workspace/applyEdit"] = apply
    d.notify("textDocument/didOpen", {"textDocument": {"uri": calc.as_uri(), "languageId": "python",
                                                       "version": 4, "text": CALC}})
    r = await edit_over_the_wire(d, llm, edit("calc.py", "a + b", "b + a"))
    assert r["status"] == "completed", r
    assert sent[0] == {"documentChanges": [{"textDocument": {"uri": calc.as_uri(), "version": 4}, "edits": [
        {"range": {"start": {"line": 1, "character": 11}, "end": {"line": 1, "character": 16}}, "newText": "b + a"}]}]}
    r = await edit_over_the_wire(d, llm, edit("calc.py", "b + a", "a * b"))
    assert r["status"] == "completed", r
    assert sent[1]["documentChanges"][0]["textDocument"]["version"] == 5  # the didChange's version


async def test_without_document_changes_the_edit_is_unversioned(start_daemon, llm: FakeLLM, workspace: Path) -> None:
    calc = (workspace / "calc.py").resolve()
    calc.write_text(CALC)
    d = await editor(start_daemon, workspace, document_changes=False)
    sent: list[dict] = []
    d.handlers["workspace/applyEdit"] = lambda p: sent.append(p["edit"]) or {"applied": True}
    d.notify("textDocument/didOpen", {"textDocument": {"uri": calc.as_uri(), "languageId": "python",
                                                       "version": 4, "text": CALC}})
    r = await edit_over_the_wire(d, llm, edit("calc.py", "a + b", "b + a"))
    assert r["status"] == "completed", r
    assert list(sent[0]) == ["changes"] and sent[0]["changes"][calc.as_uri()][0]["newText"] == "b + a"


async def test_an_edit_refused_as_stale_fails_the_call_asking_to_read_again(
        start_daemon, llm: FakeLLM, workspace: Path) -> None:
    calc = (workspace / "calc.py").resolve()
    calc.write_text(CALC)
    d = await editor(start_daemon, workspace, document_changes=True)
    typed = CALC + "# typed\n"

    def keystroke_then_refuse(params: dict) -> dict:  # the buffer moved on: its didChange, then the refusal
        assert params["edit"]["documentChanges"][0]["textDocument"]["version"] == 1
        change(d, calc, 2, typed)
        return {"applied": False, "failureReason": "calc.py changed in the editor; the edit was not applied"}

    d.handlers["workspace/applyEdit"] = keystroke_then_refuse
    d.notify("textDocument/didOpen", {"textDocument": {"uri": calc.as_uri(), "languageId": "python",
                                                       "version": 1, "text": CALC}})
    r = await edit_over_the_wire(d, llm, edit("calc.py", "a + b", "b + a"))
    assert r["status"] == "failed" and "calc.py changed in the editor while waiting; read it again" in r["output"], r
    assert calc.read_text() == CALC
    # a refusal with the buffer where it was is reported as the editor's reason, not as a change
    d.handlers["workspace/applyEdit"] = lambda p: {"applied": False, "failureReason": "the buffer is read-only"}
    r = await edit_over_the_wire(d, llm, edit("calc.py", "a + b", "b + a"))
    assert r["status"] == "failed" and r["output"].endswith(
        "the editor did not apply the change to calc.py: the buffer is read-only"), r


def test_a_version_holds_only_for_the_text_it_numbers(tmp_path: Path) -> None:
    w = Workspace(tmp_path)
    p = (tmp_path / "calc.py").resolve()
    w.set_document(p, CALC, 3)
    assert w.document_version(p, CALC) == 3 and w.document_state(p) == (CALC, 3)
    assert w.document_version(p, CALC + "x") is None  # an edit made against other text
    w.open_documents[p] = CALC + "x"  # the daemon's own write after an applied edit
    assert w.document_version(p, CALC + "x") is None and w.document_state(p) == (CALC + "x", None)
    w.set_document(p, CALC + "x", 4)  # its didChange
    assert w.document_version(p, CALC + "x") == 4
    w.close_document(p)
    assert w.document_state(p) == (None, None) and p not in w.document_versions
