"""Search tools: glob_search (file paths) and grep_search (file contents).

Both are gitignore-aware (.gitignore files of the workspace and its .git/info/exclude, nothing from
above the workspace), include hidden files, skip `.git`, and never leave the workspace. ripgrep
does all the work (rg_runs.py; scope.py says what rg searches): these functions check
the arguments, collect what rg prints (results.py) and format it.

Globs (glob_search's pattern, grep_search's glob) have ripgrep's `--glob` syntax, relative to
the searched directory, but never re-include an ignored file (rg's `-g` would).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from toycoder_daemon.core.util import secrets
from toycoder_daemon.tools.base import ToolContext, ToolError, tool
from toycoder_daemon.tools.escape import NAME_NOTE, escape_name, escape_surrogates, name_escaped
from toycoder_daemon.tools.search.results import LINE_MAX_CHARS, TRUNCATED_MARK, Hits, TopPaths
from toycoder_daemon.tools.workspace import OutsideWorkspace

if TYPE_CHECKING:
    from toycoder_daemon.tools.search.rg_runs import Walk

GLOB_MAX_RESULTS = 200
"""Most paths glob_search lists."""
GREP_DEFAULT_RESULTS = 100
GREP_MAX_RESULTS = 1000
"""Hard upper bound on grep_search's max_results."""
DEFAULT_OUTPUT_MAX_BYTES = 30_000


# -- what to search -------------------------------------------------------------------------------

def _walk(ctx: ToolContext, path: str, glob: str | None) -> tuple[str, Walk, str]:
    """The path asked for, relative to its root ("" = the root), what rg walks (from that root),
    and what the results are shown with: "" in the workspace, the root and a slash in an additional
    directory (its results are shown absolute)."""
    # the rg layer (~6 ms to import) when a search first runs, not in every new process
    from toycoder_daemon.tools.search.rg_runs import Walk
    from toycoder_daemon.tools.search.scope import glob_filter

    try:
        p = ctx.workspace.resolve(path or ".")
    except OutsideWorkspace as e:
        raise ToolError(f"refused: {e}") from None
    root = ctx.workspace.root_of(p) or ctx.workspace.root
    rel = "" if p == root else p.relative_to(root).as_posix()
    if ".git" in rel.split("/"):
        raise ToolError(f"{path} is inside .git/, which search skips")
    if not p.exists():
        raise ToolError(f"not found: {path}")
    is_dir = p.is_dir()
    if not is_dir and not p.is_file():
        raise ToolError(f"not a regular file or directory: {path}")
    base = rel if is_dir else rel.rpartition("/")[0]
    prefix = "" if root == ctx.workspace.root else f"{root}/"
    return prefix + rel, Walk(root, rel, is_dir, glob_filter(glob, base) if glob else None), prefix


# -- formatting results -------------------------------------------------------------------------

def _display(s: str) -> str:
    """A path safe to send as JSON and unable to forge a line: bytes of a file name that are not
    UTF-8 and control characters as escapes (tools/escape.py; the results then end with NAME_NOTE,
    and such a path opens as written)."""
    return escape_name(s)


def _noted(lines: list[str], paths: list[str]) -> list[str]:
    return lines + [NAME_NOTE] if any(name_escaped(p) for p in paths) else lines


def _line_text(text: bytes | str) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text.rstrip("\r")
    if len(text) > LINE_MAX_CHARS:  # redacted before the cut, a key's piece at the cut too
        kept = secrets.clip(text, LINE_MAX_CHARS)
        text = kept.head + (TRUNCATED_MARK if kept.dropped else "")
    return escape_surrogates(text)


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

def _where(asked: str) -> str:
    return f" in {_display(asked)}" if asked else ""


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
    asked, walk, prefix = _walk(ctx, path, pattern)
    top = TopPaths(GLOB_MAX_RESULTS)
    from toycoder_daemon.tools.search.rg_runs import list_files

    async with walk:
        await list_files(walk, top)
    if top.total == 0:
        return f"no files match {pattern!r}{_where(asked)}"
    paths = [prefix + p for p in top.result()]
    lines = _fit([_display(p) for p in paths], _budget(ctx))
    more = top.total - len(lines)
    return "\n".join(_noted(lines, paths[:len(lines)])) + (f"\n... and {more} more (narrow the pattern)" if more else "")


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
    asked, walk, prefix = _walk(ctx, path, glob)
    hits = Hits(limit)
    from toycoder_daemon.tools.search.rg_runs import grep

    async with walk:
        await grep(walk, pattern, case_sensitive, hits)
    shown, total = hits.result()
    shown = [(prefix + p, n, t) for p, n, t in shown]
    if total == 0:
        only = f" in files matching {glob!r}" if glob else ""
        return f"no matches for {pattern!r}{_where(asked)}{only}"
    lines = _fit([f"{_display(p)}:{n}: {_line_text(t)}" for p, n, t in shown], _budget(ctx))
    more = total - len(lines)
    tail = f"\n... {more} more matches not shown (narrow the search)" if more else ""
    return "\n".join(_noted(lines, [p for p, _, _ in shown[:len(lines)]])) + tail
