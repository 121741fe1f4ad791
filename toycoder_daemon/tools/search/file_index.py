"""The workspace's files as `rg --files` lists them (the ignore rules the search tools follow), kept
for `@` mention completion and for the question "may a prompt attach this file?".

Listing 20k files takes rg tens of milliseconds and indexing them ~10 ms more, more than a
keystroke's completion may wait at start-up: the listing starts in the background as soon as the
workspace is known (`start`, at the daemon's start-up) and is kept. Each whole listing is also kept
on disk (`KeptListing`, in the data dir), and the next daemon on the workspace answers its first
completions from that one while rg lists again; without one (a workspace never opened), a completion
that comes while the first listing runs answers from what rg has printed so far, indexed (off the
event loop) when such a call asks. A listing older than `max_age` is refreshed in the background
(the answer after next sees new files); the complete old one serves meanwhile. A path missing from a
kept list is looked up again in a fresh listing before it is called hidden, so a file made a moment
ago is not refused; a path is called visible only from a listing of this daemon's own rg.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import functools
import hashlib
import logging
import os
import stat
import time
from collections.abc import Sequence
from itertools import accumulate, compress, repeat
from operator import itemgetter, not_
from pathlib import Path
from typing import Any

from toycoder_daemon.core.util.atomic import atomic_write
from toycoder_daemon.tools.base import ToolError

log = logging.getLogger(__name__)

KEPT_FORMAT = b"toycoder-files 2"
KEPT_MAX_BYTES = 16 << 20
"""A listing bigger than this (~300k paths) is not kept on disk: reading it back would cost more than
a first completion may wait."""
KEPT_MAX_WORKSPACES = 100
"""Kept listings beyond this many (one per workspace) are removed, the least recently used first."""
STALE_TMP = 3600.0
"""A temp file of a write (atomic_write's `.<name>.<random>.tmp`) older than this many seconds is a
crashed writer's, removed by the next pruning; a younger one may be another daemon's write at work."""
OFF_LOOP = 2000
"""A listing of more files than this builds its file set in a thread (~1 ms per 20k on the loop)."""
LSTAT_OFF_LOOP = 8
"""More kept rows than this to lstat go to a thread (each lstat may wait on a slow disk)."""


def outside(path: str) -> bool:
    """`path` (a row's, workspace-relative) would name something outside the workspace (absolute, or
    a `..` component), is empty or holds a NUL: rg never lists such a path; a kept file written by hand may hold one."""
    return (not path or path.startswith("/") or path == ".." or path.startswith("../") or "/../" in path
            or path.endswith("/..") or "\0" in path)


def existing(root: str, rows: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The rows (of a kept listing) whose path still exists under `root` (lstat: a symlink counts,
    whatever it points to). Each path is joined under `root` as text: no row offered is `outside`."""
    return [r for r in rows if os.path.lexists(root + "/" + r[0].rstrip("/"))]


class Listing:
    """One listing's paths indexed for completion: every folder (with its /) and file is a row
    `lower-cased path NUL path` (just the path when it is lower-case already), the rows sorted, so
    prefixes are found by bisection and substrings by str.find on the rows joined by newlines
    (`blob`, which is also what a kept listing holds on disk). Built in a few C-level passes
    (decode, split, sort, map, join: none holds the GIL for more than a few ms on 20k paths) with no
    Python loop per file; from a kept blob, in a split and a sort of sorted rows (~3 ms).

    A path with a newline in its name is a file (`files`, what a prompt may attach) but never a row:
    the blob is split by newlines. A row that is absolute or has a `..` component (a kept file
    written by hand) is never offered: `complete` drops it (checking the few rows it answers costs
    nothing; checking a kept blob's every row, ~3.5 ms on 20k paths, would delay the first `@`)."""

    def __init__(self, rows: list[str]):
        """`rows`: sorted (`of_paths` and `of_blob` make them)."""
        self.rows = rows
        self.blob = "\n".join(rows)
        """`rows` joined by newlines: a substring is found by str.find, not a Python loop."""
        self.starts = list(accumulate(map((1).__add__, map(len, rows)), initial=0))
        """Where each row starts in `blob` (and where the blob would go on after the last)."""

    @classmethod
    def of_blob(cls, blob: str) -> Listing:
        """A kept listing's `blob`."""
        rows = blob.split("\n") if blob else []
        rows.sort()  # sorted already, in one pass: a kept file edited by hand cannot break the bisection
        return cls(rows)

    @classmethod
    def of_paths(cls, chunks: list[bytes]) -> Listing:
        """`chunks`: rg --files --null's output, joined here (in the indexing thread, not on the loop)."""
        text = b"\0".join(chunks).decode("utf-8", "surrogateescape").strip("\0")
        if text.startswith("./"):
            text = text[2:].replace("\0./", "\0")
        files = text.split("\0") if text else []
        files.sort()
        shown = files if "\n" not in text else [f for f in files if "\n" not in f]
        dirs: set[str] = set()
        for d in set(map(itemgetter(0), map(str.rpartition, shown, repeat("/")))):  # a loop per folder only
            while d and d not in dirs:
                dirs.add(d)
                d = d.rpartition("/")[0]
        shown = shown + [d + "/" for d in dirs]
        lows = "\n".join(shown).lower().split("\n") if shown else []  # "".split gives [""]
        same = list(map(str.__eq__, lows, shown))
        rows = list(compress(lows, same))  # a lower-case path is its own row: the blob stays small
        rows += map("\0".join, compress(zip(lows, shown, strict=True), map(not_, same)))
        rows.sort()
        listed = cls(rows)
        listed.files = files
        return listed

    @functools.cached_property
    def files(self) -> list[str]:
        """The files' paths, sorted (of a kept listing: made when first asked)."""
        return sorted(self.entry(n)[0] for n, r in enumerate(self.rows) if not r.endswith("/"))

    @functools.cached_property
    def file_set(self) -> frozenset[str]:
        """`files` as a set, made when first asked (`visible`: only of a whole listing of this daemon's)."""
        return frozenset(self.files)

    def low(self, n: int) -> str:
        return self.rows[n].partition("\0")[0]

    def entry(self, n: int) -> tuple[str, str]:
        low, nul, shown = self.rows[n].partition("\0")
        shown = shown if nul else low
        return shown, "folder" if shown.endswith("/") else "file"

    def complete(self, prefix: str, limit: int, scan: int) -> list[tuple[str, str]]:
        """See FileIndex.complete."""
        low, rows = prefix.lower(), self.rows
        if "\0" in low or "\n" in low:
            return []
        starts: list[int] = []
        i = bisect.bisect_left(rows, low)
        while i < len(rows) and rows[i].startswith(low) and len(starts) < scan:
            starts.append(i)
            i += 1
        lows = {n: self.low(n) for n in starts}
        ranked = sorted(starts, key=lambda n: (lows[n].rstrip("/").count("/"), len(lows[n]), lows[n]))
        out = [self.entry(n) for n in ranked[:limit]]
        if len(out) < limit and low:
            seen = set(starts)
            contains: list[int] = []
            at = self.blob.find(low)
            while at >= 0 and len(contains) < scan:
                n = bisect.bisect_right(self.starts, at) - 1
                if n not in seen:
                    seen.add(n)
                    contains.append(n)
                    lows[n] = self.low(n)
                at = self.blob.find(low, self.starts[n + 1]) if n + 1 < len(rows) else -1
            contains.sort(key=lambda n: (low not in lows[n].rstrip("/").rpartition("/")[2], len(lows[n]), lows[n]))
            out += [self.entry(n) for n in contains[:limit - len(out)]]
        return [e for e in out if not outside(e[0])]


class KeptListing:
    """A workspace's last whole listing on disk, `<folder>/<hash of its real path>`: its index rows
    (Listing.blob) after a header naming the format, the workspace and the rg flags (hashed), the
    rows' length and their sha256; written atomically, owner-only (0600, in a 0700 folder). One that
    is not a regular file of this user's, is open to others, too big, torn or changed, or of another
    workspace or other flags is ignored (and replaced by the next whole listing). A row naming a path
    outside the workspace is never offered (`Listing.complete`)."""

    def __init__(self, folder: Path, root: Path, args: Sequence[str]):
        real = os.path.realpath(root)
        self.folder = folder
        self.path = folder / hashlib.sha256(os.fsencode(real)).hexdigest()[:32]
        self.stamp = hashlib.sha256(b"\0".join(map(os.fsencode, [real, *args]))).hexdigest().encode()
        self.digest: bytes | None = None
        """The sha256 of what the file holds, as last read or written (set only once that succeeded):
        an unchanged listing is not written again, only touched."""

    def _header(self, body: bytes, digest: bytes) -> bytes:
        return b"%s %s %d %s\n" % (KEPT_FORMAT, self.stamp, len(body), digest)

    def read(self) -> Listing | None:
        """The kept listing, indexed; None when there is none this daemon may trust."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError as e:  # a symlink (ELOOP), no permission: not ours to read
            log.warning("kept file listing %s ignored: %s", self.path, e)
            return None
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
                log.warning("kept file listing %s ignored: not an owner-only file of this user's", self.path)
                return None
            data = f.read(KEPT_MAX_BYTES + 300)
        head, _, body = data.partition(b"\n")
        digest = hashlib.sha256(body).hexdigest().encode()
        if head + b"\n" != self._header(body, digest):
            log.info("kept file listing %s ignored: of another workspace, version or rg flags, or torn or changed",
                     self.path)
            return None
        self.digest = digest
        return Listing.of_blob(body.decode("utf-8", "surrogateescape"))

    def write(self, blob: str) -> None:
        """Keep a whole listing's `blob` (an unchanged one is only touched: pruning goes by the last
        use); one too big to keep removes the old one (it would be stale)."""
        body = blob.encode("utf-8", "surrogateescape")
        digest = hashlib.sha256(body).hexdigest().encode()
        try:
            if digest == self.digest:
                try:
                    os.utime(self.path, follow_symlinks=False)
                    return
                except FileNotFoundError:  # removed meanwhile (pruned by another daemon): written again
                    pass
            self.digest = None
            if len(body) > KEPT_MAX_BYTES:
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
                return
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            atomic_write(self.path, self._header(body, digest) + body, 0o600)
            self.digest = digest
            self._prune()
        except OSError as e:  # a full disk, a read-only data dir: the next daemon lists without it
            log.warning("could not keep the file listing in %s: %s", self.path, e)

    def _prune(self) -> None:
        """The least recently used listings beyond KEPT_MAX_WORKSPACES, and crashed writers' temp
        files, are removed. Other daemons prune and write here too: an entry gone meanwhile is skipped."""
        kept: list[tuple[float, str]] = []
        now = time.time()
        with os.scandir(self.folder) as it:
            for e in it:
                try:
                    if not e.is_file(follow_symlinks=False):
                        continue
                    mtime = e.stat(follow_symlinks=False).st_mtime
                except FileNotFoundError:
                    continue
                if not e.name.startswith("."):
                    kept.append((mtime, e.path))
                elif e.name.endswith(".tmp") and now - mtime > STALE_TMP:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(e.path)
        if len(kept) > KEPT_MAX_WORKSPACES:
            kept.sort()
            for _, path in kept[:len(kept) - KEPT_MAX_WORKSPACES]:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)


class FileIndex:
    def __init__(self, root: Path, keep_in: Path | None = None, max_age: float = 10.0):
        """`keep_in`: the folder where whole listings are kept for the next daemon (KeptListing);
        None keeps none."""
        self.root = root
        self.keep_in = keep_in
        self.max_age = max_age
        self.listed: Listing | None = None
        """The latest index: of a whole listing once one finished (`complete_at`), else of the kept
        listing (`from_kept`; an empty one is an answer too), else of what the first listing has
        printed so far; None before any."""
        self.from_kept = False
        """`listed` is an earlier daemon's listing (this one's rg has not finished yet)."""
        self.complete_at = 0.0
        """When the last whole listing finished (monotonic); 0 before the first one has."""
        self.kept: KeptListing | None = None
        self._listing: asyncio.Future[None] | None = None
        self._keeping: asyncio.Future[None] | None = None
        self._failed: str | None = None
        """The last listing failure logged: each keystroke's completion lists again, but a failure is
        logged once (again only after a listing succeeded or failed otherwise)."""
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

    def _publish(self, listed: Listing, whole: bool, kept: bool = False) -> None:
        self.listed, self.from_kept = listed, kept
        if whole:
            self.complete_at = time.monotonic()
        self._indexed.set()

    async def _list(self) -> None:
        # imported here, as the searches do: not in every new process
        from toycoder_daemon.tools.search.rg import RG_COMMON, SKIP_GIT, run_rg

        # NUL-separated: a name may hold a newline (Listing keeps it a file, never a row)
        args = ["--files", "--null", *RG_COMMON, *SKIP_GIT]
        if self.kept is None and self.keep_in is not None:  # this daemon's first listing: the kept one first
            self.kept = KeptListing(self.keep_in, self.root, args)
            # read before rg starts, so that rg's output does not compete for the GIL with the
            # indexing a first completion waits for (~10 ms on 20k paths); rg starts that much later
            kept = await asyncio.to_thread(self.kept.read)
            if kept is not None:
                self._publish(kept, whole=False, kept=True)
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
                listed = await asyncio.to_thread(Listing.of_paths, found[:])  # a copy: rg goes on adding
                if not self.complete_at:
                    self._publish(listed, whole=False)

        # an earlier daemon's whole listing beats a part of this one's
        early = None if self.from_kept else asyncio.ensure_future(index_so_far())
        try:
            code, _ = await run_rg(args, self.root, take, sep=b"\0")
        finally:
            if early is not None:
                early.cancel()
        if code < 0:  # killed (by the OOM killer, a person): a part, neither a listing nor to be kept
            raise ToolError(f"listing the workspace's files: rg was killed by signal {-code}")
        listed = await asyncio.to_thread(Listing.of_paths, found)  # joined and indexed off the event loop
        self._publish(listed, whole=True)
        if self.kept is not None and (self._keeping is None or self._keeping.done()):  # else the next one's
            self._keeping = asyncio.ensure_future(asyncio.to_thread(self.kept.write, listed.blob))

    def _refresh(self) -> asyncio.Future[None]:
        """One listing at a time: callers meanwhile share it."""
        if self._listing is None or self._listing.done():
            self._listing = asyncio.ensure_future(self._list())
            self._listing.add_done_callback(self._listed)
        return self._listing

    def _listed(self, done: asyncio.Future[None]) -> None:
        # a failure is taken here (none is lost unseen when a completion answered before it) and
        # logged once, not at each completion that lists again
        if done.cancelled():
            return
        failed = done.exception()
        said = None if failed is None else str(failed) or type(failed).__name__
        if said is not None and said != self._failed:
            log.warning("could not list the workspace's files: %s", said,
                        exc_info=None if isinstance(failed, ToolError) else failed)
        self._failed = said

    async def aclose(self) -> None:
        """A listing still running is stopped (its rg killed) and awaited: an rg left spawning when
        the event loop ends would hang asyncio's final cancellation (its pipes never connect). A
        listing being kept on disk is awaited (its thread finishes anyway)."""
        if self._listing is not None and not self._listing.done():
            self._listing.cancel()
            await asyncio.wait([self._listing])
        if self._keeping is not None:
            await asyncio.wait([self._keeping])

    async def _whole(self) -> Listing:
        """A whole listing of this daemon's rg: the last one (refreshed behind when stale), else the
        first one, awaited (never an earlier daemon's kept listing)."""
        if not self.complete_at:
            await asyncio.shield(self._refresh())
        elif time.monotonic() - self.complete_at > self.max_age:
            self._refresh()
        assert self.listed is not None and not self.from_kept
        return self.listed

    @staticmethod
    async def _file_set(listed: Listing) -> frozenset[str]:
        if "file_set" in vars(listed) or len(listed.files) <= OFF_LOOP:
            return listed.file_set
        return await asyncio.to_thread(getattr, listed, "file_set")  # ~1 ms per 20k files

    async def files(self) -> list[str]:
        """Workspace-relative paths (sorted); a stale kept list is returned and refreshed behind."""
        return (await self._whole()).files

    async def visible(self, rel: str) -> bool:
        """Whether rg lists the file (not hidden by the ignore rules, not under .git)."""
        if rel not in await self._file_set(await self._whole()):
            await asyncio.shield(self._refresh())
        return rel in await self._file_set(await self._whole())

    async def complete(self, prefix: str, limit: int, scan: int = 2000, wait: float = 0.03) -> list[tuple[str, str]]:
        """(path, "file"|"folder") for `prefix` (case-insensitive): the paths starting with it,
        shallowest first, then those that merely contain it (in their name first), shortest first;
        at most `scan` candidates of each kind are ranked.

        Before the first listing has finished, the answer is of the kept listing (an earlier
        daemon's: a path deleted since is left out, so the answer may have fewer than `limit` rows),
        else of the paths listed so far: at most `wait` seconds are spent waiting for the first of
        them to be indexed (a keystroke's budget)."""
        if not self.complete_at:
            running = self._refresh()
            self._wanted.set()
            if self.listed is None:
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
        if self.listed is None:
            return []
        rows = self.listed.complete(prefix, limit, scan)
        if self.from_kept:  # one lstat per row, only until this daemon's listing replaces the kept one
            root = str(self.root)
            rows = await asyncio.to_thread(existing, root, rows) if len(rows) > LSTAT_OFF_LOOP else existing(root, rows)
        return rows
