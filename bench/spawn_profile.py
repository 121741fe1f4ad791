"""Where a new process's first turn goes: spawn -> first streamed token, both faces (issue 17).

Each run spawns a fresh daemon, cold (TOYCODER_WARM=0), and drives peers.py's sequence
(initialize, session/new, the prompt, each sent as soon as the one before is answered; the fake
model streams --tokens chunks), with spawn_trace.py loaded as `sitecustomize` for stamps inside the
process. Faces alternate; medians of --runs after --warmup (the warm-up compiles bytecode into the
temp dir, as peers.py does).

  --mode timeline    ms from spawn: interpreter ready, initialize answered, the App's imports done,
                     session answered, prompt read, HTTP connect / request sent / first bytes back,
                     first chunk queued, first chunk at the client
  --mode importtime  -X importtime up to the first chunk: top --top modules by self and by
                     cumulative time, medians over runs, ours / stdlib / third-party
  --mode floor       no daemon: processes that only import the interpreter's, the libraries' and then
                     the daemon's modules (what the imports alone cost, against what no change of ours removes)
  --mode cprofile    cProfile with a CPU clock (thread_time), the main thread plus worker-thread
                     jobs, up to the first chunk: top --top functions by own and cumulative time

--warm profiles warm launches: the bench starts a fork server of its own with spawn_trace.py
imported first (so its children carry the stamps), and the timeline adds the launcher's points
(`launcher:`) and the child's (`child:`), sorted by time.

--launch installed (the default) runs the daemon as peers.py does, as a user's install runs it
(installed.py: the installed script in a venv of the dependencies, no editable-install finder);
--launch bench runs `python -m toycoder_daemon` with the project's venv, its finder included.

Run:  .venv/bin/python bench/spawn_profile.py [--mode timeline] [--runs 9] [--launch installed] [--warm]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from peer_clients import Peer, ToyACP, ToyLSP  # noqa: E402
from peer_llm import PeerLLM  # noqa: E402
from peers import PROMPT, Setup  # noqa: E402

STAMPS = [("ready", "interpreter ready (site done)", "d"), ("init", "initialize answered", "c"),
          ("app_imported", "the App's imports done", "d"), ("app_open", "App.open begins", "d"),
          ("app_opened", "App.open done", "d"), ("session", "session answered", "c"),
          ("prompt", "prompt read", "d"), ("post", "the model call posts", "d"),
          ("client_make", "HTTP client: making (its import)", "d"), ("client_made", "HTTP client made", "d"),
          ("connect", "HTTP connect", "d"),
          ("request_sent", "HTTP request sent", "d"), ("response_in", "first bytes back", "d"),
          ("chunk_out", "first chunk queued", "d"), ("chunk", "first chunk at the client", "c"),
          ("l_ready", "launcher: interpreter ready", "l"), ("l_imported", "launcher: its module imported", "l"),
          ("l_hash", "launcher: install hash begins", "l"), ("l_hashed", "launcher: install hash done", "l"),
          ("l_connect", "launcher: connects", "l"), ("l_forked", "launcher: server answered (child forked)", "l"),
          ("l_go", "launcher: go written", "l"), ("forked", "child: forked (a spare: took the launch)", "d"),
          ("main", "child: adopted the launch, faces.main.main called", "d"),
          ("frame_in", "first frame read", "d")]


async def one_run(setup: Setup, kind: type[Peer], argv: list[str], env: dict[str, str], tmp: Path,
                  n: int) -> tuple[dict[str, float], Path, Path]:
    trace, err, prof = tmp / f"trace.{n}", tmp / f"stderr.{n}", tmp / f"prof.{n}"
    env = {**env, "BENCH_TRACE": str(trace)}
    if "BENCH_TRACE_PROFILE" in env:
        env["BENCH_TRACE_PROFILE"] = str(prof)
    with open(err, "wb") as stderr:
        t0 = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE, stderr=stderr, env=env,
                                                    cwd=str(setup.ws), limit=1 << 26)
    peer = kind(proc, t0)
    try:
        got = {"init": await peer.initialize(str(setup.ws)) + t0}
        sid = await peer.new_session(str(setup.ws))
        got["session"] = time.perf_counter()
        turn = peer.start_prompt(sid, PROMPT)
        await asyncio.wait_for(turn.done.wait(), 120)
        assert turn.first_chunk is not None, "no chunk streamed"
        got["chunk"] = turn.first_chunk
    finally:
        await peer.close()
    launcher, imported = trace.with_name(trace.name + ".launcher"), trace.with_name(trace.name + ".imported")
    if imported.exists():
        print(f"{kind.name} warm child imported: {' '.join(imported.read_text().split())}")
    for line in trace.read_text().splitlines() + (launcher.read_text().splitlines() if launcher.exists() else []):
        name, _, value = line.partition("=")
        got[name] = float(value)
    return {k: v * 1000 if k.startswith("cpu") else (v - t0) * 1000 for k, v in got.items()}, err, prof


def importtimes(err: Path) -> dict[str, tuple[float, float]]:
    """name -> (self ms, cumulative ms) of the imports before the first chunk."""
    out: dict[str, tuple[float, float]] = {}
    for line in err.read_text(errors="replace").splitlines():
        if line.startswith("BENCH_TRACE first chunk"):
            break
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, cum, name = line[len("import time:"):].split("|")
        out[name.strip()] = (int(own) / 1000, int(cum) / 1000)
    return out


def origin(module: str) -> str:
    top = module.split(".")[0]
    if top == "toycoder_daemon":
        return "ours"
    if top in sys.stdlib_module_names or top in ("encodings", "_distutils_hack"):
        return "stdlib" if top != "_distutils_hack" else "third-party"
    return "third-party"


def fn_origin(key: tuple[str, int, str]) -> str:
    path = key[0]
    if path == "~" or path.startswith("<frozen"):
        return "builtin/stdlib"
    if "/toycoder_daemon/" in path:
        return "ours"
    return "third-party" if "site-packages" in path else "builtin/stdlib"


def med(rows: list[dict[Any, float]], key: Any) -> float:
    return statistics.median(r.get(key, 0.0) for r in rows)


def show_timeline(face: str, rows: list[dict[str, float]]) -> None:
    print(f"\n{face}: ms from spawn, medians of {len(rows)} (p25-p75); CPU ms to the first chunk: daemon "
          f"{med(rows, 'cpu'):.0f}" + (f", launcher {med(rows, 'cpu_launcher'):.0f}" if any('cpu_launcher' in r for r in rows)
                                       else ""))
    print("| point | ms | p25-p75 | from the point before | its process's CPU ms by then |\n|---|--:|--:|--:|--:|")
    before = 0.0
    present = [(key, label, side) for key, label, side in STAMPS if any(key in r for r in rows)]
    for key, label, side in sorted(present, key=lambda p: statistics.median(r[p[0]] for r in rows if p[0] in r)):
        values = sorted(r[key] for r in rows if key in r)
        m = statistics.median(values)
        q = statistics.quantiles(values, n=4) if len(values) > 1 else [m, m, m]
        side = dict(d="daemon", c="client", l="launcher")[side]
        cpu = [r[f"cpuat_{key}"] for r in rows if f"cpuat_{key}" in r]
        print(f"| {label} ({side}) | {m:.1f} | {q[0]:.0f}-{q[2]:.0f} | {m - before:+.1f} | "
              f"{f'{statistics.median(cpu):.1f}' if cpu else ''} |")
        before = m


def show_imports(face: str, runs: list[dict[str, tuple[float, float]]], top: int) -> None:
    names = set().union(*runs)
    own = {n: statistics.median(r.get(n, (0, 0))[0] for r in runs) for n in names}
    cum = {n: statistics.median(r.get(n, (0, 0))[1] for r in runs) for n in names}
    print(f"\n{face}: -X importtime before the first chunk, medians of {len(runs)} runs; "
          f"{len(names)} modules, self total {sum(own.values()):.0f} ms")
    by_origin: dict[str, float] = defaultdict(float)
    by_package: dict[str, float] = defaultdict(float)
    for n, v in own.items():
        by_origin[origin(n)] += v
        by_package[n.split(".")[0]] += v
    print("self ms by origin: " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(by_origin.items(), key=lambda kv: -kv[1])))
    print("self ms by top-level package: " + ", ".join(
        f"{k} {v:.1f}" for k, v in sorted(by_package.items(), key=lambda kv: -kv[1])[:top]))
    for title, table in (("self", own), ("cumulative", cum)):
        print(f"\n| top {top} by {title} | origin | self ms | cumulative ms |\n|---|---|--:|--:|")
        for n in sorted(table, key=lambda x: -table[x])[:top]:
            print(f"| `{n}` | {origin(n)} | {own[n]:.1f} | {cum[n]:.1f} |")


def show_profile(face: str, files: list[Path], top: int) -> None:
    runs = [pstats.Stats(str(f)).stats for f in files]  # type: ignore[attr-defined]
    keys = set().union(*runs)
    tot = {k: statistics.median(r[k][2] * 1000 if k in r else 0 for r in runs) for k in keys}
    cum = {k: statistics.median(r[k][3] * 1000 if k in r else 0 for r in runs) for k in keys}
    calls = {k: statistics.median(r[k][1] if k in r else 0 for r in runs) for k in keys}
    totals = [sum(v[2] for v in r.values()) * 1000 for r in runs]
    print(f"\n{face}: cProfile (thread CPU) before the first chunk, medians of {len(runs)}; "
          f"CPU profiled {statistics.median(totals):.0f} ms (with the profiler's overhead)")
    by_origin: dict[str, float] = defaultdict(float)
    for k, v in tot.items():
        by_origin[fn_origin(k)] += v
    print("own ms by origin: " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(by_origin.items(), key=lambda kv: -kv[1])))

    def where(k: tuple[str, int, str]) -> str:
        path = k[0]
        for cut in ("site-packages/", "/toycoder_daemon/", "/lib/python3.11/"):
            if cut in path:
                path = ("toycoder_daemon/" if "toycoder" in cut else "") + path.split(cut, 1)[1]
        return f"{path}:{k[1]}({k[2]})" if path != "~" else k[2]

    skip = ("_bootstrap", "<frozen", "~")
    for title, table, keep in (("own time", tot, lambda k: True),
                               ("cumulative (import machinery and builtins left out)", cum,
                                lambda k: not k[0].startswith(skip) and k[2] != "<module>" and k[0] != __file__
                                and "spawn_trace" not in k[0]),
                               ("cumulative, our functions (module bodies left out)", cum,
                                lambda k: fn_origin(k) == "ours" and k[2] != "<module>")):
        print(f"\n| top {top} by {title} | calls | own ms | cumulative ms |\n|---|--:|--:|--:|")
        for k in [k for k in sorted(table, key=lambda x: -table[x]) if keep(k)][:top]:
            print(f"| `{where(k)}` | {calls[k]:.0f} | {tot[k]:.1f} | {cum[k]:.1f} |")


_MODEL = "import pydantic\nclass M(pydantic.BaseModel):\n    a: int = 0\nM(a=1)\n"  # a model built: plugins, schema
_HTTP = "import httpx2, httpcore2, anyio._backends._asyncio\n"
FLOOR = [("interpreter (`-c pass`)", ""),
         ("+ asyncio, json, logging", "import asyncio, json, logging\n"),
         ("+ pydantic (one model built), yaml, orjson", "import asyncio, json, logging, yaml, orjson\n" + _MODEL),
         ("+ the HTTP stack (httpx2, httpcore2, anyio's asyncio backend)",
          "import asyncio, json, logging, yaml, orjson\n" + _MODEL + _HTTP),
         ("the LSP face's imports before its first chunk (server, transport + the HTTP stack)",
          "import toycoder_daemon.faces.lsp.server, toycoder_daemon.faces.lsp.transport\n" + _HTTP),
         ("the ACP face's (agent, the SDK included, + the HTTP stack)", "import toycoder_daemon.faces.acp.agent\n" + _HTTP)]


def floor(python: str, env: dict[str, str], runs: int, warmup: int) -> None:
    """Wall ms of a process that imports only this, and exits as the daemon does (os._exit: no
    teardown), interleaved; what no change of ours can remove is the fourth row."""
    times: dict[str, list[float]] = defaultdict(list)
    for i in range(warmup + runs):
        for label, code in FLOOR:
            t = time.perf_counter()
            subprocess.run([python, "-c", code + "import os\nos._exit(0)\n"], env=env, check=True)
            if i >= warmup:
                times[label].append((time.perf_counter() - t) * 1000)
    print(f"\nimports alone, wall ms, medians of {runs}; load average {os.getloadavg()[0]:.2f} after")
    print("| process | ms |\n|---|--:|")
    for label, _ in FLOOR:
        print(f"| {label} | {statistics.median(times[label]):.0f} |")


def start_traced_server(launch: list[str], env: dict[str, str], tmp: Path) -> subprocess.Popen[bytes]:
    """A fork server as a launcher would start it (launcher.spawn_server: same import path, runtime
    dir and install hash, only SERVER_ENV), with spawn_trace.py imported before its main."""
    from toycoder_daemon.warm.launcher import SERVER_ENV

    bindir = Path(launch[0]).parent
    probe = bindir / "warm-probe"  # beside the installed script: the same sys.path as a launch
    probe.write_text(f"#!{bindir / 'python'}\nimport marshal\nfrom toycoder_daemon.warm import launcher as l\n"
                     "print(l.runtime_dir(), l.install_hash(), marshal.dumps(l.import_path()).hex())\n")
    probe.chmod(0o755)
    directory, digest, path = subprocess.run([str(probe)], env=env, check=True, capture_output=True,
                                             text=True).stdout.split()
    boot = ("import sys, marshal; sys.path[:] = marshal.loads(bytes.fromhex(sys.argv[1])); "
            f"sys.path.insert(0, {str(HERE)!r}); import spawn_trace; del sys.path[0]; "
            "from toycoder_daemon.warm.server import main; main(sys.argv[2:])")
    server_env = {k: v for k, v in env.items()
                  if k in SERVER_ENV or k.startswith("LC_") or k == "BENCH_TRACE_PROFILE"}  # that: profile children
    with open(tmp / "warm-server.log", "wb") as log:
        server = subprocess.Popen([str(bindir / "python"), "-c", boot, path, directory, digest], env=server_env,
                                  cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    sock = Path(directory) / f"server-{digest}.sock"
    deadline = time.monotonic() + 60
    while not sock.exists():
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the traced fork server did not start: {(tmp / 'warm-server.log').read_text()}")
        time.sleep(0.05)
    return server


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["timeline", "importtime", "cprofile", "floor"], default="timeline")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=2000)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--launch", choices=["installed", "bench"], default="installed")
    ap.add_argument("--daemon-root", type=Path, default=HERE.parent)
    ap.add_argument("--warm", action="store_true", help="warm launches, from a traced fork server of the bench's own")
    ap.add_argument("--keep", type=Path, help="cprofile: keep each run's pstats file here (face.N.prof)")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} at the start", flush=True)
    with tempfile.TemporaryDirectory() as d, PeerLLM() as llm:
        tmp = Path(d)
        llm.set_tokens(args.tokens)
        setup = Setup(tmp, llm, None, daemon_root=args.daemon_root.resolve())
        site = tmp / "trace-site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(f"import sys\nsys.path.insert(0, {str(HERE)!r})\n"
                                               "import spawn_trace  # noqa\ndel sys.path[0]\n")
        env = {**setup.env, "PYTHONPATH": setup.env["PYTHONPATH"] + os.pathsep + str(site)}
        if args.mode == "importtime":
            env["PYTHONPROFILEIMPORTTIME"] = "1"
        if args.mode == "cprofile":
            env["BENCH_TRACE_PROFILE"] = "set per run"
        faces = setup.argv  # installed_launcher's (peers.Setup)
        if args.launch == "bench":
            faces = {kind: [sys.executable, "-m", "toycoder_daemon", *argv[1:]] for kind, argv in faces.items()}
        launch = faces[ToyLSP][:-2]
        if args.mode == "floor":
            floor(str(Path(launch[0]).parent / "python") if args.launch == "installed" else sys.executable,
                  setup.env, args.runs, args.warmup)
            return
        server = start_traced_server(launch, env, tmp) if args.warm else None
        if not args.warm:  # cold: the stamps hang on this process's imports, which a warm child never makes
            env["TOYCODER_WARM"] = "0"
        results: dict[type[Peer], list[Any]] = defaultdict(list)
        loads = []
        n = 0
        for i in range(args.warmup + args.runs):
            for kind in (ToyLSP, ToyACP):
                argv = faces[kind]
                n += 1
                got, err, prof = await one_run(setup, kind, argv, env, tmp, n)
                loads.append(os.getloadavg()[0])
                if args.keep and args.mode == "cprofile" and i >= args.warmup:
                    args.keep.mkdir(parents=True, exist_ok=True)
                    shutil.copy(prof, args.keep / f"{'acp' if kind is ToyACP else 'lsp'}.{i}.prof")
                if i >= args.warmup:
                    results[kind].append(got if args.mode == "timeline" else
                                         importtimes(err) if args.mode == "importtime" else prof)
        if server is not None:
            server.terminate()  # stops listening; exits once its children have ended
            server.wait(30)
        print(f"launch: {' '.join(launch)}{' (warm)' if args.warm else ''}; load average {min(loads):.2f}-{max(loads):.2f} "
              f"(median {statistics.median(loads):.2f})")
        for kind, rows in results.items():
            if args.mode == "timeline":
                show_timeline(kind.name, rows)
            elif args.mode == "importtime":
                show_imports(kind.name, rows, args.top)
            else:
                show_profile(kind.name, rows, args.top)


if __name__ == "__main__":
    asyncio.run(main())
