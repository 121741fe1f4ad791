"""Finding and running ripgrep.

rg is a hard dependency: the pinned `ripgrep` wheel (14.1.0; wheels for Linux and macOS on x86_64
and arm64, musllinux and Windows) puts `rg` next to the interpreter. Without it the tools that need
it fail with a clear error.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

from toycoder_daemon.core.util import secrets
from toycoder_daemon.tools.base import ToolError

RG_COMMON = (
    "--no-config", "--hidden", "--no-require-git", "--no-ignore-global", "--no-ignore-dot",
    "--no-ignore-parent", "--no-ignore-exclude", "--color", "never", "--no-messages", "--no-ignore-messages",
)
"""Flags of every rg run (here, not in rg_runs, so that the workspace listing can start without
importing the searches): gitignore-aware (rules from the workspace only), hidden files included."""
SKIP_GIT = ("--glob", "!.git")
"""Last among the globs, so that it wins over the caller's (`-g '**'` must not enter .git)."""


# -- finding rg ---------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _lookup() -> str | None:
    candidates = [Path(sys.executable).parent / "rg"]
    with contextlib.suppress(KeyError, TypeError):
        candidates.append(Path(sysconfig.get_path("scripts")) / "rg")
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    return shutil.which("rg")


def find_rg() -> str | None:
    """The rg executable: next to the interpreter (the ripgrep wheel), else on PATH."""
    return _lookup()


def _require_rg() -> str:
    rg = find_rg()
    if rg is None:
        raise ToolError("ripgrep (rg) is not installed: the toycoder daemon needs the `ripgrep` package "
                        "of its dependencies (reinstall the daemon)")
    return rg


# -- running rg ----------------------------------------------------------------------------------

async def run_rg(args: list[str], cwd: Path, on_lines: Callable[[list[bytes]], None],
                 on_err_lines: Callable[[list[bytes]], None] | None = None, *, sep: bytes = b"\n") -> tuple[int, str]:
    """Run rg (found by find_rg) with `args`, feeding complete stdout lines to on_lines as they
    arrive (and stderr lines to on_err_lines, if given); returns (exit code, the first 64 KiB of
    stderr). `sep`: what ends a stdout "line" (b"\0" for `--files --null`, whose paths may hold
    newlines). Cancelling the caller kills rg. A missing or unrunnable rg raises ToolError."""
    rg = _require_rg()
    try:
        proc = await asyncio.create_subprocess_exec(
            rg, *args, cwd=str(cwd), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=secrets.child_env(),  # no child of ours gets the daemon's keys
        )
    except OSError as e:
        _lookup.cache_clear()  # it may have moved: look again next time
        raise ToolError(f"cannot run ripgrep ({rg}): {e.strerror or e}") from None
    assert proc.stdout is not None and proc.stderr is not None

    async def pump(stream: asyncio.StreamReader, sink: Callable[[list[bytes]], None] | None,
                   keep: int = 0, sep: bytes = b"\n") -> bytes:
        head, rest = b"", b""
        while chunk := await stream.read(1 << 17):
            if len(head) < keep:
                head += chunk
            if sink is None:
                continue
            data = rest + chunk
            cut = data.rfind(sep)
            if cut < 0:
                rest = data
                continue
            rest = data[cut + 1:]
            sink(data[:cut].split(sep))
        if rest and sink is not None:
            sink([rest])
        return head

    err_task = asyncio.ensure_future(pump(proc.stderr, on_err_lines, keep=65536))
    try:
        await pump(proc.stdout, on_lines, sep=sep)
        code = await proc.wait()
        err = await err_task
    except BaseException:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(BaseException):  # reap it even when cancelled again
                await asyncio.shield(proc.wait())
        err_task.cancel()
        raise
    return code, err.decode("utf-8", "replace").strip()


def rg_error(stderr: str) -> str:
    """The reason in rg's stderr, without its "rg: " / "error:" decoration."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith("error:"):
            return ln[len("error:"):].strip()
    first = lines[0] if lines else "rg failed"
    return first[4:] if first.startswith("rg: ") else first
