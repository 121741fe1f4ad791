"""Undo that cannot be raced, is all or nothing, and treats its own data as untrusted (issue 28):
a symlink swapped in while a restore runs never leads it outside the workspace; a restore killed
halfway (an abort, or SIGKILL of a process) is finished by the next store of the session before
anything else; hand-edited checkpoint data restores no setuid bit and touches nothing outside."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import toycoder_daemon.checkpoints.restore as restore_mod
from toycoder_daemon.checkpoints import CheckpointStore

SID = "s1"
NAMES = [f"f{i}.txt" for i in range(6)]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = (tmp_path / "ws").resolve()
    root.mkdir()
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    for name in NAMES:
        (d / name).write_bytes(b"outside, keep me\n")
    return d


def agent_write(store: CheckpointStore, turn: str, p: Path, content: bytes) -> None:
    store.record_before_write(turn, p)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(content)
    store.record_after_write(turn, p)


def two_kinds_of_writes(store: CheckpointStore, ws: Path) -> str:
    """One turn that created sub/f0..f2 (undo deletes them) and modified sub/f3..f5 (undo rewrites them)."""
    (ws / "sub").mkdir()
    for name in NAMES[3:]:
        (ws / "sub" / name).write_bytes(b"before\n")
    t1 = store.begin_turn("s1-1", "write sub")
    for name in NAMES:
        agent_write(store, t1, ws / "sub" / name, b"agent\n")
    return t1


def test_a_symlink_swapped_in_during_the_restore_deletes_and_overwrites_nothing_outside(
        ws: Path, outside: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = CheckpointStore(tmp_path / "data", ws, SID)
    t1 = two_kinds_of_writes(store, ws)
    real_put = restore_mod._put

    def swap_then_put(*args):  # the race: after the checks, before the first write
        if not (ws / "sub").is_symlink():
            os.rename(ws / "sub", tmp_path / "moved")
            (ws / "sub").symlink_to(outside)
        return real_put(*args)

    monkeypatch.setattr(restore_mod, "_put", swap_then_put)
    result = store.restore(t1, force=True)
    assert result["restored"] == []
    assert sorted(c["path"] for c in result["conflicts"]) == [f"sub/{n}" for n in NAMES]
    assert all("replaced by a symlink" in c["reason"] for c in result["conflicts"])
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == dict.fromkeys(NAMES, b"outside, keep me\n")
    assert not restore_mod.os.path.exists(store.journal)  # done, with every path's failure reported


def test_two_daemons_restoring_one_session_take_turns(ws: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """B's restore, started while A's runs, waits for A's to end (one journal path per session:
    else B replaces A's journal and A's end deletes B's)."""
    import threading

    a = CheckpointStore(tmp_path / "data", ws, SID)
    t1 = two_kinds_of_writes(a, ws)
    b = CheckpointStore(tmp_path / "data", ws, SID)  # another daemon with the session open
    real_put = restore_mod._put
    outcome: dict[str, object] = {}

    def run_b() -> None:
        try:
            outcome["b"] = b.restore(t1)
        except BaseException as e:  # reported to the test, not lost in the thread
            outcome["b"] = e

    thread = threading.Thread(target=run_b)

    def start_b_then_put(*args):
        if not thread.is_alive() and "b" not in outcome:
            thread.start()
            thread.join(0.5)  # bounded: B must still be waiting for A's restore when it ends
            outcome["b waited"] = thread.is_alive()
        return real_put(*args)

    monkeypatch.setattr(restore_mod, "_put", start_b_then_put)
    result = a.restore(t1)
    thread.join(10)
    assert outcome["b waited"] is True and not thread.is_alive()
    assert not isinstance(outcome["b"], BaseException), outcome["b"]
    assert sorted(result["restored"]) == sorted(f"sub/{n}" for n in NAMES)
    assert not a.journal.exists()


def test_a_restore_s_end_leaves_a_journal_that_is_not_its_own(tmp_path: Path) -> None:
    journal = tmp_path / "restore.journal"
    first = restore_mod._Journal(journal, "r1", [("a.txt", restore_mod.State("absent"))]).__enter__()
    second = restore_mod._Journal(journal, "r2", [("b.txt", restore_mod.State("absent"))]).__enter__()
    first.__exit__(None, None, None)  # done: but the journal there now is the second one's
    assert json.loads(journal.read_text())["turn"] == "r2"
    second.__exit__(None, None, None)
    assert not journal.exists()


