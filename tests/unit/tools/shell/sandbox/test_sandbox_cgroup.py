"""A cgroup v2 per sandboxed command, ended with cgroup.kill: what a walk of the process tree races
(a pid hopper) is ended whole, in both namespace modes; the command cannot leave its cgroup; the
cgroup is removed after the command ends and after a cancel; without cgroups the walk is used."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import AllowAll, proc_dir, processes_running, processes_with
from sandbox_helpers import (
    FAKE_DAEMON,
    PACKAGE_PARENT,
    Box,
    Runner,
    cgroups_of,
    kill_markers,
    remove_cgroups_of,
    run,
    spec_for,
    unique_sleep,
)
from test_sandbox_hopper import CC, HOPPER
from waiting import scaled, wait_until

from toycoder_daemon.tools.settings import ToolSettings
from toycoder_daemon.tools.shell.sandbox import cgroups, command, landlock, probe, tree

ABI = landlock.abi_version() if sys.platform.startswith("linux") else 0
NO_CGROUP = cgroups.unusable() if ABI >= 1 else "the sandbox needs Linux with Landlock"
needs_cgroups = pytest.mark.skipif(NO_CGROUP is not None, reason=f"no cgroup per command here ({NO_CGROUP}); NOT a pass")
ROOT = os.geteuid() == 0 if sys.platform.startswith("linux") else False

# The launcher with its tree walk disabled: whatever it ends, only the cgroup can have ended.
WALKLESS = "tree.descendants = lambda root: []"
# The launcher where clone3 cannot put the shell in the cgroup: the shell joins it by a write.
NO_CLONE3 = "contain.fork_into_cgroup = lambda path: None"


def patched_launcher(patch: str, spec: dict[str, object]) -> list[str]:
    code = ("import sys\nsys.path.append(sys.argv.pop(1))\n"
            "from toycoder_daemon.tools.shell.sandbox import contain, launch, tree\n"
            f"{patch}\nsys.exit(launch.main(sys.argv[1:]))\n")
    return [sys.executable, "-I", "-S", "-c", code, PACKAGE_PARENT, json.dumps(spec)]


@pytest.fixture
def box() -> Iterator[Box]:
    b = Box.make(None)
    yield b
    b.remove()


@pytest.fixture
def cgroup() -> Iterator[str]:
    made = cgroups.create()
    assert made is not None
    yield made
    remove_cgroups_of(os.getpid())


@pytest.fixture
def hopper(tmp_path: Path) -> Path:
    if CC is None:
        pytest.skip("no C compiler (cc/gcc) to build the pid hopper; NOT a pass")
    (tmp_path / "hopper.c").write_text(HOPPER)
    subprocess.run([str(CC), "-O1", "-o", str(tmp_path / "hopper"), str(tmp_path / "hopper.c")], check=True)
    return tmp_path / "hopper"


@needs_cgroups
@pytest.mark.parametrize("namespaces", [True, False], ids=["pid-namespace", "subreaper"])
def test_a_stop_ends_a_pid_hopper_through_the_cgroup_alone(box: Box, cgroup: str, hopper: Path,
                                                           namespaces: bool) -> None:
    runner = Runner("root" if ROOT else "current user")
    marker = f"hop{uuid.uuid4().hex}"
    spec, _ = spec_for(f"{hopper} {box.tmp}/hopping 120 {marker} & sleep 600", box, runner.support(),
                       namespaces=namespaces)
    spec["cgroup"] = cgroup
    launcher = subprocess.Popen(patched_launcher(WALKLESS, spec), cwd=probe.LAUNCH_CWD, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        wait_until(lambda: (box.tmp / "hopping").exists(), scaled(30), "the hopper to run")
        assert processes_with(marker), "the hopper is not visible by its marker (the check below would prove nothing)"
        os.killpg(launcher.pid, signal.SIGTERM)  # what a cancel sends
        launcher.wait(timeout=scaled(30))
        wait_until(lambda: not processes_with(marker), scaled(30), "the hopper to be gone")
        assert not os.path.isdir(cgroup), "the launcher removes the emptied cgroup"
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
        cgroups.kill(cgroup)  # clean-up only: the hopper, if the code under test left it


@needs_cgroups
@pytest.mark.skipif(not ROOT, reason="the test writes the daemon's own cgroup as root; NOT a pass")
@pytest.mark.parametrize("clone3", [True, False], ids=["born-in-it", "joined-by-write"])
@pytest.mark.parametrize("namespaces", [True, False], ids=["pid-namespace", "subreaper"])
def test_the_command_cannot_leave_its_cgroup(box: Box, cgroup: str, namespaces: bool, clone3: bool) -> None:
    """The shell is in the command's cgroup however it got there, and Landlock keeps cgroupfs
    read-only to it: not the parent's cgroup.procs, nor a new child."""
    parent = os.path.dirname(cgroup)
    runner = Runner("root")
    spec, _ = spec_for(f"grep ^0:: /proc/self/cgroup; echo 0 > {parent}/cgroup.procs && echo LEFT; "
                       f"mkdir {cgroup}/sub && echo MADE; grep ^0:: /proc/self/cgroup; sleep 600 & echo done",
                       box, runner.support(), namespaces=namespaces)
    spec["cgroup"] = cgroup
    if clone3:
        done = run(runner, box, spec)
    else:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TMPDIR": str(box.tmp), "LANG": "C"}
        done = subprocess.run(patched_launcher(NO_CLONE3, spec), cwd=probe.LAUNCH_CWD, env=env, capture_output=True,
                              text=True, timeout=scaled(30), stdin=subprocess.DEVNULL)
    first, second, last = done.stdout.splitlines()
    assert first == second and first.startswith("0::") and first.endswith("/" + os.path.basename(cgroup)), done
    assert last == "done", done  # neither LEFT nor MADE
    # the read-only mount refuses first where there is a mount namespace, Landlock otherwise
    assert ("Read-only file system" if namespaces else "Permission denied") in done.stderr, done.stderr
    assert not os.path.isdir(cgroup), "removed once the command ended (its background sleep killed)"


