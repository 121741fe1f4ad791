"""Undo: put the files a turn (and every later turn) wrote back as they were before that turn.

For each path, the state to return to is the before-state of the earliest turn, from the named one
on, that wrote it. A path whose content is no longer what the agent last left there was changed by
someone else (the person, run_command, another program): that is a conflict, left alone unless
forced. A symlink leading out of the workspace is refused even when forced. The restore is recorded
as a turn of its own (kind "restore"), so restoring that turn undoes the undo.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path
from typing import Protocol, TypedDict

from toycoder_daemon.checkpoints.state import Blobs, Recorded, State, Turn
from toycoder_daemon.core.errors import ToyCoderError
from toycoder_daemon.core.util.atomic import atomic_write

UNTRACKED_NOTE = ("Only changes made by ToyCoder's file tools are undone; files changed by run_command "
                  "(or outside ToyCoder) are not tracked and stay as they are.")


class UnknownCheckpoint(ToyCoderError):
    def __init__(self, ref: str, why: str = "no checkpoint has that turn id"):
        super().__init__(f"unknown checkpoint {ref!r}: {why}")
        self.ref = ref


class Store(Protocol):
    """What a restore needs of the checkpoint store (store.py hands itself in)."""

    blobs: Blobs
    workspace: Path
    max_bytes: int
    turns: list[Turn]

    def key(self, path: Path | str) -> str: ...

    def begin_turn(self, turn_id: str, prompt: str, kind: str = "prompt") -> str: ...

    def state_of(self, key: str, keep: bool = False) -> State: ...

    def last_state(self, key: str) -> State | None: ...

    def record_before_write(self, turn_id: str, path: Path | str, *, content: bytes | None = None) -> Recorded: ...

    def record_after_write(self, turn_id: str, path: Path | str, *, content: bytes | None = None) -> Recorded: ...


class Conflict(TypedDict):
    path: str
    reason: str


class RestoreResult(TypedDict):
    turnId: str | None
    """The restore's own checkpoint (restore it to undo this); None when nothing was written."""
    restored: list[str]
    conflicts: list[Conflict]
    note: str


class _Refused(Exception):
    """A path that cannot be restored; the message is the conflict's reason."""


def _inside(root: Path, p: Path) -> bool:
    return p == root or root in p.parents


def _check_path(root: Path, key: str) -> None:
    p = root / key
    if not _inside(root, p.parent.resolve()):  # resolves symlinks along the existing prefix
        raise _Refused("a symlink on its path leads outside the workspace; not restored")
    if p.is_symlink() and not _inside(root, p.resolve()):
        raise _Refused("it is a symlink leading outside the workspace; not restored")


def _check_target(store: Store, target: State) -> bytes | None:
    """The content to write back (None for a target that is not a file), or why there is none."""
    if target.kind == "other":
        raise _Refused("it was not a regular file before; not restored")
    if target.kind != "file":
        return None
    if not target.stored:
        raise _Refused(f"it was too large to checkpoint ({target.size} bytes); its earlier content was not kept")
    data = store.blobs.read(target.sha)
    if data is None:
        raise _Refused("its checkpoint data is missing or damaged; not restored")
    return data


def _put(root: Path, key: str, target: State, data: bytes | None) -> None:
    p = root / key
    if os.path.isdir(p) and not os.path.islink(p):
        raise _Refused("it is a directory now; not restored")
    if target.kind == "absent":
        if os.path.lexists(p):
            os.unlink(p)
        for d in target.dirs:  # the directories the agent's write created, deepest first
            try:
                os.rmdir(root / d)
            except OSError:
                break  # not empty (someone else's files) or gone: leave it and its parents
    elif target.kind == "link":
        tmp = p.parent / f".{p.name}.{uuid.uuid4().hex[:8]}.tmp"
        os.symlink(target.target, tmp)
        try:
            os.replace(tmp, p)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    else:
        assert data is not None
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(p, data, target.mode)  # replaces a symlink at p, never writes through it


def _targets(store: Store, turn_id: str) -> dict[str, State]:
    """Path -> the state before the earliest turn from `turn_id` on that wrote it."""
    ids = [t.id for t in store.turns]
    if turn_id not in ids:
        raise UnknownCheckpoint(turn_id)
    out: dict[str, State] = {}
    for turn in store.turns[ids.index(turn_id):]:
        for key, state in turn.before.items():
            out.setdefault(key, state)
    return out


def restore(store: Store, turn_id: str, paths: list[str] | None = None, force: bool = False,
            as_turn: str | None = None) -> RestoreResult:
    """Restore turn `turn_id` and every later one (only `paths` of them, when given). `as_turn` is
    the id the restore is recorded under (default: a fresh "restore-..." id)."""
    targets = _targets(store, turn_id)
    conflicts: list[Conflict] = []
    if paths is not None:
        wanted: list[str] = []
        for raw in paths:
            try:
                key = store.key(raw)
            except ValueError as e:
                conflicts.append({"path": raw, "reason": str(e)})
                continue
            if key in targets:
                wanted.append(key)
            else:
                conflicts.append({"path": key, "reason": f"not changed by turn {turn_id} or a later one"})
        targets = {k: targets[k] for k in dict.fromkeys(wanted)}
    rid = store.begin_turn(as_turn or f"restore-{uuid.uuid4().hex[:8]}", f"restore {turn_id}", kind="restore")
    restored: list[str] = []
    wrote = False
    for key, target in targets.items():
        try:
            _check_path(store.workspace, key)
            data = _check_target(store, target)
            now = store.state_of(key)
            if not now.same(target):
                last = store.last_state(key)
                if not force and last is not None and not now.same_content(last):
                    raise _Refused("changed outside the agent since its last write; restore with force to overwrite")
                if not force and now.kind == "file" and now.size > store.max_bytes:
                    raise _Refused(f"its current content is too large to checkpoint ({now.size} bytes), so this "
                                   "restore could not be undone; restore with force to overwrite")
                store.record_before_write(rid, key)
                wrote = True
                try:
                    _put(store.workspace, key, target, data)
                finally:
                    store.record_after_write(rid, key)  # whatever is there now, even after a failure
            restored.append(key)
        except _Refused as e:
            conflicts.append({"path": key, "reason": str(e)})
        except OSError as e:
            conflicts.append({"path": key, "reason": f"could not restore: {e.strerror or e}"})
    return {"turnId": rid if wrote else None, "restored": restored, "conflicts": conflicts, "note": UNTRACKED_NOTE}


def conversation_note(result: RestoreResult, turn_id: str) -> str:
    """What the model is told, so it does not rely on file contents it saw before the restore."""
    parts = [f"The person restored files to their state before turn {turn_id}."]
    if result["restored"]:
        parts.append("Restored: " + ", ".join(result["restored"]) + ". Read them again before editing them.")
    if result["conflicts"]:
        parts.append("Not restored: " + "; ".join(f"{c['path']} ({c['reason']})" for c in result["conflicts"]) + ".")
    parts.append(UNTRACKED_NOTE)
    return " ".join(parts)
