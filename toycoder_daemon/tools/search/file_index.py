"""The workspace's files as `rg --files` lists them (the ignore rules the search tools follow), kept
for `@` mention completion and for the question "may a prompt attach this file?".

Listing 20k files takes rg tens of milliseconds and indexing them as many again, more than a
keystroke's completion may: the listing starts in the background as soon as the workspace is known
(`start`, at the daemon's start-up) and is kept. A completion that comes while that first listing
runs answers from what rg has printed so far, indexed (off the event loop) when such a call asks,
so a first `@` typed right after start-up gets the matches listed so far, promptly. A listing
older than `max_age` is refreshed in the background (the answer after next sees new files); the
complete old one serves meanwhile. A path missing from a kept list is looked up again in a fresh
listing before it is called hidden, so a file made a moment ago is not refused.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from pathlib import Path
from typing import Any


class Listing:
    """One listing's paths indexed for completion: every folder (with its /) and file, lower-cased
    and sorted, so that prefixes are found by bisection and substrings by str.find on one string."""

    def __init__(self, found: list[bytes]):
        files = sorted(p.decode("utf-8", "surrogateescape").removeprefix("./") for p in found)
        dirs: set[str] = set()
        for f in files:
            parent = f.rpartition("/")[0]
            while parent and parent not in dirs:
                dirs.add(parent)
                parent = parent.rpartition("/")[0]
        rows = sorted([(d.lower() + "/", d + "/", "folder") for d in dirs] + [(f.lower(), f, "file") for f in files])
        self.files = files
        self.file_set = frozenset(files)
        self.lows = [r[0] for r in rows]
        self.entries = [(r[1], r[2]) for r in rows]
        """(path as shown, "file"|"folder") in `lows`' order."""
        self.blob = "\n".join(self.lows)
        """`lows` joined by newlines: a substring is found by str.find, not a Python loop."""
        self.starts: list[int] = []
        at = 0
        for low in self.lows:
            self.starts.append(at)
            at += len(low) + 1

    def complete(self, prefix: str, limit: int, scan: int) -> list[tuple[str, str]]:
        """See FileIndex.complete."""
        low, lows = prefix.lower(), self.lows
        starts: list[int] = []
        i = bisect.bisect_left(lows, low)
        while i < len(lows) and lows[i].startswith(low) and len(starts) < scan:
            starts.append(i)
            i += 1
        ranked = sorted(starts, key=lambda n: (lows[n].rstrip("/").count("/"), len(lows[n]), lows[n]))
        out = [self.entries[n] for n in ranked[:limit]]
        if len(out) < limit and low and "\n" not in low:
            seen = set(starts)
            contains: list[int] = []
            at = self.blob.find(low)
            while at >= 0 and len(contains) < scan:
                n = bisect.bisect_right(self.starts, at) - 1
                if n not in seen:
                    seen.add(n)
                    contains.append(n)
                at = self.blob.find(low, self.starts[n] + len(lows[n]) + 1) if n + 1 < len(lows) else -1
            contains.sort(key=lambda n: (low not in lows[n].rstrip("/").rpartition("/")[2], len(lows[n]), lows[n]))
            out += [self.entries[n] for n in contains[:limit - len(out)]]
        return out


