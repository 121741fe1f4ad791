"""Search tools: glob_search (file paths) and grep_search (file contents).

Both are gitignore-aware (see ignore.py for the exact rules), include hidden files, skip `.git`,
and never leave the workspace. ripgrep does the work when it is available (the `ripgrep` wheel
puts `rg` next to the interpreter); otherwise, or with TOYCODER_NO_RG=1 in the environment, a
pure-Python fallback walks the tree with the same rules. Both backends give the same output.

Globs (glob_search's pattern, grep_search's glob) have ripgrep's `--glob` syntax but never
re-include an ignored file (rg's `-g` would: it overrides ignore rules, and `-g '**'` would even
enter node_modules). So the tools let rg list or search the non-ignored files, narrowed by a
file-name type and a literal leading directory when the glob allows it, and filter the paths
with the same compiled glob as the fallback.

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
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Callable

from .base import ToolContext, ToolError, tool
from .files import _resolve
from .ignore import GlobError, IgnoreMatcher, PathGlob, compile_glob

GLOB_MAX_RESULTS = 200
"""Most paths glob_search lists."""
GREP_DEFAULT_RESULTS = 100
GREP_MAX_RESULTS = 1000
"""Hard upper bound on grep_search's max_results."""
LINE_MAX_CHARS = 300
"""A matching line longer than this is cut (and marked with TRUNCATED_MARK)."""
TRUNCATED_MARK = " [...]"
RG_MAX_COLUMNS = 4 * LINE_MAX_CHARS
"""rg previews longer lines; a preview keeps at least LINE_MAX_CHARS characters."""
DEFAULT_OUTPUT_MAX_BYTES = 30_000

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


# -- what to search -------------------------------------------------------------------------------

@dataclass
class _Plan:
    ws_root: Path
    asked: str
    """The workspace-relative path the call asked for ("" = the root)."""
    target: str
    """Workspace-relative directory or file rg/the walker starts from ("" = the root)."""
    target_is_dir: bool
    base: bytes
    """Workspace-relative directory globs are relative to, with a trailing slash (or b"")."""
    glob: PathGlob | None
    name_glob: str | None
    matcher: IgnoreMatcher
    empty: bool = False
    """The glob cannot match anything under the target (its literal directory is missing or ignored)."""

    def select(self, rels: list[bytes]) -> list[bytes]:
        """The workspace-relative paths the glob (relative to `base`) selects."""
        if self.glob is None:
            return rels
        return self.glob.select(rels, len(self.base))

    def accepts(self, rel: bytes) -> bool:
        return self.glob is None or self.glob.matches(rel[len(self.base):])


def _plan(ctx: ToolContext, path: str, glob: str | None) -> _Plan:
    p = _resolve(ctx, path or ".")
    root = ctx.workspace.root
    rel = ctx.workspace.relative(p)
    rel = "" if rel == "." else Path(rel).as_posix()
    if ".git" in rel.split("/"):
        raise ToolError(f"{path} is inside .git/, which search skips")
    if not p.exists():
        raise ToolError(f"not found: {path}")
    is_dir = p.is_dir()
    if not is_dir and not p.is_file():
        raise ToolError(f"not a regular file or directory: {path}")
    compiled = None
    if glob is not None and glob.strip():
        try:
            compiled = compile_glob(glob)
        except GlobError as e:
            raise ToolError(f"invalid glob {glob!r}: {e}") from None
    base_rel = rel if is_dir else rel.rpartition("/")[0]
    plan = _Plan(ws_root=root, asked=rel, target=rel, target_is_dir=is_dir,
                 base=os.fsencode(base_rel + "/") if base_rel else b"", glob=compiled,
                 name_glob=compiled.name_glob if compiled else None, matcher=IgnoreMatcher(root))
    if compiled and is_dir and compiled.dir_prefix:
        # Start below the glob's literal directories: they must be real, non-ignored directories,
        # or nothing under them is reachable and the answer is empty.
        cur = rel
        for comp in compiled.dir_prefix:
            nxt = f"{cur}/{comp}" if cur else comp
            d = root / nxt
            if comp == ".git" or d.is_symlink() or not d.is_dir() or plan.matcher.is_ignored(
                    d, True, check_parents=False):
                plan.empty = True
                return plan
            cur = nxt
        plan.target = cur
    return plan


# -- collecting results (shared by both backends, so their output is identical) -----------------

class _TopPaths:
    """The `limit` smallest paths of a stream, and how many there were."""

    def __init__(self, limit: int):
        self.limit = limit
        self.items: list[str] = []
        self.total = 0

    def add(self, path: str) -> None:
        self.extend([path])

    def extend(self, paths: list[str]) -> None:
        self.items.extend(paths)
        self.total += len(paths)
        if len(self.items) > 4 * self.limit + 1000:
            self.items.sort()
            del self.items[self.limit:]

    def result(self) -> list[str]:
        self.items.sort()
        return self.items[: self.limit]


