"""A turn live in every daemon that has its session open (issue 32, "Live across daemons"): while
the origin's turn streams, the observer's clients get its events (before the turn ends), said to
run in the origin's client; an observer that falls behind is cut off without slowing the origin;
a dead origin leaves the observer on the session file; a turn heard live is not told again when its
records land in the file. Two Apps on one data dir and runtime dir, in-process (the daemon
processes: e2e/test_sessions_e2e.py)."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from typing import Any

import pytest
from inproc_app import InProc, eventually

from toycoder_daemon.core.ports import Event, FilesChanged, TextDelta, ToolCallFinished, ToolCallStarted
from toycoder_daemon.sessions import live
from toycoder_daemon.sessions.session import TranscriptEntry


class Observed:
    """What the observer's face is told: live turns, their events, and news from the file."""

    def __init__(self, p: InProc):
        self.turns: list[tuple[str, str, bool, str]] = []
        self.events: list[tuple[str, Event, float]] = []
        self.changed: list[tuple[list[TranscriptEntry], bool]] = []
        self.untold: list[TranscriptEntry] = []
        """What a client that can only add is given (the ACP face)."""
        sharing = p.app.sharing
        sharing.on_live_turn = lambda sid, turn, client, running, prompt: self.turns.append(
            (turn, client, running, prompt))
        sharing.on_live_event = lambda sid, turn, e: self.events.append((turn, e, time.monotonic()))
        sharing.on_changed = lambda sid, entries, reset, untold: (self.changed.append((entries, reset)),
                                                                  self.untold.extend(untold))

    def text(self) -> str:
        return "".join(e.text for _, e, _ in self.events if isinstance(e, TextDelta))


async def both(inproc: Any, interval: float = 0.02) -> tuple[InProc, InProc, str, Observed]:
    a: InProc = inproc()
    b: InProc = inproc(script=a.script)
    a.app.sharing.client = "Neovim"
    b.app.sharing.interval = interval
    seen = Observed(b)  # b's face hears live turns (set before the session is opened, as the faces do)
    sid = a.new_session()
    await b.app.load(sid)
    await eventually(lambda: sid in b.app.sharing._listeners, "b to listen for the session")
    return a, b, sid, seen


def broadcasts_of(p: InProc) -> list[live.Broadcast]:
    """The broadcasts of `p`'s turns, as they start."""
    out: list[live.Broadcast] = []
    published = p.app.sharing.published

    def keep(s: Any, turn_id: str, prompt: str, frontend: Any, cancel: Any) -> Any:
        teed = published(s, turn_id, prompt, frontend, cancel)
        out.append(teed.broadcast)
        return teed

    p.app.sharing.published = keep  # type: ignore[method-assign]
    return out


WORDS = [f"word{i} " for i in range(20)]