def test_a_restore_aborted_halfway_is_finished_by_the_next_load(ws: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    store = CheckpointStore(data, ws, SID)
    t1 = two_kinds_of_writes(store, ws)
    calls = 0
    real_put = restore_mod._put

    def abort_after_two(*args):
        nonlocal calls
        calls += 1
        if calls == 3:
            raise KeyboardInterrupt  # the fault-injection seam: the process stops mid-restore
        return real_put(*args)

    monkeypatch.setattr(restore_mod, "_put", abort_after_two)
    with pytest.raises(KeyboardInterrupt):
        store.restore(t1)
    assert store.journal.exists()
    left = sorted(p.name for p in (ws / "sub").iterdir())
    assert left == NAMES[2:]  # f0, f1 deleted; f2 not yet: half restored
    (ws / "sub" / "f5.txt").write_bytes(b"the person's edit meanwhile\n")
    monkeypatch.setattr(restore_mod, "_put", real_put)
    again = CheckpointStore(data, ws, SID)  # the next daemon: finishes it on load
    assert not again.journal.exists()
    assert sorted(p.name for p in (ws / "sub").iterdir()) == NAMES[3:]
    assert [(ws / "sub" / n).read_bytes() for n in NAMES[3:5]] == [b"before\n"] * 2
    assert (ws / "sub" / "f5.txt").read_bytes() == b"the person's edit meanwhile\n"  # changed since: left
    [restore_turn] = [c for c in again.list() if c["kind"] == "restore"]
    assert restore_turn["restoreOf"] == t1
    assert {f["path"] for f in restore_turn["files"]} == {f"sub/{n}" for n in NAMES[:5]}


CHILD = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    import toycoder_daemon.checkpoints.restore as r
    from toycoder_daemon.checkpoints import CheckpointStore
    real, calls = r._put, [0]
    def put(*args):
        calls[0] += 1
        if calls[0] == int(sys.argv[4]):
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args)
    r._put = put
    CheckpointStore(Path(sys.argv[1]), Path(sys.argv[2]), "s1").restore(sys.argv[3])
