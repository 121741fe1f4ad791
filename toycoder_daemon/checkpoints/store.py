"""Checkpoints: what each turn's file writes replaced, so any turn can be undone.

    <data>/checkpoints/<hash of the workspace path>/<session id>/
        index.jsonl            append-only; one JSON record a line
        blobs/<ab>/<abcd...>   file contents by sha256, deduplicated

        restore.journal        while a restore runs: its plan (restore.py)
        restore.lock           held (flock) by the restore running, in any daemon

    {"t":"turn","id":...,"kind":"prompt"|"restore","at":<epoch>,"prompt":<first line>,"of":<turn>}
    {"t":"before","turn":...,"path":<relative>,"state":{...}}   before the turn's first write to it
    {"t":"after","turn":...,"path":<relative>,"state":{...}}    after each write (the last one counts)

A turn's record is written with its first file record, so turns that wrote nothing leave no trace.
A torn last line (the daemon was killed mid-append) is ignored, and cut off before the next append.
The index is untrusted (hand-edited data): a line whose path is not inside the workspace is skipped,
modes keep their permission bits only (State.from_json). `of` is the turn a restore restored.
Nothing is ever written to the user's repository and no git command runs. Paths are keyed relative
to the workspace; non-UTF-8 names travel as surrogate-escaped str (os.fsdecode), round-tripped by
the index's ASCII escapes. The caller holds the session's lock (SessionStore) while writing here.

What this cannot track: only writes announced through record_before_write/record_after_write
(write_file, edit_file, and MCP or sub-agent writes that go through those tools). Files changed by
run_command (or by the person, or any other program) are not recorded: an undo does not bring them
back, and says so (UNTRACKED_NOTE); it notices them only as conflicts on the paths it does know.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Literal, TypedDict

from toycoder_daemon.checkpoints.restore import Editor, RestoreResult, UnknownCheckpoint, finish_unfinished, restore
from toycoder_daemon.checkpoints.state import Blobs, Recorded, State, Turn, confined, dumps, observe, of_content

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 10 * 1024 * 1024
PROMPT_MAX = 200
BINARY_SNIFF = 8192  # the same test the file tools use: a NUL byte early on means binary


class FileChange(TypedDict):
    path: str
    status: Literal["created", "modified", "deleted"]
    added: int | None
    """Lines added and removed; None when either side is not text (binary, too large, a link)."""
    removed: int | None
    inEditor: bool
    """The change went into an editor's buffer (its after-state is the buffer's text), not to disk."""


class FileDiff(TypedDict):
    path: str
    status: Literal["created", "modified", "deleted"]
    diff: str | None
    """The unified diff of the turn's net change to the file; None when a side is not text."""
    inEditor: bool


class Checkpoint(TypedDict):
    turnId: str
    kind: str
    restoreOf: str
    """For a restore: the turn it restored ("" otherwise)."""
    createdAt: float
    prompt: str
    files: list[FileChange]


