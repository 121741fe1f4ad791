"""The OS sandbox through the real launcher, as root and as an unprivileged user made for the run:
writes confined, .git read-only, network off, no process left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from helpers import alive, processes_running, processes_with
from sandbox_helpers import (
    FAKE_DAEMON,
    PACKAGE_PARENT,
    Box,
    Runner,
    kill_markers,
    listening,
    run,
    spec_for,
    unique_sleep,
)
from waiting import wait_until

from toycoder_daemon.tools.shell.sandbox import landlock, launch, observe, probe

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or landlock.abi_version() < 1,
                                reason="the sandbox needs Linux with Landlock")
# ---- filesystem ---------------------------------------------------------------------------------

def test_write_outside_is_refused_and_named(runner: Runner, box: Box) -> None:
    support = runner.support()
    target = box.outside / "x.txt"
    spec, plan = spec_for(f"echo leaked > {target}; echo after", box, support)
    done = run(runner, box, spec)
    assert not target.exists()
    assert "after" in done.stdout  # the shell went on: only the write failed
    note = observe.explain(done.stdout + done.stderr, plan, str(box.ws))
    assert f"blocked by the sandbox: {target} is outside the writable roots" in note


def test_an_existing_outside_file_is_not_overwritten_or_truncated(runner: Runner, box: Box) -> None:
    support = runner.support()
    report = box.outside / "report.xml"
    report.write_text("original\n")
    os.chmod(report, 0o666)
    command = (f"python3 -c \"open('{report}', 'w').write('overwritten')\"; : > {report}; "
               f"truncate -s 0 {report}; rm -f {report}")
    spec, _ = spec_for(command, box, support)
    run(runner, box, spec)
    assert report.read_text() == "original\n"


def test_workspace_and_private_temp_dir_are_writable(runner: Runner, box: Box) -> None:
    spec, _ = spec_for('echo in > made.txt && mkdir -p d/e && echo t > "$TMPDIR/t" && cat "$TMPDIR/t" '
                       "&& echo quiet > /dev/null && echo ok", box, runner.support())
    done = run(runner, box, spec)
    assert done.returncode == 0, done.stderr
    assert (box.ws / "made.txt").read_text() == "in\n" and (box.ws / "d" / "e").is_dir()
    assert (box.tmp / "t").read_text() == "t\n" and done.stdout.endswith("ok\n")


def test_git_is_read_only_unless_listed_writable(runner: Runner, box: Box) -> None:
    support = runner.support()
    assert support.readonly_mounts, "this kernel allows the mount namespace the .git rule needs"
    spec, plan = spec_for("echo bad > .git/HEAD; echo x > .git/new; echo done", box, support)
    done = run(runner, box, spec)
    assert (box.ws / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert not (box.ws / ".git" / "new").exists() and "done" in done.stdout
    assert "is in the workspace's .git, which the sandbox keeps read-only" in observe.explain(
        done.stderr, plan, str(box.ws))
    spec, _ = spec_for("echo x > .git/new", box, support, writable=(".git",))
    assert run(runner, box, spec).returncode == 0 and (box.ws / ".git" / "new").read_text() == "x\n"


@pytest.mark.parametrize("abi", [1, 3])
def test_older_landlock_abis_still_confine_writes(runner: Runner, box: Box, abi: int) -> None:
    """Rule by rule degradation: a ruleset built for ABI 1 (no truncate or refer rights) or ABI 3
    is accepted and still refuses creating, appending and truncating (which opens for writing)."""
    support = runner.support()
    victim = box.outside / "keep.txt"
    victim.write_text("keep\n")
    os.chmod(victim, 0o666)
    spec, _ = spec_for(f"echo x > {box.outside}/new.txt; echo x >> {victim}; truncate -s 0 {victim}; echo ran",
                       box, support, landlock_abi=abi)
    done = run(runner, box, spec)
    assert "ran" in done.stdout and not (box.outside / "new.txt").exists()
    assert victim.read_text() == "keep\n"


# ---- network ------------------------------------------------------------------------------------

CONNECT = "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 3); print('connected')\""


@pytest.mark.parametrize("namespaces", [True, False], ids=["netns", "landlock-tcp"])
def test_network_is_off_by_default_and_on_when_asked(runner: Runner, box: Box, namespaces: bool) -> None:
    support = runner.support()
    with listening() as port:
        spec, plan = spec_for(CONNECT.format(port=port), box, support, namespaces=namespaces)
        off = run(runner, box, spec)
        assert "connected" not in off.stdout and off.returncode != 0
        if namespaces:
            assert "the sandbox has the network off" in observe.explain(off.stderr, plan, str(box.ws))
        spec, _ = spec_for(CONNECT.format(port=port), box, support, namespaces=namespaces, network=True)
        on = run(runner, box, spec)
        assert on.stdout.strip() == "connected", on.stderr


# ---- inherited files ----------------------------------------------------------------------------


@pytest.mark.parametrize("namespaces", [True, False], ids=["pid-namespace", "subreaper"])
def test_the_command_inherits_no_files_beyond_stdio(runner: Runner, box: Box, namespaces: bool) -> None:
    """Under an ACP client's terminal the launcher may inherit the client's open files; the command
    sees only 0, 1 and 2 (and the fd `ls` opens to read the directory)."""
    spec, _ = spec_for("ls /proc/self/fd", box, runner.support(), namespaces=namespaces)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TMPDIR": str(box.tmp), "LANG": "C"}
    secret = os.open(box.tmp, os.O_RDONLY)
    high = os.dup2(secret, 57)
    try:
        done = subprocess.run(runner.launcher(spec), cwd=probe.LAUNCH_CWD, env=env, capture_output=True, text=True,
                              timeout=30, stdin=subprocess.DEVNULL, pass_fds=(secret, high))
    finally:
        os.close(secret)
        os.close(high)
    assert done.returncode == 0, done.stderr
    assert set(done.stdout.split()) == {"0", "1", "2", "3"}, done.stdout


# ---- processes ----------------------------------------------------------------------------------

BACKGROUND = "setsid sleep {a} > /dev/null 2>&1 & ( ( sleep {b} > /dev/null 2>&1 & ) & ) ; {tail}"


@pytest.mark.parametrize("namespaces", [True, False], ids=["pid-namespace", "subreaper"])
def test_no_descendant_outlives_the_command(runner: Runner, box: Box, namespaces: bool) -> None:
    a, b = unique_sleep(), unique_sleep()
    try:
        spec, _ = spec_for(BACKGROUND.format(a=a, b=b, tail="echo started"), box, runner.support(),
                           namespaces=namespaces)
        done = run(runner, box, spec)
        assert done.stdout.strip() == "started", done.stderr
        sleeps = (f"sleep {a}", f"sleep {b}")  # unique durations: only this test's processes match
        wait_until(lambda: not any(processes_with(s) for s in sleeps), what="both background sleeps to be gone")
    finally:
        kill_markers(f"sleep {a}", f"sleep {b}")


@pytest.mark.parametrize("namespaces", [True, False], ids=["pid-namespace", "subreaper"])
def test_a_cancelled_command_leaves_nothing(runner: Runner, box: Box, namespaces: bool) -> None:
    """Cancel and timeout stop the command the same way: TERM to its process group."""
    a, b, c = unique_sleep(), unique_sleep(), unique_sleep()
    spec, _ = spec_for(BACKGROUND.format(a=a, b=b, tail=f"sleep {c}"), box, runner.support(), namespaces=namespaces)
    proc = subprocess.Popen(runner.launcher(spec), cwd=box.ws, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    markers = [f"sleep {a}", f"sleep {b}", f"sleep {c}"]
    try:
        assert wait_until(lambda: all(processes_running(m) for m in markers)), "the command started its sleeps"
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
        assert wait_until(lambda: not any(processes_with(m) for m in markers))
    finally:
        kill_markers(*markers)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.parametrize("namespaces", [True, False], ids=["pid-namespace", "subreaper"])
def test_a_killed_daemon_takes_the_command_with_it(runner: Runner, box: Box, namespaces: bool) -> None:
    """The launcher dies with its parent (the daemon), even a SIGKILLed one, and its namespace with it;
    without namespaces it kills its tree first (its death signal is then SIGTERM, which it handles)."""
    a, b, c = unique_sleep(), unique_sleep(), unique_sleep()
    spec, _ = spec_for(BACKGROUND.format(a=a, b=b, tail=f"sleep {c}"), box, runner.support(), namespaces=namespaces)
    argv = runner.launcher(spec)[:-1]
    if runner.user:
        argv = argv[4:]  # run the whole fake daemon as the user instead
    parent = subprocess.Popen(runner.wrap([runner.python, "-c", FAKE_DAEMON, json.dumps(spec), *argv]),
                              cwd=box.ws, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
    markers = [f"sleep {a}", f"sleep {b}", f"sleep {c}"]
    try:
        assert wait_until(lambda: all(processes_running(m) for m in markers)), "the command started its sleeps"
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait(timeout=15)
        assert wait_until(lambda: not any(processes_with(m) for m in markers))
    finally:
        kill_markers(*markers)


def test_the_launcher_refuses_rather_than_run_unconfined_when_required(runner: Runner, box: Box) -> None:
    spec, _ = spec_for("echo ran > made.txt", box, runner.support(), landlock_abi=0)
    done = run(runner, box, spec)
    assert done.returncode == launch.REFUSED_EXIT and "it did not run" in done.stderr
    assert not (box.ws / "made.txt").exists()



# The launcher with its init held just after the fork, before the init arms its death signal: the
# window in which a SIGKILLed daemon used to leave the init running the command with no parent.
HELD_INIT = """import os, sys, time
sys.path.append(sys.argv.pop(1))
from toycoder_daemon.tools.shell.sandbox import contain, launch
forked, go, launcher = sys.argv.pop(1), sys.argv.pop(1), os.getpid()
arm = contain.prctl
def held(option, value):
    if option == contain.PR_SET_PDEATHSIG and os.getpid() == 1:  # in the init, just forked
        with open(forked + ".new", "w") as f:
            f.write(str(launcher))
        os.rename(forked + ".new", forked)
        while not os.path.exists(go):
            time.sleep(0.01)
    arm(option, value)
