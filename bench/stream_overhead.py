"""Per-turn cost of streaming a reply through the daemon vs. reading it with the OpenAI SDK directly.

One scripted reply of N text deltas (FakeLLM, in this process) is consumed, alternately:
  (a) sdk    - openai.AsyncOpenAI(...).chat.completions.create(stream=True), all chunks iterated;
  (b) daemon - one long-lived `python -m toycoder_daemon` subprocess, driven over stdio with a raw
               LSP-framed JSON-RPC client: toycoder/session/new, then toycoder/prompt is timed from
               the request being written until its response arrives.

TTFT: (a) create() called -> first chunk with non-empty content;
      (b) prompt request written -> first toycoder/update with update.kind == "text_delta".

Run:  .venv/bin/python bench/stream_overhead.py [--chunks 2000] [--runs 15] [--warmup 2] [--quick]
Timings on a shared machine are noisy: read the medians and ratios, which are measured side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import openai  # noqa: E402

from toycoder_daemon.testing.fake_llm import FakeLLM  # noqa: E402

MODEL = "fake-model"
CLK_TCK = os.sysconf("SC_CLK_TCK")

# --profile: the daemon runs under cProfile, enabled on SIGUSR1 (after the warm-up) and dumped on
# SIGUSR2 (after the measured runs). `python -m cProfile` alone would write nothing: the daemon
# leaves through os._exit.
PROFILE_WRAPPER = """
import cProfile, signal, sys
out = sys.argv.pop(1)
prof = cProfile.Profile()
signal.signal(signal.SIGUSR1, lambda *_: prof.enable())
def _dump(*_):
    prof.disable()
    prof.dump_stats(out)
    print("profile written", flush=True, file=sys.stderr)
signal.signal(signal.SIGUSR2, _dump)
from toycoder_daemon.faces.main import main
sys.argv[0] = "toycoder_daemon"
main()
"""


# ---- a minimal raw LSP-framed JSON-RPC client -------------------------------------------------

def frame(obj: Any) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class RawDaemon:
    """Spawns the daemon and reads its frames; every notification is stamped with its arrival time."""

    def __init__(self, proc: asyncio.subprocess.Process):
        self.proc = proc
        self._ids = itertools.count(1)
        self._pending: dict[Any, asyncio.Future] = {}
        self.notifications: list[tuple[float, dict[str, Any]]] = []  # (perf_counter at arrival, msg)
        self.first_text_delta: asyncio.Future | None = None
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls, *args: str, env: dict[str, str], cwd: str, profile: str | None = None) -> RawDaemon:
        launch = ["-c", PROFILE_WRAPPER, profile] if profile else ["-m", "toycoder_daemon"]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, *launch, *args,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=env, cwd=cwd, limit=1 << 24,
        )
        return cls(proc)

    async def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while True:
                line = await out.readline()
                if not line:
                    for fut in self._pending.values():
                        if not fut.done():
                            fut.set_exception(RuntimeError("daemon closed stdout"))
                    return
                line = line.strip()
                if not line:
                    break
                k, _, v = line.decode().partition(":")
                if k.strip().lower() == "content-length":
                    length = int(v)
            assert length is not None, "frame without Content-Length"
            msg = json.loads(await out.readexactly(length))
            now = time.perf_counter()
            if "method" in msg and "id" in msg:  # a request to the editor: none expected here
                self.send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
            elif "method" in msg:
                self.notifications.append((now, msg))
                if (msg["method"] == "toycoder/update" and msg["params"]["update"].get("kind") == "text_delta"
                        and self.first_text_delta is not None and not self.first_text_delta.done()):
                    self.first_text_delta.set_result(now)
            else:
                fut = self._pending.pop(msg.get("id"), None)
                if fut is not None and not fut.done():
                    fut.set_result((now, msg))

    def send(self, obj: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(frame(obj))

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: Any = None) -> asyncio.Future:
        msg_id = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = fut
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return fut

    async def call(self, method: str, params: Any = None, timeout: float = 60) -> Any:
        _, msg = await asyncio.wait_for(self.request(method, params), timeout)
        if "error" in msg:
            raise RuntimeError(f"{method} failed: {msg['error']}")
        return msg["result"]

    def cpu_seconds(self) -> float:
        """utime + stime of the daemon process (all its threads), from /proc/<pid>/stat."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14 and 15 of stat(5)

    def rss_mib(self) -> tuple[float, float]:
        """(current, peak) resident memory of the daemon, from /proc/<pid>/status."""
        values = {}
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    values[line.split(":")[0]] = int(line.split()[1]) / 1024
        return values.get("VmRSS", 0.0), values.get("VmHWM", 0.0)

    async def close(self) -> None:
        if self.proc.returncode is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except asyncio.TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        self._reader.cancel()


# ---- the two ways of consuming one reply ------------------------------------------------------

def script(chunks: int) -> tuple[dict, str]:
    parts = [f"tok{i} " for i in range(chunks)]
    return {"text": parts}, "".join(parts)


