"""How file tools touch the disk: regular files only, no symlink race, never on the shared pool.

* Paths come from `Workspace.resolve` (resolved, checked to be inside the workspace) and are opened
  with `atomic.open_nofollow`/`open_dir`: a directory swapped for a symlink after the check makes
  the open fail instead of leaving the workspace.
* Anything that is not a regular file (a FIFO, a socket, a device) is refused before any I/O that
  could block: it is looked at with lstat, and opened O_NONBLOCK and checked with fstat.
* The blocking calls run on `FILE_IO`, a small pool of their own: a read stuck on a slow disk holds
  a file tool, never the default pool that session loading and the rest of the daemon use.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import os
import stat
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO, TypeVar

from toycoder_daemon.core.util.atomic import SymlinkInPath, open_dir, open_nofollow
from toycoder_daemon.tools.base import ToolError
from toycoder_daemon.tools.escape import escape_surrogates

T = TypeVar("T")

FILE_IO = ThreadPoolExecutor(max_workers=4, thread_name_prefix="toycoder-file-io")


async def off_loop(fn: Callable[..., T], *args: object) -> T:
    """fn(*args) on the file tools' own pool."""
    return await asyncio.get_running_loop().run_in_executor(FILE_IO, functools.partial(fn, *args))


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symlink"))


def kind(mode: int) -> str:
    """What a non-regular file is, for a refusal ("a FIFO (named pipe)")."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _raced(p: Path) -> ToolError:
    return ToolError(f"{escape_surrogates(p.name)}: the path changed while it was opened (a directory became a "
                     "symlink); refused")


def lstat(p: Path) -> os.stat_result | None:
    """`p`'s own status (None when it does not exist), no symlink followed on the way."""
    try:
        parent = open_dir(p.parent)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except SymlinkInPath:
        raise _raced(p) from None
    try:
        return os.stat(p.name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return None
    finally:
        os.close(parent)


def open_regular(p: Path) -> BinaryIO:
    """`p` open for reading; ToolError unless it is a regular file (FileNotFoundError when absent).
    Never blocks on a FIFO or a device: they are refused by lstat, and the open is O_NONBLOCK with
    an fstat check in case one was put there in between."""
    st = lstat(p)
    if st is None:
        raise FileNotFoundError(errno.ENOENT, "not found", str(p))
    if not stat.S_ISREG(st.st_mode):
        raise not_regular(p, st.st_mode)
    try:
        fd = open_nofollow(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except SymlinkInPath:
        raise _raced(p) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise not_regular(p, mode)
        os.set_blocking(fd, True)  # a regular file's reads never wait on a writer
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def not_regular(p: Path, mode: int) -> ToolError:
    if stat.S_ISDIR(mode):
        return ToolError(f"{escape_surrogates(p.name)} is a directory")
    return ToolError(f"{escape_surrogates(p.name)} is {kind(mode)}, not a regular file; file tools only read and "
                     "write regular files")


def open_directory(p: Path) -> int:
    """An fd of the directory `p` (ToolError when it is not one or the path was raced)."""
    try:
        return open_dir(p)
    except SymlinkInPath:
        raise _raced(p) from None
    except (FileNotFoundError, NotADirectoryError):
        raise ToolError(f"not a directory: {escape_surrogates(p.name)}") from None


def read_if_regular(p: Path) -> bytes | None:
    """The bytes of `p` (symlinks followed, like rg follows them) when it is a regular file, else
    None: for files the tools read on their own, like .gitignore, which must not block on a FIFO."""
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            os.set_blocking(fd, True)
            return f.read()
    except OSError:
        return None