class FileIndex:
    def __init__(self, root: Path, max_age: float = 10.0):
        self.root = root
        self.max_age = max_age
        self.listed = Listing([])
        """The latest index: of a whole listing once one finished (`complete_at`), else of what the
        first listing has printed so far."""
        self.complete_at = 0.0
        """When the last whole listing finished (monotonic); 0 before the first one has."""
        self._listing: asyncio.Future[None] | None = None
        self._indexed = asyncio.Event()
        """Set each time `listed` is replaced."""
        self._wanted = asyncio.Event()
        """A completion came before the first whole listing: index what is listed so far (only then:
        when none comes, the listing costs no more than one indexing)."""

    def start(self) -> None:
        """Start listing the workspace in the background (the daemon's start-up calls this, so that
        the first `@` finds the listing under way or done)."""
        self._refresh()

    @property
    def listing(self) -> bool:
        """A listing is running."""
        return self._listing is not None and not self._listing.done()

    def _publish(self, listed: Listing, whole: bool) -> None:
        self.listed = listed
        if whole:
            self.complete_at = time.monotonic()
        self._indexed.set()

    async def _list(self) -> None:
        # imported here, as the searches do: not in every new process
        from toycoder_daemon.tools.search.rg import run_rg
        from toycoder_daemon.tools.search.rg_runs import RG_COMMON, SKIP_GIT

        found: list[bytes] = []
        more = asyncio.Event()

        def take(lines: list[bytes]) -> None:
            found.extend(lines)
            more.set()

        async def index_so_far() -> None:
            # only before the first whole listing: later a complete older one beats a partial new one
            while not self.complete_at:
                await more.wait()
                await self._wanted.wait()
                more.clear()
                self._wanted.clear()
                listed = await asyncio.to_thread(Listing, found.copy())
                if not self.complete_at:
                    self._publish(listed, whole=False)

        partial = asyncio.ensure_future(index_so_far())
        try:
            await run_rg(["--files", *RG_COMMON, *SKIP_GIT], self.root, take)
        finally:
            partial.cancel()
        self._publish(await asyncio.to_thread(Listing, found), whole=True)  # 20k paths: kept off the event loop

    def _refresh(self) -> asyncio.Future[None]:
        """One listing at a time: callers meanwhile share it."""
        if self._listing is None or self._listing.done():
            self._listing = asyncio.ensure_future(self._list())
            # a failure nobody awaited (a completion that answered before it) is not logged as lost
            self._listing.add_done_callback(lambda f: f.cancelled() or f.exception())
        return self._listing

    async def aclose(self) -> None:
        """A listing still running is stopped (its rg killed) and awaited: an rg left spawning when
        the event loop ends would hang asyncio's final cancellation (its pipes never connect)."""
        if self._listing is not None and not self._listing.done():
            self._listing.cancel()
            await asyncio.wait([self._listing])

    async def _whole(self) -> Listing:
        """A whole listing: the kept one (refreshed behind when stale), else the first one, awaited."""
        if not self.complete_at:
            await asyncio.shield(self._refresh())
        elif time.monotonic() - self.complete_at > self.max_age:
            self._refresh()
        return self.listed

    async def files(self) -> list[str]:
        """Workspace-relative paths (sorted); a stale kept list is returned and refreshed behind."""
        return (await self._whole()).files

    async def visible(self, rel: str) -> bool:
        """Whether rg lists the file (not hidden by the ignore rules, not under .git)."""
        if rel not in (await self._whole()).file_set:
            await asyncio.shield(self._refresh())
        return rel in self.listed.file_set

    async def complete(self, prefix: str, limit: int, scan: int = 2000, wait: float = 0.03) -> list[tuple[str, str]]:
        """(path, "file"|"folder") for `prefix` (case-insensitive): the paths starting with it,
        shallowest first, then those that merely contain it (in their name first), shortest first;
        at most `scan` candidates of each kind are ranked.

        Before the first listing has finished, the answer is of the paths listed so far: at most
        `wait` seconds are spent waiting for the first of them to be indexed (a keystroke's budget)."""
        if not self.complete_at:
            running = self._refresh()
            self._wanted.set()
            if not self.listed.files:
                self._indexed.clear()
                indexed = asyncio.ensure_future(self._indexed.wait())
                waiters: list[asyncio.Future[Any]] = [running, indexed]
                try:
                    await asyncio.wait(waiters, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    indexed.cancel()
                if running.done() and not running.cancelled() and (failed := running.exception()) is not None:
                    raise failed  # rg missing or failing
        elif time.monotonic() - self.complete_at > self.max_age:
            self._refresh()
        return self.listed.complete(prefix, limit, scan)
