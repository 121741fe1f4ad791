"""File access that a crash or a concurrent change cannot tear or redirect.

`atomic_write` replaces a file through a temp file beside it: a crash leaves the old file or the
new one, never a torn mix. The temp file is created and renamed inside one open directory (its fd),
so both steps land in the same place even if the path is changed meanwhile.

`open_dir` / `open_nofollow` open a path that must not contain a symlink (a path already resolved
and checked, like the workspace's): each component is opened relative to the previous directory's
fd with O_NOFOLLOW, so a directory swapped for a symlink between the check and the use makes the
open fail (ELOOP/ENOTDIR) instead of following it. There is no gap between a check and a use.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

_umask = os.umask(0)
os.umask(_umask)  # read once, at import, on the main thread (umask is process-wide)
NEW_FILE_MODE = 0o666 & ~_umask

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW


class SymlinkInPath(OSError):
    """A component of a path that had no symlink has become one."""


def _open_component(name: str, dir_fd: int, create: bool) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        if not create:
            raise
    with contextlib.suppress(FileExistsError):  # another writer made it meanwhile: fine
        os.mkdir(name, 0o777, dir_fd=dir_fd)
    return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_dir(path: Path, *, create: bool = False) -> int:
    """An fd of the directory `path` (absolute), walked from / one component at a time without
    following a symlink; `create` makes missing directories (each inside its verified parent)."""
    if not path.is_absolute():
        raise ValueError(f"not an absolute path: {path}")
    fd = os.open("/", _DIR_FLAGS)
    try:
        for name in path.parts[1:]:
            if name in (".", ".."):
                raise ValueError(f"not a normalised path: {path}")
            try:
                child = _open_component(name, fd, create)
            except OSError as e:
                if e.errno in (errno.ENOTDIR, errno.ELOOP) and _is_link(name, fd):
                    raise SymlinkInPath(e.errno, f"{path}: {name} is a symlink") from None
                raise
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_nofollow(path: Path, flags: int, mode: int = 0o666) -> int:
    """os.open of `path` with no symlink followed anywhere in it (the last component included)."""
    parent = open_dir(path.parent)
    try:
        return os.open(path.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent)
    except OSError as e:
        if e.errno == errno.ELOOP and _is_link(path.name, parent):
            raise SymlinkInPath(e.errno, f"{path} is a symlink") from None
        raise
    finally:
        os.close(parent)


def atomic_write(path: Path, data: bytes, mode: int | None = NEW_FILE_MODE, *, nofollow: bool = False,
                 parents: bool = False, keep_mode: bool = False) -> None:
    """Write to a temp file beside `path`, fsync it, then rename it over `path`, both inside one
    directory fd. `mode` is the file's mode (default: what a new file gets under the umask, not
    mkstemp's 0600); `keep_mode` keeps an existing regular file's mode instead. `nofollow`: `path`
    is a resolved path, and no symlink may appear in it (see open_dir); `parents` creates missing
    directories. A symlink at `path` itself is replaced, never written through."""
    if nofollow:
        dir_fd = open_dir(path.parent, create=parents)
    else:
        if parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if keep_mode:
            with contextlib.suppress(FileNotFoundError):
                st = os.stat(path.name, dir_fd=dir_fd, follow_symlinks=False)
                if stat.S_ISREG(st.st_mode):
                    mode = stat.S_IMODE(st.st_mode)
        _replace(dir_fd, path.name, data, mode)
    finally:
        os.close(dir_fd)


def _replace(dir_fd: int, name: str, data: bytes, mode: int | None) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        tmp = f".{name}.{os.urandom(4).hex()}.tmp"
        try:
            fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
            if mode is not None:
                os.fchmod(out.fileno(), mode)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
