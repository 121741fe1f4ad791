"""Session files: append-only JSONL per session, per workspace, under the data directory.

    <data>/sessions/<hash of the workspace path>/<session id>.jsonl
    {"t":"meta", ...}      settings; the last meta record wins
    {"t":"msg","m":{...}}  one message (the system prompt is not stored: it is rendered afresh)
    {"t":"end","turn":id,"stopReason":..,"usage":[..]}  how a turn ended (older files keep these
                           in the meta record's "turnEnds", which is still read)
    {"t":"context","start":n,"head":[{...}],"strategy":..}  the model's context from here on: `head`
                           (a compaction's summary), then the messages from the n-th (sessions/conversation.Mark)

Nothing is ever removed by compaction: the file holds every message the person saw, and a turn
appends only what it adds.

Appending writes one line (cost independent of the session's length). A torn last line (the
daemon was killed mid-write) is cut off on open and reported in the log. Rewrites (a repair that
inserts answers to tool calls a killed daemon left open) go through a temp file, fsync and
os.replace. A `<id>.lock` file held with flock while a turn (or a settings change) writes keeps
two daemons from writing at once: the second gets SessionBusy. Between
turns any daemon may have the session open; each remembers how far it has read (`offset`) and reads
only what others appended since (`read_new`). Lists come from an index (sessions/listing.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from toycoder_daemon.core.errors import MAX_SESSION_ID, InvalidSessionId, SessionBusy, SessionDeleted, SessionNotFound
from toycoder_daemon.core.messages import Message
from toycoder_daemon.core.util import safejson
from toycoder_daemon.core.util.atomic import atomic_write
from toycoder_daemon.sessions import stored
from toycoder_daemon.sessions.conversation import Mark, Stored
from toycoder_daemon.sessions.listing import SessionIndex, SessionSummary

__all__ = ["SessionFile", "SessionStore", "SessionSummary"]

log = logging.getLogger(__name__)


def _open_append(path: Path) -> BinaryIO:
    """Session files hold the conversation (code, command output): readable by their owner only."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab")


def _line(record: dict[str, Any]) -> bytes:
    return safejson.dumps_bytes(record) + b"\n"


