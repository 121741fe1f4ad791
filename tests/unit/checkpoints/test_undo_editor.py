"""Undo through the editor and the undo history, in-process (issue 32): an edit that went into an
open buffer with unsaved work is undone in that buffer (applyEdit), the person's own edits kept, no
false conflict and the disk left alone; a real conflict is the text around the agent's change edited
since, and Force then puts the buffer's earlier text back, never on disk. `/undo` walks back one
turn at a time, `/redo` re-applies; restores carry `restoreOf` live and in the transcript."""

from __future__ import annotations

import os
from pathlib import Path

from inproc_app import InProc

from toycoder_daemon.core.ports import EditApplied, FilesChanged, ToolCallFinished

CALC = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"


def edit(path: str, old: str, new: str) -> dict:
    return {"tool_calls": [{"name": "edit_file", "arguments": {"path": path, "old_string": old, "new_string": new}}]}


def write(path: str, content: str) -> dict:
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}}]}


def changes(p: InProc, sid: str) -> list[FilesChanged]:
    return [e for e in p.frontend.of(sid) if isinstance(e, FilesChanged)]


async def agent_edits_a_dirty_buffer(inproc, workspace: Path) -> tuple[InProc, str, str, Path, str]:
    """calc.py open with unsaved work at its top; the agent changes `add` through the editor, then
    the person types at its end. Returns (p, session, turn, path, the buffer now)."""
    p: InProc = inproc()
    p.frontend.default_decision = "allow_once"
    p.frontend.editor = EditApplied(True)  # an editor with applyEdit; its buffers are in memory
    calc = (workspace / "calc.py").resolve()
    calc.write_text(CALC)
    p.app.workspace.open_documents[calc] = "# the person's unsaved note\n" + CALC
    p.script.add(edit("calc.py", "return a + b", "return b + a"), {"text": "swapped"})
    sid = p.new_session()
    turn = (await p.prompt(sid, "swap add")).turn_id
    [r] = [e for e in p.frontend.of(sid) if isinstance(e, ToolCallFinished)]
    assert r.status == "completed" and "in the editor's buffer" in r.output
    now = p.app.workspace.open_documents[calc] + "# typed after the turn\n"
    p.app.workspace.open_documents[calc] = now  # the person's didChange
    return p, sid, turn, calc, now


async def test_undo_of_an_edit_into_a_dirty_buffer_reverts_it_there_and_keeps_the_persons_text(
        inproc, workspace: Path) -> None:
    p, sid, turn, calc, now = await agent_edits_a_dirty_buffer(inproc, workspace)
    out = await p.command(sid, "/undo")
    assert "restored calc.py" in out.result.text and "not restored" not in out.result.text  # no false conflict
    [undo_change] = changes(p, sid)[-1].files
    assert undo_change.in_editor  # in the buffer: clients neither reload it nor warn about the disk
    expected = "# the person's unsaved note\n" + CALC + "# typed after the turn\n"
    assert p.frontend.edits[-1] == (calc, now, expected)  # through the editor (applyEdit)
    assert p.app.workspace.open_documents[calc] == expected
    assert calc.read_text() == CALC  # the disk is left as it was
    undo = changes(p, sid)[-1]
    assert undo.turn_id == out.turn_id and undo.restore_of == turn
    # the transcript marks it too (a resumed session shows "Restored … Redo")
    entries = [e for e in p.app.transcript(p.app.session(sid)) if e.role == "changes"]
    assert [(e.turn_id, e.restore_of) for e in entries] == [(turn, None), (out.turn_id, turn)]
    # /redo re-applies the agent's change in the buffer, the person's text still there
    await p.command(sid, "/redo")
    assert p.app.workspace.open_documents[calc] == now
    assert calc.read_text() == CALC


