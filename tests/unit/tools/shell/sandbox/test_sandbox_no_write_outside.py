"""Issue 28: no write of any kind outside the writable roots, through the real launcher, as root and
as an unprivileged user made for the run: not into another terminal (nor typed into its own), not
through a device node, not to metadata (chmod, chown, utimes, setxattr), and the daemon's maps and
open files are not there to read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import processes_running
from sandbox_helpers import (
    METADATA_OPS,
    Box,
    NoUserNamespaces,
    Runner,
    kill_markers,
    metadata_changes,
    run,
    spec_for,
    unique_sleep,
)
from waiting import wait_until

from toycoder_daemon.tools.shell.sandbox import landlock, probe

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or landlock.abi_version() < 1,
                                reason="the sandbox needs Linux with Landlock")
MODES = pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "no-namespaces"])


def _ids(runner: Runner) -> tuple[int, int]:
    if runner.user is None:
        return os.geteuid(), os.getegid()
    import pwd

    entry = pwd.getpwnam(runner.user)
    return entry.pw_uid, entry.pw_gid


@contextmanager
def terminal(owner: tuple[int, int]) -> Iterator[tuple[int, int, str]]:
    """A pty of the machine (master, slave, the slave's path), owned by `owner`: another terminal
    the command's user could write to were it not for the sandbox."""
    master, slave = os.openpty()
    try:
        path = os.ttyname(slave)
        os.chown(path, *owner)
        os.set_blocking(master, False)
        yield master, slave, path
    finally:
        os.close(master)
        os.close(slave)


def _drain(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except (BlockingIOError, OSError):  # EIO: nothing was ever written on the other side
        return b""


def _mounts(text: str) -> dict[str, set[str]]:
    """mountinfo lines -> mount point: its per-mount options (the last mount of a point wins)."""
    found: dict[str, set[str]] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 6 and "-" in fields:
            found[fields[4]] = set(fields[5].split(","))
    return found


# ---- other terminals ----------------------------------------------------------------------------

@MODES
def test_another_terminal_cannot_be_written(runner: Runner, box: Box, namespaces: bool) -> None:
    """All of /dev/pts was a writable root: a command wrote into another terminal of the machine."""
    with terminal(_ids(runner)) as (master, _slave, path):
        spec, _ = spec_for(f"echo INJECTED > {path}; echo ran; ls /dev/pts", box, runner.support(),
                           namespaces=namespaces)
        done = run(runner, box, spec)
        assert "ran" in done.stdout, done.stderr
        assert b"INJECTED" not in _drain(master)
    if namespaces:  # a devpts instance of its own: no other terminal is even listed
        assert done.stdout.split()[1:] == ["ptmx"], done.stdout


PEER = ("python3 -c \"import fcntl, os; m = os.open('/dev/ptmx', os.O_RDWR | os.O_NOCTTY); "
        "fcntl.ioctl(m, 0x40045431, b'\\0' * 4); s = fcntl.ioctl(m, 0x5441, os.O_RDWR | os.O_NOCTTY); "
        "os.write(s, b'mine\\n'); print(os.read(m, 16).decode().strip())\"")
"""A pty without opening its slave by path: TIOCSPTLCK (unlock), then TIOCGPTPEER."""


def test_a_command_still_makes_ptys_of_its_own(runner: Runner, box: Box) -> None:
    """Programs that need a terminal (`script`, pexpect-driven tests) open one through /dev/ptmx,
    in the command's own devpts instance (glibc's openpty opens the slave by its path there)."""
    command = ("python3 -c \"import os; m, s = os.openpty(); os.write(s, b'mine\\n'); "
               "print(os.read(m, 16).decode().strip(), os.ttyname(s))\"")
    spec, _ = spec_for(command, box, runner.support())
    done = run(runner, box, spec)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["mine", "/dev/pts/0"]  # the first pty of a fresh instance
    spec, _ = spec_for(PEER, box, runner.support())
    assert run(runner, box, spec).stdout == "mine\n"


def test_without_namespaces_no_slave_of_the_machines_devpts_opens(runner: Runner, box: Box) -> None:
    """No devpts instance of its own: /dev/pts stays out of the writable roots, so no slave opens
    there, by its path or through its master (TIOCGPTPEER is checked as an open too). Such a
    command has no pty (docs/security.md), and no other terminal either."""
    for command in (PEER, "python3 -c 'import os; os.openpty()'"):
        spec, _ = spec_for(command, box, runner.support(), namespaces=False)
        done = run(runner, box, spec)
        assert done.stdout == "" and "PermissionError" in done.stderr, done.stdout + done.stderr


TYPE = ("python3 -c \"import ctypes, fcntl, termios\n"
        "for name, req in (('TIOCSTI', termios.TIOCSTI), ('TIOCLINUX', 0x541C)):\n"
        "    try:\n"
        "        fcntl.ioctl(0, req, b'\\x00')\n"
        "        print(name, 'done')\n"
        "    except OSError as e:\n"
        "        print(name, e.errno)\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "high = libc.ioctl(0, ctypes.c_ulong(termios.TIOCSTI | 1 << 32), ctypes.c_char_p(b'Z'))\n"
        "print('high', ctypes.get_errno() if high else 'done')\"")
"""TIOCSTI and TIOCLINUX, then TIOCSTI with high bits set in the request (which the kernel drops)."""


@MODES
def test_typing_into_its_own_terminal_is_refused(runner: Runner, box: Box, namespaces: bool) -> None:
    """TIOCSTI pushes keystrokes into a terminal, which the shell reading it then runs outside the
    sandbox; on its controlling terminal the kernel allows it to anyone (legacy_tiocsti). The
    seccomp filter refuses it, and TIOCLINUX, with EPERM (a pty would answer TIOCLINUX ENOTTY)."""
    with terminal(_ids(runner)) as (_master, slave, _path):
        spec, _ = spec_for(TYPE, box, runner.support(), namespaces=namespaces)
        launcher = probe.launcher_argv(json.dumps(spec))
        argv = runner.wrap(["setsid", "--ctty", runner.python, *launcher[1:]])  # the pty is its terminal
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TMPDIR": str(box.tmp), "LANG": "C"}
        done = subprocess.run(argv, cwd=probe.LAUNCH_CWD, env=env, stdin=slave, capture_output=True, text=True,
                              timeout=30)
        os.set_blocking(slave, False)
        queued = _drain(slave)
    assert done.stdout.split("\n")[:3] == ["TIOCSTI 1", "TIOCLINUX 1", "high 1"], done.stdout + done.stderr
    assert queued == b""


# ---- device nodes -------------------------------------------------------------------------------

@MODES
def test_no_device_node_can_be_made(runner: Runner, box: Box, namespaces: bool) -> None:
    """A block node of the disk made in the workspace wrote into files outside it (as root)."""
    disk = os.stat("/").st_dev
    command = (f"mknod blk b {os.major(disk)} {os.minor(disk)}; mknod chr c 1 3; mkfifo fifo; "
               f"mknod {box.tmp}/chr c 1 3; echo ran")
    spec, _ = spec_for(command, box, runner.support(), namespaces=namespaces)
    done = run(runner, box, spec)
    assert "ran" in done.stdout, done.stderr
    assert not os.path.lexists(box.ws / "blk") and not os.path.lexists(box.ws / "chr")
    assert not os.path.lexists(box.tmp / "chr")
    assert (box.ws / "fifo").is_fifo()  # only device nodes are refused


def test_writable_roots_are_mounted_nodev_and_nosuid(runner: Runner, box: Box) -> None:
    support = runner.support()
    if not support.readonly_mounts:
        pytest.skip("no mount table of its own here: nothing to mount nodev (Landlock and the capabilities refuse nodes)")
    spec, _ = spec_for("cat /proc/self/mountinfo", box, support)
    done = run(runner, box, spec)
    assert done.returncode == 0, done.stderr
    mounts = _mounts(done.stdout)
    for root in (box.ws, box.tmp):
        assert {"rw", "nodev", "nosuid"} <= mounts.get(str(root), set()), (root, mounts.get(str(root)))
    assert "ro" in mounts["/"] and "ro" in mounts[str(box.ws / ".git")]


# ---- metadata -----------------------------------------------------------------------------------

def _state(path: Path) -> tuple[int, int, int, int, list[str]]:
    st = os.stat(path)
    return st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns, os.listxattr(path)


def test_metadata_outside_the_writable_roots_cannot_change(runner: Runner, box: Box) -> None:
    """chmod, chown, utimes, setxattr and setcap all worked outside (as a user, a `chmod 000` broke
    the daemon's own session writes; as root it plants setuid or capability binaries): `/` is
    read-only in the command's mount namespace."""
    support = runner.support()
    if not support.readonly_mounts:
        pytest.skip("no mount table of its own here: Landlock has no right for metadata (docs/security.md)")
    uid, gid = _ids(runner)
    victims = [box.outside / "mine", box.outside]
    victims[0].write_text("keep\n")
    for v in victims:
        os.chown(v, uid, gid)  # the command's own user owns them: only the sandbox can refuse
    before = {v: _state(v) for v in victims}
    for v in victims:
        spec, _ = spec_for(metadata_changes(v, uid, gid), box, support)
        done = run(runner, box, spec)
        assert done.returncode == 0, done.stderr
        assert "CHANGED" not in done.stdout, (v, done.stdout)
        assert done.stdout.count("refused") == len(METADATA_OPS)
    assert {v: _state(v) for v in victims} == before


def test_metadata_inside_the_workspace_still_changes(runner: Runner, box: Box) -> None:
    """`chmod +x`, `touch -d` and user xattrs keep working where the command may write."""
    target = box.ws / "script.sh"
    spec, _ = spec_for(f"echo 'echo hi' > {target} && chmod +x {target} && touch -d 2001-01-01 {target} && "
                       f"python3 -c \"import os; os.setxattr('{target}', 'user.mine', b'1')\" && {target}",
                       box, runner.support())
    done = run(runner, box, spec)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hi\n" and os.access(target, os.X_OK)
    assert os.getxattr(target, "user.mine") == b"1"


# ---- the daemon's /proc -------------------------------------------------------------------------

def test_the_daemons_maps_and_open_files_are_hidden(runner: Runner, box: Box) -> None:
    """A process of the command's user (standing in for the daemon): its maps and fd list were
    readable from a command. In the command's PID namespace /proc is its own."""
    support = runner.support()
    if not support.readonly_mounts:
        pytest.skip("no PID namespace or mount table of its own here: /proc stays the host's (docs/security.md)")
    duration = unique_sleep()
    marker = f"sleep {duration}"
    daemon = subprocess.Popen(runner.wrap(["sleep", duration]), stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        assert wait_until(lambda: processes_running(marker), what="the stand-in daemon to start")
        pid = processes_running(marker)[0]
        spec, _ = spec_for(f"cat /proc/{pid}/maps; ls /proc/{pid}/fd; echo ---; ls /proc", box, support)
        done = run(runner, box, spec)
        maps, _, listing = done.stdout.partition("---\n")
        assert maps == "", maps  # neither the maps nor the fd list
        pids = [int(name) for name in listing.split() if name.isdigit()]
        assert pids and max(pids) < 10, pids  # only the namespace's own processes
        assert str(pid) not in listing.split()
    finally:
        daemon.kill()
        daemon.wait()
        kill_markers(marker)


def test_the_command_still_writes_its_own_streams_through_proc(runner: Runner, box: Box) -> None:
    """/dev/stdout, /dev/fd/N and process substitution go through the command's read-only /proc
    to its own pipes, which are not on that mount. (The pipes are the command's own: one the
    test made as root would refuse the user's reopening it, sandbox or not.)"""
    inner = "echo out > /dev/stdout; cat <(echo sub); echo fd > /dev/fd/1; echo err > /dev/stderr"
    spec, _ = spec_for(f"{{ bash -c {json.dumps(inner)} 2>&1; }} | cat", box, runner.support())
    done = run(runner, box, spec)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "out\nsub\nfd\nerr\n", done.stdout + done.stderr


def test_root_listed_writable_leaves_nothing_read_only(runner: Runner, box: Box) -> None:
    """`/` in `writable` (or a workspace at `/`): nothing is outside, so `/` is not made read-only
    (its copy cannot be moved back over it)."""
    target = box.outside / "made"
    spec, _ = spec_for(f"echo x > {target} && chmod 600 {target}", box, runner.support(), writable=("/",))
    done = run(runner, box, spec)
    assert done.returncode == 0, done.stderr
    assert target.read_text() == "x\n" and target.stat().st_mode & 0o777 == 0o600


def test_a_file_listed_writable_stays_writable_and_its_neighbours_do_not(runner: Runner, box: Box) -> None:
    """A writable root may be a single file (`~/.gitconfig`): its copy is moved back over it."""
    listed, neighbour = box.outside / "listed", box.outside / "neighbour"
    for path in (listed, neighbour):
        path.write_text("before\n")
        os.chown(path, *_ids(runner))
    spec, _ = spec_for(f"echo after > {listed} && chmod 600 {listed}; echo after > {neighbour}; echo ran", box,
                       runner.support(), writable=(str(listed),))
    done = run(runner, box, spec)
    assert done.stdout == "ran\n", done.stderr
    assert listed.read_text() == "after\n" and listed.stat().st_mode & 0o777 == 0o600
    assert neighbour.read_text() == "before\n"


def test_without_user_namespaces_the_fallback_still_confines_writes_nodes_and_terminals(unprivileged: Runner) -> None:
    """A user the machine refuses user namespaces (a seccomp filter refuses unshare(CLONE_NEWUSER),
    as a container profile does): the launcher's own probe finds no namespaces and no mount table,
    and the command runs under Landlock, the seccomp filter and the subreaper. What still holds:
    no write, node or pty outside; what does not (metadata of the user's own files): docs/security.md."""
    runner = NoUserNamespaces("user without user namespaces", unprivileged.user, unprivileged.python)
    support = runner.support()
    assert (support.namespaces, support.readonly_mounts) == (False, False)
    box = Box.make(runner.user)
    try:
        with terminal(_ids(runner)) as (master, _slave, path):
            command = (f"echo x > {box.outside}/new; echo INJECTED > {path}; mknod chr c 1 3; mkfifo fifo; "
                       "python3 -c 'import os; os.openpty()' 2>/dev/null || echo no-pty; echo ran")
            spec, plan = spec_for(command, box, support)
            assert spec["namespaces"] is False and plan.git_writable_reason
            done = run(runner, box, spec)
            assert done.stdout.split() == ["no-pty", "ran"], done.stdout + done.stderr
            assert b"INJECTED" not in _drain(master)
        assert not (box.outside / "new").exists() and not os.path.lexists(box.ws / "chr")
        assert (box.ws / "fifo").is_fifo()
    finally:
        box.remove()
