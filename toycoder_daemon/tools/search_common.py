"""What the search tools and their two backends share: the plan of one search and the collectors
of its results. Both backends fill the same collectors, so their output is identical. This module
imports neither backend, so search.py, search_rg.py and search_py.py can all import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .ignore import IgnoreMatcher, PathGlob

LINE_MAX_CHARS = 300
"""A matching line longer than this is cut (and marked with TRUNCATED_MARK)."""
TRUNCATED_MARK = " [...]"


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
