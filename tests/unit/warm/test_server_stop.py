"""The fork server told to stop while a daemon it forked still runs and a spare waits: the spare goes,
and the server keeps relaying until the daemon ends (a closed spare socket in its poll ended it)."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import pytest

from toycoder_daemon.warm import server


def spawn_sleep(seconds: str) -> int:
    return os.posix_spawnp("sleep", ["sleep", seconds], dict(os.environ))


def test_stop_with_a_running_child_and_a_ready_spare(tmp_path: Path) -> None:
    lock = os.open(tmp_path / "s.lock", os.O_RDWR | os.O_CREAT)
    srv = server.Server(str(tmp_path / "s.sock"), lock)
    srv.listen()
    ours, theirs = socket.socketpair()
    spare = server.Spare(spawn_sleep("60"), ours)
    spare.ready = True
    srv.spare = spare
    daemon = spawn_sleep("0.3")
    srv.children[daemon] = (None, os.getpid())
    srv.stop_requested = True
    try:
        srv.run()  # returns once the daemon has ended and been reaped
        assert srv.children == {} and srv.spare is None and srv.spare_due is None
        assert not (tmp_path / "s.sock").exists()
        with pytest.raises(ChildProcessError):  # the spare (sleep 60) was killed and reaped, not left waiting
            os.waitpid(spare.pid, os.WNOHANG)
    finally:
        theirs.close()
        for pid in (spare.pid, daemon):
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
