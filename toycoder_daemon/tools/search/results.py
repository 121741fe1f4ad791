"""The collectors of search results: they keep only what can be shown (the first paths in sort
order, the first matching lines in (path, line) order) while counting everything, so memory stays
bounded however much rg prints.
"""

from __future__ import annotations

LINE_MAX_CHARS = 300
"""A matching line longer than this is cut (and marked with TRUNCATED_MARK)."""
TRUNCATED_MARK = " [...]"


class TopPaths:
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


def parse_item(item: bytes) -> tuple[int, bytes]:
    """rg's raw b"LINE:TEXT" as (line, text)."""
    colon = item.find(b":")
    try:
        return int(item[:colon]), item[colon + 1:]
    except ValueError:
        return 0, item


class Hits:
    """Matching lines per file: keeps only what may be among the first `limit` in (path, line)
    order, so memory stays bounded however many lines match, and counts all of them."""

    def __init__(self, limit: int):
        self.limit = limit
        self.files: dict[str, list[bytes]] = {}
        self.counts: dict[str, int] = {}
        self.kept = 0
        self.cutoff: str | None = None
        """Once set, files sorting after it cannot be shown: they are only counted."""

    def add_file(self, path: str, items: list[bytes], count: int) -> None:
        """A file's first matching lines in line order (rg's raw b"LINE:TEXT" parts), and how many
        lines of it matched in all."""
        if count <= 0:
            return
        self.counts[path] = self.counts.get(path, 0) + count
        if self.cutoff is not None and path > self.cutoff:
            return
        old = self.files.pop(path, None)
        if old is not None:  # rg writes a file's lines together; this is just in case
            self.kept -= len(old)
            items = sorted(old + items, key=lambda item: parse_item(item)[0])
        items = items[: self.limit]
        self.files[path] = items
        self.kept += len(items)
        if self.kept > 2 * self.limit + 1000:
            self._prune()

    def drop_file(self, path: str) -> None:
        self.kept -= len(self.files.pop(path, ()))
        self.counts.pop(path, None)

    def _prune(self) -> None:
        kept: dict[str, list[bytes]] = {}
        n = 0
        for p in sorted(self.files):
            if n >= self.limit:
                break
            kept[p] = self.files[p]
            n += len(kept[p])
        self.files, self.kept = kept, n
        if n >= self.limit:
            self.cutoff = max(kept)

    def result(self) -> tuple[list[tuple[str, int, bytes]], int]:
        """The lines to show as (path, line number, text), and how many lines matched in all."""
        out: list[tuple[str, int, bytes]] = []
        for p in sorted(self.files):
            for item in self.files[p]:
                if len(out) >= self.limit:
                    break
                lineno, text = parse_item(item)
                out.append((p, lineno, text))
        return out, sum(self.counts.values())