def _parse(chunk: bytes, name: str) -> tuple[dict[str, Any], list[Stored]]:
    """Complete lines -> (meta updates, the last meta record winning, turn ends merged into its
    "turnEnds"; messages and marks in order). Lines are untrusted (sessions/stored.py): what is
    unreadable is skipped or repaired, and logged."""
    meta: dict[str, Any] = {}
    records: list[Stored] = []
    for number, raw in enumerate(chunk.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except (ValueError, RecursionError):  # RecursionError: nested too deep for the parser
            log.warning("%s: line %d: unreadable; skipped", name, number)
            continue
        if not isinstance(rec, dict):
            log.warning("%s: line %d: not a JSON object; skipped", name, number)
            continue
        kind = rec.get("t")
        if kind == "meta":
            rec = stored.meta(rec, name, number)
            ends = {**(meta.get("turnEnds") or {}), **(rec.get("turnEnds") or {})} if "turnEnds" in rec else None
            meta.update(rec)
            if ends is not None:
                meta["turnEnds"] = ends
        elif kind == "msg":
            if (m := stored.message(rec.get("m"), name, number)) is not None:
                records.append(m)
        elif kind == "end" and isinstance(rec.get("turn"), str):
            meta.setdefault("turnEnds", {})[rec["turn"]] = {k: v for k, v in rec.items() if k not in ("t", "turn")}
        elif kind == "context" and type(rec.get("start")) is int and rec["start"] >= 0 \
                and isinstance(rec.get("head"), list):
            head = [m for m in (stored.message(h, name, number) for h in rec["head"]) if m is not None]
            info = {k: v for k, v in rec.items() if k not in ("t", "start", "head")}
            records.append(Mark(rec["start"], tuple(head), info))
        elif kind in ("end", "context"):
            log.warning("%s: line %d: unreadable %s record; skipped", name, number, kind)
        else:  # another version's kind of record, perhaps: nothing this one can use
            log.debug("%s: line %d: unknown record (t=%.40r) skipped", name, number, kind)
    return meta, records


def _record(r: Stored) -> dict[str, Any]:
    if isinstance(r, Mark):
        return {"t": "context", "start": r.start, "head": list(r.head), **r.info}
    return {"t": "msg", "m": r}


@dataclass
class Appended:
    """What other daemons wrote since this one last read: settings, messages and marks. `reset`:
    the file was rewritten (a repair), so `messages` is the whole history, not an addition."""

    meta: dict[str, Any] = field(default_factory=dict)
    messages: list[Stored] = field(default_factory=list)
    reset: bool = False


class SessionFile:
    """An open session: its append handle, how far it has been read, and its lock while a turn
    runs. Rewrites run in a worker thread, so every write takes `_writing`: an append never lands in
    the file being replaced."""

    def __init__(self, path: Path, lock_path: Path, offset: int = 0, index: SessionIndex | None = None):
        self.path = path
        self._index = index
        """Told what this file appends, so lists need not read it back (sessions/listing.py)."""
        self._lock_path = lock_path
        self._lock_fd = -1
        self._out = _open_append(path)
        self._writing = threading.Lock()
        self.offset = offset
        """Bytes of the file this daemon has read or written itself."""
        self._inode = os.fstat(self._out.fileno()).st_ino

    @property
    def held(self) -> bool:
        return self._lock_fd >= 0

    def acquire(self) -> None:
        """Take the session for a turn; SessionBusy while another daemon's turn holds it,
        SessionDeleted when another daemon deleted it (then our lock file goes too: the delete
        left no `<id>.*` file, and neither do we)."""
        if self._lock_fd < 0:
            fd = _lock(self._lock_path)
            if self.gone():  # checked under the lock, which a delete holds while it unlinks
                self._lock_path.unlink(missing_ok=True)
                os.close(fd)
                raise SessionDeleted(self._lock_path.stem)
            self._lock_fd = fd

    def gone(self) -> bool:
        """Deleted (by another daemon) since it was opened? A rewrite replaces the file atomically:
        only a delete leaves no file at the path."""
        return not os.path.lexists(self.path)

    def release(self) -> None:
        if self._lock_fd >= 0:
            if self.gone():  # deleted under our turn (by hand: a delete takes the lock): leave no lock file
                self._lock_path.unlink(missing_ok=True)
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = -1

    def _write(self, data: bytes) -> None:
        with self._writing:
            out, replaced = self._out, self._replaced()
            if replaced:  # another daemon rewrote the file (compaction) since we last read it
                out = _open_append(self.path)
            try:
                end = os.fstat(out.fileno()).st_size
                out.write(data)
                out.flush()  # in the OS's hands: survives the daemon being killed
                if not replaced and end == self.offset:  # nothing unread before our line: it counts as read
                    self.offset = end + len(data)
                if self._index is not None:
                    self._index.note_write(self.path, end, data, os.fstat(out.fileno()))
            finally:
                if replaced:
                    out.close()

    def _replaced(self) -> bool:
        """Is `path` now another file than the one we hold open? Then a write goes into the file
        that is there, through a handle of its own: our handle, `_inode` and `offset` stay those of
        the old file, so the next read_new sees the replacement and reads the new file whole (our
        line included). Race-free as writes hold the session lock, which a rewrite takes too."""
        try:
            return os.stat(self.path).st_ino != self._inode
        except FileNotFoundError:  # deleted elsewhere: a write would go to an unlinked inode, lost
            raise SessionDeleted(self._lock_path.stem) from None

    def append(self, messages: list[Message]) -> None:
        self._write(b"".join(_line({"t": "msg", "m": m}) for m in messages))

    def mark(self, mark: Mark) -> None:
        self._write(_line(_record(mark)))

    def end_turn(self, turn_id: str, end: dict[str, Any], meta: dict[str, Any]) -> None:
        """How a turn ended, and the settings as it ends: two lines, one write."""
        self._write_locked(_line({"t": "end", "turn": turn_id, **end}) + _line({"t": "meta", **meta}))

    def write_meta(self, meta: dict[str, Any]) -> None:
        """A settings change: outside a turn it takes the lock for the one write."""
        self._write_locked(_line({"t": "meta", **meta}))

    def _write_locked(self, data: bytes) -> None:
        if self.held:
            self._write(data)
            return
        self.acquire()
        try:
            self._write(data)
        finally:
            self.release()

    def rewrite(self, meta: dict[str, Any], records: list[Stored]) -> None:
        data = _line({"t": "meta", **meta}) + b"".join(_line(_record(r)) for r in records)
        with self._writing:
            self._out.close()
            try:
                atomic_write(self.path, data, 0o600)
            finally:
                self._out = _open_append(self.path)
                self._inode = os.fstat(self._out.fileno()).st_ino
                self.offset = len(data)

    def changed_elsewhere(self) -> bool:
        """Cheap (one stat): has another daemon written since we last read?"""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return False
        return st.st_ino != self._inode or st.st_size != self.offset

    def read_new(self) -> Appended:
        """What others wrote since `offset` (complete lines only). With the lock held, a torn last
        line is a writer that died mid-write: it is cut off. Blocking: async callers use a thread."""
        with self._writing:
            if os.stat(self.path).st_ino != self._inode:  # replaced by another daemon's rewrite
                self._out.close()
                self._out = _open_append(self.path)
                self._inode = os.fstat(self._out.fileno()).st_ino
                meta, messages = _read(self.path, repair=self.held)
                self.offset = os.fstat(self._out.fileno()).st_size
                return Appended(meta, messages, reset=True)
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
            complete, newline, torn = data.rpartition(b"\n")
            consumed = len(complete) + len(newline)
            if torn and self.held:
                log.warning("%s: torn last line (%d bytes) cut off; a daemon was probably killed mid-write",
                            self.path.name, len(torn))
                os.truncate(self.path, self.offset + consumed)
            self.offset += consumed
            meta, messages = _parse(complete, self.path.name)
            return Appended(meta, messages)

    @contextlib.contextmanager
    def closed_on_error(self) -> Iterator[None]:
        """Close this file if the block fails."""
        try:
            yield
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        with self._writing:
            if not self._out.closed:
                self._out.close()
        self.release()


PID_WIDTH = 20
"""Bytes of a lock file's pid field (a 64-bit pid fits; readers strip the padding)."""


def _lock(lock_path: Path) -> int:
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        field = os.read(fd, 32).decode(errors="replace").strip(" \0\n")
        holder = field if field.isdigit() else "?"  # a crash's NULs or a half-written pid say nothing
        os.close(fd)
        raise SessionBusy(lock_path.stem, "a turn is running elsewhere, in another ToyCoder daemon "
                                          f"(pid {holder}); try again when it ends") from None
    # the holder's pid, written in place and padded over any longer one: an ftruncate waits for the
    # disk's journal (ms when other processes write, on the event loop at every turn's start)
    os.pwrite(fd, str(os.getpid()).ljust(PID_WIDTH).encode(), 0)
    return fd


def _read(path: Path, repair: bool = True) -> tuple[dict[str, Any], list[Stored]]:
    meta, messages, _ = _read_to(path, repair)
    return meta, messages


def _read_to(path: Path, repair: bool = True) -> tuple[dict[str, Any], list[Stored], int]:
    """Parse a session file; a torn last line is skipped, and cut off (when repairing, i.e. with the
    lock held) so the next append starts clean."""
    data = path.read_bytes()
    *complete, torn = data.split(b"\n")  # `torn` is b"" when the file ends with a newline
    meta, messages = _parse(b"\n".join(complete), path.name)
    if torn and repair:
        log.warning("%s: torn last line (%d bytes) cut off; the daemon was probably killed mid-write",
                    path.name, len(torn))
        with open(path, "r+b") as f:
            f.truncate(len(data) - len(torn))
    return meta, messages, len(data) - len(torn)


class SessionStore:
    def __init__(self, data_dir: Path, workspace: Path):
        key = hashlib.sha256(str(workspace).encode()).hexdigest()[:16]
        self.dir = data_dir / "sessions" / key
        self.data_dir = data_dir
        """Where other per-session data (checkpoints) lives too."""
        self.workspace = workspace
        self._index = SessionIndex(self.dir)

    def _ensure_dir(self) -> None:
        if not self.dir.exists():
            self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            (self.dir / "workspace.txt").write_text(str(self.workspace) + "\n")

    def _path(self, session_id: str) -> Path:
        if len(session_id.encode(errors="replace")) > MAX_SESSION_ID:
            raise InvalidSessionId(session_id)
        if not session_id or not all(c.isalnum() or c in "-_" for c in session_id):
            raise SessionNotFound(session_id)
        return self.dir / f"{session_id}.jsonl"

    def _lock_path(self, session_id: str) -> Path:
        return self.dir / f"{session_id}.lock"

    @staticmethod
    def new_id() -> str:
        return uuid.uuid4().hex[:12]

    def create(self, session_id: str, meta: dict[str, Any]) -> SessionFile:
        self._ensure_dir()
        f = SessionFile(self._path(session_id), self._lock_path(session_id), index=self._index)
        f.write_meta(meta)
        return f

    def open(self, session_id: str) -> tuple[SessionFile, dict[str, Any], list[Stored]]:
        """The file, its settings and messages (and marks); the file holds the lock when no turn runs elsewhere
        (then the caller may repair, and must `release()`)."""
        path = self._path(session_id)
        if not path.is_file():
            raise SessionNotFound(session_id)
        f = SessionFile(path, self._lock_path(session_id), index=self._index)
        with f.closed_on_error():
            with contextlib.suppress(SessionBusy):
                f.acquire()  # the caller releases it once it has repaired what a dead turn left
            meta, messages, f.offset = _read_to(path, repair=f.held)  # a running turn's half line stays
            return f, meta, messages

    def read(self, session_id: str) -> tuple[dict[str, Any], list[Stored], float]:
        """(meta, messages and marks, mtime) without the lock: for looking, never for writing."""
        path = self._path(session_id)
        try:
            mtime = path.stat().st_mtime
            meta, messages = _read(path, repair=False)
        except FileNotFoundError:
            raise SessionNotFound(session_id) from None
        return meta, messages, mtime

    @property
    def index(self) -> SessionIndex:
        """Its directory's session index (sessions/catalog.py lists through this one)."""
        return self._index

    def list(self) -> list[SessionSummary]:
        """Summaries of every stored session, newest first, from the index (sessions/listing.py):
        only bytes appended since the last list are read. Blocking: async callers use a thread."""
        return self._index.summaries()

    def delete(self, session_id: str) -> None:
        path = self._path(session_id)
        if not path.is_file():
            raise SessionNotFound(session_id)
        lock = _lock(self._lock_path(session_id))  # refuses while another daemon's turn runs
        try:
            path.unlink()
            self._lock_path(session_id).unlink(missing_ok=True)
        finally:
            os.close(lock)