def first_line(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= PROMPT_MAX else line[: PROMPT_MAX - 1] + "…"


class CheckpointStore:
    """One session's checkpoints. `max_bytes` caps the size of a file whose content is kept."""

    def __init__(self, data_dir: Path, workspace: Path, session_id: str, *, max_bytes: int = DEFAULT_MAX_BYTES):
        if not session_id or not all(c.isalnum() or c in "-_" for c in session_id):
            raise ValueError(f"bad session id {session_id!r}")
        workspace = workspace.resolve()
        key = hashlib.sha256(str(workspace).encode()).hexdigest()[:16]  # as SessionStore keys it
        self.base = data_dir / "checkpoints" / key
        self.dir = self.base / session_id
        self.index = self.dir / "index.jsonl"
        self.journal = self.dir / "restore.journal"
        self.blobs = Blobs(self.dir / "blobs")
        self.workspace = workspace
        self.max_bytes = max_bytes
        self.turns: list[Turn] = []
        self._by_id: dict[str, Turn] = {}
        self._last: dict[str, State] = {}
        """Each path's latest state the agent knows of (its last write, or what it saw before one)."""
        self._lock = threading.RLock()  # writes run on worker threads; restore holds it throughout
        self._repaired = False
        self._stats: dict[tuple[str, str], tuple[int, int] | None] = {}
        self._load()
        if self.journal.exists():  # a restore a killed daemon left half done: finished before anything else
            with self._lock:
                finish_unfinished(self)

    # ---- the index ----------------------------------------------------------------------------

    def _load(self) -> None:
        try:
            data = self.index.read_bytes()
        except FileNotFoundError:
            return
        *complete, torn = data.split(b"\n")
        if torn:
            log.warning("%s: torn last line (%d bytes) ignored", self.index, len(torn))
        for number, raw in enumerate(complete, 1):
            if raw.strip():
                try:
                    self._apply(json.loads(raw))
                except (ValueError, KeyError, TypeError, AttributeError) as e:
                    log.warning("%s: line %d skipped (%s)", self.index, number, e)

    def _apply(self, rec: dict[str, Any]) -> None:
        if rec["t"] == "turn":
            self._add_turn(Turn(str(rec["id"]), str(rec["kind"]), float(rec["at"]), str(rec["prompt"]), on_disk=True,
                                restore_of=str(rec.get("of") or "")))
            return
        turn, path = self._by_id[rec["turn"]], confined(str(rec["path"]))
        state = State.from_json(rec["state"], path)
        if rec["t"] == "before":
            turn.before.setdefault(path, state)
        elif rec["t"] == "after":
            turn.after[path] = state
        else:
            raise ValueError(f"unknown record {rec['t']!r}")
        self._last[path] = state

    def _add_turn(self, turn: Turn) -> None:
        self.turns.append(turn)
        self._by_id[turn.id] = turn

    def _prepare(self) -> None:
        """Before the first write: private directories, and no torn line for an append to join."""
        if not self._repaired:
            self._ensure_dir()
            self._cut_torn_tail()
            self._repaired = True

    def _append(self, *records: dict[str, Any]) -> None:
        fd = os.open(self.index, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "ab") as out:
            out.write(b"".join(dumps(r) for r in records))  # flushed on close, as session files are

    def _ensure_dir(self) -> None:
        if not self.base.exists():
            self.base.mkdir(mode=0o700, parents=True, exist_ok=True)
            (self.base / "workspace.txt").write_text(str(self.workspace) + "\n")
        self.dir.mkdir(mode=0o700, exist_ok=True)
        self.blobs.root.mkdir(mode=0o700, exist_ok=True)

    def _cut_torn_tail(self) -> None:
        try:
            with open(self.index, "r+b") as f:
                data = f.read()
                if data and not data.endswith(b"\n"):
                    f.truncate(data.rfind(b"\n") + 1)
        except FileNotFoundError:
            pass

    # ---- recording ----------------------------------------------------------------------------

    def begin_turn(self, turn_id: str, prompt: str, kind: str = "prompt", restore_of: str = "") -> str:
        """Start a turn; returns its checkpoint id: `turn_id`, or `turn_id.N` when an earlier daemon
        already used that id for this session (turn numbers restart with the daemon). Nothing is
        written until the turn records a file."""
        with self._lock:
            tid, n = turn_id, 1
            while tid in self._by_id:
                n += 1
                tid = f"{turn_id}.{n}"
            self._add_turn(Turn(tid, kind, time.time(), first_line(prompt), restore_of=restore_of))
            return tid

    def turn(self, turn_id: str) -> Turn | None:
        return self._by_id.get(turn_id)

    def _turn(self, turn_id: str) -> Turn:
        turn = self._by_id.get(turn_id)
        if turn is None:  # a write outside a begun turn still gets its checkpoint
            turn = Turn(turn_id, "prompt", time.time(), "")
            self._add_turn(turn)
        return turn

    def key(self, path: Path | str) -> str:
        """The relative key of a path (absolute, or relative to the workspace)."""
        p = Path(path)
        p = p if p.is_absolute() else self.workspace / p
        try:
            rel = p.relative_to(self.workspace)
        except ValueError:
            raise ValueError(f"{os.fsdecode(p)!r} is outside the workspace {self.workspace}") from None
        if not rel.parts or ".." in rel.parts:
            raise ValueError(f"{os.fsdecode(p)!r} is not a file in the workspace")
        return rel.as_posix()

    def state_of(self, key: str, keep: bool = False) -> State:
        """What `key` holds now; `keep` stores a file's content among the blobs."""
        return observe(self.workspace / key, self.workspace, self.blobs if keep else None, self.max_bytes)

    def _problem(self, key: str, state: State) -> str | None:
        if state.kind == "file" and not state.stored:
            return (f"{key} is too large to checkpoint ({state.size} bytes; the limit is {self.max_bytes}): "
                    "undo cannot bring this version back")
        return None

    def _state(self, key: str, content: bytes | None) -> State:
        if content is None:
            return self.state_of(key, keep=True)
        return of_content(content, self.workspace / key, self.blobs, self.max_bytes)

    def record_before_write(self, turn_id: str, path: Path | str, *, content: bytes | None = None) -> Recorded:
        """Keep what `path` holds before the turn's first write to it; later calls in the same turn
        are no-ops (the first state is the one undo returns to). `content`: the editor's text the
        edit starts from, when the edit goes through an open buffer rather than the disk."""
        key = self.key(path)
        with self._lock:
            turn = self._turn(turn_id)
            if key in turn.before:
                return Recorded(key, self._problem(key, turn.before[key]))
            self._prepare()
            try:
                state = self._state(key, content)
            except OSError as e:  # unreadable: the write will most likely fail too; nothing to keep
                return Recorded(key, f"{key} could not be read to checkpoint it ({e.strerror or e})")
            records = [] if turn.on_disk else [self._turn_record(turn)]
            self._append(*records, {"t": "before", "turn": turn.id, "path": key, "state": state.to_json()})
            turn.on_disk = True
            turn.before[key] = state
            self._last[key] = state
            return Recorded(key, self._problem(key, state))

    def record_after_write(self, turn_id: str, path: Path | str, *, content: bytes | None = None) -> Recorded:
        """Note what the agent's write left at `path` (conflict detection compares against it);
        `content`: the buffer's text after an edit the editor applied."""
        key = self.key(path)
        with self._lock:
            turn = self._by_id.get(turn_id)
            if turn is None or key not in turn.before:
                log.warning("after-write of %s in turn %s without a before-state: not recorded", key, turn_id)
                return Recorded(key, "no checkpoint was taken before this write")
            self._prepare()
            try:
                state = self._state(key, content)
            except OSError as e:
                return Recorded(key, f"{key} could not be read after the write ({e.strerror or e})")
            self._append({"t": "after", "turn": turn.id, "path": key, "state": state.to_json()})
            turn.after[key] = state
            self._last[key] = state
            return Recorded(key, None)

    @staticmethod
    def _turn_record(turn: Turn) -> dict[str, Any]:
        rec = {"t": "turn", "id": turn.id, "kind": turn.kind, "at": turn.created_at, "prompt": turn.prompt}
        return {**rec, "of": turn.restore_of} if turn.restore_of else rec

    def last_state(self, key: str) -> State | None:
        return self._last.get(key)

    # ---- net changes --------------------------------------------------------------------------

    def _change(self, turn: Turn, key: str) -> FileChange | None:
        before, after = turn.before[key], turn.after.get(key)
        if after is None or before.same(after):
            return None  # the write failed, or put back what was there
        status: Literal["created", "modified", "deleted"] = (
            "created" if before.kind == "absent" else "deleted" if after.kind == "absent" else "modified")
        counts = self._line_counts(before, after)
        return {"path": key, "status": status, "added": counts[0] if counts else None,
                "removed": counts[1] if counts else None, "inEditor": after.editor}

    def _text(self, state: State) -> bytes | None:
        """The content of a text state (b"" for absent); None for binary, not kept, a link."""
        if state.kind == "absent":
            return b""
        if state.kind != "file" or not state.stored:
            return None
        data = self.blobs.read(state.sha)
        if data is None or b"\x00" in data[:BINARY_SNIFF]:
            return None
        return data

    def _text_lines(self, state: State) -> list[bytes] | None:
        data = self._text(state)
        return None if data is None else data.splitlines()

    def _line_counts(self, before: State, after: State) -> tuple[int, int] | None:
        cache_key = (before.sha or before.kind, after.sha or after.kind)
        if cache_key not in self._stats:
            a, b = self._text_lines(before), self._text_lines(after)
            if a is None or b is None:
                self._stats[cache_key] = None
            else:
                from difflib import SequenceMatcher  # a turn's changes only: not in every new process

                added = removed = 0
                for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
                    if op != "equal":
                        removed += i2 - i1
                        added += j2 - j1
                self._stats[cache_key] = (added, removed)
        return self._stats[cache_key]

    def changes(self, turn_id: str) -> list[FileChange]:
        """One turn's net change per file (empty for a turn that changed nothing, or an unknown id)."""
        with self._lock:
            turn = self._by_id.get(turn_id)
            return [c for key in turn.before if (c := self._change(turn, key)) is not None] if turn else []

    def diff(self, turn_id: str, path: str) -> FileDiff:
        """What the turn did to `path` (relative to the workspace, or absolute), as a unified diff
        from before its first write to after its last. UnknownCheckpoint when the turn did not change
        that file; ValueError for a path outside the workspace."""
        from toycoder_daemon.tools.files.edit import unified_diff  # a diff asked for: not in every new process

        key = self.key(path)
        with self._lock:
            turn = self._by_id.get(turn_id)
            change = self._change(turn, key) if turn is not None and key in turn.before else None
            if turn is None or change is None:
                raise UnknownCheckpoint(turn_id, f"that turn did not change {key}")
            before, after = self._text(turn.before[key]), self._text(turn.after[key])
        text = None if before is None or after is None else unified_diff(
            key, before.decode(errors="replace"), after.decode(errors="replace"),
            existed=change["status"] != "created", remains=change["status"] != "deleted")
        return {"path": key, "status": change["status"], "diff": text, "inEditor": change["inEditor"]}

    def resolve(self, ref: str) -> str:
        """A turn id from an exact id, a turn number (the part after the last "-": `/restore 3`), or a
        unique prefix of one. A number wins over prefixes: session ids are hex, so `3` may also begin
        every turn id of a session whose id starts with a 3."""
        ref = ref.strip()
        if ref in self._by_id:
            return ref
        with self._lock:
            hits = [t.id for t in self.turns if t.on_disk and t.id.endswith(f"-{ref}")]
            if not hits:
                hits = [t.id for t in self.turns if t.on_disk and t.id.startswith(ref)]
        if len(hits) == 1 and ref:
            return hits[0]
        raise UnknownCheckpoint(ref, f"it matches {len(hits)} turns" if len(hits) > 1 else
                                "no checkpoint has that turn id")

    # ---- undo ---------------------------------------------------------------------------------

    def restore(self, turn_id: str, paths: list[str] | None = None, force: bool = False,
                as_turn: str | None = None, editor: Editor | None = None) -> RestoreResult:
        """Put every path the turn (or a later one) wrote back as it was before the turn; see
        restore.restore."""
        with self._lock:
            return restore(self, turn_id, paths, force, as_turn, editor)

    def undo_redo(self) -> tuple[str | None, str | None]:
        """(the turn `/undo` restores, the restore `/redo` restores), None for nothing to do.

        Undo walks back one turn at a time: the latest turn that changed files and is not undone.
        A restore of a turn undoes it and every later one; a restore of a restore (a redo) takes
        that back. Redo re-applies the last undo not yet redone; a new turn that changes files
        ends what can be redone (a redo would undo it)."""
        undone: set[str] = set()
        redo: list[tuple[str, set[str]]] = []  # (an undo's id, the turns it undid)
        seen: list[str] = []  # the turns that were not restores, so far
        with self._lock:
            listed = [(c["turnId"], c["kind"], c["restoreOf"]) for c in self.list()]
        for tid, kind, of in listed:
            if kind != "restore":
                seen.append(tid)
                redo.clear()
            elif of in seen:  # an undo: that turn and every later one are undone
                now = {t for t in seen[seen.index(of):] if t not in undone}
                undone |= now
                redo.append((tid, now))
            else:  # a restore of a restore: a redo (or a restore from before `of` was recorded: none)
                for i in range(len(redo) - 1, -1, -1):
                    if redo[i][0] == of:
                        undone -= redo.pop(i)[1]
                        break
        undo = next((t for t in reversed(seen) if t not in undone), None)
        return undo, (redo[-1][0] if redo else None)

    def delete(self) -> None:
        """Forget this session's checkpoints (the session is being deleted)."""
        with self._lock:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.turns.clear()
            self._by_id.clear()
            self._last.clear()
            self._repaired = False

    # ---- listing (last: a method named `list` shadows the builtin in later annotations) -------

    def list(self) -> list[Checkpoint]:
        """Turns that changed files, oldest first, each with its net change per file."""
        out: list[Checkpoint] = []
        with self._lock:  # a tool may be recording on a worker thread meanwhile
            for turn in self.turns:
                files = [c for key in turn.before if (c := self._change(turn, key)) is not None]
                if files:
                    out.append({"turnId": turn.id, "kind": turn.kind, "createdAt": turn.created_at,
                                "prompt": turn.prompt, "files": files, "restoreOf": turn.restore_of})
        return out
