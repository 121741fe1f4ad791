"""Our daemon (both faces) side by side with codex app-server and claude-agent-acp, against one fake
model server (Chat Completions for ours, Responses for codex, Messages for claude: bench/peer_llm.py).

Per token count, each run spawns every peer fresh, in rotating order (interleaved), and times:
init ms (spawn -> initialize answered), init CPU ms (the launch's processes' CPU by then: launcher,
warm child, interpreter start-up; steadier than wall times on a busy machine), session ms (new
session), 1st chunk ms (prompt -> first streamed text), spawn->chunk ms (spawn -> first streamed
text: what a person waits in all), turn ms (prompt -> turn end), turn CPU s (the peer process, /proc), RSS after the turn.
Medians of --runs after --warmup, then ours/peer ratios per column (< 1: we are ahead).
--against DIR runs a second daemon tree's faces in the same rotation (rows labelled by tree), so a
before/after pair shares the machine's load; --daemon-root replaces the tree that runs.
The concurrency case runs --sessions sessions streaming at once in one process per peer, with a
cheap request (no disk I/O: tools/list, an unknown ACP method answered -32601 by the SDK, codex
thread/loaded/list) and a session list (toycoder/session/list, session/list, thread/list) every
20 ms each meanwhile. The history
case (--history N) opens a session of N messages in a fresh process per peer (ours: a session file
loaded, compaction off; codex: thread/resume given the same history as Responses items) and times
one prompt in it.

Our daemon runs as a user's install runs it: the installed `toycoder-daemon` script in a venv of the dependencies
(installed.py), the tree's code first on PYTHONPATH, each face twice: warm (the fork server of
toycoder_daemon/warm, started by a first launch before the measured runs, in a runtime dir of the
bench's own, and stopped at the end) and cold (TOYCODER_WARM=0). A warm daemon runs in a child of
the fork server, outside the spawned launcher's tree: a marker in each spawn's environment finds it,
and its CPU and memory count as that launch's (the server's one-time imports do not, like a page
cache; its RSS is printed once). USS MiB is the launch's private memory.
codex: `--install-codex` puts npm @openai/codex@0.171.0 into bench/.peers/ (gitignored, never a
project dependency); CODEX_BIN points at another binary. claude-agent-acp: `--install-claude` puts
npm @zed-industries/claude-agent-acp@0.23.1 there (CLAUDE_ACP_JS points at another dist/index.js);
its CPU and memory count the adapter and the Claude Code CLI it runs per session; its cheap request
is an unknown method (-32601); it has no row in the history case. A peer not installed has no row.

Run:  .venv/bin/python bench/peers.py [--tokens 2000,20000] [--runs 5] [--warmup 1] [--sessions 20] [--history 5000]
                                     [--against DIR] [--quick] [--install-codex] [--install-claude] [--no-claude]
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from big_history import history  # noqa: E402
from installed import installed_launcher  # noqa: E402
from peer_clients import ClaudeACP, Codex, Peer, ToyACP, ToyLSP  # noqa: E402
from peer_llm import PeerLLM  # noqa: E402

CODEX_PKG = "@openai/codex@0.171.0"
CLAUDE_PKG = "@zed-industries/claude-agent-acp@0.23.1"
PEERS = (Codex, ClaudeACP)
PEERS_DIR = HERE / ".peers"
MODEL = "fake-model"
PROMPT = "say hello"


def find_codex() -> str | None:
    if os.environ.get("CODEX_BIN"):
        return os.environ["CODEX_BIN"]
    # the native binary, not the node wrapper in .bin/ (which would add node's start-up to codex's numbers)
    found = sorted(glob.glob(str(PEERS_DIR / "node_modules/@openai/codex-linux-*/vendor/*/bin/codex")))
    return found[0] if found else None


def find_claude() -> str | None:
    if os.environ.get("CLAUDE_ACP_JS"):
        return os.environ["CLAUDE_ACP_JS"]
    js = PEERS_DIR / "node_modules/@zed-industries/claude-agent-acp/dist/index.js"
    return str(js) if js.exists() and shutil.which("node") else None


def install_peer(package: str) -> None:
    if not shutil.which("npm"):
        raise SystemExit(f"installing {package}: npm is not on PATH")
    PEERS_DIR.mkdir(exist_ok=True)
    # saved into bench/.peers/package.json: a later install of the other peer keeps this one
    subprocess.run(["npm", "install", "--save-exact", "--no-audit", "--no-fund", "--prefix", str(PEERS_DIR), package],
                   check=True)


@dataclass(frozen=True, eq=False)  # hashed by identity: a table's key
class Row:
    """One row of the tables: a peer kind, and for ours the daemon tree it runs from and whether warm."""
    label: str
    kind: type[Peer]
    env: dict[str, str]
    warm: bool = False


def tree_env(env: dict[str, str], tree: Path) -> dict[str, str]:
    """`env` with `tree` first on PYTHONPATH (so its toycoder_daemon runs)."""
    return {**env, "PYTHONPATH": os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])}


class Setup:
    """Temp dirs, config and argv for every peer; nothing of the user's is read or written."""

    def __init__(self, tmp: Path, llm: PeerLLM, codex: str | None, daemon_root: Path = ROOT, loop_stats: bool = False,
                 against: Path | None = None, claude: str | None = None):
        self.ws = tmp / "ws"
        self.ws.mkdir()
        (self.ws / "README.md").write_text("# bench workspace\n")
        home = tmp / "home"
        home.mkdir()
        (tmp / "codex-home").mkdir()
        run = tmp / "run"  # the fork server's runtime dir: the bench's own
        run.mkdir(mode=0o700)
        self.env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
                    "TOYCODER_DATA_DIR": str(tmp / "data"), "CODEX_HOME": str(tmp / "codex-home"),
                    "BENCH_KEY": "bench-key", "TOYCODER_RUNTIME_DIR": str(run)}
        for var in ("TOYCODER_CONFIG", "OPENAI_API_KEY", "OPENAI_BASE_URL", "PYTHONDONTWRITEBYTECODE", "TOYCODER_WARM"):
            self.env.pop(var, None)
        # bytecode as an installed daemon has it (pip compiles at install): the warm-up run compiles
        # into the temp dir, so no run pays ~0.2 s of compiling and the tree stays clean
        self.env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        self.loop_stats = tmp / "loop-stats.jsonl" if loop_stats else None
        if self.loop_stats:  # in `base`: every row's env (both trees') is made from it
            self.env["BENCH_LOOP_STATS"] = str(self.loop_stats)
        base = self.env
        self.env = tree_env(base, daemon_root)
        cfg = tmp / "config.yaml"
        cfg.write_text(
            "providers:\n  openai:\n    api_keys: [\"bench-key\"]\n"
            f"    base_url: {llm.base_url}\n    models: {{default: {MODEL}, fast: {MODEL}}}\n"
            "default_provider: openai\nagent: {max_steps: 4, max_retries: 0, auto_title: false}\n"
            # compaction off (the history case); codex is told the same below
            "session: {max_messages: 1000000, max_context_tokens: 100000000}\n")
        self.data = tmp / "data"
        self.llm = llm
        # as a user's install runs it (installed.py: the installed script, no editable-install finder)
        daemon = [sys.executable, str(HERE / "loop_stats.py")] if loop_stats else installed_launcher(tmp)
        self.daemon = daemon
        self.argv: dict[type[Peer], list[str]] = {
            ToyLSP: [*daemon, "--config", str(cfg)],
            ToyACP: [*daemon, "--acp", "--config", str(cfg)],
        }
        if codex:
            self.argv[Codex] = [codex, "app-server", "-c", 'model_provider="bench"', "-c", f'model="{MODEL}"', "-c",
                                f'model_providers.bench={{name="bench",base_url="{llm.base_url}",'
                                'wire_api="responses",env_key="BENCH_KEY"}',
                                "-c", "model_context_window=100000000", "-c", "model_auto_compact_token_limit=100000000"]
        # our faces per tree (labelled by the tree's folder name when there are two, or its path when
        # the names are the same), then codex
        trees = [daemon_root] + ([against] if against else [])
        names = [t.name for t in trees] if len({t.name for t in trees}) == len(trees) else [str(t) for t in trees]
        # warm and cold rows (loop_stats.py runs faces.main.main in its own process: cold only)
        modes = [False] if loop_stats else [True, False]
        self.rows = [Row(kind.name + (" warm" if warm else " cold") + (f" [{name}]" if against else ""), kind,
                         {**tree_env(base, tree), **({} if warm else {"TOYCODER_WARM": "0"})}, warm)
                     for tree, name in zip(trees, names, strict=True) for kind in (ToyLSP, ToyACP) for warm in modes]
        if codex:
            self.rows.append(Row(Codex.name, Codex, self.env))
        if claude:
            self.argv[ClaudeACP] = [shutil.which("node") or "node", claude]
            self.rows.append(Row(ClaudeACP.name, ClaudeACP, {
                **self.env, "ANTHROPIC_BASE_URL": llm.base_url.rsplit("/v1", 1)[0], "ANTHROPIC_API_KEY": "bench-key",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
                # the CLI refuses to start as root unless told it is in a sandbox (this machine runs as root)
                **({"IS_SANDBOX": "1"} if os.geteuid() == 0 else {})}))

    def warm_status(self, row: Row) -> dict[str, object]:
        out = subprocess.run([*self.daemon, "--warm-status"], capture_output=True, text=True, env=row.env)
        return dict(json.loads(out.stdout))

    def start_servers(self) -> list[int]:
        """A first launch per tree leaves its fork server running; its pid once it serves."""
        pids = []
        for row in (r for r in self.rows if r.warm and r.kind is ToyLSP):
            subprocess.run([*self.daemon, "--version"], capture_output=True, env=row.env, check=True)
            deadline = time.monotonic() + 60
            while not (shown := self.warm_status(row)).get("running"):
                if time.monotonic() > deadline:
                    raise SystemExit(f"no fork server started for {row.label}: {shown}")
                time.sleep(0.05)
            pids.append(int(shown["pid"]))  # type: ignore[call-overload]
        return pids

    def stop_servers(self) -> None:
        for row in (r for r in self.rows if r.warm and r.kind is ToyLSP):
            subprocess.run([*self.daemon, "--warm-stop"], capture_output=True, env=row.env)

    async def spawn(self, which: type[Peer] | Row) -> Peer:
        row = which if isinstance(which, Row) else Row(which.name, which, self.env)
        peer: Peer = await row.kind.spawn(self.argv[row.kind], row.env, str(self.ws))
        peer.name = row.label
        return peer


