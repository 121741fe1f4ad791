"""The live broadcast's backlog (sessions/live.py) for observers that connect while a turn runs: a
turn nobody observes keeps its text deltas unencoded (a streamed reply is thousands of them), yet an
observer that connects later gets the very bytes one connected from the start gets, the lines as
they were always encoded, and the backlog is dropped past LIMIT at the same byte either way. The
observers here are raw sockets in the session's directory: the bytes on the wire are what is tested."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import tracemalloc
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from inproc_app import eventually

from toycoder_daemon.core.ports import Event, TextDelta, ToolCallFinished, ToolCallStarted
from toycoder_daemon.sessions import live

TEXTS = ["plain ", 'a "quote" and a \\ backslash', "new\nline\ttab\x00nul\x1f\x7f", "é 日本 🎉", "\u2028\u2029",
         "\ud800 a lone surrogate", "", "x" * 300]
EVENTS: list[Event] = [
    *(TextDelta(t) for t in TEXTS),
    ToolCallStarted("c1", "task", "a sub-agent", {"prompt": "ünïcode \"args\""}, "safe"),
    *(TextDelta(t, "c1") for t in TEXTS),
    *(TextDelta(t, 'an "odd" parent é') for t in TEXTS[:3]),
    ToolCallFinished("c1", "completed", "done\n", ()),
    TextDelta(" the end"),
]


def old_line(event: Event, turn: str = "t1") -> bytes:
    """An event's line as the broadcast has always written it (before deltas were kept unencoded)."""
    return json.dumps({"t": "event", "turn": turn, "event": dataclasses.asdict(event)}, ensure_ascii=False,
                      separators=(",", ":")).encode("utf-8", "surrogatepass") + b"\n"


