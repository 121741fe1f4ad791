"""Namespaces, the command's mount table and killing what a command left behind (Linux, via ctypes).

Used by the launcher only, in a process that exists to run one command, so changing its own
namespaces and signal dispositions is safe.
"""

from __future__ import annotations

import ctypes
import os
import signal

from toycoder_daemon.tools.shell.sandbox import cgroups, tree

TYPE_CHECKING = False  # as in launch.py: no typing import at every command's start-up
if TYPE_CHECKING:
    from collections.abc import Sequence

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
SYS_CLONE3 = 435  # the same on every architecture (the generic syscall table), as are these:
SYS_OPEN_TREE, SYS_MOVE_MOUNT, SYS_MOUNT_SETATTR = 428, 429, 442
OPEN_TREE_CLONE, AT_RECURSIVE, AT_EMPTY_PATH, AT_FDCWD = 1, 0x8000, 0x1000, -100
MOVE_MOUNT_F_EMPTY_PATH = 4
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 1, 2, 4
PRIVATE_PTS = "/dev/pts"
"""Writable for the command only once it is a devpts instance of its own (confine_mounts)."""
CLONE_INTO_CGROUP = 0x200000000
# statvfs flags that a remount inside a user namespace must keep (they are locked there).
_KEEP = {os.ST_NOSUID: MS_NOSUID, os.ST_NODEV: MS_NODEV, os.ST_NOEXEC: MS_NOEXEC, os.ST_NOATIME: MS_NOATIME,
         os.ST_NODIRATIME: MS_NODIRATIME, os.ST_RELATIME: MS_RELATIME}


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def prctl(option: int, value: int) -> None:
    _check(_libc().prctl(option, value, 0, 0, 0), f"prctl({option})")


class _CloneArgs(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "flags", "pidfd", "child_tid", "parent_tid", "exit_signal", "stack", "stack_size", "tls", "set_tid",
        "set_tid_size", "cgroup")]


def fork_into_cgroup(path: str) -> int | None:
    """fork(), the child born in the cgroup at `path` (clone3 with CLONE_INTO_CGROUP, Linux 5.7);
    None when refused (the caller then forks and joins). Moving a process in afterwards waits for an
    RCU grace period (~10 ms a command here: bench/README.md), this does not.

    It does what os.fork() does around the syscall: Python's before- and after-fork work (the import
    lock, the at-fork hooks, signals tripped in the parent not run again in the child) through its
    public API, the GIL held throughout (a PyDLL call does not release it). What it skips is libc's
    own fork work (its at-fork handlers, resetting locks other threads held), which only matters when
    other threads exist: so it refuses unless this is the process's only thread, as the launcher
    is. The child must still only set itself up and exec or _exit."""
    try:
        if len(os.listdir("/proc/self/task")) != 1:
            return None
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    api, libc = ctypes.pythonapi, ctypes.PyDLL(None, use_errno=True)
    for hook in (api.PyOS_BeforeFork, api.PyOS_AfterFork_Child, api.PyOS_AfterFork_Parent):
        hook.restype = None
    libc.syscall.restype = ctypes.c_long
    args = _CloneArgs(flags=CLONE_INTO_CGROUP, exit_signal=signal.SIGCHLD, cgroup=fd)
    api.PyOS_BeforeFork()
    pid = int(libc.syscall(ctypes.c_long(SYS_CLONE3), ctypes.byref(args), ctypes.c_size_t(ctypes.sizeof(args))))
    if pid == 0:
        api.PyOS_AfterFork_Child()
    else:
        api.PyOS_AfterFork_Parent()
    os.close(fd)  # in both processes
    return pid if pid >= 0 else None


def writer_gone(fd: int) -> bool:
    """Whether every write end of the pipe `fd` reads from is closed (its holder has exited)."""
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 1) == b""
    except BlockingIOError:  # open and empty
        return False