async def test_a_real_conflict_is_the_text_around_the_change_edited_and_force_never_writes_the_disk(
        inproc, workspace: Path) -> None:
    p, sid, turn, calc, _ = await agent_edits_a_dirty_buffer(inproc, workspace)
    edited = p.app.workspace.open_documents[calc].replace("return b + a", "return b + a  # mine")
    p.app.workspace.open_documents[calc] = edited
    out = await p.command(sid, "/undo")
    assert "not restored: calc.py: the text around the agent's change was edited since" in out.result.text
    assert p.app.workspace.open_documents[calc] == edited and calc.read_text() == CALC
    forced = await p.command(sid, "/undo --force")
    assert "restored calc.py" in forced.result.text
    assert p.app.workspace.open_documents[calc] == "# the person's unsaved note\n" + CALC  # the buffer before the turn
    assert calc.read_text() == CALC  # Force never writes buffer text to disk


async def test_a_buffer_saved_and_closed_since_is_undone_on_disk_and_never_forced_from_buffer_text(
        inproc, workspace: Path) -> None:
    p, sid, _, calc, now = await agent_edits_a_dirty_buffer(inproc, workspace)
    calc.write_text(now)  # the person saved, and closed the file
    del p.app.workspace.open_documents[calc]
    edited = now.replace("return b + a", "return b + a  # mine")
    calc.write_text(edited)
    refused = await p.command(sid, "/undo --force")
    assert "never written to disk, even when forced" in refused.result.text and calc.read_text() == edited
    calc.write_text(now)
    out = await p.command(sid, "/undo")
    assert "restored calc.py" in out.result.text
    assert calc.read_text() == "# the person's unsaved note\n" + CALC + "# typed after the turn\n"
    assert p.frontend.edits[-1][2] != calc.read_text()  # on disk, not through the editor


async def test_an_acp_client_that_writes_all_files_gets_the_undo_through_it(inproc, workspace: Path) -> None:
    p: InProc = inproc()
    p.frontend.default_decision = "allow_once"
    p.frontend.editor, p.frontend.writes_all = EditApplied(True), True
    calc = (workspace / "calc.py").resolve()
    calc.write_text(CALC)
    p.frontend.served = {calc: "# unsaved\n" + CALC}  # fs/read_text_file: its buffer
    p.script.add(edit("calc.py", "return a + b", "return b + a"), {"text": "swapped"})
    sid = p.new_session()
    await p.prompt(sid, "swap add")
    assert "return b + a" in p.frontend.served[calc] and calc.read_text() == CALC
    p.frontend.served[calc] += "# more\n"
    out = await p.command(sid, "/undo")
    assert "restored calc.py" in out.result.text, out.result.text
    assert p.frontend.served[calc] == "# unsaved\n" + CALC + "# more\n" and calc.read_text() == CALC


async def test_undo_twice_then_redo_walks_back_one_turn_at_a_time(inproc, workspace: Path) -> None:
    p: InProc = inproc()
    p.frontend.default_decision = "allow_once"
    p.script.add(write("a.txt", "one\n"), {"text": "1"}, write("a.txt", "two\n"), {"text": "2"},
                 write("a.txt", "three\n"), {"text": "3"})
    sid = p.new_session()
    turns = [(await p.prompt(sid, f"turn {i}")).turn_id for i in (1, 2, 3)]
    a = workspace / "a.txt"
    first = await p.command(sid, "/undo")
    assert a.read_text() == "two\n" and f"undid {turns[2]}" in first.result.text
    second = await p.command(sid, "/undo")
    assert a.read_text() == "one\n" and f"undid {turns[1]}" in second.result.text  # never re-applies
    redo = await p.command(sid, "/redo")
    assert a.read_text() == "two\n" and "redid" in redo.result.text
    marks = [(c.turn_id, c.restore_of) for c in changes(p, sid)]
    assert marks == [(turns[0], None), (turns[1], None), (turns[2], None), (first.turn_id, turns[2]),
                     (second.turn_id, turns[1]), (redo.turn_id, second.turn_id)]
    await p.command(sid, "/redo")
    assert a.read_text() == "three\n"
    assert "nothing to redo" in (await p.command(sid, "/redo")).result.text
    # a new turn that changes files ends what can be redone
    await p.command(sid, "/undo")
    p.script.add(write("b.txt", "bee\n"), {"text": "b"})
    await p.prompt(sid, "make b")
    assert "nothing to redo" in (await p.command(sid, "/redo")).result.text
    await p.command(sid, "/undo")
    assert not (workspace / "b.txt").exists() and a.read_text() == "two\n"


