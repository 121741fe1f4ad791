"""Checkpoints and edits through the editor over stdio (issue 11), one test per flow: three turns
(create, modify; delete by restoring a create) listed, the middle one restored with the later one,
a conflict and force, undoing the undo, the `changes` updates and the transcript; a restore while a
turn runs; workspace/applyEdit with a client that applies, one that refuses and one without the
capability; a file changed while the permission request is open. The flows in detail run
in-process (test_undo.py, test_editor_edits.py)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from helpers import new_session
from rpc import Daemon, RpcError

from toycoder_daemon.testing.fake_llm import FakeLLM

CALC = "def add(a, b):\n    return a + b\n"


def write(path: str, content: str) -> dict:
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}}]}


def edit(path: str, old: str, new: str) -> dict:
    return {"tool_calls": [{"name": "edit_file", "arguments": {"path": path, "old_string": old, "new_string": new}}]}


def of_kind(d: Daemon, sid: str, kind: str) -> list[dict]:
    return [u for u in d.updates(sid) if u["update"]["kind"] == kind]


async def test_checkpoints_restore_conflicts_force_and_undo_over_the_wire(daemon: Daemon, llm: FakeLLM,
                                                                          workspace: Path) -> None:
    daemon.handlers["toycoder/requestPermission"] = lambda p: {"decision": "allow_once"}
    llm.add(write("a.txt", "one\n"), {"text": "1"},
            edit("a.txt", "one", "one\ntwo"), write("b.txt", "bee\n"), {"text": "2"},
            edit("b.txt", "bee", "buzz"), {"text": "3"})
    sid = await new_session(daemon)
    turns = [(await daemon.call("toycoder/prompt", {"sessionId": sid, "text": t}))["turnId"]
             for t in ("make a", "grow a\nand make b", "buzz")]
    changes = of_kind(daemon, sid, "changes")
    assert [c["turnId"] for c in changes] == turns
    assert changes[1]["update"]["files"] == [
        {"path": "a.txt", "uri": (workspace / "a.txt").resolve().as_uri(), "status": "modified", "added": 1,
         "removed": 0},
        {"path": "b.txt", "uri": (workspace / "b.txt").resolve().as_uri(), "status": "created", "added": 1,
         "removed": 0}]
    listed = (await daemon.call("toycoder/checkpoint/list", {"sessionId": sid}))["checkpoints"]
    assert [(c["turnId"], c["prompt"]) for c in listed] == list(zip(turns, ["make a", "grow a", "buzz"], strict=True))
    assert listed[0]["files"] == [{"path": "a.txt", "status": "created", "added": 1, "removed": 0}]
    assert listed[0]["createdAt"].endswith("+00:00")

    # someone changes b.txt: restoring the middle turn puts a.txt back and leaves b.txt alone
    (workspace / "b.txt").write_text("mine\n")
    r = await daemon.call("toycoder/checkpoint/restore", {"sessionId": sid, "turnId": turns[1]})
    assert r["restored"] == ["a.txt"] and [c["path"] for c in r["conflicts"]] == ["b.txt"]
    assert "run_command" in r["note"] and (workspace / "a.txt").read_text() == "one\n"
    assert (workspace / "b.txt").read_text() == "mine\n"
    forced = await daemon.call("toycoder/checkpoint/restore",
                               {"sessionId": sid, "turnId": turns[1], "paths": ["b.txt"], "force": True})
    assert forced["restored"] == ["b.txt"] and not (workspace / "b.txt").exists()
    restore_changes = of_kind(daemon, sid, "changes")[-1]
    assert restore_changes["turnId"] == forced["turnId"]
    assert restore_changes["update"]["files"][0]["status"] == "deleted"
    # restoring the forced restore undoes it: b.txt is as it was just before (the person's text)
    back = await daemon.call("toycoder/checkpoint/restore", {"sessionId": sid, "turnId": forced["turnId"]})
    assert back["restored"] == ["b.txt"] and (workspace / "b.txt").read_text() == "mine\n"

    with pytest.raises(RpcError) as unknown:
        await daemon.call("toycoder/checkpoint/restore", {"sessionId": sid, "turnId": "nope"})
    assert unknown.value.code == -32602

    loaded = await daemon.call("toycoder/session/load", {"sessionId": sid})
    entries = [e for e in loaded["transcript"] if e["role"] == "changes"]
    assert [e["turnId"] for e in entries[:3]] == turns and entries[1]["text"] == "2 files changed +2 -0"
    assert entries[1]["files"][1]["uri"] == (workspace / "b.txt").resolve().as_uri()
    assert len(entries) == 6  # three turns, three restores that wrote


async def test_restore_is_refused_while_a_turn_runs(daemon: Daemon, llm: FakeLLM, workspace: Path) -> None:
    daemon.handlers["toycoder/requestPermission"] = lambda p: {"decision": "allow_once"}
    llm.add(write("a.txt", "one\n"), {"text": "1"}, {"text": ["slow", " reply"], "chunk_delay": 3600})
    sid = await new_session(daemon)
    turn = (await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "make a"}))["turnId"]
    running = asyncio.ensure_future(daemon.call("toycoder/prompt", {"sessionId": sid, "text": "talk"}, timeout=30))
    await daemon.wait_for(lambda: daemon.streamed_text(sid).endswith("slow"))
    with pytest.raises(RpcError) as busy:
        await daemon.call("toycoder/checkpoint/restore", {"sessionId": sid, "turnId": turn})
    assert busy.value.code == -32011 and (workspace / "a.txt").exists()
    await daemon.call("toycoder/cancel", {"sessionId": sid})
    assert (await running)["stopReason"] == "cancelled"


async def start_editor(start_daemon: Any, workspace: Path, apply_edit: bool) -> Daemon:
    """A daemon initialized by an editor that declares (or not) LSP's workspace.applyEdit."""
    d: Daemon = await start_daemon(init=False)
    caps: dict[str, Any] = {"experimental": {"toycoder": {"permissionRequest": True, "askUser": True}}}
    if apply_edit:
        caps["workspace"] = {"applyEdit": True}
    await d.call("initialize", {"processId": os.getpid(), "rootUri": workspace.resolve().as_uri(),
                                "capabilities": caps, "initializationOptions": {}})
    d.notify("initialized", {})
    d.handlers["toycoder/requestPermission"] = lambda p: {"decision": "allow_once"}
    return d


