"""What the daemon's kill of a stuck launcher's tree (run_command._kill_tree) costs: the old loop
(walk, kill by pid, walk again at once) against the current one (pidfd kills, then a wait for one
to exit, 1 ms doubling to 32 ms). Linux only; run as any user.

    python bench/kill_tree.py [--runs 7] [--children 4] [--mb 400]

Each run starts a stand-in launcher that is a subreaper and never reaps (as one stuck in its
clean-up), with N children that each hold M MiB of touched memory: a KILLed process takes a while
to free that, and the loop keeps finding it until it has. Runs alternate old, new, old, new...
Rows: wall ms, CPU ms of the killing thread, passes (walks of the tree); medians.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from toycoder_daemon.tools.shell import run_command  # noqa: E402
from toycoder_daemon.tools.shell.sandbox import tree  # noqa: E402

STUCK = """import ctypes, os, sys, time
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
n, mb, ready = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
for i in range(n):
    if os.fork() == 0:
        os.setsid()
        block = b"x" * (mb << 20)  # touched: freeing it at exit takes time
        open(f"{ready}.{i}", "w").close()
        time.sleep(600)
        os._exit(0)
time.sleep(600)  # never reaps
"""


def old_kill_tree(root: int, passes: list[int], within: float = run_command.KILL_TREE_LIMIT) -> None:
    """The loop before pidfds: kill by pid, walk again at once."""
    deadline = time.monotonic() + within
    while (found := tree.descendants(root)) and time.monotonic() < deadline:
        passes[0] += 1
        for pid, _ in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def new_kill_tree(root: int, passes: list[int]) -> None:
    real = tree.descendants

    def counted(r: int, start: int | None = None) -> list[tuple[int, int]]:
        passes[0] += 1
        return real(r, start)

    tree.descendants = counted
    try:
        run_command._kill_tree(root)
    finally:
        tree.descendants = real


def one(kind: str, children: int, mb: int, tmp: Path) -> tuple[float, float, int]:
    ready = tmp / f"ready{time.monotonic_ns()}"
    launcher = subprocess.Popen([sys.executable, "-c", STUCK, str(children), str(mb), str(ready)],
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not all(Path(f"{ready}.{i}").exists() for i in range(children)):
            if time.monotonic() > deadline:
                raise SystemExit("the children did not start")
            time.sleep(0.01)
        passes = [0]
        wall, cpu = time.monotonic(), time.thread_time()
        (old_kill_tree if kind == "old" else new_kill_tree)(launcher.pid, passes)
        wall, cpu = time.monotonic() - wall, time.thread_time() - cpu
        return wall * 1000, cpu * 1000, passes[0] - (1 if kind == "new" else 0)  # new's last walk finds none
    finally:
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait()
        for i in range(children):
            Path(f"{ready}.{i}").unlink(missing_ok=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--children", type=int, default=4)
    ap.add_argument("--mb", type=int, default=400)
    a = ap.parse_args()
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    rows: dict[str, list[tuple[float, float, int]]] = {"old": [], "new": []}
    for _ in range(a.runs):
        for kind in ("old", "new"):
            rows[kind].append(one(kind, a.children, a.mb, tmp))
    print(f"load average: {os.getloadavg()[0]:.2f}; {a.children} children x {a.mb} MiB, {a.runs} runs each")
    print(f"{'':6}{'wall ms':>10}{'CPU ms':>10}{'passes':>10}")
    for kind, got in rows.items():
        wall, cpu, passes = (statistics.median(x[i] for x in got) for i in range(3))
        print(f"{kind:6}{wall:10.1f}{cpu:10.1f}{passes:10.0f}")


if __name__ == "__main__":
    main()
