"""Ctrl-C while the terminal client starts the daemon (cli/rpc.Connection): a SIGINT that lands inside
Popen, once the child runs, is held until the connection is registered, so close_all() still ends
the child. A `sleep` stands in for the daemon. The client in a real terminal:
editors/terminal/test_terminal_cli.py (test_ctrl_c_while_the_daemon_starts_exits_130_...)."""

from __future__ import annotations

import signal
import subprocess
from typing import Any

import pytest
from helpers import alive, processes_with, sleep_command

from toycoder_daemon.cli import rpc

STARTED: list[int] = []


class CtrlCInPopen(subprocess.Popen):  # type: ignore[type-arg]
    """Popen hit by Ctrl-C just as it returns: the child runs, the caller has no handle on it yet."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        STARTED.append(self.pid)
        signal.raise_signal(signal.SIGINT)  # its handler runs before this __init__ returns


def test_a_ctrl_c_inside_popen_leaves_no_daemon(monkeypatch: pytest.MonkeyPatch) -> None:
    command = sleep_command(175)
    STARTED.clear()
    monkeypatch.setattr(rpc.subprocess, "Popen", CtrlCInPopen)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as the client's main() sets it
    try:
        with pytest.raises(KeyboardInterrupt):
            rpc.Connection(command.split())
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(STARTED) == 1  # started (its pid), and then interrupted
    rpc.close_all(timeout=0.1)  # what main() does on KeyboardInterrupt
    assert processes_with(command) == [] and not alive(STARTED[0])
    assert signal.getsignal(signal.SIGINT) is previous


def test_without_a_ctrl_c_the_handler_is_left_as_it_was() -> None:
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        conn = rpc.Connection(sleep_command(175).split())
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        conn.close(timeout=0.1)
    finally:
        signal.signal(signal.SIGINT, previous)
