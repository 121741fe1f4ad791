"""Atomic file replacement: a crash leaves the old file or the new one, never a torn mix."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

_umask = os.umask(0)
os.umask(_umask)  # read once, at import, on the main thread (umask is process-wide)
NEW_FILE_MODE = 0o666 & ~_umask


def atomic_write(path: Path, data: bytes, mode: int | None = NEW_FILE_MODE) -> None:
    """Write to a temp file beside `path`, fsync it, then os.replace it over `path`. `mode` is the
    file's mode (the existing file's, to keep it; default: what a new file gets under the umask,
    not mkstemp's 0600)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
