"""Signals and the sandbox: a sandboxed command cannot signal its supervisor (or anything else
outside the sandbox) nor reach abstract unix sockets outside it while the network is off, yet it
still signals its own children and the daemon still signals it; and it runs with SIGPIPE and
SIGXFSZ at their defaults."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import AllowAll, parent_of, proc_dir, processes_running, processes_with
from sandbox_helpers import FAKE_DAEMON, PACKAGE_PARENT, Box, Runner, kill_markers, run, spec_for, unique_sleep
from waiting import wait_until, wait_until_async

from toycoder_daemon.tools.base import ToolContext
from toycoder_daemon.tools.permission import PermissionGate
from toycoder_daemon.tools.registry import ToolRegistry
from toycoder_daemon.tools.shell import run_command as shell
from toycoder_daemon.tools.shell.sandbox import landlock, probe
from toycoder_daemon.tools.workspace import Workspace

ABI = landlock.abi_version() if sys.platform.startswith("linux") else 0
pytestmark = pytest.mark.skipif(ABI < 1, reason="the sandbox needs Linux with Landlock")
needs_scoping = pytest.mark.skipif(
    ABI < landlock.SCOPE_ABI,
    reason=f"Landlock ABI {ABI} < {landlock.SCOPE_ABI}: this kernel cannot scope signals or abstract sockets "
           "(docs/security.md says what that leaves open); NOT a pass")
MODES = pytest.mark.parametrize("namespaces", [True, False], ids=["pid-namespace", "subreaper"])


@pytest.fixture
def runner() -> Runner:
    return Runner("root" if os.geteuid() == 0 else "current user")


@pytest.fixture
def box() -> Iterator[Box]:
    b = Box.make(None)
    yield b
    b.remove()


def _under_fake_daemon(runner: Runner, box: Box, spec: dict[str, object]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", FAKE_DAEMON, json.dumps(spec), *runner.launcher(spec)[:-1]],
                            cwd=box.ws, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)


@needs_scoping
@pytest.mark.parametrize("how", ["KILL", "STOP"])
def test_a_command_cannot_signal_its_supervisor_and_outlive_a_killed_daemon(runner: Runner, box: Box,
                                                                              how: str) -> None:
    """The reviewer's escape: without namespaces the launcher is the supervisor, outside the
    command's Landlock domain. `kill -KILL $PPID` used to kill it (no clean-up ran) and `kill -STOP
    $PPID` froze it (the SIGTERM of the daemon's death stayed pending), so a setsid'd child and the
    shell outlived a SIGKILLed daemon."""
    a, c = unique_sleep(), unique_sleep()
    refused = box.tmp / "refused"
    command = f"setsid sleep {a} >/dev/null 2>&1 & kill -{how} $PPID 2>/dev/null || touch {refused}; sleep {c}"
    spec, _ = spec_for(command, box, runner.support(), namespaces=False)
    parent = _under_fake_daemon(runner, box, spec)
    markers = [f"sleep {a}", f"sleep {c}"]  # the launcher carries them too (in its spec)
    try:
        wait_until(lambda: all(processes_running(m) for m in markers), what="the command to start its sleeps")
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait(timeout=15)
        wait_until(lambda: not any(processes_with(m) for m in markers),
                   what="the command's tree and its launcher to end with the daemon")
        assert refused.exists(), f"kill -{how} $PPID was not refused"
    finally:
        kill_markers(*markers)


@pytest.mark.parametrize("namespaces", [True, pytest.param(False, marks=needs_scoping)],
                         ids=["pid-namespace-unscoped", "subreaper"])
def test_a_command_cannot_signal_a_process_outside(runner: Runner, box: Box, namespaces: bool) -> None:
    """The daemon, the editor, any process of the user: by pid, and by a pidfd of its /proc entry
    (the host's /proc stays mounted in a PID namespace). Without a PID namespace only Landlock's
    scope stops it; in one, the namespace alone does (checked here with scopes off: ABI 5)."""
    outsider = subprocess.Popen(["sleep", unique_sleep()], start_new_session=True)
    try:
        pid = outsider.pid
        command = (f"kill -TERM {pid} 2>/dev/null && echo by-pid; python3 -c \"import os, signal; "
                   f"fd = os.open('{proc_dir(pid)}', os.O_RDONLY); signal.pidfd_send_signal(fd, 15); print('by-pidfd')\"; "
                   "echo done")
        spec, _ = spec_for(command, box, runner.support(), namespaces=namespaces,
                           landlock_abi=min(ABI, 5) if namespaces else None)
        done = run(runner, box, spec)
        assert done.stdout == "done\n", done.stdout + done.stderr
        assert outsider.poll() is None
    finally:
        outsider.kill()
        outsider.wait()


@MODES
def test_a_command_still_signals_its_own_children(runner: Runner, box: Box, namespaces: bool) -> None:
    a = unique_sleep()
    command = f"sleep {a} & child=$!; setsid sleep {a} & kill -TERM $child $!; wait $child; echo status=$?"
    spec, _ = spec_for(command, box, runner.support(), namespaces=namespaces)
    try:
        done = run(runner, box, spec)
        assert done.stdout == "status=143\n", done.stdout + done.stderr
        assert "kill" not in done.stderr
    finally:
        kill_markers(f"sleep {a}")


@MODES
def test_the_daemon_still_signals_the_command(runner: Runner, box: Box, namespaces: bool) -> None:
    """Scoping restricts the sandboxed side only: a signal from outside reaches the shell itself."""
    sleeping = f"sleep {unique_sleep()}"
    got = box.tmp / "got"
    command = f"trap 'touch {got}; exit 7' USR1; {sleeping} & wait"
    spec, _ = spec_for(command, box, runner.support(), namespaces=namespaces)
    proc = subprocess.Popen(runner.launcher(spec), cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        (sleep,) = wait_until(lambda: processes_running(sleeping), what="the command to start")
        os.kill(parent_of(sleep), signal.SIGUSR1)  # the shell
        assert proc.wait(timeout=15) == 7
        assert got.exists()
    finally:
        kill_markers(sleeping)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


CONNECT_ABSTRACT = ("python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('\\0{name}'); "
                    "print('connected')\"")


@needs_scoping
@pytest.mark.parametrize("namespaces", [True, False], ids=["netns", "landlock-tcp"])
def test_abstract_unix_sockets_outside_follow_the_network_setting(runner: Runner, box: Box, namespaces: bool) -> None:
    """A session bus or X server listens on an abstract socket: with the network off the command
    cannot reach it (a fresh network namespace has none; without one, Landlock scopes them)."""
    name = f"toycoder-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind("\0" + name)
        server.listen(4)
        spec, _ = spec_for(CONNECT_ABSTRACT.format(name=name), box, runner.support(), namespaces=namespaces)
        off = run(runner, box, spec)
        assert "connected" not in off.stdout and off.returncode != 0, off.stdout
        spec, _ = spec_for(CONNECT_ABSTRACT.format(name=name), box, runner.support(), namespaces=namespaces,
                           network=True)
        on = run(runner, box, spec)
        assert on.stdout == "connected\n", on.stderr


@MODES
def test_sigpipe_and_sigxfsz_are_not_ignored_in_the_command(runner: Runner, box: Box, namespaces: bool) -> None:
    """Python ignores both at start-up and exec keeps an ignored disposition: `yes | head -n1` then
    printed "Broken pipe" errors, and a file over its size limit failed with EFBIG instead of killing."""
    spec, _ = spec_for("grep SigIgn /proc/self/status; yes | head -n1", box, runner.support(), namespaces=namespaces)
    done = run(runner, box, spec)
    ignored_line, first = done.stdout.splitlines()
    ignored = int(ignored_line.split()[1], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1)), ignored_line
    assert not ignored & (1 << (signal.SIGXFSZ - 1)), ignored_line
    assert (first, done.stderr, done.returncode) == ("y", "", 0)


def _start_a_setsid_child_in_subreaper_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> tuple[asyncio.Future[object], list[str]]:
    """run_command in process, sandboxed as on a kernel without user namespaces, running a child that
    left the group (setsid) and a sleep of the shell's own: (the tool call, the sleeps' markers)."""
    monkeypatch.setattr(probe, "_cached", probe.Support(sys.platform, ABI, False, False))
    registry = ToolRegistry(PermissionGate(["run_command"]))
    registry.register(shell.run_command, enabled=True)
    a, c = unique_sleep(), unique_sleep()
    call = json.dumps({"command": f"setsid sleep {a} >/dev/null 2>&1 & sleep {c}"})
    turn = asyncio.ensure_future(registry.dispatch("run_command", call, ToolContext(Workspace(tmp_path), AllowAll(), "c1")))
    return turn, [f"sleep {a}", f"sleep {c}"]


@contextlib.asynccontextmanager
async def _a_setsid_child_in_subreaper_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> AsyncIterator[tuple[asyncio.Future[object], list[str]]]:
    """_start_a_setsid_child_in_subreaper_mode, yielded once run_command holds the launcher."""
    turn, markers = _start_a_setsid_child_in_subreaper_mode(tmp_path, monkeypatch)
    try:
        assert await asyncio.to_thread(wait_until, lambda: all(processes_running(m) for m in markers),
                                       what="the command to start its sleeps")
        # Running sleeps do not mean run_command holds the process yet: on a loaded machine its loop
        # may still be connecting the pipes, and a kill_all or cancel then finds no group to signal.
        [sleep_c] = processes_running(markers[1])
        launcher = parent_of(parent_of(sleep_c))
        await wait_until_async(lambda: launcher in shell._live_groups, what="run_command to hold the launcher")
        yield turn, markers
    finally:
        turn.cancel()
        kill_markers(*markers)


async def test_the_daemons_exit_lets_a_subreaper_launcher_end_what_left_the_group(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """shell.kill_all (the daemon's exit) used to KILL every command's group: without a PID
    namespace that killed the launcher before it could end a setsid'd child, which kept running."""
    async with _a_setsid_child_in_subreaper_mode(tmp_path, monkeypatch) as (turn, markers):
        shell.kill_all()
        await asyncio.to_thread(wait_until, lambda: not any(processes_with(m) for m in markers),
                                what="the launcher to end its whole tree")
        await asyncio.wait_for(turn, 15)


# A launcher whose clean-up never finishes (as when a command forks faster than it kills).
STUCK_CLEANUP = """import sys, time
sys.path.append(sys.argv.pop(1))
from toycoder_daemon.tools.shell.sandbox import contain, launch
contain.kill_and_reap = lambda **_: time.sleep(600)
sys.exit(launch.main(sys.argv[1:]))
"""


async def test_a_cancel_that_must_kill_the_launcher_kills_its_tree_first(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A cancel TERMs the group and KILLs it after KILL_GRACE. A launcher still cleaning up then
    used to die with a setsid'd child of the command still below it, which kept running."""
    monkeypatch.setattr(probe, "launcher_argv", lambda *args: [sys.executable, "-I", "-S", "-c", STUCK_CLEANUP,
                                                               PACKAGE_PARENT, *args])
    monkeypatch.setattr(shell, "KILL_GRACE", 0.3)
    async with _a_setsid_child_in_subreaper_mode(tmp_path, monkeypatch) as (turn, markers):
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(turn, 15)
        await asyncio.to_thread(wait_until, lambda: not any(processes_with(m) for m in markers),
                                what="the daemon to end the stuck launcher's whole tree")


async def test_a_cancel_while_run_command_is_still_starting_the_launcher_lets_it_end_its_tree(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cancel that came while the spawn's pipes were still being connected KILLed the group at
    once: without a PID namespace (nor a cgroup) the launcher died before it could end a setsid'd
    child of the command, which kept running."""
    real, gate = asyncio.create_subprocess_exec, asyncio.Event()

    async def held(*args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        proc = await real(*args, **kwargs)
        await gate.wait()  # a loaded loop finishing the spawn late: the command already runs
        return proc

    monkeypatch.setattr(asyncio, "create_subprocess_exec", held)
    turn, markers = _start_a_setsid_child_in_subreaper_mode(tmp_path, monkeypatch)
    try:
        await asyncio.to_thread(wait_until, lambda: all(processes_running(m) for m in markers),
                                what="the command to start its sleeps")
        turn.cancel()  # reaches run_command first (call_soon order), the spawn finishes after
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(turn, 15)
        await asyncio.to_thread(wait_until, lambda: not any(processes_with(m) for m in markers),
                                what="the launcher to end its whole tree")
    finally:
        gate.set()
        turn.cancel()
        kill_markers(*markers)