async def run_sdk(client: openai.AsyncOpenAI, llm: FakeLLM, chunks: int) -> dict[str, Any]:
    reply, expected = script(chunks)
    llm.add(reply)
    t0 = time.perf_counter()
    ttft = None
    parts: list[str] = []
    stream = await client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "go"}],
        stream=True, stream_options={"include_usage": True},
    )
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            if ttft is None:
                ttft = time.perf_counter() - t0
            parts.append(chunk.choices[0].delta.content)
    total = time.perf_counter() - t0
    text = "".join(parts)
    if text != expected:
        raise SystemExit(f"sdk: streamed text differs from the script ({len(text)} vs {len(expected)} chars)")
    return {"total": total, "ttft": ttft}


async def run_daemon(d: RawDaemon, llm: FakeLLM, chunks: int) -> dict[str, Any]:
    reply, expected = script(chunks)
    sid = (await d.call("toycoder/session/new", {}))["sessionId"]  # not timed: a fresh, short conversation
    llm.add(reply)
    start_idx = len(d.notifications)
    d.first_text_delta = asyncio.get_running_loop().create_future()
    cpu0 = d.cpu_seconds()
    t0 = time.perf_counter()
    fut = d.request("toycoder/prompt", {"sessionId": sid, "text": "go"})
    t_end, msg = await asyncio.wait_for(fut, 120)
    cpu1 = d.cpu_seconds()
    if "error" in msg:
        raise SystemExit(f"daemon: toycoder/prompt failed: {msg['error']}")
    result = msg["result"]
    ttft = (d.first_text_delta.result() - t0) if d.first_text_delta.done() else None
    updates = [m["params"] for _, m in d.notifications[start_idx:]
               if m["method"] == "toycoder/update" and m["params"]["sessionId"] == sid]
    deltas = [u["update"]["text"] for u in updates if u["update"]["kind"] == "text_delta"]
    text = "".join(deltas)
    if text != expected:
        raise SystemExit(f"daemon: concatenated text_delta updates differ from the script "
                         f"({len(text)} vs {len(expected)} chars; first 80: {text[:80]!r})")
    if result.get("stopReason") != "end_turn" or result.get("text") != expected:
        raise SystemExit(f"daemon: unexpected prompt result: stopReason={result.get('stopReason')!r}, "
                         f"text {len(result.get('text') or '')} chars")
    if ttft is None:
        raise SystemExit("daemon: no text_delta notification before the prompt response")
    return {"total": t_end - t0, "ttft": ttft, "notifications": len(deltas), "cpu": cpu1 - cpu0,
            "first": deltas[0].count(" ")}  # model deltas ("tokN ") carried by the first notification


# ---- driver -----------------------------------------------------------------------------------

def write_config(path: Path, llm: FakeLLM) -> Path:
    path.write_text(
        "providers:\n  openai:\n    api_keys: [\"bench-key\"]\n"
        f"    base_url: {llm.base_url}\n    models: {{default: {MODEL}, fast: {MODEL}}}\n"
        "default_provider: openai\n"
        # no auto title: it is a second model request per session, which would take the next run's reply
        "agent: {max_steps: 4, max_retries: 0, retry_interval: 0.05, auto_title: false}\n"
    )
    return path


def ms(x: float) -> str:
    return f"{x * 1000:9.1f}"


