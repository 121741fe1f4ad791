"""Search tools: glob_search (file paths) and grep_search (file contents).

Both are gitignore-aware (see ignore.py for the exact rules), include hidden files, skip `.git`,
and never leave the workspace. ripgrep does the work when it is available (search_rg.py);
otherwise, or with TOYCODER_NO_RG=1 in the environment, a pure-Python fallback (search_py.py)
walks the tree with the same rules. Both fill the same collectors (search_common.py), so both
backends give the same output.

Globs (glob_search's pattern, grep_search's glob) have ripgrep's `--glob` syntax but never
re-include an ignored file (rg's `-g` would: it overrides ignore rules, and `-g '**'` would even
enter node_modules). So the tools let rg list or search the non-ignored files, narrowed by a
file-name type and a literal leading directory when the glob allows it, and filter the paths
with the same compiled glob as the fallback.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

from .. import secrets
from .base import ToolContext, ToolError, tool
from .files import _resolve
from .ignore import GlobError, IgnoreMatcher, compile_glob
from .search_common import LINE_MAX_CHARS, TRUNCATED_MARK, _Hits, _Plan, _TopPaths
from .search_py import _compile_py, _in_thread, _py_files, _py_grep
from .search_rg import _rg_files, _rg_grep, _rg_lookup, find_rg

GLOB_MAX_RESULTS = 200
"""Most paths glob_search lists."""
GREP_DEFAULT_RESULTS = 100
GREP_MAX_RESULTS = 1000
"""Hard upper bound on grep_search's max_results."""
DEFAULT_OUTPUT_MAX_BYTES = 30_000


# -- what to search -------------------------------------------------------------------------------

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


# -- formatting results -------------------------------------------------------------------------

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
    if len(text) > LINE_MAX_CHARS:  # redacted before the cut, a key's piece at the cut too
        kept = secrets.clip(text, LINE_MAX_CHARS)
        text = kept.head + (TRUNCATED_MARK if kept.dropped else "")
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
