"""The session list from an index, not from reading every session whole.

Session files are append-only (a rewrite replaces the file, so it gets a new inode). For each file
the index keeps its inode, size, mtime and how far it was read, with what that part holds: the
title and creation time from its meta records and its message count. A list stats each file and
reads only the bytes appended since the last list (all of it for a new or replaced file), so a
10 MB session costs one read, once. The index is kept in memory and saved to `index.json` next to
the sessions; it is a cache checked against every file's stat, so a stale, foreign (another daemon
wrote it) or broken index only costs a re-read.

What this daemon appends itself is taken into the index as it is written (`note_write`, from
SessionFile), so while its sessions stream a list reads nothing and only stats. The saved index is
written (with an fsync) only once `SAVE_AFTER` bytes were taken in since the last save: saving is
what spares the next process those reads, and saving on every list put an fsync in every list while
20 sessions appended (p99 of session/list 2-3x that of a request that does no I/O).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from toycoder_daemon.core.util.atomic import atomic_write
from toycoder_daemon.sessions import stored

log = logging.getLogger(__name__)

META_PREFIX = b'{"t": "meta"'
MSG_PREFIX = b'{"t": "msg"'
INDEX_NAME = "index.json"


@dataclass(frozen=True)
class SessionSummary:
    """What a session list shows (timestamps are epoch seconds)."""

    id: str
    title: str
    created_at: float
    updated_at: float
    message_count: int
    mode: str | None = None
    """The permission mode, for an open session (lists leave it out)."""
    additional_directories: tuple[str, ...] = ()
    """The extra roots its client gave (ACP additionalDirectories)."""


@dataclass
class _Entry:
    ino: int
    size: int
    mtime_ns: int
    offset: int
    """Bytes read so far, up to the end of the last complete line."""
    title: str = ""
    created_at: float | None = None
    count: int = 0
    dirs: list[str] | None = None
    """The last meta record's additionalDirectories."""
    tail: str = ""
    """Hex of the bytes just before `offset`: a replaced file that got the old inode number back
    (inodes are reused) differs there, and is read again from the start."""


TAIL = 32
SAVE_AFTER = 1 << 20
"""Bytes read or noted since the last save after which a list saves the index. Only a list saves:
a noted write never does, nor does anything at exit, so a restarted daemon re-reads what lists
took in since the last save (under this much) plus whatever was appended after the last list."""


def _take(out: _Entry, raw: bytes) -> None:
    """One complete line (with its newline) counted into `out`."""
    out.offset += len(raw)
    out.tail = (out.tail + raw[-TAIL:].hex())[-2 * TAIL:]
    if raw.startswith(MSG_PREFIX):
        out.count += 1
    elif raw.startswith(META_PREFIX):
        try:
            meta = json.loads(raw)
        except (ValueError, RecursionError):  # hand-edited: sessions/stored.py says which line
            return
        if isinstance(meta.get("title"), str):
            out.title = meta["title"]
        if stored.timestamp(meta.get("createdAt")):
            out.created_at = float(meta["createdAt"])
        if isinstance(meta.get("additionalDirectories"), list):
            out.dirs = [d for d in meta["additionalDirectories"] if isinstance(d, str)]


