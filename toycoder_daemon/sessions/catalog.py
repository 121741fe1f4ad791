"""Every workspace's sessions under the data dir, for the session lists that are not one
workspace's (ACP `session/list` without `cwd`, `toycoder/session/list {all}`), and their pages.

Each workspace's sessions live in a directory of their own whose `workspace.txt` names the
workspace (sessions/store.py); each directory is listed through its SessionIndex (listing.py), the
one an open App's store uses when there is one (`use`), so what this daemon appends is never read
back. A session without messages is never listed: clients open sessions eagerly, and a list full
of empty ones hides the real ones.
"""

from __future__ import annotations

import base64
import json
import math
import threading
from dataclasses import dataclass
from pathlib import Path

from toycoder_daemon.sessions.listing import SessionIndex, SessionSummary

WORKSPACE_FILE = "workspace.txt"
PAGE_SIZE = 100
"""Sessions per page of a list (ACP's `cursor` pages through the rest)."""


@dataclass(frozen=True)
class Listed:
    summary: SessionSummary
    cwd: str
    """The workspace the session belongs to (the directory its session/load takes)."""


def listed(rows: list[SessionSummary]) -> list[SessionSummary]:
    """What a list shows of a workspace's stored sessions: those with messages."""
    return [r for r in rows if r.message_count]


class Catalog:
    """Thread-safe: lists run in worker threads."""

    def __init__(self, data_dir: Path):
        self.root = data_dir / "sessions"
        self._indexes: dict[Path, SessionIndex] = {}
        self._known: dict[Path, str] = {}
        """Directories of open stores -> their workspace (listed even without `workspace.txt`)."""
        self._lock = threading.Lock()

    def use(self, index: SessionIndex, workspace: Path) -> None:
        """List `workspace`'s directory through `index` (an open store's: it knows what this daemon wrote)."""
        with self._lock:
            self._indexes[index.dir] = index
            self._known[index.dir] = str(workspace)

    def _index(self, directory: Path) -> SessionIndex:
        with self._lock:
            index = self._indexes.get(directory)
            if index is None:
                index = self._indexes[directory] = SessionIndex(directory)
            return index

    def workspaces(self) -> list[tuple[Path, str]]:
        """(sessions directory, workspace path) of every workspace that has stored sessions."""
        with self._lock:
            known = dict(self._known)
        out = []
        try:
            dirs = sorted(self.root.iterdir())
        except OSError:
            return []
        for d in dirs:
            cwd = known.get(d)
            if cwd is None:
                try:
                    cwd = (d / WORKSPACE_FILE).read_text().strip()
                except OSError:
                    continue  # not a workspace's directory (or going away)
            if cwd:
                out.append((d, cwd))
        return out

    def list(self, cwd: Path | None = None) -> list[Listed]:
        """Sessions with messages, newest first: every workspace's, or only `cwd`'s. Blocking."""
        rows: list[Listed] = []
        for d, root in self.workspaces():
            if cwd is not None and Path(root) != cwd:
                continue
            rows += [Listed(s, root) for s in listed(self._index(d).summaries())]
        return sorted(rows, key=lambda r: (-r.summary.updated_at, r.summary.id))

    def find(self, session_id: str) -> str | None:
        """The workspace of a stored session (with or without messages), or None. Blocking."""
        if not session_id or not all(c.isalnum() or c in "-_" for c in session_id):
            return None  # not an id this daemon makes (nor a path to follow)
        for d, root in self.workspaces():
            if (d / f"{session_id}.jsonl").is_file():
                return root
        return None


class BadCursor(ValueError):
    pass


def _cursor(row: Listed) -> str:
    key = json.dumps([row.summary.updated_at, row.summary.id]).encode()
    return base64.urlsafe_b64encode(key).decode()


def page(rows: list[Listed], cursor: str | None, size: int | None = None) -> tuple[list[Listed], str | None]:
    """One page of `rows` (newest first) after `cursor`, and the cursor of the next page (None: the
    last). The cursor names the last row given (its time and id), so a session written between two
    pages moves to the front and neither repeats nor hides another one. BadCursor for one this
    function did not make."""
    size, start = size or PAGE_SIZE, 0
    if cursor:
        try:
            updated, sid = json.loads(base64.urlsafe_b64decode(cursor.encode()))
            # ours holds a finite number and a string: anything else (a 400-digit number that no
            # float holds, a nesting json cannot recurse through) is not ours
            if isinstance(updated, bool) or not isinstance(updated, int | float) or not isinstance(sid, str):
                raise TypeError("not [time, id]")
            after = (-float(updated), sid)
            if not math.isfinite(after[0]):
                raise ValueError("not a finite time")
        except (ValueError, TypeError, OverflowError, RecursionError):
            raise BadCursor(f"not a cursor of this list: {cursor[:100]!r}") from None
        start = next((i for i, r in enumerate(rows) if (-r.summary.updated_at, r.summary.id) > after), len(rows))
    chunk = rows[start:start + size]
    more = start + size < len(rows)
    return chunk, _cursor(chunk[-1]) if more and chunk else None