def expected_text(tokens: int) -> str:
    return "".join(f"tok{i} " for i in range(tokens))


def check(peer: Peer, sid: str, tokens: int) -> None:
    text = "".join(peer.turns[sid].text)
    if text != expected_text(tokens):
        raise SystemExit(f"{peer.name}: streamed text differs from the reply ({len(text)} chars, "
                         f"expected {len(expected_text(tokens))}; starts {text[:60]!r})")


async def one_turn(setup: Setup, which: type[Peer] | Row, tokens: int) -> dict[str, float]:
    peer = await setup.spawn(which)
    try:
        init = await peer.initialize(str(setup.ws))
        init_cpu = peer.run_ms()
        t = time.perf_counter()
        sid = await peer.new_session(str(setup.ws))
        session = time.perf_counter() - t
        cpu0 = peer.cpu_seconds()
        turn = peer.start_prompt(sid, PROMPT)
        await asyncio.wait_for(turn.done.wait(), 300)
        cpu1 = peer.cpu_seconds()
        check(peer, sid, tokens)
        assert turn.first_chunk is not None and turn.ended is not None
        return {"init": init * 1000, "init_cpu": init_cpu,
                "session": session * 1000, "first": (turn.first_chunk - turn.started) * 1000,
                "spawn_first": (turn.first_chunk - peer.spawned) * 1000,
                "turn": (turn.ended - turn.started) * 1000, "cpu": cpu1 - cpu0, "rss": peer.rss_mib(),
                "uss": peer.uss_mib()}
    finally:
        await peer.close()


