"""ripgrep runs for the search tools and list_directory: their flags, and reading what rg prints
(rg.py finds and runs the process).

Globs: rg's `--glob` overrides ignore rules (`-g '*.log'` lists gitignored logs, `-g '**'` even
enters node_modules), while the tools never re-include an ignored file. So a glob reaches rg as:
a negated `--glob` (an exclusion re-includes nothing); a file-name glob as a `--type-add` type
(types only narrow what ignore rules leave); any other glob as `--glob` in one run whose paths are
kept only if a second, glob-less run lists them too (`Walk.listed`).
"""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from toycoder_daemon.tools.base import ToolError
from toycoder_daemon.tools.search.results import LINE_MAX_CHARS, Hits, TopPaths
from toycoder_daemon.tools.search.rg import RG_COMMON, SKIP_GIT, rg_error, run_rg
from toycoder_daemon.tools.search.scope import GlobFilter, rules_above

RG_MAX_COLUMNS = 4 * LINE_MAX_CHARS
"""rg previews longer lines; a preview keeps at least LINE_MAX_CHARS characters."""

RG_GREP = ("--line-number", "--with-filename", "--no-heading", "--null",
           "--max-columns", str(RG_MAX_COLUMNS), "--max-columns-preview")
_TYPE_NAME = "toycoderglob"
_BINARY_RE = re.compile(rb"^(.*): (?:WARNING: stopped searching binary file after match|binary file matches) \(found ",
                        re.DOTALL)  # DOTALL: a path may hold a newline
_IGNORING = re.compile(r"^rg: DEBUG\|ignore::walk\|[^ ]*: ignoring (.*)$")


def _glob_error(stderr: str, glob: GlobFilter | None) -> str | None:
    """globset's reason when rg refused the caller's glob."""
    if glob is None:
        return None
    for sent in (glob.rg_glob, glob.name_glob):
        marker = f"error parsing glob '{sent}': "
        at = stderr.find(marker) if sent else -1
        if at >= 0:
            return stderr[at + len(marker):].splitlines()[0]
    return None


def _write_rules(rules: list[str]) -> str | None:
    """A temporary ignore file for rg's --ignore-file (None when there are no rules)."""
    if not rules:
        return None
    fd, name = tempfile.mkstemp(prefix="toycoder-rg-", suffix=".ignore")
    with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write("\n".join(rules) + "\n")
    return name


# -- one search ------------------------------------------------------------------------------------

