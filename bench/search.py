"""Search tools vs raw ripgrep: what do grep_search / glob_search add on top of `rg`?

Generates, once per run and in a temp dir, a repository-like tree of >= 20,000 files: packages of
Python/TypeScript/Markdown sources with realistic-ish content and a few planted matches, nested
.gitignore files, and ignored directories (node_modules/, build/, per-package generated files).
Then, for each query, times side by side, rounds interleaved in rotating order:

  rg        the exact rg command lines the tool runs (recorded from a tool call; two at once for a
            path glob, see tools/search/rg_runs.py), with stdout read from a pipe by an asyncio subprocess,
            like the tool, and dropped;
  tool      the tool function awaited with a ToolContext: those rg runs plus parsing, sorting and
            formatting;
  rg -g     for queries with a glob, plain `rg --glob GLOB` with the same flags (not equivalent:
            -g overrides ignore rules, see the notes printed at the end).

Medians of --runs rounds (after one warm-up round) and the ratios to rg are printed. Before timing,
the script checks that the tool's totals ("N more" included) agree with what its rg commands
printed (for two runs: the paths both printed); it exits non-zero otherwise.

Run:  .venv/bin/python bench/search.py [--runs 7] [--quick] [--keep]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toycoder_daemon.tools.base import ToolContext  # noqa: E402
from toycoder_daemon.tools.search import rg as rg_process  # noqa: E402
from toycoder_daemon.tools.search import rg_runs  # noqa: E402
from toycoder_daemon.tools.search.tools import glob_search, grep_search  # noqa: E402
from toycoder_daemon.tools.workspace import Workspace  # noqa: E402

WORDS = [
    "user", "session", "token", "request", "response", "cache", "config", "handler", "client", "server", "queue",
    "event", "payload", "record", "index", "buffer", "stream", "parser", "render", "router", "schema", "model",
    "store", "worker",
]


def py_file(rnd: random.Random, mod: str, plant: bool) -> str:
    out = [f'"""Module {mod}: {rnd.choice(WORDS)} {rnd.choice(WORDS)} helpers."""', "",
           "from __future__ import annotations", "", "import os", "import json",
           f"from .{rnd.choice(WORDS)} import {rnd.choice(WORDS).title()}", ""]
    for _ in range(rnd.randint(3, 7)):
        a, b = rnd.choice(WORDS), rnd.choice(WORDS)
        kind = rnd.random()
        name = f"{a}_{b}_handler" if kind < 0.15 else f"{a}_{b}"
        out += [f"def {name}({a}: dict, {b}: int = 0) -> dict:",
                f'    """Return the {a} for {b}."""',
                f"    result = {{'{a}': {a}, '{b}': {b} + 1}}",
                f"    if not {a}:",
                f"        raise ValueError('missing {a}')",
                "    return result", ""]
    if plant:
        out.insert(9, "# FIXME(bench): remove this once the migration is done")
    return "\n".join(out) + "\n"


def ts_file(rnd: random.Random, mod: str, plant: bool) -> str:
    out = [f"import {{ {rnd.choice(WORDS).title()} }} from './{rnd.choice(WORDS)}';",
           f"import type {{ {rnd.choice(WORDS).title()}Options }} from '../types';", ""]
    for _ in range(rnd.randint(3, 7)):
        a, b = rnd.choice(WORDS), rnd.choice(WORDS)
        out += [f"export function {a}{b.title()}({a}: string, {b}?: number): Promise<{a.title()}> {{",
                f"  const value = await fetch(`/api/{a}/${{{a}}}`);",
                f"  return value.json() as Promise<{a.title()}>;", "}", ""]
    if plant:
        out.insert(2, "// FIXME(bench): typed errors")
    return "\n".join(out) + "\n"


def md_file(rnd: random.Random, mod: str) -> str:
    out = [f"# {mod}", ""]
    for _ in range(rnd.randint(2, 5)):
        out += [f"## {rnd.choice(WORDS).title()} {rnd.choice(WORDS)}", "",
                " ".join(rnd.choice(WORDS) for _ in range(40)), "",
                "```python", f"import {rnd.choice(WORDS)}", "```", ""]
    return "\n".join(out) + "\n"


def make_tree(root: Path, packages: int) -> tuple[int, int]:
    """Returns (files written, files not ignored)."""
    rnd = random.Random(42)
    total = visible = 0

    def w(rel: str, text: str, ignored: bool = False) -> None:
        nonlocal total, visible
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        total += 1
        visible += not ignored

    w(".gitignore", "node_modules/\nbuild/\ndist/\n*.log\n.cache/\n__pycache__/\n")
    planted = set(rnd.sample(range(packages * 100), 12))
    n = 0
    for p in range(packages):
        pkg = f"packages/p{p:02}"
        w(f"{pkg}/.gitignore", "*.generated.ts\n/tmp/\n")
        w(f"{pkg}/README.md", md_file(rnd, pkg))
        for m in range(5):
            for f in range(20):
                n += 1
                mod = f"{pkg}/src/mod{m}/f{f:02}"
                w(mod + ".py", py_file(rnd, mod, n in planted))
                w(mod + ".ts", ts_file(rnd, mod, (n + 7) in planted))
                if f % 4 == 0:
                    w(mod + ".md", md_file(rnd, mod))
                if f % 5 == 0:
                    w(mod + ".generated.ts", ts_file(rnd, mod, False), ignored=True)
            for f in range(6):
                w(f"{pkg}/tests/mod{m}/test_f{f:02}.py", py_file(rnd, f"test_{m}_{f}", False))
        w(f"{pkg}/tmp/scratch.py", py_file(rnd, "scratch", False), ignored=True)
        w(f"{pkg}/run.log", "log line\n" * 50, ignored=True)
        for f in range(12):
            w(f"{pkg}/build/lib/out{f:02}.py", py_file(rnd, "built", False), ignored=True)
    for lib in range(60):
        for f in range(60):
            w(f"node_modules/lib{lib:02}/dist/m{f:02}.ts", ts_file(rnd, f"lib{lib}", f == 3 and lib < 4), ignored=True)
    return total, visible


def rg_version(rg: str) -> str:
    return subprocess.run([rg, "--version"], capture_output=True, text=True).stdout.splitlines()[0]


async def rg_out(rg: str, args: list[str], cwd: Path) -> bytes:
    """rg's stdout, read from a pipe."""
    proc = await asyncio.create_subprocess_exec(rg, *args, cwd=str(cwd), stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    return out


async def raw_rg(rg: str, args: list[str], cwd: Path) -> int:
    """rg with its stdout read from a pipe; returns the number of match/path lines."""
    out = await rg_out(rg, args, cwd)
    return out.count(b"\n") - out.count(b": binary file matches (") - out.count(b": WARNING: stopped searching binary")


async def raw_rgs(rg: str, argvs: list[list[str]], cwd: Path) -> int:
    """The rg runs of one tool call, as the tool runs them: first the checks that a path glob's
    literal directories are not ignored (--debug), then the listings at once. One listing: its
    line count; two (a path glob and the glob-less listing): how many paths both printed."""
    checks = [a for a in argvs if "--debug" in a]
    walks = [a for a in argvs if "--debug" not in a]
    await asyncio.gather(*(rg_out(rg, a, cwd) for a in checks))
    if len(walks) == 1:
        return await raw_rg(rg, walks[0], cwd)
    outs = await asyncio.gather(*(rg_out(rg, a, cwd) for a in walks))
    common = set(outs[0].splitlines())
    for out in outs[1:]:
        common &= set(out.splitlines())
    return len(common)


def total_of(output: str) -> int:
    lines = output.splitlines()
    if lines and (m := re.match(r"\.\.\. (?:and )?(\d+) more", lines[-1])):
        return len(lines) - 1 + int(m.group(1))
    return 0 if output.startswith("no ") else len(lines)


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7, help="timed runs per query for rg and the tool (default 7)")
    ap.add_argument("--packages", type=int, default=60, help="packages in the generated tree (60: ~21,000 files)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 3 runs")
    ap.add_argument("--keep", action="store_true", help="keep the generated tree and print its path")
    args = ap.parse_args()
    if args.quick:
        args.runs = 3

    rg = rg_process.find_rg()
    if rg is None:
        print("rg not found (install the project's ripgrep dependency)", file=sys.stderr)
        return 1
    tmp = Path(tempfile.mkdtemp(prefix="toycoder-bench-search-"))
    root = tmp / "repo"
    try:
        t0 = time.perf_counter()
        total, visible = make_tree(root, args.packages)
        size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
        print(f"tree: {total:,} files ({visible:,} not gitignored), {size / 1e6:.1f} MB, "
              f"generated in {time.perf_counter() - t0:.1f} s")
        print(f"{rg_version(rg)} at {rg}; {os.cpu_count()} CPUs; python {sys.version.split()[0]}")
        print(f"{args.runs} runs each, after 1 warm-up round; rotating order\n")

        ctx = ToolContext(Workspace(root), None, "bench")  # type: ignore[arg-type]
        common = [*rg_runs.RG_COMMON, *rg_runs.SKIP_GIT]
        grep = [*common, *rg_runs.RG_GREP]
        # (kind, label, tool arguments, the plain `rg --glob` command when the query has a glob)
        queries = [
            ("grep", r"FIXME\(bench\)", {"pattern": r"FIXME\(bench\)"}, None),
            ("grep", r"def \w+_handler\(", {"pattern": r"def \w+_handler\("}, None),
            ("grep", "import (in every file)", {"pattern": "import"}, None),
            ("grep", "promise -i, glob *.ts", {"pattern": "promise", "glob": "*.ts", "case_sensitive": False},
             [*grep, "--ignore-case", "--glob", "*.ts", "-e", "promise", "--", "."]),
            ("glob", "*.py", {"pattern": "*.py"}, ["--files", *common, "--glob", "*.py", "--", "."]),
            ("glob", "**/test_*.py", {"pattern": "**/test_*.py"},
             ["--files", *common, "--glob", "**/test_*.py", "--", "."]),
            ("glob", "packages/p1*/src/**/*.ts", {"pattern": "packages/p1*/src/**/*.ts"},
             ["--files", *common, "--glob", "packages/p1*/src/**/*.ts", "--", "."]),
        ]

        seen_argv: list[list[str]] = []
        real_run_rg = rg_runs.run_rg

        async def recording_run_rg(argv, cwd, on_lines, on_err_lines=None):
            argv = list(argv)
            if "--ignore-file" in argv:  # the tool deletes its rules file after the call: keep a copy
                i = argv.index("--ignore-file") + 1
                kept = tmp / f"rules-{len(list(tmp.glob('rules-*')))}.ignore"
                shutil.copy(argv[i], kept)
                argv[i] = str(kept)
            seen_argv.append(argv)
            return await real_run_rg(argv, cwd, on_lines, on_err_lines)

        async def tool_call(kind: str, targs: dict) -> str:
            func = grep_search.func if kind == "grep" else glob_search.func
            return await func(ctx, **targs)

        # Correctness first, and the exact rg command lines each tool call runs: the tool's total
        # must be what its rg commands printed.
        rg_runs.run_rg = recording_run_rg
        ok = True
        plans = []
        for kind, label, targs, plain in queries:
            seen_argv.clear()
            a = await tool_call(kind, targs)
            argvs = list(seen_argv)
            n_rg = await raw_rgs(rg, argvs, root)
            n_plain = await raw_rg(rg, plain, root) if plain else None
            if total_of(a) != n_rg:
                ok = False
                print(f"MISMATCH {kind} {label}: its rg commands printed {n_rg} lines, tool total {total_of(a)}")
            plans.append((kind, label, targs, argvs, plain, total_of(a), n_plain))
        rg_runs.run_rg = real_run_rg
        if not ok:
            return 1
        print("checked: tool totals agree with what its rg commands printed\n")

        rows = []
        for kind, label, targs, argvs, plain, n_tool, n_plain in plans:
            times: dict[str, list[float]] = {"rg": [], "rg -g": [], "tool": []}
            pair: list[float] = []
            for i in range(args.runs + 1):
                order = ["rg", "tool"] + (["rg -g"] if plain else [])
                order = order[i % len(order):] + order[: i % len(order)]  # rotate
                got: dict[str, float] = {}
                for which in order:
                    t = time.perf_counter()
                    if which == "rg":
                        await raw_rgs(rg, argvs, root)
                    elif which == "rg -g":
                        await raw_rg(rg, plain, root)
                    else:
                        await tool_call(kind, targs)
                    got[which] = (time.perf_counter() - t) * 1000
                if i == 0:
                    continue  # warm-up
                for which, ms in got.items():
                    times[which].append(ms)
                pair.append(got["tool"] / got["rg"])
            med = {k: statistics.median(v) if v else float("nan") for k, v in times.items()}
            rows.append((f"{kind} {label}", n_tool, n_plain, len(argvs), med, statistics.median(pair)))

        head = (f"{'query':<32} {'found':>6} {'runs':>4} {'rg ms':>7} {'tool ms':>8} {'tool/rg':>8} {'(pairs)':>7}"
                f" {'rg -g ms':>9} {'tool/rg -g':>10}")
        print(head)
        print("-" * len(head))
        for name, n_tool, n_plain, n_runs, med, pmed in rows:
            rgg = f"{med['rg -g']:>9.1f} {med['tool'] / med['rg -g']:>9.2f}x" if n_plain is not None else ""
            print(f"{name:<32} {n_tool:>6,} {n_runs:>4} {med['rg']:>7.1f} {med['tool']:>8.1f}"
                  f" {med['tool'] / med['rg']:>7.2f}x {pmed:>6.2f}x {rgg}")
        gone = ", ".join(f"{name.split(' ', 1)[1]}: {n_plain - n_tool:+,}" for name, n_tool, n_plain, _, _, _ in rows
                         if n_plain is not None and n_plain != n_tool)
        print(f"""
found     matching lines (grep) or files (glob) in total; the tool shows at most 100 lines / 200 paths
runs      rg processes per tool call (a path glob: one per literal directory, to check it is not
          ignored, then the glob applied by rg -g, kept only where a glob-less listing, run at
          the same time, agrees)
rg        the exact rg commands the tool runs, at once, output read from a pipe and dropped
tool      the tool function awaited with a ToolContext: those rg runs + parsing, sorting, output
tool/rg   ratio of the medians; (pairs): median of the per-round ratios (rounds interleaved)
rg -g     plain `rg --glob GLOB` with the same flags. It is not equivalent: -g overrides ignore rules,
          so it skips gitignore checks for the files it matches and lists gitignored ones (here
          {gone or 'none'}).
          The tool narrows rg with --type-add for a file-name glob (gitignore-correct).""")
        return 0
    finally:
        if args.keep:
            print(f"\ntree kept in {root}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
