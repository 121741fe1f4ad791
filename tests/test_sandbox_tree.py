"""The sandbox's kill path signals a process only while it is the one found: a pid read from /proc
and reused before the kill must not reach the process that now has it (a root daemon's kill would
succeed). In-process, on real processes this test starts."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from waiting import scaled, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pidfds and /proc: Linux only")

if sys.platform.startswith("linux"):
    from toycoder_daemon.tools.sandbox import tree


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