@dataclass
class Walk:
    """What the rg runs of one tool call cover: the workspace-relative `target` ("" = the root),
    the ignore rules above where rg starts, and the caller's glob. Use it as `async with`."""

    root: Path
    target: str
    target_is_dir: bool
    glob: GlobFilter | None
    start: str = ""
    """Where rg starts: `target`, or below it at a path glob's literal directories."""
    empty: bool = False
    """Nothing can match (a path glob's literal directory is missing or ignored)."""
    rules_file: str | None = None
    listed: set[bytes] | None = None
    """For a glob rg cannot apply alone: the paths a glob-less run listed (only those count)."""

    async def __aenter__(self) -> Walk:
        self.start = self.target
        if self.target_is_dir and self.glob is not None and self.glob.dirs:
            await self._narrow(self.glob.dirs)
        if self.target_is_dir and not self.empty:
            self.rules_file = _write_rules(rules_above(self.root, self.start))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.rules_file:
            os.unlink(self.rules_file)

    async def _narrow(self, dirs: tuple[str, ...]) -> None:
        """Start below the glob's literal directories: they must be real, non-ignored
        directories (rg does not check the directory it is told to start from)."""
        checks = []
        cur = self.target
        for comp in dirs:
            nxt = f"{cur}/{comp}" if cur else comp
            d = self.root / nxt
            if comp == ".git" or d.is_symlink() or not d.is_dir():
                self.empty = True
                return
            checks.append(ignored_entries(self.root, cur, [comp]))
            cur = nxt
        if any(await asyncio.gather(*checks)):
            self.empty = True
            return
        self.start = cur

    @property
    def needs_listing(self) -> bool:
        g = self.glob
        return g is not None and self.target_is_dir and not g.negated and g.name_glob is None

    def args(self, *, with_glob: bool = True) -> list[str]:
        out = [*RG_COMMON]
        if self.rules_file:
            out += ["--ignore-file", self.rules_file]
        g = self.glob if self.target_is_dir else None
        name = g.name_glob if g is not None and with_glob else g.last_name if g is not None else None
        if name is not None:
            out += ["--type-add", f"{_TYPE_NAME}:{name}", "--type", _TYPE_NAME]
        elif g is not None and with_glob:
            out += ["--glob", g.rg_glob]
        return [*out, *SKIP_GIT]

    def path_args(self) -> tuple[list[str], bytes]:
        """The path argument for rg and the prefix to strip from what it prints."""
        return (["--", self.start], b"") if self.start else (["--", "."], b"./")

    def keep(self, rel: bytes) -> bool:
        return self.listed is None or rel in self.listed

    def fail(self, err: str) -> None:
        """Raise the ToolError for rg's error output: a bad glob named as such, else rg's own words."""
        reason = _glob_error(err, self.glob)
        if reason is not None and self.glob is not None:
            raise ToolError(f"invalid glob {self.glob.text!r}: {reason}")
        raise ToolError(f"search failed: {rg_error(err)}")

    async def files(self, sink: Callable[[list[bytes]], None], *, with_glob: bool = True) -> None:
        """Feed the workspace-relative paths rg lists to `sink`."""
        paths, strip = self.path_args()
        n = len(strip)

        def on_lines(lines: list[bytes]) -> None:
            sink([line[n:] if n and line.startswith(strip) else line for line in lines if line])

        # --null: each path ends with a NUL, so a name holding a newline stays one path
        code, err = await run_rg(["--files", "--null", *self.args(with_glob=with_glob), *paths], self.root, on_lines,
                                 sep=b"\0")
        if code == 2 and err:
            self.fail(err)

    async def check_glob(self) -> None:
        """Let rg parse the glob without listing anything: an invalid glob is an error even when
        nothing could match."""
        if self.glob is not None:
            args = ["--files", *RG_COMMON, "--max-depth", "0", "--glob", self.glob.rg_glob, "--", "."]
            code, err = await run_rg(args, self.root, lambda lines: None)
            if code == 2 and err:
                self.fail(err)

    async def selects_file(self) -> bool:
        """For a file target: whether the glob (relative to the file's directory) selects it.
        rg applies no filter to a file named on its command line, so ask about the directory's
        entries instead."""
        if self.glob is None or self.target_is_dir:
            return True
        parent, _, name = self.target.rpartition("/")
        found: list[bytes] = []
        strip = (parent + "/").encode() if parent else b"./"
        args = ["--files", "--null", *RG_COMMON, "--no-ignore", "--max-depth", "1", "--glob", self.glob.rg_glob,
                *SKIP_GIT, "--", parent or "."]
        code, err = await run_rg(args, self.root, found.extend, sep=b"\0")
        if code == 2 and err:
            self.fail(err)
        return os.fsencode(name) in {line.removeprefix(strip) for line in found}

    async def load_listing(self) -> None:
        listed: set[bytes] = set()
        await self.files(listed.update, with_glob=False)
        self.listed = listed


async def list_files(walk: Walk, top: TopPaths) -> None:
    """The files of `walk` into `top` (workspace-relative)."""
    if walk.empty:
        return await walk.check_glob()
    if not await walk.selects_file():
        return
    found: list[bytes] = []
    if walk.needs_listing:  # both walks at once
        await asyncio.gather(walk.load_listing(), walk.files(found.extend))
    else:
        await walk.files(found.extend)
    top.extend([p.decode("utf-8", "surrogateescape") for p in found if walk.keep(p)])


async def grep(walk: Walk, pattern: str, case_sensitive: bool, hits: Hits) -> None:
    """The lines matching `pattern` in the files of `walk` into `hits`."""
    if walk.empty:
        return await walk.check_glob()
    if not await walk.selects_file():
        return
    # The glob-less listing runs alongside; files rg reports before it is done wait in `pending`.
    listing = asyncio.ensure_future(walk.load_listing()) if walk.needs_listing else None
    pending: list[tuple[bytes, list[bytes], int]] = []
    binary: set[bytes] = set()

    def add(path: bytes, raw: list[bytes], count: int) -> None:
        if listing is not None and walk.listed is None:
            pending.append((path, raw, count))
        elif walk.keep(path):
            hits.add_file(path.decode("utf-8", "surrogateescape"), raw, count)

    try:
        await _grep(walk, pattern, case_sensitive, hits, add, binary)
        if listing is not None:
            await listing
    finally:
        if listing is not None and not listing.done():
            listing.cancel()
    for path, raw, count in pending:
        if path not in binary:
            add(path, raw, count)


