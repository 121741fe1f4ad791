"""The process a stdio MCP server runs under, so that no server outlives the daemon.

    python -I -S launch.py DAEMON_PID      (stdio.StdioChild starts it; the server's argv comes
                                            as JSON in TOYCODER_MCP_ARGV, which the server does not get)

It leads the server's process group (the daemon signals that group: stdin closed, then TERM, then
KILL) and forks the server into it, then waits for it and exits as it did. What it adds: when the
daemon dies, however (a SIGKILL included), the kernel sends it PR_SET_PDEATHSIG's SIGUSR2, and it
ends the group the documented way: the server's stdin is already closed (the daemon's end is gone),
so TERM to the group, TERM_GRACE seconds, then KILL. A server that ignores stdin EOF and TERM is
thereby gone within TERM_GRACE of the daemon, with whatever it started in its group.

It imports nothing but the standard library (started isolated: nothing of the workspace, the
current directory or PYTHON* variables is imported), holds no protocol pipe (it closes its stdin
and stdout once the server has them) and ignores TERM, INT and HUP itself: those are for the server,
whose exit ends the launcher.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
TERM_GRACE = 2.0
"""Seconds between TERM and KILL to the group once the daemon is gone (stdio.TERM_GRACE's value)."""
ARGV_VAR = "TOYCODER_MCP_ARGV"
"""The server's argv (not the launcher's own: a process listing shows each process's own command)."""
PARENT_GONE = signal.SIGUSR2
"""The death signal: one the daemon never sends, so it always means the daemon died."""


class ParentGone(Exception):
    pass


def _gone(signum: int, frame: object) -> None:
    # Once per delivery: the kernel sends the death signal each time the parent *thread* ends (a
    # killed daemon's threads end one by one), and a second raise would cut the TERM-then-KILL
    # below short. _wait re-arms it when the daemon itself is still there.
    signal.signal(PARENT_GONE, _ignore)
    raise ParentGone


def _ignore(signum: int, frame: object) -> None:
    """A handler, not SIG_IGN: an ignored disposition would survive the server's exec."""


def _arm_death_signal() -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, int(PARENT_GONE), 0, 0, 0)


def _end_group(server: int) -> None:
    """TERM the group, give the server TERM_GRACE seconds, then KILL the group (this process too)."""
    os.killpg(0, signal.SIGTERM)  # ours is ignored
    deadline = time.monotonic() + TERM_GRACE
    while time.monotonic() < deadline:
        try:
            if os.waitpid(server, os.WNOHANG)[0]:
                break
        except ChildProcessError:
            break
        time.sleep(0.02)
    os.killpg(0, signal.SIGKILL)


def _exit_as(status: int) -> None:
    """Exit the way the server did: its code, or killed by its signal (so the daemon sees -N)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)  # a signal that does not end a process (SIGCHLD...)
    os._exit(os.waitstatus_to_exitcode(status))


def _run_server(program: list[str]) -> None:
    """In the forked child: the server, with the default signal dispositions."""
    try:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, PARENT_GONE):
            signal.signal(sig, signal.SIG_DFL)
        os.execve(program[0], program, {k: v for k, v in os.environ.items() if k != ARGV_VAR})
    except BaseException as e:  # whatever it was, the child must not go on as the launcher
        os.write(2, f"cannot run {program[0]}: {e}\n".encode(errors="replace"))
    os._exit(127)


def _wait(server: int, daemon: int) -> None:
    """Wait for the server and exit as it did; return once the daemon is gone."""
    while True:
        try:
            _, status = os.waitpid(server, 0)
        except ChildProcessError:
            os._exit(0)
        except ParentGone:
            if os.getppid() == daemon:  # only the daemon's thread that started us ended: keep serving
                signal.signal(PARENT_GONE, _gone)
                continue
            return
        _exit_as(status)


def main(argv: list[str]) -> None:
    daemon, program = int(argv[1]), json.loads(os.environ[ARGV_VAR])
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _ignore)
    signal.signal(PARENT_GONE, _gone)
    server = 0
    try:
        _arm_death_signal()
        if os.getppid() != daemon:  # it died before the signal was armed
            raise ParentGone
        server = os.fork()
        if server == 0:
            _run_server(program)
        os.close(0)
        os.close(1)
        _wait(server, daemon)
    except ParentGone:
        pass
    _end_group(server or os.getpid())
    os._exit(1)


if __name__ == "__main__":
    main(sys.argv)
