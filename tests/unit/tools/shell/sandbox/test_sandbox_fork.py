"""How the launcher forks the shell: clone3 into the command's cgroup does what os.fork does for
Python (its after-fork work runs in the child) and refuses in a threaded process; a stop sent to the
group just after either fork never runs the supervisor's handler in the shell's child; a child that
cannot even report its failure still exits 127 instead of returning into the supervisor's code."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import test_sandbox_cgroup
from helpers import proc_dir
from sandbox_helpers import PACKAGE_PARENT, Box, Runner, remove_cgroups_of, spec_for, unique_sleep
from test_sandbox_cgroup import ABI, NO_CGROUP, needs_cgroups
from waiting import scaled, wait_until

from toycoder_daemon.tools.shell.sandbox import cgroups, probe

pytestmark = pytest.mark.skipif(ABI < 1, reason="the sandbox needs Linux with Landlock")
box, cgroup = test_sandbox_cgroup.box, test_sandbox_cgroup.cgroup  # its fixtures


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`code` in a fresh isolated interpreter (as the launcher runs), our package importable."""
    prelude = f"import sys\nsys.path.append({PACKAGE_PARENT!r})\n"
    return subprocess.run([sys.executable, "-I", "-S", "-c", prelude + code, *args], capture_output=True,
                          text=True, timeout=scaled(30), cwd=probe.LAUNCH_CWD, stdin=subprocess.DEVNULL)


@needs_cgroups
def test_clone3_runs_pythons_after_fork_work_and_the_child_is_born_in_the_cgroup(cgroup: str) -> None:
    done = _python(
        "import os\n"
        "from toycoder_daemon.tools.shell.sandbox import contain\n"
        "r, w = os.pipe()\n"
        "os.register_at_fork(after_in_child=lambda: os.write(w, b'child-hook '))\n"
        "pid = contain.fork_into_cgroup(sys.argv[1])\n"
        "if pid == 0:\n"
        "    os.write(w, [x for x in open(sys.argv[2]) if x.startswith('0::')][0].encode())\n"
        "    os._exit(7)\n"
        "os.close(w)\n"
        "status = os.waitpid(pid, 0)[1]\n"
        "print(os.read(r, 4096).decode().strip(), os.waitstatus_to_exitcode(status))\n",
        cgroup, proc_dir(0)[:-1] + "self/cgroup")
    assert done.returncode == 0, done.stderr
    hook, line, code = done.stdout.split()
    assert hook == "child-hook", done.stdout  # PyOS_AfterFork_Child ran (the raw syscall skipped it)
    assert line.startswith("0::") and line.endswith("/" + os.path.basename(cgroup)), done.stdout
    assert code == "7"


@needs_cgroups
def test_clone3_refuses_in_a_threaded_process(cgroup: str) -> None:
    """Another thread may hold a lock (malloc's, stdio's) that only libc's fork resets in the child."""
    done = _python(
        "import threading\n"
        "from toycoder_daemon.tools.shell.sandbox import contain\n"
        "stop = threading.Event()\n"
        "t = threading.Thread(target=stop.wait)\n"
        "t.start()\n"
        "pid = contain.fork_into_cgroup(sys.argv[1])\n"
        "if pid == 0:\n"
        "    import os; os._exit(0)\n"
        "stop.set()\n"
        "print(pid)\n", cgroup)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None"


# A launcher whose fork leaves the child waiting (flag file written) before it runs anything of its
# own, and which logs the pid of every process that runs the supervisor's kill_and_reap.
SLOW_CHILD = """import sys, time
sys.path.append(sys.argv.pop(1))
flag, log = sys.argv.pop(1), sys.argv.pop(1)
from toycoder_daemon.tools.shell.sandbox import contain, launch
import os
real_kill, real_fork, real_clone = contain.kill_and_reap, os.fork, contain.fork_into_cgroup

def logged(**kw):
    with open(log, "a") as f:
        f.write(f"{os.getpid()}\\n")
    return real_kill(**kw)

def slow(pid):
    if pid == 0:
        open(flag, "w").close()
        time.sleep(20)  # the test TERMs the group now
    return pid

contain.kill_and_reap = logged
os.fork = lambda: slow(real_fork())
contain.fork_into_cgroup = lambda path: slow(real_clone(path))
sys.exit(launch.main(sys.argv[1:]))
"""


@pytest.mark.parametrize("how", ["fork", "clone3"])
def test_a_stop_just_after_the_fork_runs_the_supervisors_handler_only_in_the_supervisor(
        box: Box, tmp_path: Path, how: str) -> None:
    if how == "clone3" and NO_CGROUP is not None:
        pytest.skip(f"no cgroup per command here ({NO_CGROUP}); NOT a pass")
    runner = Runner("root" if os.geteuid() == 0 else "current user")
    spec, _ = spec_for(f"sleep {unique_sleep()}", box, runner.support(), namespaces=False)
    spec["cgroup"] = cgroups.create() if how == "clone3" else None
    flag, log = tmp_path / "forked", tmp_path / "log"
    argv = [sys.executable, "-I", "-S", "-c", SLOW_CHILD, PACKAGE_PARENT, str(flag), str(log), json.dumps(spec)]
    launcher = subprocess.Popen(argv, cwd=probe.LAUNCH_CWD, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(flag.exists, scaled(30), "the launcher to fork")
        os.killpg(launcher.pid, signal.SIGTERM)  # what a cancel sends: the launcher and its child
        assert launcher.wait(timeout=scaled(30)) == 128 + signal.SIGTERM
        assert log.read_text().split() == [str(launcher.pid)]  # not the child's pid as well
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
        if spec["cgroup"]:
            remove_cgroups_of(os.getpid())


def test_a_child_that_cannot_report_its_failure_still_exits_127(box: Box) -> None:
    """The shell's directory is gone and stderr is closed: the report's write fails too, and that
    error used to escape into the supervisor's loop in the child (which then exited 1)."""
    runner = Runner("root" if os.geteuid() == 0 else "current user")
    spec, _ = spec_for("true", box, runner.support(), namespaces=False)
    spec["cwd"] = str(box.base / "gone")
    done = subprocess.run([sys.executable, "-c", "import os, sys; os.close(2); os.execv(sys.argv[1], sys.argv[1:])",
                           *runner.launcher(spec)], cwd=probe.LAUNCH_CWD, stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=scaled(30))
    assert done.returncode == 127, done
