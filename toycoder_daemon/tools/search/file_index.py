"""The workspace's files as `rg --files` lists them (the ignore rules the search tools follow), kept
for `@` mention completion and for the question "may a prompt attach this file?".

Listing 20k files takes rg tens of milliseconds, more than a keystroke's completion may: the list
is kept (indexed off the event loop) and served as it is, and a listing older than `max_age` is
refreshed in the background (the answer after next sees new files). A path missing from a kept list is looked up again in a
fresh listing before it is called hidden, so a file made a moment ago is not refused.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from pathlib import Path


class FileIndex:
    def __init__(self, root: Path, max_age: float = 10.0):
        self.root = root
        self.max_age = max_age
        self._files: list[str] = []
        self._set: frozenset[str] = frozenset()
        self._lows: list[str] = []
        """Every folder (with its /) and file, lower-cased, sorted: prefixes by bisection."""
        self._entries: list[tuple[str, str]] = []
        """(path as shown, "file"|"folder") in `_lows`' order."""
        self._blob = ""
        """`_lows` joined by newlines: a substring is found by str.find, not a Python loop."""
        self._starts: list[int] = []
        self._at = 0.0
        self._listing: asyncio.Future[None] | None = None

    async def _list(self) -> None:
        # imported here, as the searches do: not in every new process
        from toycoder_daemon.tools.search.rg import run_rg
        from toycoder_daemon.tools.search.rg_runs import RG_COMMON, SKIP_GIT

        found: list[bytes] = []
        await run_rg(["--files", *RG_COMMON, *SKIP_GIT], self.root, found.extend)
        await asyncio.to_thread(self._index, found)  # 20k paths: kept off the event loop
        self._at = time.monotonic()

    def _index(self, found: list[bytes]) -> None:
        files = sorted(p.decode("utf-8", "surrogateescape").removeprefix("./") for p in found)
        dirs: set[str] = set()
        for f in files:
            parent = f.rpartition("/")[0]
            while parent and parent not in dirs:
                dirs.add(parent)
                parent = parent.rpartition("/")[0]
        rows = sorted([(d.lower() + "/", d + "/", "folder") for d in dirs] + [(f.lower(), f, "file") for f in files])
        lows = [r[0] for r in rows]
        starts: list[int] = []
        at = 0
        for low in lows:
            starts.append(at)
            at += len(low) + 1
        self._files, self._set = files, frozenset(files)
        self._lows, self._entries = lows, [(r[1], r[2]) for r in rows]
        self._blob, self._starts = "\n".join(lows), starts

    def _refresh(self) -> asyncio.Future[None]:
        """One listing at a time: callers meanwhile share it."""
        if self._listing is None or self._listing.done():
            self._listing = asyncio.ensure_future(self._list())
        return self._listing

    def close(self) -> None:
        """A listing still running is stopped (its rg killed)."""
        if self._listing is not None and not self._listing.done():
            self._listing.cancel()

    async def files(self) -> list[str]:
        """Workspace-relative paths (sorted); a stale kept list is returned and refreshed behind."""
        if not self._at:
            await asyncio.shield(self._refresh())
        elif time.monotonic() - self._at > self.max_age:
            self._refresh()
        return self._files

    async def visible(self, rel: str) -> bool:
        """Whether rg lists the file (not hidden by the ignore rules, not under .git)."""
        await self.files()
        if rel not in self._set:
            await asyncio.shield(self._refresh())
        return rel in self._set

    async def complete(self, prefix: str, limit: int, scan: int = 2000) -> list[tuple[str, str]]:
        """(path, "file"|"folder") for `prefix` (case-insensitive): the paths starting with it,
        shallowest first, then those that merely contain it (in their name first), shortest first;
        at most `scan` candidates of each kind are ranked."""
        await self.files()
        low, lows = prefix.lower(), self._lows
        starts: list[int] = []
        i = bisect.bisect_left(lows, low)
        while i < len(lows) and lows[i].startswith(low) and len(starts) < scan:
            starts.append(i)
            i += 1
        ranked = sorted(starts, key=lambda n: (lows[n].rstrip("/").count("/"), len(lows[n]), lows[n]))
        out = [self._entries[n] for n in ranked[:limit]]
        if len(out) < limit and low and "\n" not in low:
            seen = set(starts)
            contains: list[int] = []
            at = self._blob.find(low)
            while at >= 0 and len(contains) < scan:
                n = bisect.bisect_right(self._starts, at) - 1
                if n not in seen:
                    seen.add(n)
                    contains.append(n)
                at = self._blob.find(low, self._starts[n] + len(lows[n]) + 1) if n + 1 < len(lows) else -1
            contains.sort(key=lambda n: (low not in lows[n].rstrip("/").rpartition("/")[2], len(lows[n]), lows[n]))
            out += [self._entries[n] for n in contains[:limit - len(out)]]
        return out