async def main_async(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="toycoder-bench-") as tmp, FakeLLM() as llm:
        tmpd = Path(tmp)
        ws = tmpd / "ws"
        ws.mkdir()
        (ws / "README.md").write_text("# bench workspace\n")
        home = tmpd / "home"
        home.mkdir()
        # cold (TOYCODER_WARM=0): the daemon must be the process spawned here, whose /proc stat the CPU
        # rows read (a warm launch's daemon is a child of the fork server), and none is left running
        env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
               "TOYCODER_DATA_DIR": str(tmpd / "data"), "TOYCODER_WARM": "0"}
        for var in ("TOYCODER_CONFIG", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
            env.pop(var, None)
        cfg = write_config(tmpd / "config.yaml", llm)

        client = openai.AsyncOpenAI(api_key="bench", base_url=llm.base_url, max_retries=0)
        profile = str(Path(args.profile).resolve()) if args.profile else None
        d = await RawDaemon.start("--config", str(cfg), env=env, cwd=str(ws), profile=profile)
        try:
            await d.call("initialize", {
                "processId": os.getpid(), "rootUri": ws.resolve().as_uri(),
                "capabilities": {"experimental": {"toycoder": {"permissionRequest": True, "askUser": True}}},
                "initializationOptions": {},
            })
            d.notify("initialized", {})

            for _ in range(args.warmup):
                await run_sdk(client, llm, args.chunks)
                await run_daemon(d, llm, args.chunks)

            if profile:
                d.proc.send_signal(signal.SIGUSR1)
            a_runs: list[dict] = []
            b_runs: list[dict] = []
            sdk_thread_cpu = 0.0  # this thread only: the SDK client's event loop (FakeLLM serves on other threads)
            sdk_proc_cpu = 0.0    # whole bench process during (a): SDK client + FakeLLM serving threads
            raw_thread_cpu = 0.0  # this thread during (b): the raw stdio client reading the daemon
            raw_proc_cpu = 0.0    # whole bench process during (b): raw client + FakeLLM serving threads
            for _ in range(args.runs):
                p0, t0 = time.process_time(), time.thread_time()
                a_runs.append(await run_sdk(client, llm, args.chunks))
                p1, t1 = time.process_time(), time.thread_time()
                b_runs.append(await run_daemon(d, llm, args.chunks))
                p2, t2 = time.process_time(), time.thread_time()
                sdk_proc_cpu += p1 - p0
                sdk_thread_cpu += t1 - t0
                raw_proc_cpu += p2 - p1
                raw_thread_cpu += t2 - t1
            if profile:
                d.proc.send_signal(signal.SIGUSR2)
                for _ in range(100):
                    if os.path.exists(profile):
                        break
                    await asyncio.sleep(0.05)
            if llm.violations:
                raise SystemExit(f"fake_llm violations: {llm.violations}")
            rss_now, rss_peak = d.rss_mib()
        finally:
            await client.close()
            await d.close()

    n = args.runs
    med = statistics.median
    a_tot = [r["total"] for r in a_runs]
    b_tot = [r["total"] for r in b_runs]
    a_ttft = [r["ttft"] for r in a_runs]
    b_ttft = [r["ttft"] for r in b_runs]
    ratios = [b / a for a, b in zip(a_tot, b_tot, strict=True)]
    notes = [r["notifications"] for r in b_runs]
    daemon_cpu = sum(r["cpu"] for r in b_runs)

    print(f"stream_overhead: {args.chunks} text deltas per reply, {n} measured runs each "
          f"(+{args.warmup} warm-up), interleaved a,b,a,b,...")
    print(f"{'':34}{'median':>9} {'min':>9} {'max':>9}")
    print(f"{'(a) sdk     total ms':34}{ms(med(a_tot))} {ms(min(a_tot))} {ms(max(a_tot))}")
    print(f"{'(b) daemon  total ms':34}{ms(med(b_tot))} {ms(min(b_tot))} {ms(max(b_tot))}")
    print(f"{'(a) sdk     TTFT ms':34}{ms(med(a_ttft))} {ms(min(a_ttft))} {ms(max(a_ttft))}")
    print(f"{'(b) daemon  TTFT ms':34}{ms(med(b_ttft))} {ms(min(b_ttft))} {ms(max(b_ttft))}")
    print(f"{'added TTFT ms (b - a, per pair)':34}"
          f"{ms(med([b - a for a, b in zip(a_ttft, b_ttft, strict=True)]))}")
    print(f"{'ratio b/a total (median of pairs)':34}{med(ratios):9.2f} {min(ratios):9.2f} {max(ratios):9.2f}")
    print(f"{'ratio b/a total (of medians)':34}{med(b_tot) / med(a_tot):9.2f}")
    print(f"{'text_delta notifications / turn':34}{med(notes):9.0f} {min(notes):9d} {max(notes):9d}"
          f"   (for {args.chunks} model deltas)")
    firsts = [r["first"] for r in b_runs]
    print(f"{'model deltas in 1st notification':34}{med(firsts):9.0f} {min(firsts):9d} {max(firsts):9d}")
    print("CPU per turn, ms (mean over measured runs):")
    print(f"{'  daemon process (/proc stat)':34}{ms(daemon_cpu / n)}"
          f"   (10 ms tick resolution, summed over runs)")
    print(f"{'  (a) SDK client thread':34}{ms(sdk_thread_cpu / n)}")
    print(f"{'  (a) bench process, incl. FakeLLM':34}{ms(sdk_proc_cpu / n)}")
    print(f"{'  (b) raw client thread':34}{ms(raw_thread_cpu / n)}")
    print(f"{'  (b) bench process, incl. FakeLLM':34}{ms(raw_proc_cpu / n)}")
    print(f"daemon memory after the runs: {rss_now:.0f} MiB resident, {rss_peak:.0f} MiB peak")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=2000, help="text deltas in the scripted reply (default 2000)")
    parser.add_argument("--runs", type=int, default=15, help="measured runs of each of a and b (default 15)")
    parser.add_argument("--warmup", type=int, default=2, help="warm-up runs of each (default 2)")
    parser.add_argument("--quick", action="store_true", help="smoke run: --chunks 2000 --runs 5")
    parser.add_argument("--profile", metavar="OUT",
                        help="run the daemon under cProfile during the measured runs and write the stats to OUT "
                             "(timings are then distorted; read OUT with pstats)")
    args = parser.parse_args()
    if args.quick:
        args.chunks, args.runs = 2000, 5
    if args.chunks < 1 or args.runs < 1:
        parser.error("--chunks and --runs must be >= 1")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
