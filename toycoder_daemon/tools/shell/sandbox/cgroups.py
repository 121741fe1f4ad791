"""A cgroup v2 per sandboxed command, ended whole with `cgroup.kill` (Linux >= 5.14).

The daemon makes one under its own cgroup for each command (`create`); the launcher forks the shell
into it (contain.fork_into_cgroup) or the shell joins it before it is confined (`join`, which waits
for an RCU grace period), so everything the command starts is in it, and Landlock
then keeps the command from writing any cgroup file: it cannot move itself out. Ending the command
kills the cgroup whole (`kill`): the kernel signals every process in it, forks in flight included,
where a walk of the process tree races a process that forks faster than the walk kills. The
directory goes once it is empty (`remove`). Where the daemon cannot make one (no cgroup2 mount, a
cgroup it may not write, an older kernel) the walk (tree.py) is all there is.

Stdlib only: the launcher imports this on every command.
"""

from __future__ import annotations

import os
import time

from toycoder_daemon.tools.shell.sandbox import tree

SIMULATE_ENV = "TOYCODER_SANDBOX_SIMULATE_NO_CGROUP"
"""For tests only: when set to 1, the daemon behaves as where it cannot make cgroups."""
PREFIX = "toycoder-"
SWEEP_AGE = 60.0
"""The sweep leaves a cgroup younger than this (seconds): between its making and the shell's fork a
live daemon's is empty too, and a daemon in another PID namespace sharing this cgroup looks dead."""
_made = 0
_owner = (0, "")


def own_dir() -> str | None:
    """This process's cgroup v2 directory, None when no cgroup2 mount shows it."""
    try:
        with open("/proc/self/cgroup") as f:
            path = next((line[3:] for line in f.read().splitlines() if line.startswith("0::")), None)
        with open("/proc/self/mountinfo") as f:
            mounts = f.read().splitlines()
    except OSError:
        return None
    if path is None:
        return None
    for line in mounts:
        left, _, right = line.partition(" - ")
        if right.split(" ", 1)[0] != "cgroup2":
            continue
        fields = left.split()
        root, point = fields[3], fields[4]
        if root != "/" and path != root and not path.startswith(root + "/"):
            continue  # this mount shows another part of the hierarchy
        rest = path[len(root):] if root != "/" else path
        return point.rstrip("/") + "/" + rest.strip("/") if rest.strip("/") else point
    return None


def unusable() -> str | None:
    """Why commands cannot get a cgroup of their own here, or None. Tries it (makes one, removes it)."""
    if os.environ.get(SIMULATE_ENV) == "1":
        return f"disabled by {SIMULATE_ENV}"
    parent = own_dir()
    if parent is None:
        return "no cgroup v2 hierarchy is mounted where this process's cgroup is"
    if not os.access(os.path.join(parent, "cgroup.procs"), os.W_OK):
        return f"this user may not move processes in {parent}"
    trial = create(parent, "probe")
    if trial is None:
        return f"this user may not make a cgroup in {parent}"
    try:
        if not os.path.exists(os.path.join(trial, "cgroup.kill")):
            return "this kernel has no cgroup.kill (Linux < 5.14)"
    finally:
        try:  # noqa: SIM105 (contextlib costs start-up time on every command)
            os.rmdir(trial)
        except OSError:
            pass
    sweep(parent)
    return None


def sweep(parent: str, older_than: float = SWEEP_AGE) -> None:
    """Remove the empty cgroups that daemons no longer running left in `parent`. In a PID namespace
    a command's launcher dies with the daemon by SIGKILL (so that a stopped launcher still dies),
    and then nobody removes its command's cgroup, already empty when the namespace ended. A name
    holds its daemon's pid and start time: a pid another process took since is no longer its daemon."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    now = time.time()
    for name in names:
        parts = name[len(PREFIX):].split("-")
        if not name.startswith(PREFIX) or not parts[0].isdigit():
            continue
        daemon = tree.identify(int(parts[0]))
        if daemon is not None and (len(parts) < 3 or str(daemon[1]) == parts[1]):
            continue  # its daemon runs (a name without a start time: a process with its pid runs)
        path = os.path.join(parent, name)
        try:
            if now - os.stat(path).st_ctime >= older_than:
                os.rmdir(path)  # refused while a process is in it
        except OSError:
            pass


def _name(suffix: str) -> str:
    """`toycoder-<pid>-<start time>-<suffix>`: this process, told apart from a later one of its pid."""
    global _owner
    pid = os.getpid()
    if _owner[0] != pid:  # once per process (a forked child is another)
        me = tree.identify(pid)
        _owner = (pid, f"{PREFIX}{pid}-{me[1] if me else 0}")
    return f"{_owner[1]}-{suffix}"


def create(parent: str | None = None, name: str | None = None) -> str | None:
    """A fresh, empty cgroup `toycoder-<pid>-<start time>-<n>` below this process's own, None when
    refused."""
    global _made
    parent = parent or own_dir()
    if parent is None:
        return None
    for _ in range(100):  # a name taken by another cgroup of ours (a test's, say) is skipped
        _made += 1
        path = os.path.join(parent, _name(name or str(_made)))
        try:
            os.mkdir(path)
            return path
        except FileExistsError:
            if name:
                return None
        except OSError:
            return None
    return None


def join(path: str) -> bool:
    """Move the calling process into the cgroup; False when refused (the walk then still kills)."""
    try:
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write("0")
        return True
    except OSError:
        return False


def kill(path: str) -> None:
    """SIGKILL every process in the cgroup and its descendants (a cgroup already gone is fine)."""
    try:
        with open(os.path.join(path, "cgroup.kill"), "w") as f:
            f.write("1")
    except OSError:
        pass


def populated(path: str) -> bool:
    """Whether a live process is in it (zombies are not: the kernel counts them out at exit)."""
    try:
        with open(os.path.join(path, "cgroup.events")) as f:
            return "populated 1" in f.read()
    except OSError:
        return False  # gone


def remove(path: str, within: float = 5.0) -> bool:
    """Kill what is in the cgroup, wait for it to empty (up to `within` s), remove it; True when it
    is gone. The wait starts at 1 ms and doubles up to 32 ms."""
    if not os.path.isdir(path):
        return True
    kill(path)
    deadline, wait = time.monotonic() + within, 0.001
    while populated(path) and time.monotonic() < deadline:
        time.sleep(wait)
        wait = min(wait * 2, 0.032)
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True