""")


@pytest.mark.parametrize("killed_at", range(1, 7))  # before each of the six writes
def test_a_restore_killed_by_sigkill_is_finished_before_anything_else(ws: Path, tmp_path: Path,
                                                                     killed_at: int) -> None:
    data = tmp_path / "data"
    t1 = two_kinds_of_writes(CheckpointStore(data, ws, SID), ws)
    child = subprocess.run([sys.executable, "-c", CHILD, str(data), str(ws), t1, str(killed_at)],
                           capture_output=True, timeout=60)
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    store = CheckpointStore(data, ws, SID)
    assert not store.journal.exists()
    assert sorted(p.name for p in (ws / "sub").iterdir()) == NAMES[3:]
    assert all((ws / "sub" / n).read_bytes() == b"before\n" for n in NAMES[3:])


def test_hand_edited_checkpoint_data_restores_no_setuid_bit_and_nothing_outside(ws: Path, outside: Path,
                                                                                 tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = CheckpointStore(data, ws, SID)
    (ws / "tool.sh").write_bytes(b"echo hi\n")
    (ws / "tool.sh").chmod(0o755)
    t1 = store.begin_turn("s1-1", "edit tool, make new/c.txt")
    agent_write(store, t1, ws / "tool.sh", b"echo agent\n")
    agent_write(store, t1, ws / "new" / "c.txt", b"c\n")
    (outside / "empty").mkdir()
    rel_outside = os.path.relpath(outside / "empty", ws)
    lines = [json.loads(raw) for raw in store.index.read_bytes().splitlines()]
    for rec in lines:
        if rec["t"] == "before" and rec["path"] == "tool.sh":
            rec["state"]["mode"] = 0o4755 | stat.S_ISGID  # setuid, setgid
        if rec["t"] == "before" and rec["path"] == "new/c.txt":
            rec["state"]["dirs"] = ["new", rel_outside]  # "remove this empty directory too"
    lines.append({"t": "before", "turn": t1, "path": "../outside/f0.txt", "state": {"k": "absent"}})
    lines.append({"t": "after", "turn": t1, "path": "tool.sh", "state": ["not", "an", "object"]})
    store.index.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in lines))
    edited = CheckpointStore(data, ws, SID)
    # a path outside, and directories that are not parents of their path: those lines are skipped
    assert set(edited.turns[0].before) == {"tool.sh"}
    result = edited.restore(t1, force=True)
    assert result["restored"] == ["tool.sh"]
    assert (ws / "tool.sh").read_bytes() == b"echo hi\n"
    assert stat.S_IMODE((ws / "tool.sh").stat().st_mode) == 0o755  # permission bits only
    assert (outside / "empty").is_dir() and (outside / "f0.txt").exists()


def test_a_thread_swapping_the_directory_back_and_forth_during_restores_never_reaches_outside(
        ws: Path, tmp_path: Path) -> None:
    """The race as an attacker runs it: a loop swapping sub/ for a symlink to outside and back while
    restores run; whatever interleaving happens, the files outside stay as they were."""
    import threading

    names = [f"f{i}.txt" for i in range(60)]
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in names:
        (outside / name).write_bytes(b"outside, keep me\n")
    store = CheckpointStore(tmp_path / "data", ws, SID)
    (ws / "sub").mkdir()
    t1 = store.begin_turn("s1-1", "write sub")
    for name in names:
        agent_write(store, t1, ws / "sub" / name, b"agent\n")
    stop = threading.Event()

    def swapper() -> None:
        real, link = ws / "sub", ws / "sub-real"
        while not stop.is_set():
            try:
                os.rename(real, link)
                real.symlink_to(outside)
                real.unlink()
                os.rename(link, real)
            except OSError:
                pass

    racer = threading.Thread(target=swapper)
    racer.start()
    try:
        for _ in range(5):
            store.restore(t1, force=True)
    finally:
        stop.set()
        racer.join()
    assert sorted(p.name for p in outside.iterdir()) == sorted(names)
    assert all((outside / n).read_bytes() == b"outside, keep me\n" for n in names)


def test_a_restore_stopped_halfway_in_this_daemon_is_finished_by_its_next_restore(
        ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = CheckpointStore(tmp_path / "data", ws, SID)
    t1 = two_kinds_of_writes(store, ws)
    real_put = restore_mod._put
    calls = 0

    def stop_at_four(*args):
        nonlocal calls
        calls += 1
        if calls == 4:
            raise SystemExit(1)
        return real_put(*args)

    monkeypatch.setattr(restore_mod, "_put", stop_at_four)
    with pytest.raises(SystemExit):
        store.restore(t1)
    assert store.journal.exists()
    monkeypatch.setattr(restore_mod, "_put", real_put)
    again = store.restore(t1)  # the same store: the leftover plan is finished first
    assert not store.journal.exists() and again["conflicts"] == []
    assert sorted(p.name for p in (ws / "sub").iterdir()) == NAMES[3:]
    assert all((ws / "sub" / n).read_bytes() == b"before\n" for n in NAMES[3:])


def test_a_hand_edited_journal_removes_nothing_outside_and_restores_no_setuid_bit(
        ws: Path, outside: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = CheckpointStore(data, ws, SID)
    (ws / "a.sh").write_bytes(b"x\n")
    t1 = store.begin_turn("s1-1", "write a")
    agent_write(store, t1, ws / "a.sh", b"agent\n")
    kept = store.turns[0].after["a.sh"]  # the journal says: put the agent's a.sh back, setuid
    (ws / "a.sh").write_bytes(b"x\n")  # what the turn's before-state says a.sh held
    store.journal.write_text(json.dumps({"turn": t1, "items": [
        {"path": "../outside/f0.txt", "state": {"k": "absent"}},
        {"path": "/" + str(outside / "f1.txt").lstrip("/"), "state": {"k": "absent"}},
        {"path": "a.sh", "state": {**kept.to_json(), "mode": 0o6777}},
    ]}))
    CheckpointStore(data, ws, SID)  # the next load runs the journal, as untrusted data
    assert not store.journal.exists()
    assert sorted(p.name for p in outside.iterdir()) == NAMES
    assert (ws / "a.sh").read_bytes() == b"agent\n"  # finished, with the permission bits only
    assert stat.S_IMODE((ws / "a.sh").stat().st_mode) == 0o777