# ---- over the LSP face in-process (tests/inproc.py): a client keeping its buffer in memory -----------

def apply_text_edit(text: str, e: dict) -> str:
    """One LSP TextEdit applied to `text` (ASCII: UTF-16 units are characters)."""
    lines = text.splitlines(keepends=True) + [""]
    offset = [sum(len(x) for x in lines[:i]) for i in range(len(lines))]
    start = offset[e["range"]["start"]["line"]] + e["range"]["start"]["character"]
    end = offset[e["range"]["end"]["line"]] + e["range"]["end"]["character"]
    return text[:start] + e["newText"] + text[end:]


async def test_over_the_lsp_face_undo_and_redo_go_through_apply_edit_into_the_clients_buffer(
        start_daemon, llm, workspace: Path) -> None:
    from helpers import new_session, tool_results

    calc = (workspace / "calc.py").resolve()
    calc.write_text(CALC)
    d = await start_daemon(init=False)
    caps = {"experimental": {"toycoder": {"permissionRequest": True}}, "workspace": {"applyEdit": True}}
    await d.call("initialize", {"processId": os.getpid(), "rootUri": workspace.resolve().as_uri(),
                                "capabilities": caps, "initializationOptions": {}})
    d.notify("initialized", {})
    d.handlers["toycoder/requestPermission"] = lambda p: {"decision": "allow_once"}
    buffer = {"text": "# the person's unsaved note\n" + CALC, "version": 1}
    applied: list[str] = []

    def change(text: str) -> None:
        buffer["text"], buffer["version"] = text, buffer["version"] + 1
        d.notify("textDocument/didChange", {"textDocument": {"uri": calc.as_uri(), "version": buffer["version"]},
                                            "contentChanges": [{"text": text}]})

    def apply(params: dict) -> dict:  # the editor: applies the edit to its buffer, reports the change
        text = buffer["text"]
        for e in reversed(params["edit"]["changes"][calc.as_uri()]):
            text = apply_text_edit(text, e)
        applied.append(text)
        change(text)
        return {"applied": True}

    d.handlers["workspace/applyEdit"] = apply
    d.notify("textDocument/didOpen", {"textDocument": {"uri": calc.as_uri(), "languageId": "python",
                                                       "version": 1, "text": buffer["text"]}})
    llm.add(edit("calc.py", "return a - b", "return b - a"), {"text": "ok"})
    sid = await new_session(d)
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "swap sub"})
    assert [r["status"] for r in tool_results(d, sid)] == ["completed"]
    change(buffer["text"] + "# typed after the turn\n")
    undo = await d.call("toycoder/prompt", {"sessionId": sid, "text": "/undo"})
    assert "restored calc.py" in undo["text"] and "not restored" not in undo["text"], undo
    assert buffer["text"] == "# the person's unsaved note\n" + CALC + "# typed after the turn\n"
    assert calc.read_text() == CALC
    marks = [(u["turnId"], u["update"].get("restoreOf"), [f.get("inEditor") for f in u["update"]["files"]])
             for u in d.updates(sid) if u["update"]["kind"] == "changes"]
    turn = marks[0][0]
    assert marks == [(turn, None, [True]), (undo["turnId"], turn, [True])]
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "/redo"})
    assert "return b - a" in buffer["text"] and buffer["text"].endswith("# typed after the turn\n")
    assert len(applied) == 3 and calc.read_text() == CALC
    # the transcript a resumed client gets marks the restores
    loaded = await d.call("toycoder/session/load", {"sessionId": sid})
    restores = [e.get("restoreOf") for e in loaded["transcript"] if e["role"] == "changes"]
    assert restores == [None, turn, undo["turnId"]]
