"""Run the daemon with its event-loop passes timed (peers.py --loop-stats).

Every pass of the loop (`BaseEventLoop._run_once`: wait for I/O, then run what is ready) is timed
in wall and thread-CPU time. That is what a request waits for (one or two passes), and unlike a
request's round trip its CPU time does not depend on how busy the machine is. SIGUSR1 starts a new
window; SIGUSR2 appends the window's percentiles as one JSON line to $BENCH_LOOP_STATS.

Run as:  python bench/loop_stats.py [daemon args...]   (instead of python -m toycoder_daemon)
"""

from __future__ import annotations

import asyncio.base_events
import json
import os
import signal
import sys
import time
from typing import Any

OUT = os.environ["BENCH_LOOP_STATS"]
passes: list[tuple[float, float]] = []
_run_once = asyncio.base_events.BaseEventLoop._run_once  # type: ignore[attr-defined]


def timed(self: Any) -> None:
    t, c = time.perf_counter(), time.thread_time()
    _run_once(self)
    passes.append((time.perf_counter() - t, time.thread_time() - c))


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(p * len(s)))] * 1000 if s else float("nan")


def dump(*_: Any) -> None:
    wall, cpu = [w for w, _ in passes], [c for _, c in passes]
    row = {"passes": len(passes), "cpu_p50": pct(cpu, 0.5), "cpu_p99": pct(cpu, 0.99), "cpu_max": pct(cpu, 1),
           "wall_p50": pct(wall, 0.5), "wall_p99": pct(wall, 0.99), "wall_max": pct(wall, 1), "cpu_s": sum(cpu)}
    with open(OUT, "a") as f:
        f.write(json.dumps(row) + "\n")


asyncio.base_events.BaseEventLoop._run_once = timed  # type: ignore[attr-defined]
signal.signal(signal.SIGUSR1, lambda *_: passes.clear())
signal.signal(signal.SIGUSR2, dump)
sys.argv[0] = "toycoder_daemon"
from toycoder_daemon.faces.main import main  # noqa: E402

main()