def _parse_item(item: bytes | tuple[int, str]) -> tuple[int, bytes | str]:
    """rg's raw b"LINE:TEXT", or the fallback's (line, text), as (line, text)."""
    if isinstance(item, tuple):
        return item
    colon = item.find(b":")
    try:
        return int(item[:colon]), item[colon + 1:]
    except ValueError:
        return 0, item


class _Hits:
    """Matching lines per file: keeps only what may be among the first `limit` in (path, line)
    order, so memory stays bounded however many lines match, and counts all of them."""

    def __init__(self, limit: int):
        self.limit = limit
        self.files: dict[str, list] = {}
        self.counts: dict[str, int] = {}
        self.kept = 0
        self.cutoff: str | None = None
        """Once set, files sorting after it cannot be shown: they are only counted."""

    def add_file(self, path: str, items: list, count: int) -> None:
        """A file's first matching lines in line order (raw rg items or (line, text)), and how
        many lines of it matched in all."""
        if count <= 0:
            return
        self.counts[path] = self.counts.get(path, 0) + count
        if self.cutoff is not None and path > self.cutoff:
            return
        old = self.files.pop(path, None)
        if old is not None:  # rg writes a file's lines together; this is just in case
            self.kept -= len(old)
            items = sorted(map(_parse_item, old + items), key=lambda t: t[0])
        items = items[: self.limit]
        self.files[path] = items
        self.kept += len(items)
        if self.kept > 2 * self.limit + 1000:
            self._prune()

    def drop_file(self, path: str) -> None:
        self.kept -= len(self.files.pop(path, ()))
        self.counts.pop(path, None)

    def _prune(self) -> None:
        kept, n = {}, 0
        for p in sorted(self.files):
            if n >= self.limit:
                break
            kept[p] = self.files[p]
            n += len(kept[p])
        self.files, self.kept = kept, n
        if n >= self.limit:
            self.cutoff = max(kept)

    def result(self) -> tuple[list[tuple[str, int, bytes | str]], int]:
        out: list[tuple[str, int, bytes | str]] = []
        for p in sorted(self.files):
            for item in self.files[p]:
                if len(out) >= self.limit:
                    break
                lineno, text = _parse_item(item)
                out.append((p, lineno, text))
        return out, sum(self.counts.values())


def _display(s: str) -> str:
    """A path or line safe to send as JSON (undecodable bytes in file names become U+FFFD)."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _line_text(text: bytes | str) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text.rstrip("\r")
    if len(text) > LINE_MAX_CHARS:
        text = text[:LINE_MAX_CHARS] + TRUNCATED_MARK
    return _display(text)


def _budget(ctx: ToolContext) -> int:
    s = ctx.settings
    return getattr(s, "output_max_bytes", DEFAULT_OUTPUT_MAX_BYTES) if s is not None else DEFAULT_OUTPUT_MAX_BYTES


def _fit(lines: list[str], budget: int) -> list[str]:
    size = 0
    for i, line in enumerate(lines):
        size += len(line.encode("utf-8")) + 1
        if size > budget - 100 and i > 0:
            return lines[:i]
    return lines


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


# -- the pure-Python fallback ---------------------------------------------------------------------

def _walk(plan: _Plan, stop: threading.Event):
    if not plan.target_is_dir:
        yield os.fsencode(plan.target)
        return
    for rel in plan.matcher.walk_rel(plan.target or None):
        if stop.is_set():  # the tool call was cancelled: end the thread's work early
            return
        yield rel


async def _in_thread(func, *args) -> None:
    """Run a fallback in a thread; a cancelled call also stops the thread's walk."""
    stop = threading.Event()
    try:
        await asyncio.to_thread(func, *args, stop)
    except asyncio.CancelledError:
        stop.set()
        raise


def _py_files(plan: _Plan, top: _TopPaths, stop: threading.Event) -> None:
    rels = plan.select(list(_walk(plan, stop)))
    top.extend([rel.decode("utf-8", "surrogateescape") for rel in rels])


_NO_PREFILTER = re.compile(r"\\[AZ]|\(\?<?[=!]")
_NEWLINE_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\n")


def _compile_py(pattern: str, case_sensitive: bool) -> tuple[re.Pattern[str], re.Pattern[str] | None]:
    if "\n" in pattern or _NEWLINE_ESCAPE.search(pattern):
        raise ToolError(f"invalid regex {pattern!r}: the literal \"\\n\" is not allowed in a regex")
    flags = 0 if case_sensitive else re.IGNORECASE
    try:
        rx = re.compile(pattern, flags)
        # A whole-file search finds every file that has a matching line (and maybe more), unless
        # the pattern looks across line ends or at the ends of the whole text.
        pre = None if _NO_PREFILTER.search(pattern) else re.compile(pattern, flags | re.MULTILINE)
    except re.error as e:
        raise ToolError(f"invalid regex {pattern!r}: {e}") from None
    return rx, pre


