"""What a sandboxed command must not reach beyond its files: the client's environment through its
supervisors' environment blocks, a writable root's .git, the host's Unix sockets and session
variables, and the host's SysV IPC objects."""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import ANCESTOR_ENVIRONS
from sandbox_helpers import Box, Runner, make_plan, run, spec_for

from toycoder_daemon.tools.settings import ToolSettings
from toycoder_daemon.tools.shell.sandbox import boot, command, landlock, policy, probe

ABI = landlock.abi_version() if sys.platform.startswith("linux") else 0
pytestmark = pytest.mark.skipif(ABI < 1, reason="the sandbox needs Linux with Landlock")

# ---- A: the client's environment ----------------------------------------------------------------

_ANCESTORS = ANCESTOR_ENVIRONS  # the script lives in helpers.py, which alone reads /proc


@pytest.mark.parametrize("mode", ["pid-namespace", "subreaper", "unsandboxed"])
def test_a_terminal_command_sees_no_dropped_variable_in_any_visible_environ(runner: Runner, box: Box,
                                                                          mode: str) -> None:
    """portable(): the launcher gets the client's whole environment and keeps only the variables we
    pass; neither it nor the init forked from it may still carry the rest in its environment block.
    Unsandboxed (the policy's `off`) nothing else stops the command from reading the launcher's."""
    if mode == "unsandboxed":
        spec = {"command": _ANCESTORS, "writable": [], "readonly": [], "network": True, "landlock": 0,
                "namespaces": False, "required": False, "cwd": str(box.ws)}
    else:
        spec, _ = spec_for(_ANCESTORS, box, runner.support(), namespaces=mode == "pid-namespace")
    spec["daemon"] = None
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C", "SECRET_THING": "hunter2"}
    argv = runner.wrap([runner.python, *probe.launcher_argv(boot.keep_env_arg(["LANG", "PATH"]), json.dumps(spec))[1:]])
    done = subprocess.run(argv, cwd=probe.LAUNCH_CWD, env=env, capture_output=True, text=True,
                          timeout=30, stdin=subprocess.DEVNULL)
    assert done.returncode == 0 and "walked" in done.stdout, done.stderr
    if mode == "unsandboxed" and runner.user:  # its own, its shell's and the launcher's blocks were read
        assert done.stdout.count("PATH=") >= 3, done.stdout
    assert "hunter2" not in done.stdout and "SECRET_THING" not in done.stdout


# ---- B: every writable root's .git ------------------------------------------------------------

def _repo(path: Path, owner: str | None) -> Path:
    (path / ".git" / "hooks").mkdir(parents=True)
    (path / ".git" / "config").write_text("[core]\n")
    if owner:
        for p in (path, path / ".git", path / ".git" / "hooks", path / ".git" / "config"):
            shutil.chown(p, owner, owner)
    return path


def test_the_git_of_every_writable_root_and_of_repositories_one_level_down_is_read_only(runner: Runner,
                                                                                          box: Box) -> None:
    support = runner.support()
    extra = _repo(box.base / "extra", runner.user)
    nested = _repo(box.ws / "sub", runner.user)
    linked = box.base / "linked"  # a worktree's .git is a file naming its git dir
    linked.mkdir()
    (linked / ".git").write_text(f"gitdir: {extra / '.git'}\n")
    if runner.user:
        shutil.chown(linked, runner.user, runner.user)
        shutil.chown(linked / ".git", runner.user, runner.user)
    targets = [extra / ".git" / "hooks" / "pre-commit", extra / ".git" / "config",
               nested / ".git" / "hooks" / "pre-commit", nested / ".git" / "config", linked / ".git"]
    writes = "; ".join(f"echo planted >> {t}" for t in targets)
    spec, plan = spec_for(f"{writes}; echo ok > {extra}/file; echo ok > sub/file; echo done", box, support,
                          writable=(str(extra), str(linked)))
    assert {str(extra / ".git"), str(nested / ".git"), str(linked / ".git")} <= set(plan.readonly)
    done = run(runner, box, spec)
    assert "done" in done.stdout, done.stderr
    assert (extra / "file").read_text() == "ok\n" and (box.ws / "sub" / "file").read_text() == "ok\n"
    for t in targets:
        assert not t.exists() or "planted" not in t.read_text(), t


def test_a_git_listed_writable_stays_writable(tmp_path: Path) -> None:
    box = Box.make(None)
    try:
        extra = _repo(box.base / "extra", None)
        support = probe.Support(sys.platform, ABI, True, True)
        p = make_plan(box, support, writable=(str(extra), str(extra / ".git")))
        assert str(extra / ".git") not in p.readonly and str(box.ws / ".git") in p.readonly
    finally:
        box.remove()