def _scan(path: Path, entry: _Entry, st: os.stat_result) -> _Entry:
    """`entry` brought up to date with the complete lines after `entry.offset`."""
    with open(path, "rb") as f:
        if entry.offset:
            f.seek(entry.offset - len(entry.tail) // 2)
            if f.read(len(entry.tail) // 2).hex() != entry.tail:
                entry = _Entry(st.st_ino, -1, -1, 0)
        out = _Entry(st.st_ino, st.st_size, st.st_mtime_ns, entry.offset, entry.title, entry.created_at, entry.count,
                     entry.dirs, entry.tail)
        f.seek(entry.offset)
        for raw in f:
            if not raw.endswith(b"\n"):
                break  # a torn or still-being-written last line: read it next time
            _take(out, raw)
    return out


class SessionIndex:
    """Thread-safe: lists run in worker threads, several at once."""

    def __init__(self, directory: Path):
        self.dir = directory
        self._entries: dict[str, _Entry] | None = None
        self._lock = threading.Lock()
        self._unsaved = 0
        """Bytes taken in (read or noted) since the index was last saved."""

    def _load(self) -> dict[str, _Entry]:
        try:
            raw = json.loads((self.dir / INDEX_NAME).read_bytes())
            return {str(k): _Entry(**v) for k, v in raw.items()}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, TypeError, AttributeError) as e:
            log.info("session index %s unreadable (%s); rebuilding it", self.dir / INDEX_NAME, e)
            self._unsaved = SAVE_AFTER  # replace it at once, or every new process pays the rebuild
            return {}

    def _save(self, entries: dict[str, _Entry]) -> None:
        data = json.dumps({k: asdict(v) for k, v in entries.items()}, ensure_ascii=True).encode()
        try:
            atomic_write(self.dir / INDEX_NAME, data, 0o600)
        except OSError as e:  # only a cache: the next list reads the files again
            log.warning("cannot save the session index %s: %s", self.dir / INDEX_NAME, e)

    def note_write(self, path: Path, start: int, data: bytes, st: os.stat_result) -> None:
        """This daemon appended `data` (complete lines) to `path` at `start`, and the file is now
        `st`. The entry moves on when it was exactly up to `start` and nobody else wrote since (then
        a list need not read these bytes); otherwise it is left for a list to read. Called where
        the write happens (often the event loop): it never waits for a list holding the lock."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            entries, sid = self._entries, path.stem
            if (entries is None or path.parent != self.dir or st.st_size != start + len(data)
                    or not data.endswith(b"\n")):
                return
            entry = entries.get(sid)
            if entry is None and start == 0:
                entry = _Entry(st.st_ino, 0, -1, 0)  # a new session file: its first lines are these
            if entry is None or entry.ino != st.st_ino or entry.offset != start or entry.size != start:
                return
            out = _Entry(st.st_ino, st.st_size, st.st_mtime_ns, entry.offset, entry.title, entry.created_at,
                         entry.count, entry.dirs, entry.tail)
            for raw in data[:-1].split(b"\n"):  # lines as _scan reads them (split at b"\n" only)
                _take(out, raw + b"\n")
            entries[sid] = out
            self._unsaved += len(data)
        finally:
            self._lock.release()

    def summaries(self) -> list[SessionSummary]:
        """Every stored session, newest first."""
        with self._lock:
            if self._entries is None:
                self._entries = self._load()
            if not self.dir.is_dir():
                return []
            entries, out = self._entries, []
            present: set[str] = set()
            for path in self.dir.glob("*.jsonl"):
                sid = path.stem
                try:
                    st = path.stat()
                    entry = entries.get(sid)
                    if entry is None or entry.ino != st.st_ino or st.st_size < entry.offset:
                        entry = _Entry(st.st_ino, -1, -1, 0)  # new or replaced: read it all
                    if entry.size != st.st_size or entry.mtime_ns != st.st_mtime_ns:
                        read_from = entry.offset
                        entry = _scan(path, entry, st)
                        entries[sid] = entry
                        self._unsaved += entry.offset - read_from if entry.offset >= read_from else entry.offset
                except OSError:
                    continue  # deleted while listing
                present.add(sid)
                created = entry.created_at if entry.created_at is not None else st.st_mtime
                out.append(SessionSummary(sid, entry.title, created, st.st_mtime, entry.count,
                                          additional_directories=tuple(entry.dirs or ())))
            for gone in set(entries) - present:
                del entries[gone]
                self._unsaved = SAVE_AFTER  # deletes are rare: keep the saved index to what exists
            if self._unsaved >= SAVE_AFTER:
                self._save(entries)
                self._unsaved = 0
        return sorted(out, key=lambda s: s.updated_at, reverse=True)
