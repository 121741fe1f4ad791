"""Checkpoints in-process (issue 11): turns record what they wrote and report `changes`; restores
(of a turn and every later one, conflicts, force, undoing an undo) through the App and the slash
commands; the transcript's `changes` entries. test_undo_e2e.py keeps the wire round trips."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from inproc_app import InProc, eventually

from toycoder_daemon.checkpoints import UnknownCheckpoint
from toycoder_daemon.core.errors import BadInput, SessionBusy
from toycoder_daemon.core.ports import FilesChanged, ToolCallFinished


def write(path: str, content: str) -> dict:
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}}]}


def edit(path: str, old: str, new: str) -> dict:
    return {"tool_calls": [{"name": "edit_file", "arguments": {"path": path, "old_string": old, "new_string": new}}]}


def changes(p: InProc, sid: str) -> list[FilesChanged]:
    return [e for e in p.frontend.of(sid) if isinstance(e, FilesChanged)]


def results(p: InProc, sid: str) -> list[ToolCallFinished]:
    return [e for e in p.frontend.of(sid) if isinstance(e, ToolCallFinished)]


async def three_turns(p: InProc, ws: Path) -> tuple[str, list[str]]:
    """Turn 1 creates a.txt, turn 2 modifies it and creates b.txt, turn 3 modifies b.txt."""
    p.frontend.default_decision = "allow_once"
    p.script.add(write("a.txt", "one\n"), {"text": "made a"},
                 edit("a.txt", "one", "one\ntwo"), write("b.txt", "bee\n"), {"text": "two changes"},
                 edit("b.txt", "bee", "buzz"), {"text": "done"})
    sid = p.new_session()
    turns = [(await p.prompt(sid, prompt)).turn_id for prompt in ("make a", "grow a, make b", "buzz")]
    assert [r.status for r in results(p, sid)] == ["completed"] * 4
    assert (ws / "a.txt").read_text() == "one\ntwo\n" and (ws / "b.txt").read_text() == "buzz\n"
    return sid, turns


async def test_each_turn_reports_its_changes_and_is_listed_under_its_turn_id(inproc, workspace: Path) -> None:
    p: InProc = inproc()
    sid, turns = await three_turns(p, workspace)
    reported = changes(p, sid)
    assert [c.turn_id for c in reported] == turns
    assert [[(f.path, f.status, f.added, f.removed) for f in c.files] for c in reported] == [
        [("a.txt", "created", 1, 0)],
        [("a.txt", "modified", 1, 0), ("b.txt", "created", 1, 0)],
        [("b.txt", "modified", 1, 1)],
    ]
    assert reported[0].files[0].uri == (workspace / "a.txt").resolve().as_uri()
    listed = p.app.checkpoint_list(sid)
    assert [c["turnId"] for c in listed] == turns
    assert [c["prompt"] for c in listed] == ["make a", "grow a, make b", "buzz"]
    # a turn that writes nothing reports nothing and is not listed
    p.script.add({"text": "just talk"})
    await p.prompt(sid, "hello")
    assert len(changes(p, sid)) == 3 and len(p.app.checkpoint_list(sid)) == 3



async def test_a_turns_diff_of_one_file_is_its_net_change_from_any_later_state(inproc, workspace: Path) -> None:
    p: InProc = inproc()
    sid, turns = await three_turns(p, workspace)
    (workspace / "a.txt").write_text("changed by hand since\n")  # the diff is the turn's, not the disk's
    created = p.app.checkpoint_diff(sid, turns[0], "a.txt")
    assert (created["status"], created["diff"]) == ("created", "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+one\n")
    grown = p.app.checkpoint_diff(sid, turns[1].rsplit("-", 1)[1], str(workspace / "a.txt"))  # a number, an absolute path
    assert grown["path"] == "a.txt" and grown["status"] == "modified"
    assert grown["diff"] == "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1,2 @@\n one\n+two\n"
    with pytest.raises(UnknownCheckpoint, match="did not change b.txt"):
        p.app.checkpoint_diff(sid, turns[0], "b.txt")
    with pytest.raises(UnknownCheckpoint):
        p.app.checkpoint_diff(sid, "no-such-turn", "a.txt")
    with pytest.raises(BadInput, match="outside the workspace"):
        p.app.checkpoint_diff(sid, turns[0], "/etc/passwd")
    await p.app.close_session(sid)  # a session not open here: read from its checkpoints for the look
    assert p.app.checkpoint_diff(sid, turns[2], "b.txt")["diff"] == (
        "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-bee\n+buzz\n")


async def test_restoring_the_middle_turn_restores_it_and_the_later_one_and_can_be_undone(
        inproc, workspace: Path) -> None:
    p: InProc = inproc()
    sid, turns = await three_turns(p, workspace)
    result = await p.app.restore(sid, turns[1], frontend_for=lambda s, t: p.frontend.bind(s))
    assert sorted(result["restored"]) == ["a.txt", "b.txt"] and result["conflicts"] == []
    assert (workspace / "a.txt").read_text() == "one\n" and not (workspace / "b.txt").exists()
    assert "run_command" in result["note"]
    restore_turn = result["turnId"]
    assert restore_turn and restore_turn not in turns
    last = changes(p, sid)[-1]
    assert last.turn_id == restore_turn
    assert sorted((f.path, f.status) for f in last.files) == [("a.txt", "modified"), ("b.txt", "deleted")]
    note = p.app.session(sid).messages[-1]
    assert note["role"] == "user" and f"before turn {turns[1]}" in note["content"]
    # the restore is a checkpoint of its own: restoring it undoes the undo
    again = await p.app.restore(sid, restore_turn)
    assert sorted(again["restored"]) == ["a.txt", "b.txt"]
    assert (workspace / "a.txt").read_text() == "one\ntwo\n" and (workspace / "b.txt").read_text() == "buzz\n"
    # the model is told, and its next request carries the note
    p.script.add({"text": "ok"})
    await p.prompt(sid, "what now?")
    sent = [m["content"] for m in p.script.calls[-1]["messages"] if m["role"] == "user"]
    assert any("restored files to their state before turn" in c for c in sent)


async def test_a_file_changed_outside_the_agent_is_a_conflict_unless_forced(inproc, workspace: Path) -> None:
    p: InProc = inproc()
    sid, turns = await three_turns(p, workspace)
    (workspace / "b.txt").write_text("the person's words\n")
    result = await p.app.restore(sid, turns[1])
    assert result["restored"] == ["a.txt"]
    assert [c["path"] for c in result["conflicts"]] == ["b.txt"] and "force" in result["conflicts"][0]["reason"]
    assert (workspace / "b.txt").read_text() == "the person's words\n" and (workspace / "a.txt").read_text() == "one\n"
    forced = await p.app.restore(sid, turns[1], force=True)
    assert "b.txt" in forced["restored"] and not (workspace / "b.txt").exists()


async def test_restore_refuses_while_a_turn_runs_and_unknown_turns(inproc, workspace: Path) -> None:
    p: InProc = inproc()
    sid, turns = await three_turns(p, workspace)
    with pytest.raises(UnknownCheckpoint):
        await p.app.restore(sid, "no-such-turn")
    p.script.add({"text": ["slow", " reply"], "chunk_delay": 3600})
    running = p.start_prompt(sid, "talk")
    await eventually(lambda: p.app.session(sid).busy, "the turn to start")
    with pytest.raises(SessionBusy):
        await p.app.restore(sid, turns[0])
    assert (workspace / "a.txt").read_text() == "one\ntwo\n"
    p.app.cancel(sid)
    await asyncio.wait_for(running, 10)


async def test_undo_checkpoints_and_restore_commands(inproc, workspace: Path) -> None:
    p: InProc = inproc()
    sid, turns = await three_turns(p, workspace)
    listed = (await p.command(sid, "/checkpoints")).result.text
    assert all(t in listed for t in turns) and "b.txt modified +1 -1" in listed
    undo = await p.command(sid, "/undo")
    assert "restored b.txt" in undo.result.text and "run_command" in undo.result.text
    assert (workspace / "b.txt").read_text() == "bee\n" and (workspace / "a.txt").read_text() == "one\ntwo\n"
    assert changes(p, sid)[-1].turn_id == undo.turn_id  # the command's turn is the restore's checkpoint
    # /undo again goes one more turn back (never re-applies what it undid)
    await p.command(sid, "/undo")
    assert not (workspace / "b.txt").exists() and (workspace / "a.txt").read_text() == "one\n"
    await p.command(sid, "/redo")
    await p.command(sid, "/redo")
    assert (workspace / "b.txt").read_text() == "buzz\n" and (workspace / "a.txt").read_text() == "one\ntwo\n"
    # /restore by the turn's number
    number = turns[0].rsplit("-", 1)[1]
    out = await p.command(sid, f"/restore {number}")
    assert "restored" in out.result.text and not (workspace / "a.txt").exists() and not (workspace / "b.txt").exists()
    assert "unknown checkpoint" in (await p.command(sid, "/restore nope")).result.text
    assert "give one turn" in (await p.command(sid, "/restore")).result.text


async def test_undo_reports_conflicts_and_force(inproc, workspace: Path) -> None:
    p: InProc = inproc()
    sid, _ = await three_turns(p, workspace)
    (workspace / "b.txt").write_text("mine\n")
    out = (await p.command(sid, "/undo")).result.text
    assert "not restored: b.txt" in out and "--force" in out and (workspace / "b.txt").read_text() == "mine\n"
    await p.command(sid, "/undo --force")
    assert (workspace / "b.txt").read_text() == "bee\n"


async def test_nothing_to_undo_in_a_fresh_session(inproc) -> None:
    p: InProc = inproc()
    sid = p.new_session()
    assert "nothing to undo" in (await p.command(sid, "/undo")).result.text
    assert "no checkpoints yet" in (await p.command(sid, "/checkpoints")).result.text


async def test_the_transcript_shows_each_turns_changes_after_it(inproc, workspace: Path) -> None:
    p: InProc = inproc()
    sid, turns = await three_turns(p, workspace)
    await p.app.restore(sid, turns[2])
    entries = p.app.transcript(p.app.session(sid))
    roles = [e.role for e in entries]
    marks = [i for i, r in enumerate(roles) if r == "changes"]
    assert len(marks) == 4
    users = [i for i, r in enumerate(roles) if r == "user"]
    assert users[0] < marks[0] < users[1] < marks[1] < users[2]
    assert marks[2] == len(roles) - 2 and marks[3] == len(roles) - 1
    assert [e.turn_id for e in entries if e.role == "changes"][:3] == turns
    assert entries[marks[1]].text == "2 files changed +2 -0"
    assert entries[marks[3]].text.startswith("restored") and entries[marks[3]].files[0].path == "b.txt"
    assert not any("restored files to their state" in e.text for e in entries)  # the model's note is not shown


async def test_ids_stay_unique_across_daemons_and_deleting_the_session_deletes_its_checkpoints(
        inproc, workspace: Path) -> None:
    first: InProc = inproc()
    sid, turns = await three_turns(first, workspace)
    await first.close()
    second: InProc = inproc()
    second.frontend.default_decision = "allow_once"
    second.script.add(write("c.txt", "sea\n"), {"text": "ok"})
    out = await second.prompt(sid, "make c")
    assert out.turn_id not in turns
    assert [c["turnId"] for c in second.app.checkpoint_list(sid)] == [*turns, out.turn_id]
    store_dir = second.app.checkpoints.store(sid).dir
    assert store_dir.is_dir()
    second.app.delete_session(sid)
    assert not store_dir.exists()


async def test_a_later_daemon_never_reuses_the_id_of_a_turn_that_changed_no_file(inproc, workspace: Path) -> None:
    first: InProc = inproc()
    first.script.add({"text": "Noted."})
    sid = first.new_session()
    earlier = (await first.prompt(sid, "remember the word banana")).turn_id  # no checkpoint: nothing written
    assert first.app.checkpoint_list(sid) == []
    await first.close()
    second: InProc = inproc()
    second.script.add({"text": "ok"})
    later = (await second.prompt(sid, "and now?")).turn_id
    assert (earlier, later) == (f"{sid}-1", f"{sid}-2")


async def test_a_file_too_large_to_checkpoint_says_so_in_the_result(inproc, workspace: Path) -> None:
    p: InProc = inproc()
    p.app.checkpoints.max_bytes = 16
    p.frontend.default_decision = "allow_once"
    (workspace / "big.txt").write_text("x" * 100 + "\n")
    p.script.add(write("big.txt", "small\n"), {"text": "ok"})
    sid = p.new_session()
    await p.prompt(sid, "shrink it")
    [r] = results(p, sid)
    assert r.status == "completed" and "too large to checkpoint" in r.output


async def test_a_subagents_writes_are_the_turns_and_undone_with_it(inproc, workspace: Path) -> None:
    p: InProc = inproc({"agents": {"scribe": {"prompt": "explorer", "tools": ["write_file"],
                                              "description": "Writes notes."}}})
    p.frontend.default_decision = "allow_once"
    p.script.add({"tool_calls": [{"name": "scribe", "arguments": {"query": "note it"}}]},
                 write("notes.txt", "noted\n"), {"text": "written"}, {"text": "ok"})
    sid = p.new_session()
    out = await p.prompt(sid, "take a note")
    assert (workspace / "notes.txt").read_text() == "noted\n"
    [reported] = changes(p, sid)
    assert reported.turn_id == out.turn_id and [f.path for f in reported.files] == ["notes.txt"]
    await p.command(sid, "/undo")
    assert not (workspace / "notes.txt").exists()


def test_the_acp_face_offers_the_checkpoint_commands() -> None:
    from toycoder_daemon.commands.builtin import commands
    from toycoder_daemon.commands.custom import CommandRow
    from toycoder_daemon.faces.acp.content import commands_update

    rows = [CommandRow(c.name, c.usage, c.help, "builtin", tuple(c.aliases)) for c in commands.all()]
    offered = {c["name"]: c for c in commands_update(rows)["availableCommands"]}
    assert {"undo", "checkpoints", "restore"} <= set(offered)
    assert offered["restore"].get("input") is not None  # takes the turn as input


async def test_a_cancelled_restore_still_finishes_and_tells_the_model(inproc, workspace: Path, monkeypatch) -> None:
    p: InProc = inproc()
    sid, turns = await three_turns(p, workspace)
    store = p.app.runtimes[sid].checkpoints.store  # the open session's own
    started, release = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    real = store.restore

    def slow_restore(*args, **kwargs):
        loop.call_soon_threadsafe(started.set)
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(store, "restore", slow_restore)
    restoring = asyncio.ensure_future(p.app.restore(sid, turns[2]))
    await asyncio.wait_for(started.wait(), 10)
    assert p.app.cancel(sid)
    release.set()
    result = await asyncio.wait_for(restoring, 10)
    assert result["restored"] == ["b.txt"] and (workspace / "b.txt").read_text() == "bee\n"
    assert "restored files to their state before turn" in p.app.session(sid).messages[-1]["content"]
