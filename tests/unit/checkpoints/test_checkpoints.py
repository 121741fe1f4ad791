"""Checkpoint store on a temp dir: recording, listing, restoring, conflicts, and hostile content."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from toycoder_daemon.checkpoints import CheckpointStore, UnknownCheckpoint, conversation_note
from toycoder_daemon.checkpoints.restore import UNTRACKED_NOTE

SID = "s1"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = (tmp_path / "ws").resolve()
    root.mkdir()
    (root / "a.txt").write_bytes(b"a1\na2\n")
    (root / "b.sh").write_bytes(b"echo hi\n")
    (root / "b.sh").chmod(0o755)
    return root


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


def store_for(data: Path, ws: Path, **kw: int) -> CheckpointStore:
    return CheckpointStore(data, ws, SID, **kw)


def agent_write(store: CheckpointStore, turn: str, ws: Path, rel: str, content: bytes | None) -> None:
    """What write_file/edit_file will do: record, write (None deletes), record."""
    store.record_before_write(turn, ws / rel)
    p = ws / rel
    if content is None:
        p.unlink()
    else:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content)
    store.record_after_write(turn, ws / rel)


def three_turns(store: CheckpointStore, ws: Path) -> tuple[str, str, str]:
    t1 = store.begin_turn("s1-1", "create c and change a\nmore detail")
    agent_write(store, t1, ws, "new/dir/c.txt", b"c\n")
    agent_write(store, t1, ws, "a.txt", b"a1\nA2\na3\n")
    t2 = store.begin_turn("s1-2", "rewrite a, drop b")
    agent_write(store, t2, ws, "a.txt", b"x\n")
    agent_write(store, t2, ws, "b.sh", None)
    t3 = store.begin_turn("s1-3", "grow c")
    agent_write(store, t3, ws, "new/dir/c.txt", b"c\nc2\n")
    return t1, t2, t3


def files_of(store: CheckpointStore) -> dict[str, list[tuple[str, str, int | None, int | None]]]:
    return {c["turnId"]: [(f["path"], f["status"], f["added"], f["removed"]) for f in c["files"]] for c in store.list()}


def test_three_turns_are_listed_with_their_net_changes(ws: Path, data: Path) -> None:
    store = store_for(data, ws)
    t1, t2, t3 = three_turns(store, ws)
    assert files_of(store) == {
        t1: [("new/dir/c.txt", "created", 1, 0), ("a.txt", "modified", 2, 1)],
        t2: [("a.txt", "modified", 1, 3), ("b.sh", "deleted", 0, 1)],
        t3: [("new/dir/c.txt", "modified", 1, 0)],
    }
    listed = store.list()
    assert [c["prompt"] for c in listed] == ["create c and change a", "rewrite a, drop b", "grow c"]
    assert all(c["kind"] == "prompt" and isinstance(c["createdAt"], float) for c in listed)
    # The same history read back by a fresh store (a restarted daemon).
    assert files_of(store_for(data, ws)) == files_of(store)


def test_restoring_the_middle_turn_restores_it_and_the_later_one(ws: Path, data: Path) -> None:
    store = store_for(data, ws)
    t1, t2, t3 = three_turns(store, ws)
    result = store.restore(t2)
    assert sorted(result["restored"]) == ["a.txt", "b.sh", "new/dir/c.txt"]
    assert result["conflicts"] == []
    assert (ws / "a.txt").read_bytes() == b"a1\nA2\na3\n"  # as turn 1 left it
    assert (ws / "b.sh").read_bytes() == b"echo hi\n"  # recreated, with its mode
    assert stat.S_IMODE((ws / "b.sh").stat().st_mode) == 0o755
    assert (ws / "new/dir/c.txt").read_bytes() == b"c\n"  # turn 3 undone, turn 1's creation kept
    assert result["note"] == UNTRACKED_NOTE and "run_command" in result["note"]


def test_restoring_the_first_turn_deletes_what_it_created_with_its_directories(ws: Path, data: Path) -> None:
    (ws / "keep").mkdir()
    store = store_for(data, ws)
    t1 = store.begin_turn("s1-1", "make files")
    agent_write(store, t1, ws, "new/dir/c.txt", b"c\n")
    agent_write(store, t1, ws, "keep/d.txt", b"d\n")
    result = store.restore(t1)
    assert sorted(result["restored"]) == ["keep/d.txt", "new/dir/c.txt"]
    assert not (ws / "new").exists()  # the directories the write created go too
    assert (ws / "keep").is_dir() and not (ws / "keep/d.txt").exists()  # a directory that was there stays


def test_a_file_changed_outside_the_agent_is_a_conflict_until_forced(ws: Path, data: Path) -> None:
    store = store_for(data, ws)
    t1 = store.begin_turn("s1-1", "edit")
    agent_write(store, t1, ws, "a.txt", b"agent\n")
    agent_write(store, t1, ws, "b.sh", b"echo agent\n")
    (ws / "a.txt").write_bytes(b"the person's work\n")
    result = store.restore(t1)
    assert result["restored"] == ["b.sh"]
    assert [c["path"] for c in result["conflicts"]] == ["a.txt"]
    assert "changed outside the agent" in result["conflicts"][0]["reason"]
    assert (ws / "a.txt").read_bytes() == b"the person's work\n"
    forced = store.restore(t1, force=True)
    assert forced["restored"] == ["a.txt", "b.sh"] and forced["conflicts"] == []
    assert (ws / "a.txt").read_bytes() == b"a1\na2\n"


def test_a_file_put_back_by_hand_is_not_a_conflict(ws: Path, data: Path) -> None:
    store = store_for(data, ws)
    t1 = store.begin_turn("s1-1", "edit")
    agent_write(store, t1, ws, "a.txt", b"agent\n")
    (ws / "a.txt").write_bytes(b"a1\na2\n")
    result = store.restore(t1)
    assert result == {"turnId": None, "restored": ["a.txt"], "conflicts": [], "inEditor": [], "note": UNTRACKED_NOTE}


def test_a_restore_is_recorded_and_can_be_undone(ws: Path, data: Path) -> None:
    store = store_for(data, ws)
    t1, t2, t3 = three_turns(store, ws)
    undo = store.restore(t2, as_turn="s1-4")
    assert undo["turnId"] == "s1-4"
    last = store.list()[-1]
    assert last["turnId"] == "s1-4" and last["kind"] == "restore" and last["prompt"] == f"restore {t2}"
    assert {f["path"]: f["status"] for f in last["files"]} == {
        "a.txt": "modified", "b.sh": "created", "new/dir/c.txt": "modified"}
    redo = store_for(data, ws).restore("s1-4")  # from disk, as after a restart
    assert sorted(redo["restored"]) == ["a.txt", "b.sh", "new/dir/c.txt"] and redo["conflicts"] == []
    assert (ws / "a.txt").read_bytes() == b"x\n"
    assert not (ws / "b.sh").exists()
    assert (ws / "new/dir/c.txt").read_bytes() == b"c\nc2\n"


def test_recording_before_a_write_is_idempotent_per_turn_and_path(ws: Path, data: Path) -> None:
    store = store_for(data, ws)
    t1 = store.begin_turn("s1-1", "two edits")
    agent_write(store, t1, ws, "a.txt", b"first\n")
    agent_write(store, t1, ws, "a.txt", b"second\n")
    t2 = store.begin_turn("s1-2", "third edit")
    agent_write(store, t2, ws, "a.txt", b"third\n")
    lines = [json.loads(x) for x in store.index.read_bytes().splitlines()]
    befores = [(r["turn"], r["path"]) for r in lines if r["t"] == "before"]
    assert befores == [(t1, "a.txt"), (t2, "a.txt")]
    assert sum(1 for r in lines if r["t"] == "turn") == 2
    assert files_of(store)[t1] == [("a.txt", "modified", 1, 2)]  # from the original, to the last write
    store.restore(t1)
    assert (ws / "a.txt").read_bytes() == b"a1\na2\n"


def test_a_torn_last_index_line_is_ignored_and_cut_before_the_next_append(ws: Path, data: Path) -> None:
    store = store_for(data, ws)
    t1 = store.begin_turn("s1-1", "edit")
    agent_write(store, t1, ws, "a.txt", b"agent\n")
    with open(store.index, "ab") as f:
        f.write(b'{"t":"after","turn":"s1-1","pa')  # the daemon died mid-write
    again = store_for(data, ws)
    assert files_of(again) == files_of(store)
    t2 = again.begin_turn("s1-2", "more")
    agent_write(again, t2, ws, "b.sh", b"echo more\n")
    raw = again.index.read_bytes()
    assert b'"pa\n' not in raw and b'"pa{' not in raw
    assert all(json.loads(line) for line in raw.splitlines())  # every line whole again
    assert list(files_of(store_for(data, ws))) == [t1, t2]


def test_a_damaged_middle_line_is_skipped(ws: Path, data: Path) -> None:
    store = store_for(data, ws)
    t1 = store.begin_turn("s1-1", "edit")
    agent_write(store, t1, ws, "a.txt", b"agent\n")
    lines = store.index.read_bytes().splitlines(keepends=True)
    store.index.write_bytes(lines[0] + b"not json\n" + b"".join(lines[1:]))
    assert files_of(store_for(data, ws)) == {t1: [("a.txt", "modified", 1, 2)]}


def test_a_turn_id_used_by_an_earlier_daemon_gets_a_suffix(ws: Path, data: Path) -> None:
    store = store_for(data, ws)
    agent_write(store, store.begin_turn("s1-1", "first daemon"), ws, "a.txt", b"one\n")
    later = store_for(data, ws)
    t = later.begin_turn("s1-1", "second daemon")
    assert t == "s1-1.2"
    agent_write(later, t, ws, "a.txt", b"two\n")
    assert [c["turnId"] for c in store_for(data, ws).list()] == ["s1-1", "s1-1.2"]


def test_resolve_takes_an_id_a_prefix_or_a_turn_number(ws: Path, data: Path) -> None:
    store = store_for(data, ws)
    t1, t2, t3 = three_turns(store, ws)
    assert store.resolve("s1-2") == t2
    assert store.resolve("3") == t3
    with pytest.raises(UnknownCheckpoint, match="matches 3 turns"):
        store.resolve("s1")
    with pytest.raises(UnknownCheckpoint):
        store.resolve("9")
    with pytest.raises(UnknownCheckpoint):
        store.restore("nope")


def test_only_the_named_paths_are_restored(ws: Path, data: Path) -> None:
    store = store_for(data, ws)
    t1 = store.begin_turn("s1-1", "edit both")
    agent_write(store, t1, ws, "a.txt", b"agent a\n")
    agent_write(store, t1, ws, "b.sh", b"agent b\n")
    result = store.restore(t1, paths=[str(ws / "a.txt"), "zzz.txt"])
    assert result["restored"] == ["a.txt"]
    assert result["conflicts"] == [{"path": "zzz.txt", "reason": f"not changed by turn {t1} or a later one"}]
    assert (ws / "a.txt").read_bytes() == b"a1\na2\n" and (ws / "b.sh").read_bytes() == b"agent b\n"


def test_a_write_that_did_not_happen_is_not_listed(ws: Path, data: Path) -> None:
    store = store_for(data, ws)
    t1 = store.begin_turn("s1-1", "failed write")
    store.record_before_write(t1, ws / "a.txt")  # the tool failed after this
    assert store.list() == []
    assert store.restore(t1)["conflicts"] == []
    assert (ws / "a.txt").read_bytes() == b"a1\na2\n"


def test_an_after_without_a_before_is_reported_not_recorded(ws: Path, data: Path) -> None:
    store = store_for(data, ws)
    rec = store.record_after_write("s1-1", ws / "a.txt")
    assert rec.problem == "no checkpoint was taken before this write"
    assert not store.index.exists()


def test_paths_outside_the_workspace_are_refused(ws: Path, data: Path) -> None:
    store = store_for(data, ws)
    with pytest.raises(ValueError, match="outside the workspace"):
        store.record_before_write("s1-1", ws.parent / "elsewhere.txt")
    with pytest.raises(ValueError, match="not a file in the workspace"):
        store.record_before_write("s1-1", ws)


def test_a_file_over_the_cap_is_hashed_not_kept_and_reported(ws: Path, data: Path) -> None:
    store = store_for(data, ws, max_bytes=64)
    big = b"x" * 5000 + b"\n"
    (ws / "big.log").write_bytes(big)
    t1 = store.begin_turn("s1-1", "touch big")
    rec = store.record_before_write(t1, ws / "big.log")
    assert rec.problem is not None and "too large to checkpoint" in rec.problem and "5001 bytes" in rec.problem
    assert store.record_before_write(t1, ws / "big.log").problem == rec.problem  # again: same outcome
    (ws / "big.log").write_bytes(b"small\n")
    store.record_after_write(t1, ws / "big.log")
    before = store.turns[-1].before["big.log"]
    assert before.sha == hashlib.sha256(big).hexdigest() and not before.stored
    assert not store.blobs.has(before.sha)
    assert files_of(store)[t1] == [("big.log", "modified", None, None)]  # no text to count
    result = store.restore(t1)
    assert result["restored"] == []
    assert "too large to checkpoint (5001 bytes)" in result["conflicts"][0]["reason"]
    assert (ws / "big.log").read_bytes() == b"small\n"


def test_files_larger_than_a_read_chunk_are_streamed_kept_or_dropped_by_the_cap(ws: Path, data: Path) -> None:
    content = hashlib.sha256(b"seed").digest() * (3 * 1024 * 1024 // 32)  # 3 MiB: several read chunks
    for cap, kept in ((2 * 1024 * 1024, False), (4 * 1024 * 1024, True)):
        (ws / "huge.dat").write_bytes(content)
        store = CheckpointStore(data, ws, f"cap{cap}", max_bytes=cap)
        t1 = store.begin_turn("t-1", "shrink huge")
        rec = store.record_before_write(t1, ws / "huge.dat")
        state = store.turns[-1].before["huge.dat"]
        assert state.sha == hashlib.sha256(content).hexdigest() and state.size == len(content)
        assert (state.stored, rec.problem is None, store.blobs.has(state.sha)) == (kept, kept, kept)
        assert not list(store.blobs.root.glob(".in.*"))  # no temp file left behind either way
        (ws / "huge.dat").write_bytes(b"small\n")
        store.record_after_write(t1, ws / "huge.dat")
        result = store.restore(t1)
        assert (result["restored"] == ["huge.dat"]) is kept
        assert ((ws / "huge.dat").read_bytes() == content) is kept


def test_a_file_over_the_cap_still_has_its_changes_detected(ws: Path, data: Path) -> None:
    store = store_for(data, ws, max_bytes=8)
    t1 = store.begin_turn("s1-1", "write big")
    agent_write(store, t1, ws, "a.txt", b"y" * 100)
    (ws / "a.txt").write_bytes(b"z" * 100)  # same size, other content: only the hash tells
    result = store.restore(t1)
    assert "changed outside the agent" in result["conflicts"][0]["reason"]
    assert (ws / "a.txt").read_bytes() == b"z" * 100


def test_a_restore_that_could_not_be_undone_needs_force(ws: Path, data: Path) -> None:
    store = store_for(data, ws, max_bytes=8)
    t1 = store.begin_turn("s1-1", "grow a")
    agent_write(store, t1, ws, "a.txt", b"y" * 100)  # the agent's own write, too large to keep
    result = store.restore(t1)
    assert "so this restore could not be undone" in result["conflicts"][0]["reason"]
    assert (ws / "a.txt").read_bytes() == b"y" * 100
    assert store.restore(t1, force=True)["restored"] == ["a.txt"]
    assert (ws / "a.txt").read_bytes() == b"a1\na2\n"


def test_an_unreadable_file_is_reported_not_recorded(ws: Path, data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = store_for(data, ws)

    def unreadable(key: str, keep: bool = False) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(store, "state_of", unreadable)
    rec = store.record_before_write("s1-1", ws / "a.txt")
    assert rec.problem == "a.txt could not be read to checkpoint it (Permission denied)"
    assert store.list() == [] and not store.index.exists()


def test_an_edit_through_the_editor_records_the_buffer_it_started_from(ws: Path, data: Path) -> None:
    store = store_for(data, ws)
    t1 = store.begin_turn("s1-1", "edit the open buffer")
    store.record_before_write(t1, ws / "b.sh", content=b"echo unsaved\n")  # the buffer, not the disk
    store.record_after_write(t1, ws / "b.sh", content=b"echo unsaved\necho agent\n")
    assert files_of(store)[t1] == [("b.sh", "modified", 1, 0)]
    assert store.turns[-1].before["b.sh"].mode == 0o755  # the file's mode, for a restore to keep
    (ws / "b.sh").write_bytes(b"echo unsaved\necho agent\n")  # the editor saved the buffer
    assert store.restore(t1)["restored"] == ["b.sh"]
    assert (ws / "b.sh").read_bytes() == b"echo unsaved\n"
    assert stat.S_IMODE((ws / "b.sh").stat().st_mode) == 0o755


def test_binary_files_get_no_line_counts_and_restore_byte_for_byte(ws: Path, data: Path) -> None:
    blob = bytes(range(256)) * 3
    (ws / "img.bin").write_bytes(blob)
    store = store_for(data, ws)
    t1 = store.begin_turn("s1-1", "patch binary")
    agent_write(store, t1, ws, "img.bin", b"\x00changed")
    agent_write(store, t1, ws, "a.txt", b"a1\n")
    assert files_of(store)[t1] == [("img.bin", "modified", None, None), ("a.txt", "modified", 0, 1)]
    store.restore(t1)
    assert (ws / "img.bin").read_bytes() == blob


def test_non_utf8_file_names_round_trip(ws: Path, data: Path) -> None:
    name = os.fsdecode(b"caf\xe9.txt")  # latin-1 bytes: not UTF-8
    try:
        (ws / name).write_bytes(b"old\n")
    except (OSError, UnicodeEncodeError):
        pytest.fail("this filesystem refuses non-UTF-8 names; the test needs one that accepts them")
    store = store_for(data, ws)
    t1 = store.begin_turn("s1-1", "edit café")
    agent_write(store, t1, ws, name, b"new\n")
    again = store_for(data, ws)
    assert files_of(again) == {t1: [(name, "modified", 1, 1)]}
    assert again.restore(t1)["restored"] == [name]
    assert (ws / name).read_bytes() == b"old\n"


def test_a_symlinked_directory_leading_outside_is_refused_even_when_forced(ws: Path, data: Path,
                                                                           tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_bytes(b"outside\n")
    store = store_for(data, ws)
    t1 = store.begin_turn("s1-1", "write sub/f.txt")
    agent_write(store, t1, ws, "sub/f.txt", b"agent\n")
    (ws / "sub/f.txt").unlink()
    (ws / "sub").rmdir()
    (ws / "sub").symlink_to(outside)
    result = store.restore(t1, force=True)
    assert result["restored"] == []
    assert "outside the workspace" in result["conflicts"][0]["reason"]
    assert (outside / "f.txt").read_bytes() == b"outside\n"


def test_a_file_replaced_by_a_symlink_to_outside_is_refused_even_when_forced(ws: Path, data: Path,
                                                                             tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"keep me\n")
    store = store_for(data, ws)
    t1 = store.begin_turn("s1-1", "edit a")
    agent_write(store, t1, ws, "a.txt", b"agent\n")
    (ws / "a.txt").unlink()
    (ws / "a.txt").symlink_to(secret)
    result = store.restore(t1, force=True)
    assert "symlink leading outside the workspace" in result["conflicts"][0]["reason"]
    assert secret.read_bytes() == b"keep me\n" and (ws / "a.txt").is_symlink()


def test_blobs_are_deduplicated_private_and_outside_the_workspace(ws: Path, data: Path) -> None:
    before = {p.relative_to(ws) for p in ws.rglob("*")}
    store = store_for(data, ws)
    t1 = store.begin_turn("s1-1", "same content twice")
    agent_write(store, t1, ws, "a.txt", b"same\n")
    agent_write(store, t1, ws, "b.sh", b"same\n")
    blobs = [p for p in store.blobs.root.rglob("*") if p.is_file()]
    contents = {p.read_bytes() for p in blobs}
    assert len(blobs) == len(contents) == 3  # a's and b's originals, and the shared new content
    for p in [*blobs, store.index]:
        assert stat.S_IMODE(p.stat().st_mode) == 0o600
    for d in [store.dir, store.blobs.root, *(p.parent for p in blobs)]:
        assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert {p.relative_to(ws) for p in ws.rglob("*")} == before  # nothing of ours in the workspace
    assert store.dir.is_relative_to(data / "checkpoints")


def test_damaged_blob_is_a_conflict_not_a_wrong_restore(ws: Path, data: Path) -> None:
    store = store_for(data, ws)
    t1 = store.begin_turn("s1-1", "edit")
    agent_write(store, t1, ws, "a.txt", b"agent\n")
    sha = store.turns[-1].before["a.txt"].sha
    store.blobs.path(sha).write_bytes(b"garbage")
    result = store.restore(t1)
    assert "missing or damaged" in result["conflicts"][0]["reason"]
    assert (ws / "a.txt").read_bytes() == b"agent\n"


def test_conversation_note_names_the_files_and_what_is_not_tracked(ws: Path, data: Path) -> None:
    store = store_for(data, ws)
    t1 = store.begin_turn("s1-1", "edit")
    agent_write(store, t1, ws, "a.txt", b"agent\n")
    agent_write(store, t1, ws, "b.sh", b"agent\n")
    (ws / "b.sh").write_bytes(b"person\n")
    note = conversation_note(store.restore(t1), t1)
    assert f"before turn {t1}" in note and "Restored: a.txt." in note
    assert "Not restored: b.sh (changed outside the agent" in note and UNTRACKED_NOTE in note


def test_delete_forgets_the_sessions_checkpoints(ws: Path, data: Path) -> None:
    store = store_for(data, ws)
    agent_write(store, store.begin_turn("s1-1", "edit"), ws, "a.txt", b"agent\n")
    store.delete()
    assert not store.dir.exists() and store.list() == []
    assert store_for(data, ws).list() == []


def test_a_turn_number_wins_over_a_session_id_that_starts_with_it(ws: Path, data: Path) -> None:
    """Session ids are hex: `/restore 3` in session 3ab... means its turn 3, not every turn."""
    store = store_for(data, ws)
    ids = [store.begin_turn(f"3ab-{n}", f"turn {n}") for n in (1, 2, 3)]
    for n, t in enumerate(ids, 1):
        agent_write(store, t, ws, "a.txt", f"{n}\n".encode())
    assert store.resolve("3") == ids[2] and store.resolve("1") == ids[0]
    assert store.resolve("3ab-2") == ids[1]
    with pytest.raises(UnknownCheckpoint, match="matches 3 turns"):
        store.resolve("3a")  # a prefix still has to be unique
