"""Undo through the editor and the undo history, in-process (issue 32): an edit that went into an
open buffer with unsaved work is undone in that buffer (applyEdit), the person's own edits kept, no
false conflict and the disk left alone; a real conflict is the text around the agent's change edited
since, and Force then puts the buffer's earlier text back, never on disk. `/undo` walks back one
turn at a time, `/redo` re-applies; restores carry `restoreOf` live and in the transcript."""

from __future__ import annotations

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