def open_buffer(d: Daemon, path: Path, text: str) -> None:
    d.notify("textDocument/didOpen", {"textDocument": {"uri": path.resolve().as_uri(), "languageId": "python",
                                                       "version": 1, "text": text}})


async def test_edits_to_open_buffers_go_through_apply_edit(start_daemon, llm: FakeLLM, workspace: Path) -> None:
    calc = workspace / "calc.py"
    calc.write_text(CALC)
    unsaved = CALC + "# unsaved\n"
    # an editor that applies
    d = await start_editor(start_daemon, workspace, apply_edit=True)
    edits: list[dict] = []
    d.handlers["workspace/applyEdit"] = lambda p: edits.append(p) or {"applied": True}
    open_buffer(d, calc, unsaved)
    llm.add(edit("calc.py", "a + b", "b + a"), {"text": "ok"})
    sid = await new_session(d)
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "swap"})
    [result] = of_kind(d, sid, "tool_result")
    assert result["update"]["status"] == "completed" and "in the editor's buffer" in result["update"]["output"]
    [change] = edits[0]["edit"]["changes"][calc.resolve().as_uri()]
    assert change == {"range": {"start": {"line": 1, "character": 11}, "end": {"line": 1, "character": 16}},
                      "newText": "b + a"}
    assert calc.read_text() == CALC  # the editor owns the buffer; the daemon did not write the file
    # an editor that refuses: a failed call with its reason
    d.handlers["workspace/applyEdit"] = lambda p: {"applied": False, "failureReason": "buffer is read-only"}
    llm.add(edit("calc.py", "b + a", "a * b"), {"text": "ok"})
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "again"})
    failed = of_kind(d, sid, "tool_result")[-1]["update"]
    assert failed["status"] == "failed" and "buffer is read-only" in failed["output"]
    # an editor without the capability: unsaved work is not written under
    plain = await start_editor(start_daemon, workspace, apply_edit=False)
    plain.handlers["workspace/applyEdit"] = lambda p: pytest.fail("applyEdit sent without the capability")
    open_buffer(plain, calc, unsaved)
    llm.add(edit("calc.py", "a + b", "b + a"), {"text": "ok"})
    sid2 = await new_session(plain)
    await plain.call("toycoder/prompt", {"sessionId": sid2, "text": "swap"})
    refused = of_kind(plain, sid2, "tool_result")[-1]["update"]
    assert refused["status"] == "failed" and "unsaved changes" in refused["output"] and calc.read_text() == CALC


async def test_a_file_changed_while_the_permission_request_is_open_is_not_written(daemon: Daemon, llm: FakeLLM,
                                                                                  workspace: Path) -> None:
    calc = workspace / "calc.py"
    calc.write_text(CALC)

    def person_edits_then_allows(params: dict) -> dict:
        calc.write_text(CALC + "# typed while the question was open\n")
        return {"decision": "allow_once"}

    daemon.handlers["toycoder/requestPermission"] = person_edits_then_allows
    llm.add(edit("calc.py", "a + b", "b + a"), {"text": "ok"})
    sid = await new_session(daemon)
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "swap"})
    [result] = of_kind(daemon, sid, "tool_result")
    assert result["update"]["status"] == "failed"
    assert result["update"]["output"] == "error: calc.py changed while waiting for approval; read it again"
    assert calc.read_text() == CALC + "# typed while the question was open\n"
    assert of_kind(daemon, sid, "changes") == []