async def _grep(walk: Walk, pattern: str, case_sensitive: bool, hits: Hits,
                add: Callable[[bytes, list[bytes], int], None], binary: set[bytes]) -> None:
    paths, strip = walk.path_args()
    args = [*walk.args(), *RG_GREP, "--case-sensitive" if case_sensitive else "--ignore-case",
            "-e", pattern, *paths]
    n = len(strip)
    # rg writes each file's lines together and in order: collect them per file (the raw
    # "LINE:TEXT" parts, parsed only if shown) until the path changes.
    cur: bytes | None = None
    prefix = b""
    raw: list[bytes] = []
    carry: bytes | None = None  # the start of a path that holds a newline: its rest is on the next line

    def flush() -> None:
        nonlocal cur, prefix, raw
        if cur is not None and raw and cur not in binary:
            add(cur, raw[: hits.limit], len(raw))
        cur, prefix, raw = None, b"", []

    def on_lines(lines: list[bytes]) -> None:
        nonlocal cur, prefix, carry
        for line in lines:
            if carry is not None:
                line, carry = carry + b"\n" + line, None
            if prefix and line.startswith(prefix):
                raw.append(line[len(prefix):])
                continue
            nul = line.find(b"\0")
            if nul < 0:  # "PATH: binary file matches (...)" or "PATH: WARNING: stopped searching binary file"
                m = _BINARY_RE.match(line)
                if m:
                    path = m.group(1)
                    path = path[n:] if n and path.startswith(strip) else path
                    binary.add(path)
                    if path != cur:
                        hits.drop_file(path.decode("utf-8", "surrogateescape"))
                else:
                    carry = line
                continue
            flush()
            path = line[:nul]
            cur = path[n:] if n and path.startswith(strip) else path
            prefix = line[: nul + 1]
            raw.append(line[nul + 1:])

    code, err = await run_rg(args, walk.root, on_lines)
    flush()
    if code == 2 and not hits.counts and err:
        if _glob_error(err, walk.glob) is None and any(
                w in err for w in ("regex", "literal", "look-around", "backreferences")):
            raise ToolError(f"invalid regex {pattern!r}: {rg_error(err)}")
        walk.fail(err)


# -- list_directory ----------------------------------------------------------------------------------

async def ignored_entries(root: Path, rel_dir: str, names: Iterable[str]) -> set[str]:
    """Which of `names` (entries of the workspace directory `rel_dir`) the ignore rules hide.

    rg prints files, never directories, and an empty directory prints nothing, as an ignored one
    does; but its debug log names every entry the ignore rules skip, directories included, in the
    line `ignoring PATH: Ignore(...)` (ripgrep 14.1, the pinned wheel; the list_directory tests
    fail if that line changes). A one-level walk (--max-depth 1) keeps it fast, and so do all the
    rules in one --ignore-file with --no-ignore-vcs: rg would otherwise compile the .gitignore of
    every sub-directory it lists, though it does not enter them."""
    prefix = f"{rel_dir}/" if rel_dir else "./"
    # As rg prints paths: bytes that are not UTF-8 become U+FFFD.
    shown = {os.fsencode(prefix + n).decode("utf-8", "replace"): n for n in names}
    hidden: set[str] = set()

    def on_err(lines: list[bytes]) -> None:
        for line in lines:
            m = _IGNORING.match(line.decode("utf-8", "replace"))
            if m is None:
                continue
            # PATH itself may hold ": Ignore(": try each cut.
            rest = m.group(1)
            at = rest.find(": Ignore(")
            while at >= 0:
                if rest[:at] in shown:
                    hidden.add(shown[rest[:at]])
                    break
                at = rest.find(": Ignore(", at + 1)

    rules = _write_rules(rules_above(root, rel_dir, own=True))
    try:
        args = ["--files", "--debug", "--max-depth", "1", *RG_COMMON, "--no-ignore-vcs",
                *(["--ignore-file", rules] if rules else []), *SKIP_GIT, "--", rel_dir or "."]
        code, err = await run_rg(args, root, lambda lines: None, on_err)
    finally:
        if rules:
            os.unlink(rules)
    if code == 2 and "error:" in err:
        raise ToolError(f"cannot tell which entries are gitignored: {rg_error(err)}")
    return hidden