class Observer:
    """A listener of the session that keeps the raw bytes the origin writes to it."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.connected = False
        self.closed = False
        self.server: asyncio.Server | None = None

    async def listen(self, session_id: str) -> Observer:
        path = os.path.join(live.session_dir(session_id, create=True), f"{uuid.uuid4().hex[:8]}.sock")
        self.server = await asyncio.start_unix_server(self._serve, path)
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connected = True
        while chunk := await reader.read(1 << 16):
            self.data += chunk
        self.closed = True
        writer.close()

    def lines(self) -> list[bytes]:
        return bytes(self.data).splitlines(keepends=True)

    def end(self) -> dict[str, Any]:
        last: dict[str, Any] = json.loads(self.lines()[-1])
        assert last["t"] == "end", last
        return last

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


@pytest.fixture(autouse=True)
def quick_rescan(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live, "RESCAN", 0.01)  # a new observer is found within 10 ms


async def run(events: Sequence[Event], joins: Sequence[int], limit: int | None = None,
              monkeypatch: pytest.MonkeyPatch | None = None, turn: str = "t1") -> list[Observer]:
    """A turn of `events` in a fresh session; an observer starts listening before the event at each
    index of `joins` (len(events): after the last) and is connected before the next is sent. With
    `limit`, LIMIT is that while the events are sent (where the backlog is dropped is decided then),
    and the default again before a late observer connects (its catch-up write is over a tight LIMIT)."""
    session_id = uuid.uuid4().hex
    broadcast = live.Broadcast(session_id, turn, "test", "the prompt", None)
    broadcast.start()
    observers: list[Observer] = []
    if limit is not None and monkeypatch is not None:
        monkeypatch.setattr(live, "LIMIT", limit)
    try:
        for i in range(len(events) + 1):
            if i == len(events) and limit is not None and monkeypatch is not None:
                monkeypatch.setattr(live, "LIMIT", 1 << 20)
            for _ in range(joins.count(i)):
                observer = await Observer().listen(session_id)
                observers.append(observer)
                await eventually(lambda o=observer: bool(o.data), "the origin to connect to the observer")
            if i < len(events):
                broadcast.send(events[i])
        broadcast.end(["r1"])
        await eventually(lambda: all(o.closed for o in observers), "the observers' streams to end")
    finally:
        broadcast.end([])
        for o in observers:
            o.close()
    assert broadcast.cut == 0
    return observers


@pytest.mark.parametrize("turn", ["t1", '"text":"" é'])
async def test_an_observer_gets_the_same_bytes_whenever_it_connects(turn: str) -> None:
    """From the start, in the middle (the deltas kept so far encoded when it connects) and at the
    end (the whole turn kept unencoded until then): the lines json.dumps made of every event."""
    n = len(EVENTS)
    early, = await run(EVENTS, [0], turn=turn)
    middle, late = await run(EVENTS, [n // 2, n], turn=turn)
    only_late, = await run(EVENTS, [n], turn=turn)
    assert early.data == middle.data == late.data == only_late.data
    lines = early.lines()
    assert lines[1:-1] == [old_line(e, turn) for e in EVENTS]  # the bytes as before
    assert [live.event_from_json(json.loads(line)["event"]) for line in lines[1:-1]] == EVENTS
    assert early.end() == {"t": "end", "turn": turn, "recorded": ["r1"], "partial": False}
    if turn == "t1":
        assert lines[2] == (b'{"t":"event","turn":"t1","event":{"text":"a \\"quote\\" and a \\\\ backslash",'
                            b'"parent_tool_call_id":null,"kind":"text_delta"}}\n')


@pytest.mark.parametrize("observed", [False, True], ids=["unobserved", "observed"])
async def test_the_backlog_is_dropped_past_limit_at_the_same_byte(monkeypatch: pytest.MonkeyPatch,
                                                                   observed: bool) -> None:
    """Unobserved, the deltas' lines are counted, not made; observed from the start, every line is
    made and measured: either way a backlog of exactly LIMIT bytes is kept and one byte more is not."""
    total = sum(len(old_line(e)) for e in EVENTS)
    joins = [0, len(EVENTS)] if observed else [len(EVENTS)]
    kept = (await run(EVENTS, joins, total, monkeypatch))[-1]
    assert kept.lines()[1:-1] == [old_line(e) for e in EVENTS] and kept.end()["partial"] is False
    dropped = (await run(EVENTS, joins, total - 1, monkeypatch))[-1]
    assert len(dropped.lines()) == 2 and dropped.end()["partial"] is True  # start, end: it missed the turn


async def test_each_unobserved_delta_counts_the_bytes_of_its_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Delta by delta (escapes, multi-byte characters, a lone surrogate, a parent call id): the
    backlog of one delta is kept at LIMIT = its line's length and dropped at one byte less."""
    for event in EVENTS:
        size = len(old_line(event))
        late, = await run([event], [1], size, monkeypatch)
        assert late.end()["partial"] is False and late.lines()[1] == old_line(event), event
        late, = await run([event], [1], size - 1, monkeypatch)
        assert late.end()["partial"] is True, event


async def test_a_turn_nobody_observes_keeps_no_encoded_copy_of_its_text() -> None:
    """500 deltas of 1,000 characters: encoded, the backlog would hold ~0.55 MB of lines; kept as
    they are, it holds references to the one text. An observer that connects then still gets them all."""
    delta = TextDelta("y" * 1000)
    session_id = uuid.uuid4().hex
    broadcast = live.Broadcast(session_id, "t1", "test", "the prompt", None)  # not started: nobody can connect
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(500):
            broadcast.send(delta)
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 500 * len(old_line(delta)) // 10, kept
    observer = await Observer().listen(session_id)
    broadcast.start()
    try:
        await eventually(lambda: observer.data.count(b"\n") >= 501, "the backlog to reach the observer")
        broadcast.end([])
        await eventually(lambda: observer.closed, "the stream to end")
    finally:
        broadcast.end([])
        observer.close()
    assert observer.lines()[1:-1] == [old_line(delta)] * 500 and observer.end()["partial"] is False
