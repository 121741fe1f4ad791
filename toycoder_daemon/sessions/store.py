"""Session files: append-only JSONL per session, per workspace, under the data directory.

    <data>/sessions/<hash of the workspace path>/<session id>.jsonl
    {"t":"meta", ...}      settings; the last meta record wins
    {"t":"msg","m":{...}}  one message (the system prompt is not stored: it is rendered afresh)

Appending writes one line (cost independent of the session's length). A torn last line (the
daemon was killed mid-write) is cut off on open and reported in the log. Rewrites (compaction) go
through a temp file, fsync and os.replace. A `<id>.lock` file held with flock keeps a second daemon
from writing the same session; it gets SessionBusy instead.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

from ..atomic import atomic_write
from ..errors import SessionBusy, SessionNotFound
from ..messages import Message

log = logging.getLogger(__name__)

META_PREFIX = b'{"t": "meta"'
MSG_PREFIX = b'{"t": "msg"'


@dataclass(frozen=True)
class SessionSummary:
    """What a session list shows (timestamps are epoch seconds)."""

    id: str
    title: str
    created_at: float
    updated_at: float
    message_count: int


def _open_append(path: Path) -> BinaryIO:
    """Session files hold the conversation (code, command output): readable by their owner only."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab")


def _line(record: dict[str, Any]) -> bytes:
    # a lone surrogate (a model's, a file name's) is kept as its JSON escape: the line always encodes
    return json.dumps(record, ensure_ascii=False).encode("utf-8", "backslashreplace") + b"\n"


class SessionFile:
    """An open session: its lock and its append handle. Rewrites run in a worker thread, so every
    write takes `_writing`: an append never lands in the file being replaced."""

    def __init__(self, path: Path, lock_fd: int):
        self.path = path
        self._lock_fd = lock_fd
        self._out = _open_append(path)
        self._writing = threading.Lock()

    def append(self, messages: list[Message]) -> None:
        data = b"".join(_line({"t": "msg", "m": m}) for m in messages)
        with self._writing:
            self._out.write(data)
            self._out.flush()  # in the OS's hands: survives the daemon being killed

    def write_meta(self, meta: dict[str, Any]) -> None:
        data = _line({"t": "meta", **meta})
        with self._writing:
            self._out.write(data)
            self._out.flush()

    def rewrite(self, meta: dict[str, Any], messages: list[Message]) -> None:
        data = _line({"t": "meta", **meta}) + b"".join(_line({"t": "msg", "m": m}) for m in messages)
        with self._writing:
            self._out.close()
            try:
                atomic_write(self.path, data, 0o600)
            finally:
                self._out = _open_append(self.path)

    @contextlib.contextmanager
    def closed_on_error(self) -> Iterator[None]:
        """Close (and so unlock) this file if the block fails: a session that failed to load
        must not stay locked."""
        try:
            yield
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        with self._writing:
            if not self._out.closed:
                self._out.close()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = -1


def _read(path: Path, repair: bool = True) -> tuple[dict[str, Any], list[Message]]:
    """Parse a session file; a torn last line is skipped, and cut off (when repairing, i.e. with the
    lock held) so the next append starts clean."""
    data = path.read_bytes()
    *complete, torn = data.split(b"\n")  # `torn` is b"" when the file ends with a newline
    meta: dict[str, Any] = {}
    messages: list[Message] = []
    for number, raw in enumerate(complete, 1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except ValueError:
            log.warning("%s: unreadable line %d skipped", path.name, number)
            continue
        if rec.get("t") == "meta":
            meta.update({k: v for k, v in rec.items() if k != "t"})
        elif rec.get("t") == "msg" and isinstance(rec.get("m"), dict):
            messages.append(cast(Message, rec["m"]))  # our own records: trusted to have our shapes
    if torn and repair:
        log.warning("%s: torn last line (%d bytes) cut off; the daemon was probably killed mid-write",
                    path.name, len(torn))
        with open(path, "r+b") as f:
            f.truncate(len(data) - len(torn))
    return meta, messages


class SessionStore:
    def __init__(self, data_dir: Path, workspace: Path):
        key = hashlib.sha256(str(workspace).encode()).hexdigest()[:16]
        self.dir = data_dir / "sessions" / key
        self.workspace = workspace

    def _ensure_dir(self) -> None:
        if not self.dir.exists():
            self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            (self.dir / "workspace.txt").write_text(str(self.workspace) + "\n")

    def _path(self, session_id: str) -> Path:
        if not session_id or not all(c.isalnum() or c in "-_" for c in session_id):
            raise SessionNotFound(session_id)
        return self.dir / f"{session_id}.jsonl"

    def _lock(self, session_id: str) -> int:
        fd = os.open(self.dir / f"{session_id}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise SessionBusy(session_id, f"it is open in another ToyCoder daemon (pid {holder})") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        return fd

    @staticmethod
    def new_id() -> str:
        return uuid.uuid4().hex[:12]

    def create(self, session_id: str, meta: dict[str, Any]) -> SessionFile:
        self._ensure_dir()
        path = self._path(session_id)
        lock = self._lock(session_id)
        f = SessionFile(path, lock)
        f.write_meta(meta)
        return f

    def open(self, session_id: str) -> tuple[SessionFile, dict[str, Any], list[Message]]:
        path = self._path(session_id)
        if not path.is_file():
            raise SessionNotFound(session_id)
        lock = self._lock(session_id)
        try:
            meta, messages = _read(path)
            return SessionFile(path, lock), meta, messages
        except BaseException:
            os.close(lock)
            raise

    def read(self, session_id: str) -> tuple[dict[str, Any], list[Message], float]:
        """(meta, messages, mtime) without the lock: for looking, never for writing."""
        path = self._path(session_id)
        try:
            mtime = path.stat().st_mtime
            meta, messages = _read(path, repair=False)
        except FileNotFoundError:
            raise SessionNotFound(session_id) from None
        return meta, messages, mtime

    def list(self) -> list[SessionSummary]:
        """Summaries of every stored session, newest first, without parsing the messages."""
        out: list[SessionSummary] = []
        if not self.dir.is_dir():
            return out
        for path in self.dir.glob("*.jsonl"):
            try:
                meta: dict[str, Any] = {}
                count = 0
                with open(path, "rb") as f:
                    for raw in f:
                        if raw.startswith(MSG_PREFIX):
                            count += 1
                        elif raw.startswith(META_PREFIX):
                            with contextlib.suppress(ValueError):
                                meta.update(json.loads(raw))
                mtime = path.stat().st_mtime
            except OSError:
                continue
            out.append(SessionSummary(path.stem, meta.get("title") or "", meta.get("createdAt", mtime), mtime, count))
        return sorted(out, key=lambda s: s.updated_at, reverse=True)

    def delete(self, session_id: str) -> None:
        path = self._path(session_id)
        if not path.is_file():
            raise SessionNotFound(session_id)
        lock = self._lock(session_id)  # refuses while another daemon holds it
        try:
            path.unlink()
            (self.dir / f"{session_id}.lock").unlink(missing_ok=True)
        finally:
            os.close(lock)