async def test_the_observer_hears_the_turn_while_it_runs_and_not_again_from_the_file(inproc: Any) -> None:
    a, b, sid, seen = await both(inproc)
    a.script.add({"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "hi\n"}}]},
                 {"text": WORDS, "chunk_delay": 0.03})
    a.frontend.default_decision = "allow_once"
    sent: list[float] = []
    inner_bind = a.frontend.bind

    def timed(s: str) -> Any:
        f = inner_bind(s)
        emit = f.emit

        def emit_timed(e: Event) -> None:
            if isinstance(e, TextDelta):
                sent.append(time.monotonic())
            emit(e)
        f.emit = emit_timed
        return f

    turn = asyncio.ensure_future(a.app.prompt(sid, "write it", lambda s, t: timed(s)))
    await eventually(lambda: "word3" in seen.text(), "b to hear the first words")
    assert not turn.done()  # heard while the turn runs, not after
    out = await asyncio.wait_for(turn, 20)
    await eventually(lambda: any(not running for _, _, running, _ in seen.turns), "b to hear the end")
    assert seen.turns[0] == (out.turn_id, "Neovim", True, "write it")
    assert seen.text() == "".join(WORDS)
    kinds = [type(e) for _, e, _ in seen.events]
    assert ToolCallStarted in kinds and ToolCallFinished in kinds and FilesChanged in kinds
    # the delay behind the origin, per text delta (the recording frontend sees each delta alone)
    heard = [t for _, e, t in seen.events if isinstance(e, TextDelta)]
    lags = sorted(h - s for h, s in zip(heard, sent, strict=True))
    assert lags[int(len(lags) * 0.95) - 1] < 0.1, lags
    # the file catches up (b knows the turn for its next one) but tells nothing heard already
    await eventually(lambda: len(b.app.session(sid).messages.history()) == len(a.app.session(sid).messages.history()),
                     "b to read the turn from the file")
    polls = 0
    catch_up = b.app.sharing.catch_up

    async def counted(session: Any) -> Any:
        nonlocal polls
        polls += 1
        return await catch_up(session)

    b.app.sharing.catch_up = counted  # type: ignore[method-assign]
    await eventually(lambda: polls >= 3, "three more polls of the file")
    assert seen.changed == []
    # a turn b did not hear live is told from the file as before
    a.app.sharing.published = lambda s, turn_id, prompt, frontend, cancel: frontend  # type: ignore[method-assign]
    a.script.add({"text": "quiet"})
    await a.prompt(sid, "unheard")
    await eventually(lambda: seen.changed != [], "b to read the unheard turn")
    assert [(e.role, e.text) for e in seen.changed[0][0]] == [("user", "unheard"), ("assistant", "quiet")]
    assert seen.changed[0][1] is False


async def test_an_observer_that_falls_behind_is_cut_off_without_slowing_the_origin(
        inproc: Any, monkeypatch: Any) -> None:
    a, b, sid, seen = await both(inproc)
    monkeypatch.setattr(live, "LIMIT", 64 * 1024)
    # an observer that never reads: a socket in the session's live dir nobody accepts on
    stalled = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stalled.bind(os.path.join(live.session_dir(sid, create=False), "1-1.sock"))
    stalled.listen()
    broadcasts = broadcasts_of(a)
    a.script.add({"text": ["x" * 4000] * 400, "chunk_delay": 0.001})  # 1.6 MB: far more than LIMIT
    started = time.monotonic()
    try:
        out = await asyncio.wait_for(a.prompt(sid, "flood"), 20)
    finally:
        stalled.close()
    assert out.result.stop_reason == "end_turn"
    assert time.monotonic() - started < 10
    assert broadcasts[0].cut == 1  # the stalled one; b kept up and heard it all
    await eventually(lambda: any(not running for _, _, running, _ in seen.turns), "b to hear the end")
    assert seen.text() == "x" * 4000 * 400


async def test_a_dead_origin_leaves_the_observer_on_the_session_file(inproc: Any) -> None:
    a, b, sid, seen = await both(inproc)
    broadcasts = broadcasts_of(a)
    a.script.add({"text": WORDS, "chunk_delay": 0.02})
    task = a.start_prompt(sid, "dies midway")
    await eventually(lambda: "word2" in seen.text(), "b to hear the turn")
    for writer in broadcasts[0]._writers.values():  # as when the origin's process dies: its sockets close
        writer.transport.abort()
    await eventually(lambda: any(not running for _, _, running, _ in seen.turns), "b to stop hearing it")
    await asyncio.wait_for(task, 20)  # the file gets the whole turn

    def since_reload() -> list[tuple[str, str]]:
        first = next((i for i, (_, reset) in enumerate(seen.changed) if reset), None)
        return [] if first is None else [(e.role, e.text) for entries, _ in seen.changed[first:] for e in entries]

    # the whole history as the file has it, then the rest of the turn as it lands
    await eventually(lambda: ("assistant", "".join(WORDS)) in since_reload(), "b to reload from the file")
    assert since_reload() == [("user", "dies midway"), ("assistant", "".join(WORDS))]
    assert [reset for _, reset in seen.changed].count(True) == 1
    # a client that cannot replace its history gets the cut turn from the file, and nothing twice
    assert [(e.role, e.text) for e in seen.untold] == [("user", "dies midway"), ("assistant", "".join(WORDS))]


async def test_an_acp_client_cut_off_from_a_live_turn_gets_what_it_missed_from_the_file(
        inproc: Any, tmp_path: Any, llm: Any, workspace: Any) -> None:
    from acp_client import Editor, acp_face

    from toycoder_daemon.faces.acp.sessions import CUT_NOTICE

    class Holding(Editor):
        """The observer's person, asked too (permission from any editor), answers only at the end."""

        release = asyncio.Event()

        async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
            await self.release.wait()
            return await super().request_permission(*args, **kwargs)

    a: InProc = inproc()
    a.app.sharing.client = "Neovim"
    broadcasts = broadcasts_of(a)
    hold = asyncio.Event()  # the origin's person answers the permission only after the cut
    a.frontend.hold, a.frontend.default_decision = hold, "allow_once"
    async with acp_face(tmp_path, llm, editor=Holding()) as (two, editor, _):  # on the same data and runtime dirs
        sid = a.new_session()
        await two.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
        await eventually(lambda: len(os.listdir(live.session_dir(sid, create=False))) == 1, "two to listen")
        a.script.add({"tool_calls": [{"name": "write_file", "arguments": {"path": "n.txt", "content": "n\n"}}]},
                     {"text": "Written."})
        task = a.start_prompt(sid, "write, then die")
        await editor.wait_for(lambda f: bool(editor.updates("tool_call")))  # heard live
        for writer in broadcasts[0]._writers.values():  # as when the origin's process dies: its sockets close
            writer.transport.abort()
        await editor.wait_for(lambda f: CUT_NOTICE in editor.text("agent_thought_chunk"))
        hold.set()
        await asyncio.wait_for(task, 20)
        await editor.wait_for(lambda f: editor.text() == "Written.")
        Holding.release.set()
        ups = editor.updates()
        cut = next(i for i, u in enumerate(ups) if u["sessionUpdate"] == "agent_thought_chunk"
                   and u["content"]["text"] == CUT_NOTICE)
        after = [(u["sessionUpdate"], u["content"]["text"] if u["sessionUpdate"].endswith("_chunk") else u.get("status"))
                 for u in ups[cut + 1:]]
        # what the file had at the cut (the prompt, the call: heard live before, whose updates the client
        # keeps), replayed; then the rest of the turn as it lands, once
        assert after[0] == ("user_message_chunk", "write, then die") and after[1][0] == "tool_call", after
        assert [k for k, _ in after].count("tool_call") == 1, after
        assert ("tool_call_update", "completed") in after and ("agent_message_chunk", "Written.") in after, after


async def test_listeners_are_private_and_go_with_the_session(inproc: Any) -> None:
    a, b, sid, seen = await both(inproc)
    path = b.app.sharing._listeners[sid].path
    assert path is not None and oct(os.stat(path).st_mode & 0o777) == "0o600"
    assert oct(os.stat(os.path.dirname(path)).st_mode & 0o777) == "0o700"
    await b.app.close_session(sid)
    assert not os.path.exists(path)


def test_events_cross_the_socket_whole() -> None:
    from toycoder_daemon.core.ports import ChangedFile, PlanEntry, PlanUpdated

    for e in (TextDelta("hi", "p1"), ToolCallFinished("c1", "completed", "ok", ("/a",)),
              FilesChanged("t1", (ChangedFile("a", "file:///a", "modified", 1, 2),), restore_of="t0"),
              PlanUpdated((PlanEntry("do", "high", "pending"),))):
        assert live.event_from_json(live.event_to_json(e)) == e
    assert live.event_from_json({"kind": "from_the_future"}) is None


async def test_a_cancel_from_the_observer_cancels_the_origins_turn(inproc: Any) -> None:
    a, b, sid, seen = await both(inproc)
    a.script.add({"text": WORDS * 10, "chunk_delay": 0.02})
    task = a.start_prompt(sid, "long")
    await eventually(lambda: "word2" in seen.text(), "b to hear the turn")
    assert b.app.cancel(sid) is True  # b's client cancels: no turn runs in b, the one heard live is a's
    out = await asyncio.wait_for(task, 10)
    assert out.result.stop_reason == "cancelled"
    await eventually(lambda: any(not running for _, _, running, _ in seen.turns), "b to hear the end")
    assert b.app.cancel(sid) is False  # nothing runs anywhere now


def test_the_tee_offers_the_inner_frontends_optional_ports() -> None:
    """A turn's frontend wrapped for the live stream still answers the workspace trust question when
    its client can (the trust check is an isinstance of a runtime protocol)."""
    from toycoder_daemon.core.ports import WorkspaceTruster

    class Plain:
        def emit(self, event: Event) -> None:
            pass

    class Truster(Plain):
        async def trust_workspace(self, request: Any) -> str:
            return "once"

    broadcast = live.Broadcast("s1", "t1", "test", "hi", None)
    assert isinstance(live.Teed(Truster(), broadcast), WorkspaceTruster)  # type: ignore[arg-type]
    assert not isinstance(live.Teed(Plain(), broadcast), WorkspaceTruster)  # type: ignore[arg-type]


async def test_the_own_clients_question_ending_in_a_cancel_ends_the_wait_as_without_observers() -> None:
    """What the origin's own client's question does (here: it ends cancelled, not by the turn) the
    turn sees, as when nobody else has the session open: it does not wait for an observer forever."""
    broadcast = live.Broadcast("s1", "t1", "test", "hi", None)

    async def cancelled_by_itself() -> str:
        raise asyncio.CancelledError

    waiting = broadcast.first_answer("c1", live.ask_question("which?", None), cancelled_by_itself(),
                                     lambda answer: True, lambda answer, by: None)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(waiting, 10)
    assert broadcast._waiting == {} and broadcast._asks == {}


async def test_a_session_closed_and_opened_again_mid_turn_hears_the_turn_once(inproc: Any) -> None:
    """The closed session's listener lets go of the origin's connection too: the turn goes on only
    on the new one (from its start), not on both, nor does the old one end the new one's hearing."""
    a, b, sid, seen = await both(inproc)
    a.script.add({"text": WORDS, "chunk_delay": 0.05})
    task = a.start_prompt(sid, "long")
    await eventually(lambda: "word2" in seen.text(), "b to hear the turn")
    await b.app.close_session(sid)
    before = len(seen.events)
    await b.app.load(sid)
    await asyncio.wait_for(task, 20)
    await eventually(lambda: any(not running for _, _, running, _ in seen.turns), "b to hear the end")
    again = "".join(e.text for _, e, _ in seen.events[before:] if isinstance(e, TextDelta))
    assert again == "".join(WORDS)  # the whole turn once more (the backlog), then its rest: once
    assert [running for _, _, running, _ in seen.turns].count(False) == 1