contain.prctl = held
sys.exit(launch.main(sys.argv[1:]))
"""


def test_a_daemon_killed_while_the_init_starts_takes_the_command_with_it() -> None:
    runner = Runner("root" if os.geteuid() == 0 else "current user")
    if not runner.support().namespaces:
        pytest.skip("no PID namespaces here: there is no init")
    box = Box.make(None)
    a, c = unique_sleep(), unique_sleep()
    spec, _ = spec_for(f"touch ran; setsid sleep {a} & sleep {c}", box, runner.support())
    forked, go = box.tmp / "forked", box.tmp / "go"
    launcher = [sys.executable, "-I", "-S", "-c", HELD_INIT, PACKAGE_PARENT, str(forked), str(go)]
    parent = subprocess.Popen([sys.executable, "-c", FAKE_DAEMON, json.dumps(spec), *launcher], cwd="/",
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
    markers = [f"sleep {a}", f"sleep {c}"]  # the launcher and its init carry them too (in the spec)
    try:
        wait_until(forked.exists, what="the launcher to fork its init")
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait(timeout=15)
        launcher_pid = int(forked.read_text())
        # the launcher dies of its death signal; only then does the init go on to arm its own
        wait_until(lambda: not alive(launcher_pid), what="the launcher to die with its daemon")
        go.touch()
        assert wait_until(lambda: not any(processes_with(m) for m in markers), what="the init to end")
        assert not (box.ws / "ran").exists(), "the command ran after its daemon had died"
    finally:
        kill_markers(*markers)
        box.remove()
