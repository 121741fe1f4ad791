"""Finding and killing the processes below one (Linux /proc, pidfds), without naming a stranger.

A pid read from /proc can be reused between the read and the kill: the process exits, its parent
reaps it, and an unrelated process gets the number (a root daemon's kill would then succeed). So
each process found is remembered with its start time, and signalled only through a pidfd opened
afterwards whose process still has that start time: a pidfd names one process for good, so if the
pid was reused before the open the start time differs, and after it the signal fails (ESRCH).

Stdlib only: the launcher imports this on every command.
"""

from __future__ import annotations

import os
import select
import signal
import time

TYPE_CHECKING = False  # mypy reads the block below; importing typing costs start-up time per command
if TYPE_CHECKING:
    from collections.abc import Iterable

    Found = tuple[int, int]  # (pid, start time in clock ticks since boot), from /proc/PID/stat

FIRST_WAIT = 0.001
MAX_WAIT = 0.032
"""The wait between kill passes starts at FIRST_WAIT and doubles up to MAX_WAIT: repeating at once
burned a core while a forking process was being chased."""


def _stat(pid: int | str) -> tuple[bytes, int, int] | None:
    """(state, parent pid, start time) of a process, from one read; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[19])


def _is_zombie(pid: int) -> bool:
    """Dead for good: every thread is a zombie. A main thread that ended while other threads run
    shows "Z" in /proc/PID/stat, yet the process lives (its threads can fork) and cannot be reaped
    until they end, so it must still be killed."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True  # gone: as good as dead
    for tid in tasks:
        found = _stat(f"{pid}/task/{tid}")
        if found is not None and found[0] not in (b"Z", b"X"):
            return False
    return True


def identify(pid: int, parent: int | None = None) -> Found | None:
    """(pid, start time) when the process lives (and, with `parent`, is that process's child), None
    when it is gone, a zombie or another's child."""
    found = _stat(pid)
    if found is None or (parent is not None and found[1] != parent):
        return None
    if found[0] in (b"Z", b"X") and _is_zombie(pid):
        return None
    return pid, found[2]


def _children(pid: int) -> list[int] | None:
    """The children of `pid` (zombies included), [] when it is gone, None when this kernel has no
    /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found.extend(int(c) for c in f.read().split())
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread ended meanwhile
            return None
        except OSError:
            continue
    return found


def descendants(root: int, start: int | None = None) -> list[Found]:
    """Every live process below `root` (parents before children), with its start time. It follows
    each process's own children list, not a walk of all /proc: orphans are handed to the subreaper,
    so a process that forks and exits every millisecond is seen microseconds after the list is read,
    where a walk of a busy /proc took longer than its pid lived. Zombies are left out: they cannot
    fork, and their children were already handed up to a (sub)reaper.

    A pid is only a number, so a list is taken as a process's own only when that process (its start
    time; `start` for the root, None when the root is the caller itself) is still there after the
    read, and a child only when its own stat names that parent: a pid that changed hands meanwhile
    never brings a stranger, nor a stranger's children, into the tree. A child being handed up to
    the subreaper right then is found below it on the next pass."""
    found: list[Found] = []
    todo: list[tuple[int, int | None]] = [(root, start)]
    while todo:
        pid, born = todo.pop()
        kids = _children(pid)
        if kids is None:
            return _walk(root) if start is None or _started(root) == start else []
        if born is not None and _started(pid) != born:
            continue
        for child in kids:
            live = identify(child, pid)
            if live is not None:
                found.append(live)
                todo.append(live)
    return found


def _started(pid: int) -> int | None:
    found = _stat(pid)
    return None if found is None else found[2]


def _walk(root: int) -> list[Found]:
    """descendants() from one walk of /proc, for kernels without children lists."""
    children: dict[int, list[Found]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if fields[0] in (b"Z", b"X") and _is_zombie(int(name)):
            continue
        children.setdefault(int(fields[1]), []).append((int(name), int(fields[19])))
    found: list[Found] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child[0])
    return found


def signal_found(found: Iterable[Found], sig: int) -> list[int]:
    """Send `sig` to each process found that is still the one found; returns a pidfd for each one
    signalled (the caller closes them; one becomes readable when its process exits). A process gone
    meanwhile, or whose pid now names another process, is skipped."""
    fds: list[int] = []
    for pid, start in found:
        try:
            fd = os.pidfd_open(pid)
        except OSError:  # gone (ESRCH); or no pidfds (Linux < 5.3): never a bare kill by pid
            continue
        try:
            # Read after the open: the same start time now means the pidfd names the process found.
            if _started(pid) != start:
                os.close(fd)
                continue
            signal.pidfd_send_signal(fd, sig)
        except OSError:  # it ended between the check and the signal: the pidfd knows, ESRCH
            os.close(fd)
            continue
        fds.append(fd)
    return fds


def wait_any(fds: list[int], seconds: float) -> None:
    """Wait until one of the pidfds' processes has exited, or `seconds` pass; closes them."""
    try:
        if not fds:
            time.sleep(seconds)
            return
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        poller.poll(max(1, round(seconds * 1000)))
    finally:
        close(fds)


def close(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


def kill_below(root: int, start: int, wait: float) -> bool:
    """One pass: KILL every live process below `root` (the process of that start time), then wait up
    to `wait` seconds for one of them to exit (so the next pass does not find it again). False when
    there was nothing to kill."""
    found = descendants(root, start)
    if not found:
        return False
    wait_any(signal_found(found, signal.SIGKILL), wait)
    return True


def next_wait(wait: float) -> float:
    return min(wait * 2, MAX_WAIT)
