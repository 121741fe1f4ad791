"""Helpers for the sandbox tests: run one command through the real launcher, as root or as an
unprivileged user created for the test run, and look for processes by unique markers."""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers import processes_with
from waiting import wait_until

import toycoder_daemon
from toycoder_daemon.tools.shell.sandbox import cgroups, probe
from toycoder_daemon.tools.shell.sandbox.policy import Plan, Policy, plan

_probed: dict[str, probe.Support] = {}
PACKAGE_PARENT = str(Path(toycoder_daemon.__file__).resolve().parents[1])
"""Where `import toycoder_daemon` finds our package: what a launcher run by a test appends to sys.path
(as probe.BOOT does), found from the package, not by counting a module's folders."""

FAKE_DAEMON = ("import json, os, subprocess, sys; spec = json.loads(sys.argv[1]); spec['daemon'] = os.getpid(); "
               "subprocess.Popen(sys.argv[2:] + [json.dumps(spec)], start_new_session=True); "
               "import time; time.sleep(600)")
"""`python -c FAKE_DAEMON SPEC LAUNCHER_ARGV...`: a stand-in daemon that starts the launcher (in a
session of its own, as run_command does) with itself as the spec's daemon, then waits to be killed."""


@dataclass
class Runner:
    """Who runs the launcher: root, or a fresh unprivileged user (with an interpreter it can run)."""

    name: str
    user: str | None = None
    python: str = sys.executable

    def wrap(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", self.user, "--", *argv] if self.user else argv

    def launcher(self, spec: dict[str, Any]) -> list[str]:
        return self.wrap([self.python, *probe.launcher_argv(json.dumps(spec))[1:]])

    def support(self) -> probe.Support:
        """What the launcher can do for this runner (probed once per runner: it starts a process)."""
        if self.name not in _probed:
            _probed[self.name] = self._probe()
        return _probed[self.name]

    def _probe(self) -> probe.Support:
        done = subprocess.run(self.wrap([self.python, *probe.launcher_argv("--probe")[1:]]), capture_output=True,
                              text=True, timeout=30, check=True, cwd=probe.LAUNCH_CWD)
        found = json.loads(done.stdout)
        return probe.Support(sys.platform, found["landlock"], found["namespaces"], found["readonlyMounts"])


def python_for(user: str) -> str | None:
    """An interpreter the user can run: the test's own, else the system's (a venv under /root is
    out of other users' reach; the launcher needs only the standard library)."""
    for candidate in (sys.executable, "/usr/bin/python3"):
        check = ["runuser", "-u", user, "--", candidate, "-S", "-c", "pass"]
        if subprocess.run(check, capture_output=True).returncode == 0:
            return candidate
    return None


USERS_LOCK = Path(tempfile.gettempdir()) / "toycoder-tests-useradd.lock"
"""Shared by every run of the suite on the machine, on purpose: it only orders useradd/userdel."""


def _users_db(argv: list[str], *, check: bool = True) -> None:
    """useradd/userdel, one at a time: they refuse at once ("cannot lock /etc/passwd; try again later")
    while another holds that lock, as a parallel worker or another run of the suite may. Ours take
    turns on USERS_LOCK; a lock held by anyone else is waited for. `check`: another failure raises."""
    def done() -> bool:
        with open(USERS_LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            p = subprocess.run(argv, capture_output=True, text=True)
        if p.returncode == 0 or "lock" in p.stderr:
            return p.returncode == 0
        if check:
            raise AssertionError(f"{argv} failed ({p.returncode}): {p.stderr}")
        return True

    wait_until(done, 60, f"{argv[0]} to get the lock of the users' files", interval=0.2)


@contextmanager
def temporary_user() -> Iterator[str]:
    """A throwaway unprivileged user, removed afterwards."""
    name = f"tcsbx{os.getpid() % 100000}{secrets.token_hex(2)}"
    _users_db(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name])
    try:
        yield name
    finally:
        _users_db(["userdel", name], check=False)  # as before: a user left behind fails no test


@dataclass
class Box:
    """A workspace, a directory outside it (writable by anyone, so only the sandbox can refuse),
    and a private temp dir, all where the runner can reach them."""

    base: Path
    ws: Path
    outside: Path
    tmp: Path

    @classmethod
    def make(cls, owner: str | None) -> Box:
        base = Path(tempfile.mkdtemp(prefix="toycoder-sbx-test-"))
        ws, outside, tmp = base / "ws", base / "outside", base / "tmp"
        for d in (ws, ws / ".git", outside, tmp):
            d.mkdir()
        (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        os.chmod(base, 0o755)
        os.chmod(outside, 0o777)
        if owner:
            for d in (ws, ws / ".git", ws / ".git" / "HEAD", tmp):
                shutil.chown(d, owner, owner)
        return cls(base, ws, outside, tmp)

    def remove(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)


def make_plan(box: Box, support: probe.Support, **policy: Any) -> Plan:
    args = policy.pop("args", {})
    return plan(Policy(**policy), box.ws, str(box.tmp), support, args)


def spec_for(command: str, box: Box, support: probe.Support, *, namespaces: bool = True,
             landlock_abi: int | None = None, **policy: Any) -> tuple[dict[str, Any], Plan]:
    p = make_plan(box, support, **policy)
    assert p.sandboxed, p.describe()
    spec = p.spec(command, support, required=True)
    spec["daemon"] = 0  # not started by a daemon: no parent check
    spec["cwd"] = str(box.ws)
    spec["namespaces"] = namespaces and support.namespaces
    if landlock_abi is not None:
        spec["landlock"] = landlock_abi
    if not spec["namespaces"]:
        spec["readonly"] = []
    return spec, p


def run(runner: Runner, box: Box, spec: dict[str, Any], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TMPDIR": str(box.tmp), "LANG": "C"}
    return subprocess.run(runner.launcher(spec), cwd=probe.LAUNCH_CWD, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def kill_markers(*markers: str) -> None:
    """Clean-up only: kill what this test started if the code under test failed to."""
    for m in markers:
        for pid in processes_with(m):
            with suppress(ProcessLookupError):
                os.kill(pid, 9)


def unique_sleep() -> str:
    """A sleep duration nobody else uses, so its command line identifies this test's process."""
    return f"900000.{uuid.uuid4().int % 10**12:012d}"  # GNU sleep takes fractions: unique per call


@contextmanager
def listening() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that accepts connections."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s.getsockname()[1]


def cgroups_of(pid: int) -> list[str]:
    """The command cgroups a daemon of this pid made that still exist."""
    parent = cgroups.own_dir()
    if parent is None or not sys.platform.startswith("linux"):
        return []
    return [os.path.join(parent, n) for n in os.listdir(parent) if n.startswith(f"{cgroups.PREFIX}{pid}-")]


def remove_cgroups_of(pid: int) -> None:
    """Clean-up only: a test leaves no cgroup behind, also when the code under test failed to remove it."""
    for path in cgroups_of(pid):
        cgroups.remove(path)


METADATA_OPS = ("chmod", "chown", "utime-past", "utime-now", "setxattr", "setcap")
_METADATA = """python3 - <<'EOF'
import os
target, uid, gid = {target!r}, {uid}, {gid}
ops = {{
    "chmod": lambda: os.chmod(target, 0),
    "chown": lambda: os.chown(target, uid, gid),
    "utime-past": lambda: os.utime(target, (1, 1)),
    "utime-now": lambda: os.utime(target),
    "setxattr": lambda: os.setxattr(target, "user.planted", b"1"),
    "setcap": lambda: os.setxattr(target, "security.capability",
                                  bytes.fromhex("0000000200200000000000000000000000000000")),
}}
for name, op in ops.items():
    try:
        op()
        print(name, "CHANGED")
    except OSError as e:
        print(name, "refused", e.errno)
EOF"""


def metadata_changes(target: Path, uid: int, gid: int) -> str:
    """A command that tries each of METADATA_OPS on `target` and prints "<op> CHANGED" or
    "<op> refused <errno>" for each (setcap: a file capability granting CAP_SYS_ADMIN)."""
    return _METADATA.format(target=str(target), uid=uid, gid=gid)


NO_USER_NAMESPACES = """import ctypes, os, struct, sys
# A seccomp filter refusing unshare(CLONE_NEWUSER) with EPERM, as a container's profile or a kernel
# without unprivileged user namespaces does; then exec the rest of argv.
arch, unshare = {"x86_64": (0xC000003E, 272), "aarch64": (0xC00000B7, 97)}[os.uname().machine]
prog = [(0x20, 0, 0, 4), (0x15, 1, 0, arch), (0x06, 0, 0, 0x7FFF0000), (0x20, 0, 0, 0), (0x15, 0, 2, unshare),
        (0x20, 0, 0, 16), (0x45, 1, 0, 0x10000000), (0x06, 0, 0, 0x7FFF0000), (0x06, 0, 0, 0x00050001)]
raw = b"".join(struct.pack("<HBBI", *ins) for ins in prog)
buf = ctypes.create_string_buffer(raw)
fprog = struct.pack("<HxxxxxxQ", len(prog), ctypes.addressof(buf))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, ctypes.c_char_p(fprog), 0, 0) == 0, os.strerror(ctypes.get_errno())
os.execv(sys.argv[1], sys.argv[1:])
"""
"""`python -c NO_USER_NAMESPACES ARGV...`: run ARGV where user namespaces cannot be made."""


@dataclass
class NoUserNamespaces(Runner):
    """An unprivileged user on a machine that refuses it user namespaces (so any namespace)."""

    def wrap(self, argv: list[str]) -> list[str]:
        return super().wrap([self.python, "-S", "-c", NO_USER_NAMESPACES, *argv])
