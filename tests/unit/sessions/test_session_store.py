"""SessionStore on a temp dir and the Conversation that writes through it: append-only lines, the
last meta wins, torn lines, locks, rewrites, and no mutation that bypasses the file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from toycoder_daemon.core.errors import SessionBusy, SessionNotFound
from toycoder_daemon.core.messages import Message
from toycoder_daemon.sessions.conversation import Conversation
from toycoder_daemon.sessions.session import FileSink
from toycoder_daemon.sessions.store import SessionStore


def user(text: str) -> Message:
    return {"role": "user", "content": text}


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "data", tmp_path / "ws")


def records(store: SessionStore, sid: str) -> list[dict]:
    return [json.loads(line) for line in (store.dir / f"{sid}.jsonl").read_text().splitlines()]


def test_create_append_read_list_delete(store: SessionStore) -> None:
    sid = store.new_id()
    f = store.create(sid, {"title": "first", "createdAt": 1.0})
    f.append([user("a"), user("b")])
    f.write_meta({"title": "renamed", "createdAt": 1.0})
    meta, msgs, _ = store.read(sid)
    assert meta["title"] == "renamed" and [m["content"] for m in msgs] == ["a", "b"]
    assert (store.dir / "workspace.txt").read_text().strip().endswith("ws")
    [row] = store.list()
    assert (row.id, row.title, row.message_count) == (sid, "renamed", 2)
    other, _, _ = store.open(sid)  # open in two daemons at once: only a turn takes the lock
    assert other.held  # open() repairs under the lock and leaves releasing it to the caller
    other.release()
    f.acquire()
    with pytest.raises(SessionBusy, match="another ToyCoder daemon"):
        other.acquire()
    with pytest.raises(SessionBusy):
        store.delete(sid)
    f.release()
    other.acquire()
    other.close()
    f.close()
    store.delete(sid)
    assert store.list() == []
    with pytest.raises(SessionNotFound):
        store.read(sid)
    with pytest.raises(SessionNotFound):
        store.open("../escape")


def test_the_lock_names_its_holder_over_an_older_longer_pid(store: SessionStore) -> None:
    sid = store.new_id()
    f = store.create(sid, {"title": "t"})
    lock = store.dir / f"{sid}.lock"
    lock.write_text("4194304")  # pid_max: the longest pid an older daemon (unpadded) left
    f.acquire()  # written in place, without truncating (no journal wait on the event loop)
    assert lock.read_text().strip() == str(os.getpid())
    other, _, _ = store.open(sid)
    with pytest.raises(SessionBusy, match=rf"\(pid {os.getpid()}\)"):
        other.acquire()
    f.close()
    other.close()


def test_a_lock_whose_pid_field_is_garbage_names_no_holder(store: SessionStore) -> None:
    sid = store.new_id()
    f = store.create(sid, {"title": "t"})
    f.acquire()
    other, _, _ = store.open(sid)
    for garbage in (b"\0" * 20, b"4x2 \n"):  # a crash's zero-filled block; anything not a pid
        (store.dir / f"{sid}.lock").write_bytes(garbage)
        with pytest.raises(SessionBusy, match=r"\(pid \?\)"):
            other.acquire()
    f.close()
    other.close()


def test_torn_last_line_is_cut_on_open(store: SessionStore) -> None:
    sid = store.new_id()
    f = store.create(sid, {"title": ""})
    f.append([user("kept")])
    f.close()
    path = store.dir / f"{sid}.jsonl"
    with path.open("ab") as out:
        out.write(b'{"t": "msg", "m": {"role": "us')  # the daemon was killed mid-write
    f2, _, msgs = store.open(sid)
    assert [m["content"] for m in msgs] == ["kept"]
    f2.append([user("next")])
    f2.close()
    assert [r["m"]["content"] for r in records(store, sid) if r["t"] == "msg"] == ["kept", "next"]


async def test_conversation_writes_every_mutation(store: SessionStore) -> None:
    sid = store.new_id()
    f = store.create(sid, {"title": "t"})
    conv = Conversation("system prompt", [], FileSink(f, lambda: {"title": "after"}))
    conv.append(user("one"))
    conv.extend([user("two"), user("three")])
    conv.extend([])
    assert [m["content"] for m in conv] == ["system prompt", "one", "two", "three"]
    assert [m["content"] for m in conv.stored()] == ["one", "two", "three"]
    assert [r["m"]["content"] for r in records(store, sid) if r["t"] == "msg"] == ["one", "two", "three"]
    await conv.replace_all([{"role": "system", "content": "new prompt"}, user("summary"), conv[-1]], strategy="summary")
    assert conv.system == "new prompt" and len(conv) == 3 and conv[1]["content"] == "summary"
    recs = records(store, sid)  # compaction appends where the model's context starts; nothing is removed
    assert [r["m"]["content"] for r in recs if r["t"] == "msg"] == ["one", "two", "three"]
    assert recs[-1] == {"t": "context", "start": 2, "head": [user("summary")], "strategy": "summary"}
    conv.append(user("four"))
    assert [r["m"]["content"] for r in records(store, sid) if r["t"] == "msg"] == ["one", "two", "three", "four"]
    assert [m["content"] for m in conv] == ["new prompt", "summary", "three", "four"]
    await conv.replace_all([user("only")])  # without a system message the prompt is kept
    assert [m["content"] for m in conv] == ["new prompt", "only"]
    assert [m["content"] for m in conv.history()] == ["one", "two", "three", "four"]
    f.close()


def test_conversation_has_no_unwritten_list_mutations() -> None:
    conv = Conversation("s")
    for name in ("__setitem__", "__delitem__", "__iadd__", "insert", "pop", "remove", "clear", "sort", "reverse"):
        assert not hasattr(conv, name), name


async def test_rewrite_runs_off_the_event_loop(store: SessionStore) -> None:
    sid = store.new_id()
    f = store.create(sid, {})
    threads: list[str] = []
    rewrite = f.rewrite

    def spy(meta: dict, messages: list[Message]) -> None:
        import threading

        threads.append(threading.current_thread().name)
        rewrite(meta, messages)

    f.rewrite = spy  # type: ignore[method-assign]
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]}
    conv = Conversation("s", [call, user("later")], FileSink(f, dict))
    answer = {"role": "tool", "tool_call_id": "c1", "content": "cancelled"}
    assert conv.repair([conv[1], answer, conv[2]])  # inserted before a later message: a rewrite
    await conv.rewrite()
    assert threads and threads[0] != "MainThread"
    f.close()


def test_read_new_gives_what_another_daemon_appended(store: SessionStore) -> None:
    sid = store.new_id()
    a = store.create(sid, {"title": ""})
    a.append([user("one")])
    b, _, msgs = store.open(sid)
    b.release()
    assert [m["content"] for m in msgs] == ["one"] and not b.changed_elsewhere()
    a.acquire()
    a.append([user("two")])
    a.write_meta({"title": "by a"})
    with (store.dir / f"{sid}.jsonl").open("ab") as out:
        out.write(b'{"t": "msg", "m": {"role": "us')  # a's next line, half written
    assert b.changed_elsewhere()
    new = b.read_new()
    assert [m["content"] for m in new.messages] == ["two"] and new.meta["title"] == "by a" and not new.reset
    a.release()  # as if a was killed: b, holding the lock, cuts the torn line off
    b.acquire()
    assert b.read_new().messages == [] and not b.changed_elsewhere()
    b.append([user("three")])
    assert not b.changed_elsewhere()  # its own line counts as read
    assert [m["content"] for m in a.read_new().messages] == ["three"]
    b.rewrite({"title": "compacted"}, [user("summary")])
    b.release()
    new = a.read_new()
    assert new.reset and [m["content"] for m in new.messages] == ["summary"]
    a.close()
    b.close()


def test_a_write_after_another_daemons_rewrite_goes_into_the_new_file(store: SessionStore) -> None:
    sid = store.new_id()
    a = store.create(sid, {"title": "t"})
    a.append([user("one")])
    b, _, _ = store.open(sid)
    b.rewrite({"title": "compacted"}, [user("summary")])  # compaction, before a's poll noticed it
    b.release()
    a.write_meta({"title": "renamed by a"})
    assert [r.get("title") for r in records(store, sid) if r["t"] == "meta"] == ["compacted", "renamed by a"]
    new = a.read_new()  # a reads the new file whole, its own line included, and goes on from its end
    assert new.reset and new.meta["title"] == "renamed by a" and [m["content"] for m in new.messages] == ["summary"]
    assert not a.changed_elsewhere()
    a.acquire()
    a.append([user("two")])
    a.release()
    assert not a.changed_elsewhere()  # its own line counts as read
    b.acquire()
    assert [m["content"] for m in b.read_new().messages] == ["two"]
    assert [m["content"] for m in store.open(sid)[2]] == ["summary", "two"]
    a.close()
    b.close()
