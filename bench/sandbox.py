"""Cost of run_command's sandbox per command: `true`, N times sandboxed vs not, interleaved.

  plain      /bin/sh -c true                               (what run_command spawned before)
  sandboxed  the launcher run_command spawns now            (namespaces + Landlock + reaping)
  no-ns      the launcher without namespaces                (the unprivileged fallback: subreaper,
                                                             Landlock TCP rules)
  cgroup     sandboxed, in a cgroup of its own              (where the daemon can make one: made
                                                             before, killed and removed after; the
                                                             shell forked into it by clone3)
  cgroup-join the same, the shell joining it by a write       (the fallback where clone3 is refused)

Each run is spawn-to-exit through subprocess, in a temp workspace; medians and the ratio to plain
are printed, and the median CPU time (user + system) of the run's processes, which the machine's
load changes far less than the wall time. The machine is shared and noisy: read the ratio and the
CPU time, not the absolute wall times.

Run:  .venv/bin/python bench/sandbox.py [--runs 100] [--against DIR]

--against times a second checkout's launcher (the package at DIR, e.g. `git archive` of an older
commit unpacked there) in the same rotation, as `sandboxed, against` and `no-ns, against`, so
before and after share the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toycoder_daemon.tools.shell.sandbox import cgroups, probe  # noqa: E402
from toycoder_daemon.tools.shell.sandbox.policy import Policy, plan  # noqa: E402

JOIN = ("import sys; sys.path.append({package!r}); from toycoder_daemon.tools.shell.sandbox import contain, launch; "
        "contain.fork_into_cgroup = lambda path: None; sys.exit(launch.main(sys.argv[1:]))")
"""The launcher with clone3 refused: the shell joins its cgroup by a write to cgroup.procs."""
AGAINST = ("import sys; sys.path.append({package!r}); from toycoder_daemon.tools.shell.sandbox.launch import main; "
           "sys.exit(main(sys.argv[1:]))")
"""Another checkout's launcher, started as probe.BOOT starts ours."""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], cwd: str, env: dict[str, str], spec: dict[str, Any] | None = None,
          join: bool = False) -> tuple[float, float]:
    """Spawn to exit, and the CPU time of the processes it ran (the launcher reaps its own, so they
    count); with `spec`, a fresh cgroup is made before and removed after, in the wall time."""
    cpu = _children_cpu()
    start = time.perf_counter()
    made = None
    if spec is not None:
        made = cgroups.create()
        argv = probe.launcher_argv(json.dumps({**spec, "cgroup": made}))
        if join:
            package = str(Path(__file__).resolve().parent.parent)  # the tree whose launcher runs
            argv = [*argv[:4], JOIN.format(package=package), *argv[5:]]
    done = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True)
    if made:
        cgroups.remove(made)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{argv[:3]}... failed ({done.returncode}): {done.stderr.decode(errors='replace')}")
    return elapsed, _children_cpu() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--against", type=Path, help="another checkout whose launcher is timed in the same rotation")
    args = parser.parse_args()
    support = probe.support()
    print(support.summary())
    if support.missing():
        print("nothing to compare: commands are not sandboxed here")
        return 1
    with tempfile.TemporaryDirectory(prefix="toycoder-bench-") as base:
        ws, tmp = Path(base) / "ws", Path(base) / "tmp"
        (ws / ".git").mkdir(parents=True)
        tmp.mkdir()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TMPDIR": str(tmp)}
        spec = plan(Policy(), ws, str(tmp), support, {}).spec("true", support, required=True)
        spec["daemon"] = 0
        variants = {
            "plain": ["/bin/sh", "-c", "true"],
            "sandboxed": probe.launcher_argv(json.dumps(spec)),
            "no-ns": probe.launcher_argv(json.dumps({**spec, "namespaces": False, "readonly": []})),
        }
        if support.cgroup:
            variants["cgroup"] = variants["cgroup-join"] = variants["sandboxed"]
        if args.against:
            other = AGAINST.format(package=str(args.against.resolve()))
            for name in ("sandboxed", "no-ns"):
                argv = variants[name]
                variants[f"{name}, against"] = [*argv[:4], other, *argv[5:]]
        times: dict[str, list[float]] = {name: [] for name in variants}
        cpus: dict[str, list[float]] = {name: [] for name in variants}

        def one(name: str) -> tuple[float, float]:
            return timed(variants[name], str(ws), env, spec if name.startswith("cgroup") else None,
                         join=name == "cgroup-join")

        for name in variants:  # warm-up
            one(name)
        for i in range(args.runs):
            names = list(variants)
            for name in names[i % len(names):] + names[:i % len(names)]:  # rotate the order
                wall, cpu = one(name)
                times[name].append(wall)
                cpus[name].append(cpu)
    plain = statistics.median(times["plain"])
    print(f"{args.runs} runs of `true` each, interleaved")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"  {name:<18} median {med * 1000:7.2f} ms   ratio to plain {med / plain:6.1f}x   "
              f"CPU {statistics.median(cpus[name]) * 1000:6.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
