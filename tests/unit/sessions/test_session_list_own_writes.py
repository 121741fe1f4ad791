"""Issue 17: the session index takes in what this daemon appends as it writes it (no read back, no
index save per list), and still sees what other daemons do to the same sessions: new, appended to,
rewritten, deleted. Another SessionStore on the same directory is what another daemon is to the
index (its own SessionIndex, the same files); test_session_list_e2e.py runs two real daemons."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toycoder_daemon.sessions import listing
from toycoder_daemon.sessions.store import SessionStore

Scans = list[tuple[int, int, bool]]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def rows(store: SessionStore) -> dict[str, tuple[str, int]]:
    return {r.id: (r.title, r.message_count) for r in store.list()}


def fresh_rows(store: SessionStore, tmp_path: Path) -> dict[str, tuple[str, int, float]]:
    """What an index built from the files alone says (no saved index, nothing noted)."""
    (store.dir / listing.INDEX_NAME).unlink(missing_ok=True)
    return {r.id: (r.title, r.message_count, r.created_at) for r in SessionStore(tmp_path / "data", tmp_path / "ws").list()}


def test_own_writes_are_listed_without_reading_them(tmp_path: Path, scans: Scans) -> None:
    store = SessionStore(tmp_path / "data", tmp_path / "ws")
    assert store.list() == []  # the index is loaded: from here on, writes are noted
    files = {sid: store.create(sid, {"title": "", "createdAt": float(n)}) for n, sid in enumerate(["s1", "s2", "s3"])}
    files["s1"].append([user("a"), user("b")])
    files["s2"].write_meta({"title": "named", "createdAt": 1.0})
    files["s2"].append([user("c")])
    assert rows(store) == {"s1": ("", 2), "s2": ("named", 1), "s3": ("", 0)}
    for i in range(20):  # a turn's appends between lists, as while sessions stream
        files["s3"].append([user(str(i))])
        assert rows(store)["s3"] == ("", i + 1)
    assert scans == []  # all of it known from the writes themselves
    assert {k: (t, c) for k, (t, c, _) in fresh_rows(store, tmp_path).items()} == rows(store)
    assert {r.id: r.created_at for r in store.list()} == {"s1": 0.0, "s2": 1.0, "s3": 2.0}
    for f in files.values():
        f.close()


def test_what_another_daemon_does_is_read(tmp_path: Path, scans: Scans) -> None:
    here, there = SessionStore(tmp_path / "data", tmp_path / "ws"), SessionStore(tmp_path / "data", tmp_path / "ws")
    mine = here.create("mine", {"title": "mine"})
    mine.append([user("1")])
    assert rows(here) == {"mine": ("mine", 1)}

    theirs = there.create("theirs", {"title": "theirs"})  # new, elsewhere
    theirs.append([user("x"), user("y")])
    assert rows(here) == {"mine": ("mine", 1), "theirs": ("theirs", 2)}

    other, _, _ = there.open("mine")  # a turn in my session, made elsewhere
    other.append([user("2"), user("3")])
    other.write_meta({"title": "renamed there"})
    other.release()
    assert rows(here)["mine"] == ("renamed there", 3)

    other.append([user("4")])  # unread here when this daemon writes next: not taken as noted
    mine.append([user("5")])
    assert rows(here)["mine"] == ("renamed there", 5)

    other.rewrite({"title": "compacted"}, [user("summary")])  # compaction elsewhere: a new file
    assert rows(here)["mine"] == ("compacted", 1)
    mine.close()
    other.close()
    theirs.close()
    there.delete("theirs")
    assert rows(here) == {"mine": ("compacted", 1)}
    assert scans  # what others wrote was read
    assert {k: (t, c) for k, (t, c, _) in fresh_rows(here, tmp_path).items()} == rows(here)


def test_a_write_while_a_list_holds_the_index_is_read_later(tmp_path: Path, scans: Scans) -> None:
    """A write never waits for a list (it may run on the event loop): it is then left to be read."""
    store = SessionStore(tmp_path / "data", tmp_path / "ws")
    f = store.create("s1", {"title": "t"})
    assert rows(store) == {"s1": ("t", 0)}
    before = len(scans)
    with store._index._lock:  # a list in another thread, mid-way
        f.append([user("a")])
    assert rows(store) == {"s1": ("t", 1)} and len(scans) == before + 1
    f.append([user("b")])  # and noted again afterwards
    assert rows(store) == {"s1": ("t", 2)} and len(scans) == before + 1
    f.close()


def test_the_index_is_saved_once_enough_was_taken_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "SAVE_AFTER", 4096)
    saves: list[int] = []
    real = listing.SessionIndex._save
    monkeypatch.setattr(listing.SessionIndex, "_save", lambda self, entries: (saves.append(len(entries)),
                                                                               real(self, entries))[1])
    store = SessionStore(tmp_path / "data", tmp_path / "ws")
    f = store.create("s1", {"title": "t"})
    assert rows(store) == {"s1": ("t", 0)} and saves == []
    for i in range(20):  # small appends, a list after each: no save (an fsync) per list
        f.append([user(str(i))])
        store.list()
    assert saves == []
    f.append([user("x" * 5000)])
    store.list()
    store.list()
    assert saves == [1]
    # what was saved is what a restarted daemon starts from: nothing left to read
    assert rows(SessionStore(tmp_path / "data", tmp_path / "ws")) == {"s1": ("t", 21)}
    f.close()
