"""The sandbox's kill path signals a process only while it is the one found: a pid read from /proc
and reused before the kill must not reach the process that now has it (a root daemon's kill would
succeed), nor may a reused pid bring another's processes into the tree walked. In-process, on real
processes this test starts, and on a staged /proc for the reuse races."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys

import pytest
from helpers import proc_dir
from waiting import scaled, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pidfds and /proc: Linux only")

if sys.platform.startswith("linux"):
    from toycoder_daemon.tools.shell.sandbox import tree


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL)


def test_a_live_process_found_is_signalled() -> None:
    """The control: without it the two tests below would pass with a kill path that signals nothing."""
    proc = _sleeper()
    try:
        found = tree.identify(proc.pid)
        assert found is not None and found[0] == proc.pid
        fds = tree.signal_found([found], signal.SIGKILL)
        assert len(fds) == 1
        tree.close(fds)
        assert proc.wait(timeout=scaled(10)) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()


def test_an_entry_whose_process_exited_and_was_reaped_is_not_signalled() -> None:
    proc = _sleeper()
    found = tree.identify(proc.pid)
    assert found is not None
    proc.terminate()
    assert proc.wait(timeout=scaled(10)) == -signal.SIGTERM  # reaped: its pid is free for reuse
    # Whether or not another process has its pid by now, the stale entry names nobody.
    assert tree.signal_found([found], signal.SIGKILL) == []


def test_a_live_process_whose_start_time_differs_is_not_signalled() -> None:
    """As when the pid found was reused: the process now holding it started at another time."""
    proc = _sleeper()
    try:
        found = tree.identify(proc.pid)
        assert found is not None
        for start in (found[1] - 1, found[1] + 1):
            assert tree.signal_found([(proc.pid, start)], signal.SIGKILL) == []
        # A KILL sent above would have ended it already (the kernel queues it before the call returns).
        proc.terminate()
        assert proc.wait(timeout=scaled(10)) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()


def test_descendants_records_each_processs_start_time() -> None:
    """The walk's start times are what identify() reads: otherwise every kill would be skipped."""
    parent = subprocess.Popen(["sh", "-c", "sleep 600 & sleep 600 & wait"], stdin=subprocess.DEVNULL)
    found: list[tuple[int, int]] = []
    try:
        found = wait_until(lambda: len(tree.descendants(parent.pid)) == 2 and tree.descendants(parent.pid),
                           scaled(10), "the two sleeps to start")
        assert all(tree.identify(pid) == (pid, start) for pid, start in found)
    finally:
        tree.close(tree.signal_found(found, signal.SIGKILL))  # our sleeps, still checked by start time
        parent.kill()
        parent.wait()


class FakeProc:
    """A /proc as the walk reads it (stat, task lists, children lists), staged by the test, for the
    reuse races a real machine cannot be made to hit: `open` and `os` of the tree module go here."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.dirs: dict[str, list[str]] = {}

    def process(self, pid: int, ppid: int, start: int, children: tuple[int, ...] = ()) -> None:
        fillers = " ".join(["0"] * 17)  # fields 5-21; the start time is field 22
        at = proc_dir(pid)
        self.files[f"{at}/stat"] = f"{pid} (x) S {ppid} {fillers} {start} 0 0\n".encode()
        self.files[f"{at}/task/{pid}/stat"] = self.files[f"{at}/stat"]
        self.files[f"{at}/task/{pid}/children"] = " ".join(map(str, children)).encode()
        self.dirs[f"{at}/task"] = [str(pid)]

    def open(self, path: str, mode: str = "r") -> io.BytesIO:
        if path not in self.files:
            raise FileNotFoundError(path)
        return io.BytesIO(self.files[path])

    def listdir(self, path: str) -> list[str]:
        if path not in self.dirs:
            raise FileNotFoundError(path)
        return self.dirs[path]


@pytest.fixture
def fake_proc(monkeypatch: pytest.MonkeyPatch) -> FakeProc:
    fake = FakeProc()
    real_os = os

    class Os:
        def __getattr__(self, name: str) -> object:
            return fake.listdir if name == "listdir" else getattr(real_os, name)

    monkeypatch.setattr(tree, "open", fake.open, raising=False)
    monkeypatch.setattr(tree, "os", Os())
    return fake


def test_a_listed_child_whose_pid_another_parents_process_took_is_left_out(fake_proc: FakeProc) -> None:
    """Between reading a parent's children list and the child's stat, the child may exit, be reaped
    and its pid be taken: the stat then names another parent, and that process is not ours."""
    fake_proc.process(10, 1, 100, children=(11, 12))
    fake_proc.process(11, 10, 110)
    fake_proc.process(12, 99, 120, children=(13,))  # pid 12 now: a stranger's child
    fake_proc.process(13, 12, 130)
    assert tree.descendants(10) == [(11, 110)]


def test_the_list_of_a_root_that_changed_hands_is_not_walked(fake_proc: FakeProc) -> None:
    """The daemon walks below its launcher's pid after the launcher may have been reaped."""
    fake_proc.process(20, 1, 200, children=(21,))
    fake_proc.process(21, 20, 210)
    assert tree.descendants(20, 200) == [(21, 210)]
    assert tree.descendants(20, 199) == []  # the process holding pid 20 is not the launcher we started
