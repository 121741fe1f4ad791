"""Issue 13 item 13: session/list reads per-session metadata from an index (only what was appended
since the last list) and runs off the event loop, so a 10 MB session does not stall other requests.
bench/session_list.py measures a cheap request's p95 while lists run."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

from toycoder_daemon.sessions import listing
from toycoder_daemon.sessions.store import SessionStore
from toycoder_daemon.wire import protocol as wire


def big_tool_message(i: int) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"c{i}", "content": "x" * 100_000, "status": "completed"}


def test_list_reads_only_what_was_appended(tmp_path: Path, scans: list[tuple[int, int, bool]]) -> None:
    store = SessionStore(tmp_path / "data", tmp_path / "ws")
    f = store.create("big", {"title": "big one", "createdAt": 5.0})
    f.append([big_tool_message(i) for i in range(100)])  # ~10 MB
    size = (store.dir / "big.jsonl").stat().st_size
    assert size > 10_000_000
    [row] = store.list()
    assert (row.title, row.created_at, row.message_count) == ("big one", 5.0, 100)
    assert scans == [(0, size, False)]
    for _ in range(50):
        store.list()
    assert len(scans) == 1  # nothing changed: nothing read
    f.append([{"role": "user", "content": "more"}])
    f.write_meta({"title": "renamed", "createdAt": 5.0})
    [row] = store.list()
    assert (row.title, row.message_count) == ("renamed", 101)
    assert len(scans) == 1  # this store's own appends are taken in as written: not read back
    # a fresh store (a restarted daemon) reads the saved index, not the 10 MB: only what came after it
    again = SessionStore(tmp_path / "data", tmp_path / "ws")
    assert [(r.title, r.message_count) for r in again.list()] == [("renamed", 101)]
    assert len(scans) == 2 and scans[-1][0] == size
    f.close()


def test_index_follows_rewrites_torn_lines_deletes_and_a_broken_index(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "data", tmp_path / "ws")
    f = store.create("s1", {"title": "t"})
    f.append([{"role": "user", "content": str(i)} for i in range(5)])
    assert store.list()[0].message_count == 5
    f.rewrite({"title": "compacted"}, [{"role": "user", "content": "summary"}])  # a new file (inode)
    assert [(r.title, r.message_count) for r in store.list()] == [("compacted", 1)]
    with open(store.dir / "s1.jsonl", "ab") as raw:
        raw.write(b'{"t": "msg", "m": {"role": "user", "con')  # torn: not counted yet
    assert store.list()[0].message_count == 1
    with open(store.dir / "s1.jsonl", "ab") as raw:
        raw.write(b'tent": "x"}}\n')
    assert store.list()[0].message_count == 2
    (store.dir / listing.INDEX_NAME).write_text("{not json")
    assert SessionStore(tmp_path / "data", tmp_path / "ws").list()[0].message_count == 2
    f.close()
    store.delete("s1")
    assert store.list() == [] and json.loads((store.dir / listing.INDEX_NAME).read_text()) == {}


async def test_session_list_runs_off_the_event_loop(start_daemon: Any, scans: list[tuple[int, int, bool]],
                                                    tmp_path: Path) -> None:
    d = await start_daemon()
    sid = (await d.call(wire.SESSION_NEW, {"title": "big"}))["sessionId"]
    [path] = (tmp_path / "data" / "sessions").glob(f"*/{sid}.jsonl")
    with open(path, "ab") as f:  # what a long session with big tool outputs looks like on disk
        for i in range(100):
            f.write(json.dumps({"t": "msg", "m": big_tool_message(i)}).encode() + b"\n")
    main = threading.get_ident()
    threads: list[int] = []
    real_list = listing.SessionIndex.summaries

    def list_where(self: listing.SessionIndex) -> Any:
        threads.append(threading.get_ident())
        return real_list(self)

    listing.SessionIndex.summaries = list_where  # type: ignore[method-assign]
    try:
        results = await asyncio.gather(*(d.call(wire.SESSION_LIST, {}) for _ in range(20)))
    finally:
        listing.SessionIndex.summaries = real_list  # type: ignore[method-assign]
    assert all([(s["sessionId"], s["messageCount"]) for s in r["sessions"]] == [(sid, 100)] for r in results)
    assert threads and main not in threads
    assert scans and not any(on_loop for _, _, on_loop in scans)
    assert len(scans) == 1  # 20 lists, one read of the file


def test_a_replaced_file_with_the_old_inode_is_read_again(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "data", tmp_path / "ws")
    f = store.create("s1", {"title": "first"})
    f.append([{"role": "user", "content": str(i)} for i in range(3)])
    assert store.list()[0].message_count == 3
    f.close()
    path = store.dir / "s1.jsonl"
    # same inode, longer, different content before the old offset: what inode reuse looks like
    path.write_bytes(b'{"t": "meta", "title": "other"}\n' + b'{"t": "msg", "m": {"role": "user", "content": "y"}}\n' * 9)
    [row] = store.list()
    assert (row.title, row.message_count) == ("other", 9)
