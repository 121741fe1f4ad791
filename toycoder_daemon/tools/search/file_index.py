"""The workspace's files as `rg --files` lists them (the ignore rules the search tools follow), kept
for `@` mention completion and for the question "may a prompt attach this file?".

Listing 20k files takes rg tens of milliseconds, more than a keystroke's completion may: the list
is kept and served as it is, and a listing older than `max_age` is refreshed in the background
(the answer after next sees new files). A path missing from a kept list is looked up again in a
fresh listing before it is called hidden, so a file made a moment ago is not refused.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path


class FileIndex:
    def __init__(self, root: Path, max_age: float = 5.0):
        self.root = root
        self.max_age = max_age
        self._files: list[str] = []
        self._set: frozenset[str] = frozenset()
        self._dirs: list[str] = []
        self._at = 0.0
        self._listing: asyncio.Future[None] | None = None

    async def _list(self) -> None:
        # imported here, as the searches do: not in every new process
        from toycoder_daemon.tools.search.rg import run_rg
        from toycoder_daemon.tools.search.rg_runs import RG_COMMON, SKIP_GIT

        found: list[bytes] = []
        await run_rg(["--files", *RG_COMMON, *SKIP_GIT], self.root, found.extend)
        files = sorted(p.decode("utf-8", "surrogateescape").removeprefix("./") for p in found)
        dirs: set[str] = set()
        for f in files:
            parent = f.rpartition("/")[0]
            while parent and parent not in dirs:
                dirs.add(parent)
                parent = parent.rpartition("/")[0]
        self._files, self._set, self._dirs, self._at = files, frozenset(files), sorted(dirs), time.monotonic()

    def _refresh(self) -> asyncio.Future[None]:
        """One listing at a time: callers meanwhile share it."""
        if self._listing is None or self._listing.done():
            self._listing = asyncio.ensure_future(self._list())
        return self._listing

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

    async def complete(self, prefix: str, limit: int) -> list[tuple[str, str]]:
        """(path, "file"|"folder") for `prefix`: the folders and files starting with it first, then
        those whose name or path merely contains it (case-insensitive), shortest first."""
        files = await self.files()
        low = prefix.lower()
        starts: list[tuple[str, str]] = []
        contains: list[tuple[str, str]] = []
        for kind, names in (("folder", self._dirs), ("file", files)):
            for name in names:
                shown = name + "/" if kind == "folder" else name
                n = shown.lower()
                if n.startswith(low):
                    starts.append((shown, kind))
                elif low and low in n:
                    contains.append((shown, kind))
            if len(starts) >= limit:
                break
        starts.sort(key=lambda e: (e[0].count("/") - (e[1] == "folder"), len(e[0]), e[0]))
        contains.sort(key=lambda e: (low not in e[0].rpartition("/")[2].lower(), len(e[0]), e[0]))
        return (starts + contains)[:limit]