@needs_cgroups
@pytest.mark.parametrize("how", ["returns", "cancel"])
async def test_run_command_removes_its_cgroup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    from toycoder_daemon.tools.base import ToolContext
    from toycoder_daemon.tools.permission import PermissionGate
    from toycoder_daemon.tools.registry import ToolRegistry
    from toycoder_daemon.tools.shell import run_command as shell
    from toycoder_daemon.tools.workspace import Workspace

    monkeypatch.setattr(probe, "_cached", probe.Support(sys.platform, ABI, False, False, cgroup=True))
    registry = ToolRegistry(PermissionGate(["run_command"]))
    registry.register(shell.run_command, enabled=True)
    background, foreground = unique_sleep(), unique_sleep()
    tail = "grep ^0:: /proc/self/cgroup" if how == "returns" else f"sleep {foreground}"
    call = json.dumps({"command": f"sleep {background} & {tail}"})
    turn = asyncio.ensure_future(registry.dispatch("run_command", call, ToolContext(Workspace(tmp_path), AllowAll(), "c")))
    try:
        if how == "cancel":
            sleeping = f"sleep {foreground}"
            [pid] = await asyncio.to_thread(wait_until, lambda: processes_running(sleeping), scaled(30), "the command")
            line = next(x for x in Path(proc_dir(pid), "cgroup").read_text().splitlines() if x.startswith("0::"))
            turn.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(turn, scaled(30))
        else:
            out = (await asyncio.wait_for(turn, scaled(30))).output
            line = next(x for x in out.splitlines() if x.startswith("0::"))
        made = os.path.basename(line)
        assert made.startswith(f"toycoder-{os.getpid()}-"), line  # the command ran in a cgroup of its own
        assert not cgroups_of(os.getpid()), "removed when run_command returns"
        assert not processes_with(background)
    finally:
        turn.cancel()
        remove_cgroups_of(os.getpid())