def enter_namespaces(*, network: bool) -> set[str]:
    """Unshare PID, mount, SysV IPC and (unless network) network namespaces; an unprivileged process
    takes a user namespace too, mapping itself to its own ids. Returns the names entered, empty when the
    kernel or its settings refuse (the caller then falls back).

    Root takes no user namespace: with the network on it keeps low ports and raw sockets, and it
    owns root's files. So a root daemon's command keeps root's capabilities less those caps.py
    cuts (every one that overrides file modes or ownership among them): docs/security.md."""
    flags = CLONE_NEWPID | CLONE_NEWNS | (0 if network else CLONE_NEWNET)
    uid, gid = os.geteuid(), os.getegid()
    as_user = uid != 0
    if as_user:
        flags |= CLONE_NEWUSER
    libc = _libc()
    # Its own SysV IPC namespace, else it attaches to (and overwrites) the host's shared memory
    # segments, semaphores and message queues of its uid. A kernel without IPC namespaces
    # (CONFIG_IPC_NS off) refuses the whole call: then the others still.
    ipc = libc.unshare(flags | CLONE_NEWIPC) == 0
    if not ipc and libc.unshare(flags) != 0:
        return set()
    if as_user:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
    # Our mounts must not propagate back to the daemon's namespace.
    _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount private /")
    entered = {"pid", "mount", *(["ipc"] if ipc else [])}
    if not network:
        entered.add("network")
    return entered


def bind_readonly(path: str) -> None:
    """Make `path` read-only in this mount namespace (a bind mount of itself, remounted ro)."""
    libc = _libc()
    raw = os.fsencode(path)
    _check(libc.mount(raw, raw, None, MS_BIND | MS_REC, None), f"bind {path}")
    keep = os.statvfs(path).f_flag
    extra = sum(ms for st, ms in _KEEP.items() if keep & st)
    _check(libc.mount(None, raw, None, MS_REMOUNT | MS_BIND | MS_RDONLY | extra, None), f"remount {path} read-only")


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64)]


def _syscall(libc: ctypes.CDLL, number: int, *args: object) -> int:
    result = int(libc.syscall(ctypes.c_long(number), *args))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"syscall {number}: {os.strerror(err)}")
    return result


def _set_attr(libc: ctypes.CDLL, fd: int, path: bytes, flags: int, attr_set: int) -> None:
    attr = _MountAttr(attr_set, 0, 0, 0)
    _syscall(libc, SYS_MOUNT_SETATTR, ctypes.c_int(fd), path, ctypes.c_uint(flags), ctypes.byref(attr),
             ctypes.c_size_t(ctypes.sizeof(attr)))


