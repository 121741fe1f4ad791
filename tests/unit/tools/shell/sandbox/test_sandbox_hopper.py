"""Without a PID namespace (the subreaper mode), a command that changes pid faster than a /proc walk
and leaves thousands of zombies behind is still ended by a cancel and by the daemon's death: the
launcher reaps every zombie waiting after each walk (one per walk was quadratic), and a cancel keeps
killing below the launcher until nothing is left before it kills the launcher itself."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import AllowAll, proc_dir, processes_with
from sandbox_helpers import FAKE_DAEMON, Box, Runner, cgroups_of, spec_for
from waiting import scaled, wait_until

from toycoder_daemon.tools.base import ToolContext
from toycoder_daemon.tools.permission import PermissionGate
from toycoder_daemon.tools.registry import ToolRegistry
from toycoder_daemon.tools.shell import run_command as shell
from toycoder_daemon.tools.shell.sandbox import cgroups, landlock, probe
from toycoder_daemon.tools.workspace import Workspace

ABI = landlock.abi_version() if sys.platform.startswith("linux") else 0
CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = [
    pytest.mark.skipif(ABI < 1, reason="the sandbox needs Linux with Landlock"),
    pytest.mark.skipif(CC is None, reason="no C compiler (cc/gcc) to build the pid hopper and zombie maker; NOT a pass"),
]
ZOMBIES = 8000

# Forks argv[1] children that exit at once and are never waited for, touches argv[2], then sleeps:
# when it is killed they become the launcher's zombies (it is the subreaper).
ZOMBIE_MAKER = r"""
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  for (int i = 0; i < n; i++) { pid_t p = fork(); if (p == 0) _exit(0); }
  close(open(argv[2], O_WRONLY | O_CREAT, 0644));
  for (;;) pause();
}
"""
# Leaves its session, ignores the polite signals, then forks and lets the parent exit every 1 ms,
# so its pid changes faster than a /proc walk; touches argv[1] once running; ends by itself after
# argv[2] seconds (so a failing test leaves nothing for long). argv[3] is the test's marker.
HOPPER = r"""
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
  setsid(); signal(SIGTERM, SIG_IGN); signal(SIGHUP, SIG_IGN); signal(SIGINT, SIG_IGN);
  time_t end = time(NULL) + atoi(argv[2]);
  close(open(argv[1], O_WRONLY | O_CREAT, 0644));
  for (;;) {
    usleep(1000);
    pid_t p = fork();
    if (p > 0) _exit(0);
    if (p == 0 && time(NULL) > end) _exit(0);
  }
}
"""


@pytest.fixture
def programs(tmp_path: Path) -> dict[str, Path]:
    built = {}
    for name, source in (("zombies", ZOMBIE_MAKER), ("hopper", HOPPER)):
        (tmp_path / f"{name}.c").write_text(source)
        out = tmp_path / name
        subprocess.run([str(CC), "-O1", "-o", str(out), str(tmp_path / f"{name}.c")], check=True)
        out.chmod(0o755)
        built[name] = out
    return built


@pytest.fixture
def box() -> Iterator[Box]:
    b = Box.make(None)
    yield b
    b.remove()


def _command(programs: dict[str, Path], flags: Path, marker: str) -> str:
    return (f"{programs['zombies']} {ZOMBIES} {flags}/zombies-made & "
            f"{programs['hopper']} {flags}/hopping 120 {marker} & sleep 600")


def _started(flags: Path) -> bool:
    return (flags / "zombies-made").exists() and (flags / "hopping").exists()


def _leftovers(marker: str) -> list[int]:
    return processes_with(marker)  # the hopper carries the marker in argv, the launcher in its spec


@pytest.mark.parametrize("cgroup", [False, True], ids=["walk", "cgroup"])
async def test_a_cancel_ends_a_pid_hopper_without_a_pid_namespace(programs: dict[str, Path], tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch, cgroup: bool) -> None:
    if cgroup and (why := cgroups.unusable()):
        pytest.skip(f"no cgroup per command here ({why}); NOT a pass")
    monkeypatch.setattr(probe, "_cached", probe.Support(sys.platform, ABI, False, False, cgroup=cgroup))
    registry = ToolRegistry(PermissionGate(["run_command"]))
    registry.register(shell.run_command, enabled=True)
    marker = f"hop{uuid.uuid4().hex}"
    flags = tmp_path / "flags"
    flags.mkdir()
    call = json.dumps({"command": _command(programs, flags, marker)})
    ctx = ToolContext(Workspace(tmp_path), AllowAll(), "c1")
    turn = asyncio.ensure_future(registry.dispatch("run_command", call, ctx))
    await asyncio.to_thread(wait_until, lambda: _started(flags), scaled(60), "zombies made and the hopper running")
    assert _leftovers(marker), "the hopper is not visible by its marker (the check below would prove nothing)"
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(turn, scaled(60))
    await asyncio.to_thread(wait_until, lambda: not _leftovers(marker), scaled(30),
                            "the hopper and its launcher to be gone after the cancel")
    assert not cgroups_of(os.getpid())  # run_command removed the one it made, if any


def test_the_daemons_death_ends_a_pid_hopper_and_reaps_thousands_of_zombies(programs: dict[str, Path],
                                                                            box: Box) -> None:
    runner = Runner("root" if os.geteuid() == 0 else "current user")
    marker = f"hop{uuid.uuid4().hex}"
    spec, _ = spec_for(_command(programs, box.tmp, marker), box, runner.support(), namespaces=False)
    assert not spec["namespaces"]
    parent = subprocess.Popen([sys.executable, "-c", FAKE_DAEMON, json.dumps(spec), *runner.launcher(spec)[:-1]],
                              cwd=box.ws, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        wait_until(lambda: _started(box.tmp), scaled(60), "zombies made and the hopper running")
        assert _leftovers(marker), "the hopper is not visible by its marker (the check below would prove nothing)"
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait(timeout=15)
    # One reap per /proc walk took minutes here (each walk reads thousands of zombies).
    wait_until(lambda: not _leftovers(marker), scaled(30),
               "the hopper, its zombies and the launcher to be gone after the daemon's death")


ZOMBIE_LEADER = """#include <pthread.h>
#include <unistd.h>
static void *wait_here(void *a) { for (;;) pause(); return 0; }
int main(void) { pthread_t t; pthread_create(&t, 0, wait_here, 0); pthread_exit(0); }
"""


def test_a_process_whose_main_thread_ended_is_still_killed(tmp_path: Path) -> None:
    """Its /proc/PID/stat says "Z" while a thread lives on: it is no zombie to skip. Left out, it
    could neither be killed nor reaped, and kill_and_reap waited for it for ever."""
    src, exe = tmp_path / "zleader.c", tmp_path / "zleader"
    src.write_text(ZOMBIE_LEADER)
    subprocess.run([str(CC), "-pthread", "-o", str(exe), str(src)], check=True, capture_output=True)
    report = tmp_path / "report"
    code = ("import os, signal, sys, time\n"
            "from toycoder_daemon.tools.shell.sandbox import contain\n"
            "contain.prctl(contain.PR_SET_CHILD_SUBREAPER, 1)\n"
            "z = os.fork()\n"
            f"if z == 0:\n    os.execv({str(exe)!r}, ['zleader'])\n"
            "deadline = time.monotonic() + 10\n"
            f"while open({proc_dir(0)[:-1]!r} + str(z) + '/stat').read().rsplit(')', 1)[1].split()[0] != 'Z':\n"
            "    assert time.monotonic() < deadline, 'the main thread never ended'\n"
            "    time.sleep(0.01)\n"
            f"open({str(report)!r}, 'w').write(str(z))\n"
            "contain.kill_and_reap(pid_namespace_init=False)\n")
    with open(tmp_path / "stderr", "w") as err:  # a file: a pipe would stay open in a survivor
        proc = subprocess.Popen([sys.executable, "-c", code], stderr=err)
    try:
        proc.wait(timeout=scaled(30))  # the bug: kill_and_reap never returns
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    z = int(report.read_text())
    try:
        assert proc.returncode == 0, (tmp_path / "stderr").read_text()
        assert not Path(proc_dir(z)).exists()  # killed and reaped
    finally:
        if Path(proc_dir(z)).exists() and "zleader" in (Path(proc_dir(z)) / "comm").read_text():
            os.kill(z, signal.SIGKILL)  # the bug left it to init: ours to clean up
