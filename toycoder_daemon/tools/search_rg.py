"""The ripgrep backend of the search tools: finding rg, its flags, and running it.

The `ripgrep` wheel puts `rg` next to the interpreter; TOYCODER_NO_RG=1 disables it.

Ignore files rg must not read itself: `--no-ignore-parent` keeps it from reading those above the
workspace (a dotfiles repo with `*` in ~/.gitignore would hide everything), `--no-ignore-exclude`
from reading nested repositories' .git/info/exclude (and from ranking them above .gitignore files
when it searches a sub-directory). What it still needs, the workspace's exclude file and, for a
sub-directory, the .gitignore rules of the directories above it, goes in one `--ignore-file`,
rebased to the workspace root, lowest precedence first.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
import shutil
import sys
import sysconfig
import tempfile
from collections.abc import Callable
from pathlib import Path

from .base import ToolError
from .search_common import LINE_MAX_CHARS, _Hits, _Plan, _TopPaths

RG_MAX_COLUMNS = 4 * LINE_MAX_CHARS
"""rg previews longer lines; a preview keeps at least LINE_MAX_CHARS characters."""

RG_COMMON = (
    "--no-config", "--hidden", "--no-require-git", "--no-ignore-global", "--no-ignore-dot",
    "--no-ignore-parent", "--no-ignore-exclude", "--glob", "!.git", "--color", "never", "--no-messages", "--no-ignore-messages",
)
"""Flags of every rg run: the same file set as IgnoreMatcher.walk_rel."""
RG_GREP = ("--line-number", "--with-filename", "--no-heading", "--null",
           "--max-columns", str(RG_MAX_COLUMNS), "--max-columns-preview")
_TYPE_NAME = "toycoderglob"
_BINARY_RE = re.compile(rb"^(.*): (?:WARNING: stopped searching binary file after match|binary file matches) \(found ")


# -- finding rg ---------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _rg_lookup() -> str | None:
    candidates = [Path(sys.executable).parent / "rg"]
    try:
        candidates.append(Path(sysconfig.get_path("scripts")) / "rg")
    except (KeyError, TypeError):
        pass
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    return shutil.which("rg")


def find_rg() -> str | None:
    """The rg executable, or None when missing or disabled with TOYCODER_NO_RG=1."""
    if os.environ.get("TOYCODER_NO_RG", "").strip() not in ("", "0"):
        return None
    return _rg_lookup()


# -- running rg ----------------------------------------------------------------------------------

async def _run_rg(args: list[str], cwd: Path, on_lines: Callable[[list[bytes]], None]) -> tuple[int, str]:
    """Run rg, feeding complete stdout lines to on_lines as they arrive; returns (exit code,
    stderr). Cancelling the caller kills rg."""
    proc = await asyncio.create_subprocess_exec(
        *args, cwd=str(cwd), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None

    async def read_err() -> bytes:
        assert proc.stderr is not None
        data = b""
        while chunk := await proc.stderr.read(65536):
            if len(data) < 65536:
                data += chunk
        return data

    err_task = asyncio.ensure_future(read_err())
    try:
        rest = b""
        while chunk := await proc.stdout.read(1 << 17):
            data = rest + chunk
            cut = data.rfind(b"\n")
            if cut < 0:
                rest = data
                continue
            rest = data[cut + 1:]
            on_lines(data[:cut].split(b"\n"))
        if rest:
            on_lines([rest])
        code = await proc.wait()
        err = await err_task
    except BaseException:
        if proc.returncode is None:
            try:
                proc.kill()
            except ProcessLookupError:
                pass
            try:
                await asyncio.shield(proc.wait())
            except BaseException:
                pass
        err_task.cancel()
        raise
    return code, err.decode("utf-8", "replace").strip()


def _rg_error(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith("error:"):
            return ln[len("error:"):].strip()
    first = lines[0] if lines else "rg failed"
    return first[4:] if first.startswith("rg: ") else first


def _rg_narrowing(plan: _Plan, temps: list[str]) -> list[str]:
    """--type-add/--type and --ignore-file arguments for a plan."""
    args: list[str] = []
    if plan.name_glob:
        args += ["--type-add", f"{_TYPE_NAME}:{plan.name_glob}", "--type", _TYPE_NAME]
    if plan.target_is_dir:
        rules = plan.matcher.rules_above(plan.ws_root / plan.target)
        if rules:
            fd, name = tempfile.mkstemp(prefix="toycoder-rg-", suffix=".ignore")
            with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write("\n".join(rules) + "\n")
            temps.append(name)
            args += ["--ignore-file", name]
    return args


def _rg_target(plan: _Plan) -> tuple[str, bytes]:
    """The path argument for rg and the prefix to strip from what it prints."""
    return (plan.target, b"") if plan.target else (".", b"./")


async def _rg_files(rg: str, plan: _Plan, top: _TopPaths) -> None:
    temps: list[str] = []
    try:
        target, strip = _rg_target(plan)
        args = [rg, "--files", *RG_COMMON, *_rg_narrowing(plan, temps), "--", target]
        n = len(strip)

        def on_lines(lines: list[bytes]) -> None:
            if n:
                lines = [line[n:] if line.startswith(strip) else line for line in lines if line]
            else:
                lines = [line for line in lines if line]
            top.extend([line.decode("utf-8", "surrogateescape") for line in plan.select(lines)])

        code, err = await _run_rg(args, plan.ws_root, on_lines)
        if code == 2 and top.total == 0 and err:
            raise ToolError(f"search failed: {_rg_error(err)}")
    finally:
        for t in temps:
            os.unlink(t)


async def _rg_grep(rg: str, plan: _Plan, pattern: str, case_sensitive: bool, hits: _Hits) -> None:
    temps: list[str] = []
    try:
        target, strip = _rg_target(plan)
        args = [rg, *RG_COMMON, *RG_GREP, "--case-sensitive" if case_sensitive else "--ignore-case",
                *_rg_narrowing(plan, temps), "-e", pattern, "--", target]
        n = len(strip)
        # rg writes each file's lines together and in order: collect them per file (the raw
        # "LINE:TEXT" parts, parsed only if shown) until the path changes.
        state: list = [None, b"", []]  # path, path + NUL as printed, raw lines
        binary: set[bytes] = set()

        def flush() -> None:
            path, _, raw = state
            if path is not None and raw and path not in binary and plan.accepts(path):
                hits.add_file(path.decode("utf-8", "surrogateescape"), raw[: hits.limit], len(raw))
            state[0], state[1], state[2] = None, b"", []

        def on_lines(lines: list[bytes]) -> None:
            prefix, raw = state[1], state[2]
            plen = len(prefix)
            for line in lines:
                if prefix and line.startswith(prefix):
                    raw.append(line[plen:])
                    continue
                nul = line.find(b"\0")
                if nul < 0:  # "PATH: binary file matches (...)" or "PATH: WARNING: stopped searching binary file"
                    m = _BINARY_RE.match(line)
                    if m:
                        path = m.group(1)
                        path = path[n:] if n and path.startswith(strip) else path
                        binary.add(path)
                        if path != state[0]:
                            hits.drop_file(path.decode("utf-8", "surrogateescape"))
                    continue
                flush()
                path = line[:nul]
                state[0] = path[n:] if n and path.startswith(strip) else path
                state[1] = prefix = line[: nul + 1]
                plen = len(prefix)
                raw = state[2]
                raw.append(line[plen:])

        code, err = await _run_rg(args, plan.ws_root, on_lines)
        flush()
        if code == 2 and not hits.counts and err:
            reason = _rg_error(err)
            if "regex" in err or "literal" in err or "look-around" in err or "backreferences" in err:
                raise ToolError(f"invalid regex {pattern!r}: {reason}")
            raise ToolError(f"search failed: {reason}")
    finally:
        for t in temps:
            os.unlink(t)