def _read_text(path: bytes) -> str | None:
    """The text as rg sees it: None for a binary file (a NUL byte anywhere, after UTF-16 BOM
    decoding), a UTF-8 BOM removed, invalid UTF-8 replaced."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        text = data.decode("utf-16", "replace")
        return None if "\x00" in text else text
    if b"\x00" in data:
        return None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return data.decode("utf-8", "replace")


def _py_grep(plan: _Plan, rx: re.Pattern[str], pre: re.Pattern[str] | None, hits: _Hits,
             stop: threading.Event) -> None:
    root = os.fsencode(str(plan.ws_root))
    search = rx.search
    for rel in plan.select(list(_walk(plan, stop))):
        if stop.is_set():
            return
        text = _read_text(root + b"/" + rel)
        if not text or (pre is not None and pre.search(text) is None):
            continue
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        found = [(i, line) for i, line in enumerate(lines, 1) if search(line)]
        if found:
            hits.add_file(rel.decode("utf-8", "surrogateescape"), found[: hits.limit], len(found))


# -- the tools ----------------------------------------------------------------------------------

def _where(plan: _Plan) -> str:
    return f" in {_display(plan.asked)}" if plan.asked else ""


@tool(level="safe", title=lambda a: f"glob_search {a.get('pattern', '')}")
async def glob_search(
    ctx: ToolContext,
    pattern: Annotated[str, "Glob, e.g. '*.py' (a name at any depth), 'src/**/*.ts' (a path relative to `path`), "
                            "'*.{ts,tsx}'; a leading '!' inverts it"],
    path: Annotated[str, "Directory to search, relative to the workspace root"] = ".",
) -> str:
    """Find files by name or path pattern. Gitignored files are left out, hidden files are included,
    .git is skipped. Lists workspace-relative paths, sorted, up to 200; narrow the pattern or the path
    when there are more."""
    plan = _plan(ctx, path, pattern)
    top = _TopPaths(GLOB_MAX_RESULTS)
    if not plan.empty:
        rg = find_rg()
        ran = False
        if rg is not None:
            try:
                await _rg_files(rg, plan, top)
                ran = True
            except OSError:  # rg vanished or cannot run: the fallback still answers
                _rg_lookup.cache_clear()
        if not ran:
            top = _TopPaths(GLOB_MAX_RESULTS)
            await _in_thread(_py_files, plan, top)
    if top.total == 0:
        return f"no files match {pattern!r}{_where(plan)}"
    lines = _fit([_display(p) for p in top.result()], _budget(ctx))
    more = top.total - len(lines)
    return "\n".join(lines) + (f"\n... and {more} more (narrow the pattern)" if more else "")


@tool(level="safe", title=lambda a: f"grep_search {a.get('pattern', '')}")
async def grep_search(
    ctx: ToolContext,
    pattern: Annotated[str, "Regular expression (Rust/ripgrep syntax; a plain word works too), matched per line"],
    path: Annotated[str, "File or directory to search, relative to the workspace root"] = ".",
    glob: Annotated[str | None, "Only files matching this glob, e.g. '*.py' or 'src/**/*.ts'; '!*.md' excludes"] = None,
    case_sensitive: Annotated[bool, "Match case exactly (false: ignore case)"] = True,
    max_results: Annotated[int, "Most matching lines to show (at most 1000)"] = GREP_DEFAULT_RESULTS,
) -> str:
    """Search file contents with a regular expression. Gitignored and binary files are skipped, hidden
    files are searched. Each match is `path:line: text` (long lines cut), sorted by path then line;
    says how many more matched when there are more than max_results."""
    if not pattern:
        raise ToolError("empty pattern")
    limit = max(1, min(int(max_results), GREP_MAX_RESULTS))
    plan = _plan(ctx, path, glob)
    hits = _Hits(limit)
    if not plan.empty:
        rg = find_rg()
        ran = False
        if rg is not None:
            try:
                await _rg_grep(rg, plan, pattern, case_sensitive, hits)
                ran = True
            except OSError:
                _rg_lookup.cache_clear()
        if not ran:
            rx, pre = _compile_py(pattern, case_sensitive)
            hits = _Hits(limit)
            await _in_thread(_py_grep, plan, rx, pre, hits)
    shown, total = hits.result()
    if total == 0:
        only = f" in files matching {glob!r}" if glob else ""
        return f"no matches for {pattern!r}{_where(plan)}{only}"
    lines = _fit([f"{_display(p)}:{n}: {_line_text(t)}" for p, n, t in shown], _budget(ctx))
    more = total - len(lines)
    return "\n".join(lines) + (f"\n... {more} more matches not shown (narrow the search)" if more else "")
