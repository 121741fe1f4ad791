"""Cold start: spawning `python -m toycoder_daemon` until its `initialize` response arrives, and
until the first `session/new` answer (what a person waits for before typing the first prompt).

The `initialize` request (then `initialized` and the session request) is written to the daemon's
stdin right after the spawn, so the times cover interpreter start, imports, config loading and the
handshake. Both faces: the LSP-framed one and `--acp` (newline-delimited). Side by side, in the same run and in
rotating order, the same interpreter is timed spawn-to-exit on baselines:

  python -c "pass"                          interpreter start-up alone
  python -c "import pygls.lsp.server"       the LSP framework the daemon is built on
  python -c "import toycoder_daemon.faces.lsp.server" everything the daemon imports before it serves

Every launch is cold (TOYCODER_WARM=0: no fork server; bench/peers.py times warm launches too).
Every process gets HOME and TOYCODER_DATA_DIR pointing at temp dirs; the daemon gets a config file
whose provider points at an unused local port (nothing is contacted), or, with --defaults, no
--config at all (built-in defaults).

Run:  .venv/bin/python bench/cold_start.py [--runs 10] [--defaults] [--tree DIR] [--against DIR]
(--tree times another checkout's daemon with the same script, e.g. an older commit for before/after;
--against times a second checkout's daemon in the same rotation, so before/after share the load.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def frame(obj: object) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_frame(stream) -> dict:
    length = None
    while True:
        line = stream.readline()
        if not line:
            raise RuntimeError("daemon closed stdout before answering initialize")
        line = line.strip()
        if not line:
            break
        k, _, v = line.decode().partition(":")
        if k.strip().lower() == "content-length":
            length = int(v)
    assert length is not None, "frame without Content-Length"
    return json.loads(stream.read(length))


def time_daemon(args: list[str], env: dict[str, str], ws: Path) -> tuple[float, float]:
    """(spawn -> initialize answer, spawn -> first toycoder/session/new answer) in seconds."""
    init = frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "processId": os.getpid(), "rootUri": ws.resolve().as_uri(),
        "capabilities": {"experimental": {"toycoder": {"permissionRequest": True, "askUser": True}}},
        "initializationOptions": {},
    }})
    then = (frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
            + frame({"jsonrpc": "2.0", "id": 2, "method": "toycoder/session/new", "params": {}}))
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "toycoder_daemon", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=str(ws))
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(init)
        proc.stdin.flush()
        answered: dict[int, float] = {}
        while 2 not in answered:
            msg = read_frame(proc.stdout)
            if msg.get("id") in (1, 2) and "method" not in msg:
                if "error" in msg:
                    raise SystemExit(f"request {msg['id']} failed: {msg['error']}")
                answered[msg["id"]] = time.perf_counter() - t0
                if msg["id"] == 1:  # as an editor does: the session request after the answer
                    proc.stdin.write(then)
                    proc.stdin.flush()
        proc.stdin.close()  # end of input: the daemon exits
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return answered[1], answered[2]


def time_acp(args: list[str], env: dict[str, str], ws: Path) -> tuple[float, float]:
    """The same over `--acp`: (spawn -> initialize answer, spawn -> session/new answer)."""
    def line(obj: object) -> bytes:
        return json.dumps(obj).encode() + b"\n"

    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "toycoder_daemon", "--acp", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=str(ws))
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(line({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                               "params": {"protocolVersion": 1, "clientCapabilities": {}}}))
        proc.stdin.flush()
        answered: dict[int, float] = {}
        while 2 not in answered:
            raw = proc.stdout.readline()
            if not raw:
                raise RuntimeError("the ACP daemon closed stdout early")
            msg = json.loads(raw)
            if msg.get("id") in (1, 2) and "method" not in msg:
                if "error" in msg:
                    raise SystemExit(f"ACP request {msg['id']} failed: {msg['error']}")
                answered[msg["id"]] = time.perf_counter() - t0
                if msg["id"] == 1:
                    proc.stdin.write(line({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                                           "params": {"cwd": str(ws), "mcpServers": []}}))
                    proc.stdin.flush()
        proc.stdin.close()
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return answered[1], answered[2]


def time_python(code: str, env: dict[str, str], ws: Path) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(ws),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"python -c {code!r} failed: {proc.stderr.decode(errors='replace')}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10, help="measured runs of each (default 10)")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up runs of each, not counted (default 1)")
    parser.add_argument("--defaults", action="store_true", help="start the daemon without --config")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose daemon is timed (default: this one)")
    parser.add_argument("--against", type=Path, help="another checkout whose daemon is timed in the same rotation")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be >= 1")

    with tempfile.TemporaryDirectory(prefix="toycoder-cold-") as tmp:
        tmpd = Path(tmp)
        ws, home = tmpd / "ws", tmpd / "home"
        ws.mkdir()
        home.mkdir()
        # TOYCODER_WARM=0: every launch runs the daemon in its own process (a cold start), and none
        # leaves a fork server behind in the user's runtime dir
        env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
               "TOYCODER_DATA_DIR": str(tmpd / "data"), "PYTHONPATH": str(args.tree.resolve()), "TOYCODER_WARM": "0"}
        for var in ("TOYCODER_CONFIG", "OPENAI_API_KEY", "OPENAI_BASE_URL", "PYTHONSTARTUP", "PYTHONDONTWRITEBYTECODE"):
            env.pop(var, None)
        # bytecode as an installed daemon has it (pip compiles at install): the warm-up run compiles
        # into the temp dir, so no measured run pays ~0.2 s of compiling and the trees stay clean
        env["PYTHONPYCACHEPREFIX"] = str(tmpd / "pycache")
        daemon_args: list[str] = []
        if not args.defaults:
            cfg = tmpd / "config.yaml"
            cfg.write_text("providers:\n  openai:\n    api_keys: [\"bench-key\"]\n"
                           "    base_url: http://127.0.0.1:9/v1\n    models: {default: m, fast: m}\n"
                           "default_provider: openai\n")
            daemon_args = ["--config", str(cfg)]

        cases = [
            ('python -c "pass"', lambda: (time_python("pass", env, ws),)),
            ('python -c "import pygls.lsp.server"', lambda: (time_python("import pygls.lsp.server", env, ws),)),
            ('python -c "import toycoder_daemon.faces.lsp.server"',
             lambda: (time_python("import toycoder_daemon.faces.lsp.server", env, ws),)),
            ("LSP daemon", lambda: time_daemon(daemon_args, env, ws)),
            ("ACP daemon", lambda: time_acp(daemon_args, env, ws)),
        ]
        rows = {"LSP daemon": ("LSP spawn -> initialize answer", "LSP spawn -> first session/new answer"),
                "ACP daemon": ("ACP spawn -> initialize answer", "ACP spawn -> first session/new answer")}
        if args.against:
            other = {**env, "PYTHONPATH": str(args.against.resolve())}
            cases += [("LSP daemon, against", lambda: time_daemon(daemon_args, other, ws)),
                      ("ACP daemon, against", lambda: time_acp(daemon_args, other, ws))]
            rows.update({f"{face} daemon, against": (f"  against: {face} initialize", f"  against: {face} session/new")
                         for face in ("LSP", "ACP")})
        times: dict[str, list[float]] = {}
        for i in range(args.warmup + args.runs):
            k = i % len(cases)
            for name, fn in cases[k:] + cases[:k]:  # rotate the order so no case always runs first
                ts = fn()
                if i >= args.warmup:
                    for row, t in zip(rows.get(name, (name,)), ts, strict=True):
                        times.setdefault(row, []).append(t)

    med = statistics.median
    base = med(times['python -c "pass"'])
    print(f"cold_start: {args.runs} runs each (+{args.warmup} warm-up), rotating order, "
          f"daemon {'with built-in defaults' if args.defaults else 'with --config (unused provider URL)'}, "
          f"tree {args.tree.resolve()}" + (f", against {args.against.resolve()}" if args.against else "")
          + f", load {os.getloadavg()[0]:.2f}")
    print(f"{'':46}{'median':>8} {'min':>8} {'max':>8} {'-pass':>8}")
    for name, ts in times.items():
        print(f"{name + ' ms':46}{med(ts) * 1000:8.1f} {min(ts) * 1000:8.1f} {max(ts) * 1000:8.1f}"
              f" {(med(ts) - base) * 1000:8.1f}")
    print("(-pass: median minus the bare interpreter's median; baselines are spawn-to-exit)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
