"""The fork server (toycoder_daemon/warm) as the tests see it: its sockets in a runtime dir, its status,
the process serving a launch, and stopping the servers a test run started (and no other run's).

Every run of the suite has a runtime dir of its own (conftest's `warm_runtime_dir`), and a test of the
server's faults one of its own on top (`private_runtime_dir`), so what is found there is ours.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from helpers import has_env
from waiting import wait_until

from toycoder_daemon.warm import launcher

RUNTIME_VAR = "TOYCODER_RUNTIME_DIR"


def new_runtime_dir() -> Path:
    """A private 0700 dir with a short path (a unix socket's path has at most 107 bytes)."""
    return Path(tempfile.mkdtemp(prefix="tcw-", dir="/tmp"))


def sockets(directory: Path) -> list[Path]:
    return sorted(directory.glob("server-*.sock"))


def status(sock: Path) -> dict[str, Any] | None:
    """The server's answer to --warm-status, or None when nothing serves that socket."""
    try:
        _, body = launcher.request(launcher.STATUS, path=str(sock))
    except launcher.NotWarm:
        return None
    return dict(marshal.loads(body))


def statuses(directory: Path) -> list[dict[str, Any]]:
    return [s for sock in sockets(directory) if (s := status(sock)) is not None]


def wait_for_server(directory: Path, timeout: float = 30) -> dict[str, Any]:
    """The status of the server serving in `directory` once there is one (a cold launch starts it)."""
    found = wait_until(lambda: statuses(directory), timeout, f"a fork server serving in {directory}")
    return found[0]


def ensure_server(directory: Path) -> dict[str, Any]:
    """A fork server serves in `directory`: if none does, one launch (cold, its input at once closed)
    starts it, as a user's first launch does; then wait until it answers."""
    if not statuses(directory):
        env = {**os.environ, RUNTIME_VAR: str(directory)}
        env.pop("TOYCODER_WARM", None)
        subprocess.run([sys.executable, "-m", "toycoder_daemon"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=env, timeout=60, check=False)
    return wait_for_server(directory)


def serving_pid(launcher_pid: int, directory: Path | None = None) -> int:
    """The process that runs the daemon of a launch: its warm child, else the launcher itself."""
    where = directory or Path(os.environ[RUNTIME_VAR])
    for s in statuses(where):
        for child in s["children"]:
            if child["launcher"] == launcher_pid:
                return int(child["pid"])
    return launcher_pid


def served_warm(launcher_pid: int, directory: Path | None = None) -> bool:
    return serving_pid(launcher_pid, directory) != launcher_pid


def _ours(pid: int, directory: Path) -> bool:
    """The process is a fork server started with this runtime dir (so by this run)."""
    return has_env(pid, f"{RUNTIME_VAR}={directory}".encode())


def stop_servers(directory: Path) -> None:
    """Stop every server serving in `directory`: asked first, killed if it lingers."""
    pids = [s["pid"] for s in statuses(directory) if _ours(s["pid"], directory)]
    for sock in sockets(directory):
        with contextlib.suppress(launcher.NotWarm):
            launcher.request(launcher.STOP, path=str(sock))
    try:
        wait_until(lambda: not any(_ours(p, directory) for p in pids), 5, "the fork servers to exit")
    except AssertionError:  # a child of theirs still runs: they wait for it; the run is over
        for pid in pids:
            if _ours(pid, directory):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