def test_without_cgroups_the_walk_is_used_and_the_reports_say_so(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    monkeypatch.setenv(cgroups.SIMULATE_ENV, "1")
    assert cgroups.unusable() == f"disabled by {cgroups.SIMULATE_ENV}"
    walk = probe.Support("linux", 7, False, False, cgroup=False)
    killed_whole = probe.Support("linux", 7, False, False, cgroup=True)
    assert walk.report()["cgroupKill"] is False and killed_whole.report()["cgroupKill"] is True
    assert walk.supervisor_exposed and "nor cgroup" in walk.supervisor_exposed
    assert killed_whole.supervisor_exposed is None  # scoped signals and cgroup.kill: no race left
    assert probe.Support("linux", 5, False, False, cgroup=True).supervisor_exposed  # it can still stop its launcher
    assert "a subreaper and a cgroup (cgroup.kill)" in killed_whole.summary()
    assert "cgroup" not in walk.summary().split("NOT against")[0]
    if ABI >= 1:
        monkeypatch.setattr(probe, "_cached", walk)
        prepared = asyncio.run(command.prepare(ToolSettings(), tmp_path, "true", {}))
        assert prepared.spec is not None and prepared.spec["cgroup"] is None and prepared.cgroup is None
        asyncio.run(prepared.cleanup())


@needs_cgroups
def test_a_fresh_cgroup_is_made_per_command_and_removed_by_cleanup(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    monkeypatch.setattr(probe, "_cached", probe.Support(sys.platform, ABI, False, False, cgroup=True))
    try:
        first = asyncio.run(command.prepare(ToolSettings(), tmp_path, "true", {}))
        second = asyncio.run(command.prepare(ToolSettings(), tmp_path, "true", {}))
        assert first.cgroup and second.cgroup and first.cgroup != second.cgroup
        assert first.spec is not None and first.spec["cgroup"] == first.cgroup
        assert os.path.basename(first.cgroup).startswith(f"toycoder-{os.getpid()}-")
        for p in (first, second):
            asyncio.run(p.cleanup())
        assert not cgroups_of(os.getpid())
    finally:
        remove_cgroups_of(os.getpid())


@needs_cgroups
def test_the_sweep_removes_only_empty_cgroups_of_daemons_no_longer_running() -> None:
    # In a cgroup of this test's own: a sweep of the shared parent (another test run's) never sees
    # the dead-looking names below, and this test's sweep never sees another run's.
    parent = cgroups.create(name=f"sweep{uuid.uuid4().hex[:8]}")
    assert parent is not None
    never_a_pid = 4194305  # above PID_MAX_LIMIT (4194304): no process has it, ever
    dead, busy = (os.path.join(parent, f"{cgroups.PREFIX}{never_a_pid}-{n}") for n in (1, 2))
    me = tree.identify(os.getpid())
    assert me is not None
    # Our pid with another start time: what a dead daemon's name looks like once its pid is taken.
    reused = os.path.join(parent, f"{cgroups.PREFIX}{os.getpid()}-{me[1] + 1}-1")
    ours = cgroups.create(parent)
    assert ours is not None
    for path in (dead, reused, busy):
        os.mkdir(path)
    sleeper = subprocess.Popen([sys.executable, "-c", "import sys, time; open(sys.argv[1], 'w').write('0'); time.sleep(600)",
                                os.path.join(busy, "cgroup.procs")], stdin=subprocess.DEVNULL)
    try:
        wait_until(lambda: cgroups.populated(busy), scaled(30), "the sleeper to join the dead daemon's cgroup")
        cgroups.sweep(parent)
        assert os.path.isdir(dead) and os.path.isdir(reused), "younger than SWEEP_AGE: kept"
        cgroups.sweep(parent, older_than=0)
        assert not os.path.isdir(dead) and not os.path.isdir(reused)
        assert os.path.isdir(ours)  # this process runs, with the start time in the name: its cgroup stays
        assert os.path.isdir(busy)  # a process is in it: never removed
    finally:
        sleeper.kill()
        sleeper.wait()
        for path in (dead, reused, ours, busy, parent):
            if os.path.isdir(path):
                cgroups.remove(path)


@needs_cgroups
def test_a_launcher_whose_daemon_is_already_gone_removes_the_cgroup(box: Box, cgroup: str) -> None:
    """Nobody else would: the daemon that made it is dead (until a later daemon's sweep)."""
    runner = Runner("root" if ROOT else "current user")
    spec, _ = spec_for("true", box, runner.support())
    spec.update(cgroup=cgroup, daemon=1)  # not the launcher's parent: as when the daemon died first
    done = run(runner, box, spec)
    assert done.returncode == 137, done
    assert not os.path.isdir(cgroup)


@needs_cgroups
@pytest.mark.parametrize("namespaces", [True, False], ids=["pid-namespace", "subreaper"])
def test_a_daemon_killed_outright_leaves_no_cgroup(box: Box, cgroup: str, namespaces: bool) -> None:
    """With a PID namespace the launcher dies by SIGKILL with the daemon; its init, TERMed by that,
    removes the cgroup (it used to die by SIGKILL too, leaving it to a later daemon's sweep)."""
    runner = Runner("root" if ROOT else "current user")
    sleep = f"sleep {unique_sleep()}"
    spec, _ = spec_for(sleep, box, runner.support(), namespaces=namespaces)
    spec["cgroup"] = cgroup
    daemon = subprocess.Popen([sys.executable, "-c", FAKE_DAEMON, json.dumps(spec), *runner.launcher(spec)[:-1]],
                              cwd=box.ws, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(lambda: processes_running(sleep), scaled(30), "the command to run")
        os.killpg(daemon.pid, signal.SIGKILL)
        daemon.wait()
        wait_until(lambda: not processes_with(sleep), scaled(30), "the command and its launcher to end")
        wait_until(lambda: not os.path.isdir(cgroup), scaled(30), "the cgroup to be removed")
    finally:
        if daemon.poll() is None:
            os.killpg(daemon.pid, signal.SIGKILL)
            daemon.wait()
        kill_markers(sleep)
