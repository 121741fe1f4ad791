"""One session in two daemons (two Apps on one data directory, in-process): only a running turn
holds the session; a turn sees what the other daemon added; open sessions hear about it. The
subprocess tier (test_sessions_e2e.py on LSP, test_issue15_flows.py on ACP) keeps the wire path
and a SIGKILL mid-turn."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest
from acp_client import Editor
from inproc_app import InProc, eventually

from toycoder_daemon.core.errors import SessionBusy
from toycoder_daemon.sessions.conversation import Conversation, Mark
from toycoder_daemon.sessions.session import Session, TranscriptEntry
from toycoder_daemon.sessions.store import Appended
from toycoder_daemon.tools.registry import ToolRegistry


def heard(p: InProc) -> list[tuple[str, list[TranscriptEntry], bool]]:
    got: list[tuple[str, list[TranscriptEntry], bool]] = []
    p.app.sharing.interval = 0.01
    p.app.sharing.on_changed = lambda sid, entries, reset, untold: got.append((sid, entries, reset))
    return got


async def shared(inproc: Any) -> tuple[InProc, InProc, str, list[tuple[str, list[TranscriptEntry], bool]]]:
    """Daemon a's new session, open in daemon b all along; `got`: what b's clients hear."""
    a: InProc = inproc()
    b: InProc = inproc()
    got = heard(b)
    sid = a.new_session()
    await b.app.load(sid)
    return a, b, sid, got


async def test_b_continues_what_a_did_and_hears_about_it(inproc) -> None:
    a, b, sid, got = await shared(inproc)
    a.script.add({"text": "The answer is 42."})
    await a.prompt(sid, "what is the answer?")

    def entries() -> list[tuple[str, str]]:  # heard as the lines land: one update or several
        return [(e.role, e.text) for _, got_entries, _ in got for e in got_entries]

    await eventually(lambda: len(entries()) == 2, "b to hear about a's turn")
    assert entries() == [("user", "what is the answer?"), ("assistant", "The answer is 42.")]
    assert {(changed, reset) for changed, _, reset in got} == {(sid, False)}
    assert b.app.session(sid).title == "what is the answer?"

    b.script.add({"text": "You asked before."})
    assert (await b.prompt(sid, "what did I ask?")).result.text == "You asked before."
    sent = [(m["role"], m.get("content")) for m in b.script.calls[-1]["messages"][1:]]
    assert sent == [("user", "what is the answer?"), ("assistant", "The answer is 42."), ("user", "what did I ask?")]

    a.script.add({"text": "Three turns."})
    await a.prompt(sid, "how many?")  # a catches up on b's turn before its own
    sent = [m.get("content") for m in a.script.calls[-1]["messages"][1:]]
    assert sent == ["what is the answer?", "The answer is 42.", "what did I ask?", "You asked before.", "how many?"]


async def test_a_prompt_during_the_other_daemons_turn_is_busy_elsewhere(inproc) -> None:
    a: InProc = inproc()
    b: InProc = inproc()
    sid = a.new_session()
    await b.app.load(sid)
    a.script.add({"text": ["Once upon", " a time"], "chunk_delay": 3600})
    turn = a.start_prompt(sid, "tell a story")
    await eventually(lambda: bool(a.frontend.of(sid, "text_delta")), "a's turn to stream")
    with pytest.raises(SessionBusy, match="another ToyCoder daemon"):
        await b.prompt(sid, "me too")
    with pytest.raises(SessionBusy, match="another ToyCoder daemon"):
        b.app.set_model(sid, None, "fast")  # a settings change takes the lock too
    assert b.script.calls == []
    assert a.app.cancel(sid)
    assert (await asyncio.wait_for(turn, 10)).result.stop_reason == "cancelled"
    b.script.add({"text": "my turn now"})
    assert (await b.prompt(sid, "me too")).result.text == "my turn now"
    assert [m.get("content") for m in b.script.calls[-1]["messages"][1:]][0] == "tell a story"


async def test_a_compaction_elsewhere_is_heard_as_a_compaction_entry(inproc) -> None:
    a, b, sid, got = await shared(inproc)
    a.script.add({"text": "one"})
    await a.prompt(sid, "first")
    await eventually(lambda: sum(len(e) for _, e, _ in got) == 2, "b to hear the first turn")
    s = a.app.session(sid)
    summary = {"role": "user", "content": "summary of it all"}
    await s.messages.replace_all([summary], strategy="summary", summary="it all")  # as compaction does: an append
    await eventually(lambda: any(e.role == "compaction" for _, entries, _ in got for e in entries),
                     "b to hear the compaction")
    _, entries, reset = got[-1]
    assert not reset and [(e.role, e.text) for e in entries] == [("compaction", "it all")]
    seen = b.app.session(sid).messages
    assert [m.get("content") for m in seen.stored()] == ["summary of it all"]  # what b's model gets
    assert [m.get("content") for m in seen.history()] == ["first", "one"]  # what b's person sees


async def test_an_acp_client_gets_a_replay_of_a_turn_made_in_another_daemon(tmp_path, llm, workspace) -> None:
    from acp import text_block
    from acp_client import acp_face, new_session

    async with acp_face(tmp_path, llm) as (one, _, _), acp_face(tmp_path, llm) as (two, editor, _):
        sid = await new_session(one, workspace)
        await two.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
        llm.add({"text": "Made in one."})
        await one.prompt(session_id=sid, prompt=[text_block("hello from one")])
        # heard live (sessions/live.py), in the origin's deltas, or replayed from the file: the same text
        await editor.wait_for(lambda f: editor.text() == "Made in one.")
        assert editor.text("user_message_chunk") == "hello from one"
        llm.add({"text": "Two knows.", "expect": {"last_user_contains": "two"}})
        assert (await two.prompt(session_id=sid, prompt=[text_block("two here")])).stop_reason == "end_turn"
        sent = [m["content"] for m in llm.requests[-1]["body"]["messages"][1:]]
        assert sent == ["hello from one", "Made in one.", "two here"]


async def test_a_turn_that_starts_while_the_poll_reads_has_what_the_poll_read(inproc) -> None:
    # The poll's read has moved the file's offset (its thread is done) but the session has not taken
    # it in yet when b's turn starts: the turn must wait for it. The file's read and lock are wrapped
    # to hold that moment open, which a loaded machine hits by chance (once in ~12 runs of the ACP
    # test above, whose live stream's end reads the file as the next prompt starts).
    a: InProc = inproc()
    b: InProc = inproc()
    sid = a.new_session()
    await b.app.load(sid)
    b.app.sharing.interval = 0.01
    file = b.app.session(sid).file
    assert file is not None
    read, acquire = file.read_new, file.acquire
    reading, resume = threading.Event(), threading.Event()

    def read_new() -> Appended:  # the read of a's turn: done, the poll not told yet
        new = read()
        if any(not isinstance(m, Mark) and m.get("role") == "assistant" for m in new.messages):
            reading.set()
            resume.wait(10)
        return new

    def acquire_then_resume() -> None:  # b's turn holds the session, then the read goes on
        acquire()
        resume.set()

    file.read_new, file.acquire = read_new, acquire_then_resume  # type: ignore[method-assign]
    a.script.add({"text": "The answer is 42."})
    await a.prompt(sid, "what is the answer?")
    await eventually(reading.is_set, "b's poll to read a's turn")
    b.script.add({"text": "You asked before."})
    await b.prompt(sid, "what did I ask?")
    sent = [m.get("content") for m in b.script.calls[-1]["messages"][1:]]
    assert sent == ["what is the answer?", "The answer is 42.", "what did I ask?"]


async def test_new_and_switch_close_the_previous_session_in_this_daemon(inproc) -> None:
    p: InProc = inproc()
    first = p.new_session("first")  # no messages: not listed, but /switch takes its whole id
    out = await p.command(first, "/new second")
    second = out.action["sessionId"] if out.action else ""
    assert second and second != first and first not in p.app.live and second in p.app.live
    out = await p.command(second, f"/switch {first}")
    assert out.action == {"kind": "switch", "sessionId": first}
    assert second not in p.app.live and first in p.app.live


# ---- a tool call and its result heard in different polls ---------------------------------------

def _call(cid: str, name: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}]}


def _result(cid: str, content: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": content, "status": "completed"}


def test_a_result_in_a_later_batch_is_named_as_in_one() -> None:
    # as a second daemon's poll reads a turn: each call is stored before it runs, its result later;
    # the model reuses "c1" in the next turn, within the batch that answers the first c1
    batches = [[{"role": "user", "content": "look"}, _call("c1", "read_file")],
               [_result("c1"), {"role": "user", "content": "again"}, _call("c1", "grep_search")],
               [_result("c1"), {"role": "assistant", "content": "done"}]]
    s = Session(id="s", title="", tools=ToolRegistry())
    heard: list[TranscriptEntry] = []
    for batch in batches:
        s.messages = Conversation("", [*s.messages.history(), *batch])
        heard += s.transcript(messages=batch)
    assert [(e.role, e.tool_call_id, e.name) for e in heard] == [
        (e.role, e.tool_call_id, e.name) for e in s.transcript()]
    assert [e.name for e in heard if e.role == "tool"] == ["read_file", "grep_search"]


async def _split_turn(a: InProc, sid: str, seen_call: Callable[[], bool]) -> None:
    """a's turn writes a file; the person answers only once b's clients have heard the call (so the
    result lands in a later poll)."""
    hold = asyncio.Event()
    a.frontend.hold, a.frontend.default_decision = hold, "allow_once"
    a.script.add({"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "hi\n"}}]},
                 {"text": "Written."})
    turn = a.start_prompt(sid, "write notes")
    await eventually(seen_call, "b to hear the call before its result")
    hold.set()
    await asyncio.wait_for(turn, 10)


async def test_the_other_daemons_result_keeps_its_tools_name_across_polls(inproc) -> None:
    a, b, sid, got = await shared(inproc)
    await _split_turn(a, sid, lambda: any(e.role == "tool_call" for _, es, _ in got for e in es))
    await eventually(lambda: any(e.role == "assistant" for _, es, _ in got for e in es), "b to hear the turn end")
    tools = [(e.role, e.name) for _, es, _ in got for e in es if e.role in ("tool_call", "tool")]
    assert tools == [("tool_call", "write_file"), ("tool", "write_file")]
    assert not any(e.role == "tool" for e in got[0][1])  # the poll did split the call from its result


async def test_an_acp_client_hears_a_split_tool_call_as_in_one_poll(tmp_path, llm, workspace) -> None:
    from acp import text_block
    from acp_client import acp_face, new_session

    class Holding(Editor):
        """Answers a permission question only once `release` is set."""

        release = asyncio.Event()

        async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
            await self.release.wait()
            return await super().request_permission(*args, **kwargs)

    # both hold: the observer is asked too (and the first answer decides)
    async with acp_face(tmp_path, llm, editor=Holding()) as (one, holding, _), \
            acp_face(tmp_path, llm, editor=Holding()) as (two, editor, _):
        sid = await new_session(one, workspace)
        await two.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
        llm.add({"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "hi\n"}}]},
                {"text": "Written."})
        turn = asyncio.ensure_future(one.prompt(session_id=sid, prompt=[text_block("write notes")]))
        await editor.wait_for(lambda f: f.get("method") == "session/update"
                              and f["params"]["update"]["sessionUpdate"] == "tool_call")
        assert not [u for u in editor.updates("tool_call_update") if u.get("status") == "completed"]  # not yet
        Holding.release.set()
        await asyncio.wait_for(turn, 10)
        await editor.wait_for(lambda f: editor.text() == "Written.")
        (call,) = editor.updates("tool_call")
        assert (call["title"], call["kind"]) == ("write_file notes.txt", "edit")
        allowed, done = editor.updates("tool_call_update")  # the permission's answer, then the result
        assert allowed["status"] == "in_progress" and allowed["toolCallId"] == call["toolCallId"]
        assert done["toolCallId"] == call["toolCallId"] and done["status"] == "completed"