# ---- C: Unix sockets and the session's variables ------------------------------------------------

def _listener(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    os.chmod(path, 0o666)
    s.listen(8)
    return s


_CONNECT = """python3 - <<'EOF'
import socket
for path in {paths!r}:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        print(path, "CONNECTED")
    except OSError as e:
        print(path, "refused", e.errno)
EOF"""


def test_hidden_sockets_and_runtime_dirs_cannot_be_connected_to(runner: Runner, box: Box) -> None:
    """The mechanism: a socket file named in the spec gets /dev/null bound over it, a directory an
    empty read-only tmpfs (the defaults are /run/user, the container engines' and the buses' sockets)."""
    runtime = box.outside / "run-user"
    runtime.mkdir(mode=0o777)
    os.chmod(runtime, 0o777)
    bus, engine, other = runtime / "bus", box.outside / "docker.sock", box.outside / "other.sock"
    with _listener(bus), _listener(engine), _listener(other):
        spec, _ = spec_for(_CONNECT.format(paths=[str(bus), str(engine), str(other)]), box, runner.support())
        spec["hidden"] = [str(runtime), str(engine)]
        done = run(runner, box, spec)
    assert f"{other} CONNECTED" in done.stdout, done.stdout + done.stderr  # not hidden: reachable
    assert f"{bus} refused" in done.stdout and f"{engine} refused" in done.stdout, done.stdout + done.stderr


def test_the_plan_hides_the_runtime_dirs_and_engine_sockets_unless_writable(tmp_path: Path) -> None:
    box = Box.make(None)
    try:
        support = probe.Support(sys.platform, ABI, True, True)
        hidden = make_plan(box, support).hidden
        assert "/run/user" in hidden and "/run/docker.sock" in hidden and "/var/run/docker.sock" in hidden
        assert "/run/user" not in make_plan(box, support, writable=("/run/user/0/work",)).hidden
    finally:
        box.remove()


@pytest.fixture
def session_variables(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus")
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/ssh-x/agent.1")
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    yield


def test_a_sandboxed_command_gets_no_session_socket_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                              session_variables: None) -> None:
    monkeypatch.setattr(probe, "_cached", probe.Support(sys.platform, ABI, True, True))
    prepared = asyncio.run(command.prepare(ToolSettings(), tmp_path, "true", {}))
    try:
        assert prepared.plan.sandboxed
        for name in policy.SESSION_VARIABLES:
            assert name not in prepared.env
        assert prepared.env["PATH"] == os.environ["PATH"]
        assert prepared.spec is not None and "/tmp/ssh-x/agent.1" in prepared.spec["hidden"]
    finally:
        asyncio.run(prepared.cleanup())
    unsandboxed = asyncio.run(command.prepare(ToolSettings(), tmp_path, "true", {"sandbox": False}))
    assert unsandboxed.env["SSH_AUTH_SOCK"] == "/tmp/ssh-x/agent.1"  # run outside the sandbox: as before


# ---- D: SysV IPC ----------------------------------------------------------------------------------

IPC_CREAT, IPC_EXCL, IPC_RMID = 0o1000, 0o2000, 0


@pytest.fixture
def shm_key() -> Iterator[int]:
    """A SysV shared memory segment of the host, anyone may attach; removed afterwards."""
    libc = ctypes.CDLL(None, use_errno=True)
    key = 0x7C000000 + os.getpid() % 0x100000
    shmid = libc.shmget(key, 4096, IPC_CREAT | IPC_EXCL | 0o666)
    assert shmid >= 0, os.strerror(ctypes.get_errno())
    try:
        yield key
    finally:
        libc.shmctl(shmid, IPC_RMID, None)


def test_a_command_cannot_reach_the_hosts_sysv_shared_memory(runner: Runner, box: Box, shm_key: int) -> None:
    probe_cmd = f"python3 -c 'import ctypes; print(\"shmget\", ctypes.CDLL(None).shmget({shm_key}, 0, 0))'"
    spec, _ = spec_for(probe_cmd, box, runner.support())
    done = run(runner, box, spec)
    assert "shmget -1" in done.stdout, done.stdout + done.stderr
    unsandboxed = subprocess.run(runner.wrap(["sh", "-c", probe_cmd]), capture_output=True, text=True, timeout=30)
    assert "shmget -1" not in unsandboxed.stdout  # the segment is there for whoever is not isolated