def hide(path: str) -> None:
    """Make `path` unreachable in this mount namespace: a socket file gets /dev/null bound over it
    (connect() then fails), a directory an empty read-only tmpfs. A missing path is left alone."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    libc, raw = _libc(), os.fsencode(path)
    if stat.S_ISDIR(mode):
        _check(libc.mount(b"tmpfs", raw, b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, b"mode=0755,size=4k"),
               f"hide {path}")
    elif stat.S_ISSOCK(mode):
        _check(libc.mount(b"/dev/null", raw, None, MS_BIND, None), f"hide {path}")


def confine_mounts(writable: list[str], readonly: list[str], hidden: Sequence[str] = ()) -> None:
    """Give this process a mount namespace of its own (the launcher and the init keep theirs, where
    they read the host's /proc and remove the command's cgroup) in which, as bubblewrap does:

    - every mount is read-only (EROFS for every write, chmod, chown, utimes and setxattr included),
      but copies of the writable roots (directories and files; device nodes need no copy: a
      read-only mount does not stop writing to one) moved back over their paths, `nosuid,nodev`;
    - `readonly` paths (the writable roots' .git) are bound read-only again inside them;
    - `hidden` sockets and directories (policy.HIDDEN) cannot be connected to (`hide`);
    - /dev/pts is a devpts instance of its own (no other terminal of the machine is there; /dev/ptmx
      makes ptys in it) and /proc a procfs of this PID namespace, read-only, so the daemon's maps and
      open files are not there to read.

    Must run inside the new PID namespace (the procfs shows the caller's), after enter_namespaces.
    Raises OSError."""
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    _check(libc.unshare(CLONE_NEWNS), "unshare mount namespace")
    roots = []
    for path in sorted(set(writable), key=len):  # parents first: a nested root is moved onto its parent's copy
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue  # a root that does not exist cannot be written to anyway
        if (mode & 0o170000) in (0o020000, 0o060000) or path == "/":
            continue
        raw = os.fsencode(path)
        # A copy of the tree (with its submounts), taken while it is still writable.
        fd = _syscall(libc, SYS_OPEN_TREE, ctypes.c_int(AT_FDCWD), raw,
                      ctypes.c_uint(OPEN_TREE_CLONE | AT_RECURSIVE | os.O_CLOEXEC))
        roots.append((fd, raw))
    try:
        if "/" not in writable:  # else nothing is outside (the workspace is `/`, or `/` was listed)
            _set_attr(libc, AT_FDCWD, b"/", AT_RECURSIVE, MOUNT_ATTR_RDONLY)
        for fd, raw in roots:
            _set_attr(libc, fd, b"", AT_EMPTY_PATH | AT_RECURSIVE, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
            _syscall(libc, SYS_MOVE_MOUNT, ctypes.c_int(fd), b"", ctypes.c_int(AT_FDCWD), raw,
                     ctypes.c_uint(MOVE_MOUNT_F_EMPTY_PATH))
    finally:
        for fd, _ in roots:
            os.close(fd)
    for path in readonly:
        bind_readonly(path)
    for path in hidden:
        hide(path)
    _check(libc.mount(b"devpts", PRIVATE_PTS.encode(), b"devpts", MS_NOSUID | MS_NOEXEC,
                      b"newinstance,ptmxmode=0666,mode=620"), "mount a devpts instance")
    _check(libc.mount(b"/dev/pts/ptmx", b"/dev/ptmx", None, MS_BIND, None), "bind /dev/ptmx")
    _check(libc.mount(b"proc", b"/proc", b"proc", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")


def kill_and_reap(*, pid_namespace_init: bool, cgroup: str | None = None) -> None:
    """Kill everything this process started and reap it. With the command's cgroup (cgroups.py)
    that is one write, forks in flight included; then, and without one, as the init of a PID
    namespace `kill(-1)` reaches exactly the namespace; otherwise this process is a subreaper and
    walks its tree, signalling through pidfds (tree.py: a reused pid is never signalled). The walk
    stays in cgroup mode too: it costs one pass when the cgroup killed everything, and catches a
    shell that could not join it. The emptied cgroup is removed."""
    if cgroup:
        cgroups.kill(cgroup)
    wait = tree.FIRST_WAIT
    while True:
        fds: list[int] = []
        if pid_namespace_init:
            try:  # noqa: SIM105 (contextlib costs start-up time on every command)
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass
        else:
            fds = tree.signal_found(tree.descendants(os.getpid()), signal.SIGKILL)
        # Reap everything already dead before walking again: one reap per walk is quadratic when the
        # command left thousands of zombies (each walk then takes ~0.1 s).
        reaped = 0
        while True:
            try:
                pid = os.waitpid(-1, os.WNOHANG)[0]
            except ChildProcessError:  # nothing left to reap: every descendant is gone
                tree.close(fds)
                if cgroup:
                    cgroups.remove(cgroup, within=1.0)
                return
            if not pid:
                break
            reaped += 1
        if reaped:
            tree.close(fds)
            wait = tree.FIRST_WAIT
        else:  # killed but not yet dead: wait for one to exit, then kill again in case one forked
            tree.wait_any(fds, wait)
            wait = tree.next_wait(wait)
