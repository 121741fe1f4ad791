"""One history, two views (issue 33): compaction keeps every message in the session file and
appends where the model's context starts; a reload shows the whole conversation with a compaction
entry; the model gets the summary and what came after; old compacted files load; undo and sharing
work across a compaction; a turn appends only what it adds."""

from __future__ import annotations

import json
from pathlib import Path

from inproc_app import InProc, eventually

from toycoder_daemon.sessions.context import SUMMARY_PREFIX

SMALL = {"session": {"max_messages": 6, "compress_keep_recent": 2}}
ROOMY = {"session": {"max_messages": 1000}}


async def chat(p: InProc, sid: str, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        p.script.add({"text": f"answer {i}"})
        assert (await p.prompt(sid, f"question {i}")).result.text == f"answer {i}"


async def compacted(p: InProc) -> str:
    """A session whose turns 0-2 were summarised before turn 4 (questions 0-4 answered)."""
    sid = p.new_session()
    await chat(p, sid, 4)
    p.script.add({"text": "The user asked questions 0-2."}, {"text": "answer 4"})
    await p.prompt(sid, "question 4")
    return sid


def lines(p: InProc, sid: str) -> list[dict]:
    path = p.app.store.dir / f"{sid}.jsonl"
    return [json.loads(raw) for raw in path.read_text().splitlines()]


async def test_a_reload_after_compaction_shows_every_message_and_the_compaction(inproc) -> None:
    sid = await compacted(inproc(SMALL))
    other: InProc = inproc(SMALL)  # another daemon on the same data dir: a reload from disk
    entries = (await other.app.load(sid)).transcript()
    shown = [(e.role, e.text) for e in entries]
    questions = [(r, t) for r, t in shown if r == "user"]
    assert questions == [("user", f"question {i}") for i in range(5)]
    assert ("assistant", "answer 0") in shown and ("assistant", "answer 4") in shown
    assert shown.index(("compaction", "The user asked questions 0-2.")) == shown.index(("user", "question 4")) - 1


async def test_the_next_request_carries_the_summary_and_what_came_after_only(inproc) -> None:
    p: InProc = inproc(SMALL)
    sid = await compacted(p)
    p.script.add({"text": "answer 5"})
    await p.prompt(sid, "question 5")
    sent = [m["content"] for m in p.script.calls[-1]["messages"][1:]]
    assert sent == [SUMMARY_PREFIX + "The user asked questions 0-2.", "question 3", "answer 3", "question 4",
                    "answer 4", "question 5"]
    other: InProc = inproc(ROOMY)  # the same after a reload (with room: no second compaction)
    other.script.add({"text": "answer 6"})
    await other.prompt(sid, "question 6")
    assert [m["content"] for m in other.script.calls[-1]["messages"][1:]] == [*sent, "answer 5", "question 6"]


async def test_a_file_compacted_by_the_previous_version_loads_as_it_is(inproc) -> None:
    p: InProc = inproc(SMALL)
    sid = p.new_session()
    path = p.app.store.dir / f"{sid}.jsonl"
    old = [{"t": "meta", "id": sid, "title": "old", "turnEnds": {"t2": {"stopReason": "end_turn", "usage": [1, 2, 3]}}},
           {"t": "msg", "m": {"role": "user", "content": SUMMARY_PREFIX + "They talked."}},
           {"t": "msg", "m": {"role": "user", "content": "question 2", "turn": "t2"}},
           {"t": "msg", "m": {"role": "assistant", "content": "answer 2"}}]
    path.write_text("".join(json.dumps(r) + "\n" for r in old))
    other: InProc = inproc(SMALL)
    s = await other.app.load(sid)
    assert [(e.role, e.text, e.stop_reason) for e in s.transcript()] == [
        ("compaction", "They talked.", None), ("user", "question 2", "end_turn"), ("assistant", "answer 2", None)]
    other.script.add({"text": "answer 3"})
    await other.prompt(sid, "question 3")
    assert [m["content"] for m in other.script.calls[-1]["messages"][1:]] == [
        SUMMARY_PREFIX + "They talked.", "question 2", "answer 2", "question 3"]


def write(path: str, content: str) -> dict:
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}}]}


async def test_undo_of_a_turn_before_and_after_a_compaction(inproc, workspace: Path) -> None:
    p: InProc = inproc(SMALL)
    p.frontend.default_decision = "allow_once"
    sid = p.new_session()
    p.script.add(write("a.txt", "one\n"), {"text": "made a"})
    before = (await p.prompt(sid, "make a")).turn_id
    await chat(p, sid, 2)
    p.script.add({"text": "summary"}, write("b.txt", "bee\n"), {"text": "made b"})
    after = (await p.prompt(sid, "make b"))
    assert any(r["t"] == "context" for r in lines(p, sid)) and (workspace / "b.txt").exists()
    result = await p.app.restore(sid, after.turn_id, frontend_for=lambda s, t: p.frontend.bind(s))
    assert result["restored"] == ["b.txt"] and not (workspace / "b.txt").exists()
    result = await p.app.restore(sid, before, frontend_for=lambda s, t: p.frontend.bind(s))
    assert "a.txt" in result["restored"] and not (workspace / "a.txt").exists()
    shown = [e for e in p.app.session(sid).transcript(p.app.runtimes[sid].checkpoints.changes_of())
             if e.role in ("changes", "compaction")]
    assert [e.role for e in shown][:2] == ["changes", "compaction"]  # the first turn's changes stay before it


async def test_a_second_daemon_sees_the_compaction(inproc) -> None:
    a: InProc = inproc(SMALL)
    b: InProc = inproc(SMALL)
    got: list = []
    b.app.sharing.interval = 0.01
    b.app.sharing.on_changed = lambda sid, entries, reset, untold: got.append((entries, reset))
    sid = a.new_session()
    await b.app.load(sid)
    await chat(a, sid, 4)
    a.script.add({"text": "The user asked questions 0-2."}, {"text": "answer 4"})
    await a.prompt(sid, "question 4")
    await eventually(lambda: any(e.text == "answer 4" for entries, _ in got for e in entries), "b to hear turn 4")
    heard = [(e.role, e.text) for entries, reset in got for e in entries if not reset]
    assert ("compaction", "The user asked questions 0-2.") in heard
    b.script.add({"text": "answer 5"})
    await b.prompt(sid, "question 5")
    assert b.script.calls[-1]["messages"][1]["content"] == SUMMARY_PREFIX + "The user asked questions 0-2."
    assert len(b.app.session(sid).messages.history()) == 12


async def test_the_file_grows_linearly_with_its_turns(inproc) -> None:
    p: InProc = inproc(ROOMY)
    sid = p.new_session()
    path = p.app.store.dir / f"{sid}.jsonl"
    sizes = []
    for i in range(50):
        p.script.add({"text": f"answer {i}"})
        await p.prompt(sid, f"question {i}")
        sizes.append(path.stat().st_size)
    first, last = sizes[5] - sizes[4], sizes[49] - sizes[48]
    assert last <= first * 1.1, (first, last)  # today's per-turn meta grew with every turn