def p99(values: list[float]) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, -(-99 * len(s) // 100) - 1))]  # nearest rank


async def many_sessions(setup: Setup, which: type[Peer] | Row, tokens: int, sessions: int) -> dict[str, float]:
    peer = await setup.spawn(which)
    try:
        await peer.initialize(str(setup.ws))
        sids = [await peer.new_session(str(setup.ws)) for _ in range(sessions)]
        # a running daemon: one of each probe first, so what is timed is requests beside 20 streams,
        # not the first request of each kind in a fresh process
        # (that cost is in the fresh-process tables)
        await peer.cheap_request(sids[0])
        await peer.list_request(sids[0])
        probes: list[float] = []
        lists: list[float] = []
        stop = asyncio.Event()

        async def probe(request: Callable[[str], Awaitable[None]], times: list[float]) -> None:
            while not stop.is_set():
                t = time.perf_counter()
                await request(sids[0])
                times.append((time.perf_counter() - t) * 1000)
                await asyncio.sleep(0.02)

        timed = setup.loop_stats is not None and not isinstance(peer, Codex)
        if timed:
            peer.proc.send_signal(signal.SIGUSR1)  # loop_stats.py: a new window of passes from here
        probers = [asyncio.ensure_future(probe(peer.cheap_request, probes)),
                   asyncio.ensure_future(probe(peer.list_request, lists))]
        cpu0 = peer.cpu_seconds()
        t0 = time.perf_counter()
        turns = [peer.start_prompt(sid, PROMPT) for sid in sids]
        await asyncio.wait_for(asyncio.gather(*(t.done.wait() for t in turns)), 600)
        total = time.perf_counter() - t0
        cpu = peer.cpu_seconds() - cpu0
        stop.set()
        await asyncio.gather(*probers)
        for sid in sids:
            check(peer, sid, tokens)
        firsts = [((t.first_chunk or t0) - t0) * 1000 for t in turns]
        row = {"total": total, "first_p99": p99(firsts), "probe_p99": p99(probes) if probes else float("nan"),
               "list_p99": p99(lists) if lists else float("nan"),
               "cpu": cpu, "rss": peer.rss_mib()}
        if setup.loop_stats is not None:
            row.update(await loop_passes(peer, setup.loop_stats) if timed else {"pass_cpu": math.nan, "pass_wall": math.nan})
        return row
    finally:
        await peer.close()


def write_session(setup: Setup, messages: list[dict[str, object]]) -> str:
    """A stored session of ours holding `messages` (what the daemon loads); its id."""
    sys.path.insert(0, str(ROOT))
    from toycoder_daemon.sessions.store import SessionStore

    store = SessionStore(setup.data, setup.ws.resolve())
    sid = store.new_id()
    f = store.create(sid, {"id": sid, "title": "big history", "titleBy": "user"})
    f.append(messages)  # type: ignore[arg-type]
    f.close()
    return sid


async def big_history_turn(setup: Setup, which: type[Peer] | Row, messages: list[dict[str, object]]) -> dict[str, float]:
    """A fresh process opens an N-message session and is prompted once in it (the prompt is the
    history's last message; the rest is the session)."""
    kind = which.kind if isinstance(which, Row) else which
    sid = write_session(setup, messages[:-1]) if kind is not Codex else ""
    peer = await setup.spawn(which)
    try:
        if isinstance(peer, Codex):
            peer.experimental = True
        await peer.initialize(str(setup.ws))
        t = time.perf_counter()
        sid = await peer.open_history(str(setup.ws), sid, messages[:-1])  # type: ignore[arg-type]
        opened = time.perf_counter() - t
        sent = setup.llm.stats()["request_bytes"]
        cpu0 = peer.cpu_seconds()
        turn = peer.start_prompt(sid, str(messages[-1]["content"]))
        await asyncio.wait_for(turn.done.wait(), 300)
        cpu = peer.cpu_seconds() - cpu0
        body = setup.llm.stats()["request_bytes"] - sent
        again = peer.start_prompt(sid, "and again")  # the same session, warm: no first-turn set-up
        await asyncio.wait_for(again.done.wait(), 300)
        assert turn.first_chunk and turn.ended and again.first_chunk
        return {"open": opened * 1000, "first": (turn.first_chunk - turn.started) * 1000,
                "turn": (turn.ended - turn.started) * 1000, "cpu": cpu,
                "again": (again.first_chunk - again.started) * 1000, "mb": body / 1e6, "rss": peer.rss_mib()}
    finally:
        await peer.close()


async def loop_passes(peer: Peer, out: Path) -> dict[str, float]:
    """The event-loop pass p99s (CPU, wall) of the window just measured (bench/loop_stats.py)."""
    lines = len(out.read_text().splitlines()) if out.exists() else 0
    peer.proc.send_signal(signal.SIGUSR2)
    for _ in range(500):  # the daemon appends one line: poll for it (5 s at most)
        if out.exists() and len(rows := out.read_text().splitlines()) > lines:
            stats = json.loads(rows[-1])
            return {"pass_cpu": stats["cpu_p99"], "pass_wall": stats["wall_p99"]}
        await asyncio.sleep(0.01)
    raise SystemExit(f"{peer.name}: no loop stats from bench/loop_stats.py")


COLS = [("init", "init ms", "{:9.0f}"), ("init_cpu", "init CPU ms", "{:9.1f}"),
        ("session", "session ms", "{:9.0f}"), ("first", "1st chunk ms", "{:9.0f}"),
        ("spawn_first", "spawn->chunk ms", "{:9.0f}"),
        ("turn", "turn ms", "{:9.0f}"), ("cpu", "turn CPU s", "{:9.2f}"), ("rss", "RSS MiB", "{:9.0f}"),
        ("uss", "USS MiB", "{:9.0f}")]
HISTORY = [("open", "open ms", "{:9.0f}"), ("first", "1st chunk ms", "{:9.0f}"), ("turn", "turn ms", "{:9.0f}"),
           ("cpu", "turn CPU s", "{:9.2f}"), ("again", "2nd prompt 1st ms", "{:9.0f}"), ("mb", "request MB", "{:9.2f}"),
           ("rss", "RSS MiB", "{:9.0f}")]
MANY = [("total", "total s", "{:9.2f}"), ("first_p99", "1st chunk p99 ms", "{:9.0f}"),
        ("probe_p99", "cheap req p99 ms", "{:9.1f}"), ("list_p99", "list req p99 ms", "{:9.1f}"),
        ("cpu", "CPU s", "{:9.2f}"), ("rss", "RSS MiB", "{:9.0f}")]
PASSES = [("pass_cpu", "loop pass CPU p99", "{:9.1f}"), ("pass_wall", "loop pass p99 ms", "{:9.1f}")]


def table(title: str, cols: list[tuple[str, str, str]], rows: dict[Row, dict[str, float]]) -> None:
    ours = [r for r in rows if r.kind not in PEERS]
    peers = [r for r in rows if r.kind in PEERS]
    short = {Codex: "codex", ClaudeACP: "claude"}
    ratio_labels = {(r, p): "ratio " + r.label.removeprefix("toycoder ") + "/" + short[p.kind] for p in peers for r in ours}
    width = max([22, *(len(r.label) + 2 for r in rows), *(len(s) + 2 for s in ratio_labels.values())])
    print(f"\n{title}")
    print(f"{'':{width}}" + "".join(f"{label:>18}" for _, label, _ in cols))
    for r, row in rows.items():
        print(f"{r.label:{width}}" + "".join(f"{fmt.format(row[key]):>18}" for key, _, fmt in cols))
    for (r, p), label in ratio_labels.items():
        ratios = [rows[r][k] / rows[p][k] if rows[p][k] else float("nan") for k, _, _ in cols]
        print(f"{label:{width}}" + "".join(f"{x:18.2f}" for x in ratios))


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


async def main_async(args: argparse.Namespace) -> int:
    codex = find_codex()
    if codex is None:
        print(f"codex: not installed (run with --install-codex to put npm {CODEX_PKG} into bench/.peers/, "
              "or set CODEX_BIN); printing our numbers only", file=sys.stderr)
    claude = find_claude() if not args.no_claude else None
    if claude is None and not args.no_claude:
        print(f"claude-agent-acp: not installed (run with --install-claude to put npm {CLAUDE_PKG} into bench/.peers/, "
              "or set CLAUDE_ACP_JS); no claude rows", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="toycoder-peers-") as tmp, PeerLLM() as llm:
        against = Path(args.against).resolve() if args.against else None
        setup = Setup(Path(tmp), llm, codex, Path(args.daemon_root).resolve(), args.loop_stats, against, claude)
        entries = setup.rows
        print(f"peers: {', '.join(e.label for e in entries)}; medians of {args.runs} runs after {args.warmup} warm-up, "
              f"interleaved; load average {os.getloadavg()[0]:.2f}")
        if against:
            print(f"trees: {Path(args.daemon_root).resolve()} and {against} (--against)")
        servers = setup.start_servers()
        try:
            await measure(args, setup, llm, entries)
        finally:
            for pid in servers:
                print(f"fork server {pid}: RSS {rss_of(pid):.0f} MiB (imported once, not counted in a launch)")
            setup.stop_servers()
    print(f"\nload average after: {os.getloadavg()[0]:.2f} (a busy machine inflates wall times; read CPU and ratios)")
    return 0


def rss_of(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:")), float("nan"))
    except OSError:
        return float("nan")


async def measure(args: argparse.Namespace, setup: Setup, llm: PeerLLM, entries: list[Row]) -> None:
    """Every table, in order: fresh processes per token count, concurrent sessions, a big history."""
    for tokens in args.tokens:
        llm.set_tokens(tokens)
        runs: dict[Row, list[dict[str, float]]] = {e: [] for e in entries}
        for r in range(args.warmup + args.runs):
            order = entries[r % len(entries):] + entries[:r % len(entries)]
            for entry in order:
                m = await one_turn(setup, entry, tokens)
                if r >= args.warmup:
                    runs[entry].append(m)
        if args.runs:  # --runs 0: the warm-up alone (bytecode compiled for the tables after)
            table(f"{tokens:,} tokens, one fresh process per run", COLS, {k: medians(v) for k, v in runs.items()})
    if args.sessions:
        llm.set_tokens(args.many_tokens)
        many: dict[Row, list[dict[str, float]]] = {e: [] for e in entries}
        for r in range(args.many_runs):
            for entry in entries[r % len(entries):] + entries[:r % len(entries)]:
                many[entry].append(await many_sessions(setup, entry, args.many_tokens, args.sessions))
        table(f"{args.sessions} sessions streaming {args.many_tokens:,} tokens at once in one process "
              f"(medians of {args.many_runs})", MANY + (PASSES if args.loop_stats else []),
              {k: medians(v) for k, v in many.items()})
    if args.history:
        llm.set_tokens(args.history_tokens)
        messages = history(args.history)
        with_history = [e for e in entries if e.kind.has_history]
        hist: dict[Row, list[dict[str, float]]] = {e: [] for e in with_history}
        for r in range(args.warmup + args.history_runs):
            for entry in with_history[r % len(with_history):] + with_history[:r % len(with_history)]:
                m = await big_history_turn(setup, entry, messages)
                if r >= args.warmup:
                    hist[entry].append(m)
        table(f"a prompt in a {args.history:,}-message session (compaction off), {args.history_tokens:,}-token reply, "
              f"fresh process (medians of {args.history_runs})", HISTORY, {k: medians(v) for k, v in hist.items()})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", default="2000,20000", help="comma-separated reply sizes (default 2000,20000)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--sessions", type=int, default=20, help="concurrent sessions (0: skip that case)")
    parser.add_argument("--many-tokens", type=int, default=2000)
    parser.add_argument("--many-runs", type=int, default=3)
    parser.add_argument("--loop-stats", action="store_true",
                        help="run our daemons under bench/loop_stats.py: event-loop pass p99s in the 20-session table")
    parser.add_argument("--history", type=int, default=5000, help="messages in the big-history case (0: skip it)")
    parser.add_argument("--history-tokens", type=int, default=200)
    parser.add_argument("--history-runs", type=int, default=3)
    parser.add_argument("--daemon-root", default=str(ROOT),
                        help="the source tree whose toycoder_daemon runs (default: this one)")
    parser.add_argument("--against", help="a second tree whose daemon runs in the same rotation, rows labelled by "
                                           "tree (before/after under one load)")
    parser.add_argument("--install-codex", action="store_true", help=f"npm install {CODEX_PKG} into bench/.peers/ first")
    parser.add_argument("--install-claude", action="store_true",
                        help=f"npm install {CLAUDE_PKG} into bench/.peers/ first")
    parser.add_argument("--no-claude", action="store_true", help="leave claude-agent-acp out (it is slow to start)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: --tokens 2000 --runs 2 --warmup 0 --many-runs 1 --history-runs 1")
    args = parser.parse_args()
    if args.quick:
        args.tokens, args.runs, args.warmup, args.many_runs, args.history_runs = "2000", 2, 0, 1, 1
    args.tokens = [int(t) for t in str(args.tokens).split(",") if t]
    if args.install_codex:
        install_peer(CODEX_PKG)
    if args.install_claude:
        install_peer(CLAUDE_PKG)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
