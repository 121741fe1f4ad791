#!/usr/bin/env python3
"""Session storage: does appending cost the same at 10 and at 10,000 messages? And what do load and
list cost as sessions grow? Median per-append time, side by side, interleaved, in one run.

    .venv/bin/python bench/sessions.py [--lengths 10,1000,10000] [--appends 200] [--runs 5] [--tree DIR]

Also: bytes a turn adds to the file (prompt, reply, the turn's end) at 10, 100 and 1,000 turns;
flat means the file grows linearly. --tree: measure another checkout's package (before/after).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

_tree = sys.argv[sys.argv.index("--tree") + 1] if "--tree" in sys.argv else str(Path(__file__).resolve().parent.parent)
sys.path.insert(0, _tree)

from toycoder_daemon.llm.base import Usage  # noqa: E402
from toycoder_daemon.sessions.conversation import Conversation  # noqa: E402
from toycoder_daemon.sessions.session import FileSink, Session  # noqa: E402
from toycoder_daemon.sessions.store import SessionStore  # noqa: E402
from toycoder_daemon.tools.registry import ToolRegistry  # noqa: E402


def message(i: int) -> dict:
    if i % 3 == 2:
        return {"role": "tool", "tool_call_id": f"call_{i}", "content": "     1\tdef f():\n     2\t    return 1\n" * 5}
    return {"role": "user" if i % 3 == 0 else "assistant", "content": f"message {i} " + "lorem ipsum " * 20}


def bytes_per_turn(store: SessionStore, turns: int) -> float:
    """Bytes the last turn of `turns` added: its prompt, its reply and how it ended."""
    s = Session(id=f"t{turns}", title="bench", tools=ToolRegistry())
    s.file = store.create(s.id, s.meta())
    s.messages = Conversation("sys", [], FileSink(s.file, s.meta))
    size = 0
    for i in range(turns):
        size = s.file.path.stat().st_size
        s.ask(f"question {i} " + "lorem ipsum " * 10, f"turn{i}")
        s.messages.append({"role": "assistant", "content": f"answer {i} " + "lorem ipsum " * 20})
        s.end_turn(f"turn{i}", "end_turn", Usage(100, 20, 120))
    s.file.close()
    return s.file.path.stat().st_size - size


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", default="10,1000,10000")
    ap.add_argument("--appends", type=int, default=200, help="appends timed per run")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tree", default=_tree, help="the checkout whose package is measured")
    args = ap.parse_args()
    lengths = [int(x) for x in args.lengths.split(",")]

    with tempfile.TemporaryDirectory() as tmp:
        store = SessionStore(Path(tmp), Path("/bench/workspace"))
        logs: dict[int, tuple[object, Conversation]] = {}
        for n in lengths:
            f = store.create(f"s{n}", {"title": f"{n} messages"})
            f.append([message(i) for i in range(n)])
            logs[n] = (f, Conversation("sys", [message(i) for i in range(n)], FileSink(f, dict)))

        append_us: dict[int, list[float]] = {n: [] for n in lengths}
        load_ms: dict[int, list[float]] = {n: [] for n in lengths}
        for _ in range(args.runs):
            for n in lengths:  # interleaved: every length sees the same machine noise
                log = logs[n][1]
                t = time.perf_counter()
                for i in range(args.appends):
                    log.append(message(n + i))
                append_us[n].append((time.perf_counter() - t) / args.appends * 1e6)
            for n in lengths:
                f = logs[n][0]
                f.close()  # release the lock so it can be opened again
                t = time.perf_counter()
                f2, _, msgs = store.open(f"s{n}")
                load_ms[n].append((time.perf_counter() - t) * 1e3)
                logs[n] = (f2, Conversation("sys", msgs, FileSink(f2, dict)))
        list_ms = []
        for _ in range(args.runs):
            t = time.perf_counter()
            rows = store.list()
            list_ms.append((time.perf_counter() - t) * 1e3)
        for f, _ in logs.values():
            f.close()
        per_turn = {t: bytes_per_turn(store, t) for t in (10, 100, 1000)}

    base = statistics.median(append_us[lengths[0]])
    print(f"sessions: {args.appends} appends x {args.runs} runs per length (median), one message = one JSONL line")
    print(f"{'messages':>10} {'append us':>10} {'vs first':>9} {'load ms':>9}")
    for n in lengths:
        a = statistics.median(append_us[n])
        print(f"{n:>10} {a:>10.1f} {a / base:>8.2f}x {statistics.median(load_ms[n]):>9.1f}")
    print("bytes per turn (prompt + reply + its end): " + ", ".join(f"{b:.0f} at {t} turns" for t, b in per_turn.items()))
    print(f"list of {len(rows)} sessions ({sum(r.message_count for r in rows)} messages in all): "
          f"{statistics.median(list_ms):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
