#!/usr/bin/env python3
"""Does session/list stall the daemon? One stored session of ~10 MB, many session/list requests
in flight, and meanwhile a cheap request (toycoder/commands/list) sent one after another: its
latency p50/p95 with the lists running, next to the same request with nothing else going on.
Issue 13 asks for p95 under 50 ms; the script exits 1 when it is not.

    .venv/bin/python bench/session_list.py [--lists 1000] [--in-flight 8] [--mb 10]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHEAP = "toycoder/commands/list"


class Client:
    """A minimal LSP-framed JSON-RPC client of the daemon subprocess."""

    def __init__(self, proc: asyncio.subprocess.Process):
        self.proc = proc
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = 0
            while (line := await out.readline()).strip():
                k, _, v = line.decode().partition(":")
                if k.strip().lower() == "content-length":
                    length = int(v)
            if not line:
                return
            msg = json.loads(await out.readexactly(length))
            if "id" in msg and "method" in msg:
                self.send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
            elif (fut := self._pending.pop(msg.get("id"), None)) is not None:
                fut.set_result(msg)

    def send(self, obj: Any) -> None:
        body = json.dumps(obj).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    async def call(self, method: str, params: Any = None) -> Any:
        msg_id = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = fut
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        msg = await asyncio.wait_for(fut, 120)
        if "error" in msg:
            raise RuntimeError(f"{method}: {msg['error']}")
        return msg["result"]


async def cheap_latencies(c: Client, until: asyncio.Event | None, count: int) -> list[float]:
    out: list[float] = []
    while (until is None and len(out) < count) or (until is not None and not until.is_set()):
        t = time.perf_counter()
        await c.call(CHEAP, {})
        out.append((time.perf_counter() - t) * 1e3)
        await asyncio.sleep(0.005)
    return out


async def run(args: argparse.Namespace, tmp: Path) -> int:
    ws = tmp / "ws"
    ws.mkdir()
    cfg = tmp / "config.yaml"
    cfg.write_text("providers:\n  openai:\n    api_keys: [bench]\n    base_url: http://127.0.0.1:9/v1\n")
    # cold (TOYCODER_WARM=0): the daemon is the process spawned here, and no fork server is left behind
    env = {**os.environ, "HOME": str(tmp), "TOYCODER_DATA_DIR": str(tmp / "data"), "PYTHONPATH": str(ROOT),
           "TOYCODER_WARM": "0"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "toycoder_daemon", "--config", str(cfg), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env, cwd=str(tmp), limit=1 << 26)
    c = Client(proc)
    try:
        await c.call("initialize", {"processId": os.getpid(), "rootUri": ws.as_uri(), "capabilities": {}})
        c.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        sid = (await c.call("toycoder/session/new", {"title": "big"}))["sessionId"]
        [path] = (tmp / "data" / "sessions").glob(f"*/{sid}.jsonl")
        line = json.dumps({"t": "msg", "m": {"role": "tool", "tool_call_id": "c", "content": "x" * 100_000}})
        with open(path, "a") as f:
            for _ in range(args.mb * 10):
                f.write(line + "\n")
        print(f"session file: {path.stat().st_size / 1e6:.1f} MB; {args.lists} lists, {args.in_flight} in flight")

        idle = await cheap_latencies(c, None, 200)
        done = asyncio.Event()
        remaining = itertools.count()

        async def lister() -> None:
            while next(remaining) < args.lists:
                rows = (await c.call("toycoder/session/list", {}))["sessions"]
                assert rows and rows[0]["messageCount"] == args.mb * 10, rows

        t = time.perf_counter()
        probe = asyncio.ensure_future(cheap_latencies(c, done, 0))
        await asyncio.gather(*(lister() for _ in range(args.in_flight)))
        elapsed = time.perf_counter() - t
        done.set()
        busy = await probe
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        await asyncio.wait_for(proc.wait(), 30)

    def pct(xs: list[float], q: float) -> float:
        return statistics.quantiles(xs, n=100)[int(q) - 1] if len(xs) > 1 else xs[0]

    print(f"lists: {args.lists} in {elapsed:.2f}s ({elapsed / args.lists * 1e3:.2f} ms each)")
    for name, xs in (("idle", idle), ("during lists", busy)):
        print(f"{CHEAP} {name:>13}: n={len(xs):4d}  p50 {pct(xs, 50):6.2f} ms  p95 {pct(xs, 95):6.2f} ms  "
              f"max {max(xs):6.2f} ms")
    p95 = pct(busy, 95)
    print(f"verdict: p95 during lists {p95:.2f} ms {'<' if p95 < 50 else '>='} 50 ms")
    return 0 if p95 < 50 else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lists", type=int, default=1000)
    ap.add_argument("--in-flight", type=int, default=8, help="session/list requests outstanding at once")
    ap.add_argument("--mb", type=int, default=10, help="size of the stored session")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(run(args, Path(tmp)))


if __name__ == "__main__":
    sys.exit(main())
