"""One writer at a time per path, across every session and daemon of the person: an exclusive
fcntl lock on a lock file of that path under the data dir (`<data dir>/locks/<sha256(path)[:32]>`).

The file tools take it around "read the base, compute the change, check, replace", and restores
around their writes, so two of them never interleave on one file. Writers that do not take it (the
person's editor, a build) are caught by the identity check (`Identity`): a file replaced only if it
is still the one the change was computed from. The lock files stay (one small file per path
written, reused); a lock dies with its holder, so a killed daemon never leaves one held.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from toycoder_daemon.config.model import data_dir

WAIT = 30.0
"""How long a writer waits for another one's lock on the same path before giving up."""


class PathBusy(Exception):
    """The path's lock stayed held for WAIT seconds."""


@contextlib.contextmanager
def path_lock(p: Path) -> Iterator[None]:
    """Hold the lock of `p` (an absolute, resolved path) for the block."""
    locks = data_dir() / "locks"
    locks.mkdir(mode=0o700, parents=True, exist_ok=True)
    name = hashlib.sha256(os.fsencode(p)).hexdigest()[:32]
    fd = os.open(locks / name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        deadline = time.monotonic() + WAIT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise PathBusy(str(p)) from None
                time.sleep(0.005)  # another writer's replace takes milliseconds
        yield
    finally:
        os.close(fd)  # releases the lock


@dataclass(frozen=True)
class Identity:
    """Which file, and which content, a path held when a change was computed from it."""

    inode: int
    size: int
    mtime_ns: int
    sha256: str

    @classmethod
    def of(cls, st: os.stat_result, data: bytes) -> Identity:
        return cls(st.st_ino, st.st_size, st.st_mtime_ns, hashlib.sha256(data).hexdigest())
