"""Undo: put the files a turn (and every later turn) wrote back as they were before that turn.

For each path, the state to return to is the before-state of the earliest turn, from the named one
on, that wrote it. A path whose content is no longer what the agent last left there was changed by
someone else (the person, run_command, another program): that is a conflict, left alone unless
forced. A symlink leading out of the workspace is refused even when forced. The restore is recorded
as a turn of its own (kind "restore", `restore_of` the turn it restored), so restoring that turn
undoes the undo.

No race leads a restore outside the workspace: every path is walked from / one directory at a time
without following a symlink (atomic.open_dir), and each unlink, rmdir, symlink and rename happens
relative to the directory fd it checked. A directory swapped for a symlink meanwhile fails the
restore of that path; nothing outside is deleted or written.

A restore is journaled: the plan (each path and the state it goes to) is written and fsynced
before the first file changes, and removed once the last one is done. A daemon killed in between
leaves the journal; the next CheckpointStore of the session finishes it before anything else
(`finish_unfinished`): each path still as it was before the restore is put back now, one already
restored is left, one changed since by someone else is left and logged. One restore of a session
runs at a time, across daemons (a flock on restore.lock for the whole restore), and a journal is
unlinked only while it is still the file its restore wrote (same inode).

Edits that went into an editor's buffer (the checkpoint holds the buffer's text, State.editor) are
undone in the buffer, through the editor: the agent's change is taken back out of the buffer's text
now (merge.py), so the person's own unsaved edits stay; the disk is not compared nor written. Only
when the editor no longer has the file open is the same merge applied to the file on disk.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypedDict

from toycoder_daemon.checkpoints.merge import revert
from toycoder_daemon.checkpoints.state import Blobs, Recorded, State, Turn, confined, of_bytes
from toycoder_daemon.core.errors import ToyCoderError
from toycoder_daemon.core.util.atomic import SymlinkInPath, atomic_write, open_dir
from toycoder_daemon.tools.files.write_lock import PathBusy, path_lock

if TYPE_CHECKING:
    from collections.abc import Iterator

log = logging.getLogger(__name__)

UNTRACKED_NOTE = ("Only changes made by ToyCoder's file tools are undone; files changed by run_command "
                  "(or outside ToyCoder) are not tracked and stay as they are.")
BOM = "\ufeff"


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
    journal: Path

    def key(self, path: Path | str) -> str: ...

    def begin_turn(self, turn_id: str, prompt: str, kind: str = "prompt", restore_of: str = "") -> str: ...

    def turn(self, turn_id: str) -> Turn | None: ...

    def state_of(self, key: str, keep: bool = False) -> State: ...

    def last_state(self, key: str) -> State | None: ...

    def record_before_write(self, turn_id: str, path: Path | str, *, content: bytes | None = None) -> Recorded: ...

    def record_after_write(self, turn_id: str, path: Path | str, *, content: bytes | None = None) -> Recorded: ...


class Editor(Protocol):
    """The editor's buffers, for undoing edits that went into them (checkpoints/undo.py bridges
    these calls from the restore's thread to the frontend)."""

    def text(self, key: str) -> str | None:
        """The text of the editor's open buffer of `key`; None when it has none (the disk is the truth)."""

    def apply(self, key: str, before: str, after: str) -> str | None:
        """Replace the buffer's text `before` by `after`; None when applied, else why not."""


class Conflict(TypedDict):
    path: str
    reason: str


class RestoreResult(TypedDict):
    turnId: str | None
    """The restore's own checkpoint (restore it to undo this); None when nothing was written."""
    restored: list[str]
    conflicts: list[Conflict]
    inEditor: list[str]
    """Those of `restored` changed in the editor's buffer, not on disk (nothing to reload)."""
    note: str


class _Refused(Exception):
    """A path that cannot be restored; the message is the conflict's reason."""


@dataclass
class _DiskItem:
    key: str
    target: State
    data: bytes | None
    now: State
    """What the path held when the restore was planned: it is written only if it still does."""


@dataclass
class _BufferItem:
    key: str
    now: str
    new: str
    encoding: str


def _inside(root: Path, p: Path) -> bool:
    return p == root or root in p.parents


def _check_path(root: Path, key: str) -> None:
    """Friendly refusals up front; the walk in _put is what makes a race harmless."""
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


def _is_dir(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def _put(root: Path, key: str, target: State, data: bytes | None) -> None:
    """Make `key` hold `target`, every step relative to a directory fd walked without symlinks."""
    p = root / key
    try:
        parent = open_dir(p.parent, create=target.kind != "absent")
    except (FileNotFoundError, NotADirectoryError):
        return  # an absence to restore, and its directory is gone already
    try:
        if _is_dir(p.name, parent):
            raise _Refused("it is a directory now; not restored")
        if target.kind == "absent":
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p.name, dir_fd=parent)
        elif target.kind == "link":
            tmp = f".{p.name}.{uuid.uuid4().hex[:8]}.tmp"
            os.symlink(target.target, tmp, dir_fd=parent)
            try:
                os.replace(tmp, p.name, src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=parent)
                raise
    finally:
        os.close(parent)
    if target.kind == "absent":
        for d in target.dirs:  # the directories the agent's write created, deepest first
            try:
                fd = open_dir((root / d).parent)
            except OSError:
                break
            try:
                os.rmdir((root / d).name, dir_fd=fd)
            except OSError:
                break  # not empty (someone else's files) or gone: leave it and its parents
            finally:
                os.close(fd)
    elif target.kind == "file":
        assert data is not None
        # the mode is the permission bits only (State.from_json masks what the index says);
        # nofollow: walked again from /, so a parent swapped since fails instead of leading out
        atomic_write(p, data, target.mode & 0o777, nofollow=True, parents=True)


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


def _decode(data: bytes) -> tuple[str, str]:
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1"


def _text(store: Store, state: State) -> str:
    if state.kind == "absent":
        return ""
    data = _check_target(store, state)
    if data is None:
        raise _Refused("it was not a text file; not restored")
    return _decode(data)[0].removeprefix(BOM)


def _plan_text(store: Store, key: str, target: State, force: bool,
               editor: Editor | None) -> _DiskItem | _BufferItem | None:
    """A path the agent edited through an editor's buffer: take its change back out of the buffer's
    text now (the disk's, when no buffer is open), keeping everything else. None: nothing to do."""
    last = store.last_state(key)
    before, after = _text(store, target), _text(store, last) if last is not None else ""
    buffer = editor.text(key) if editor is not None else None
    disk = store.state_of(key)
    if buffer is not None:
        now, encoding = buffer, "utf-8"
    elif disk.kind == "absent":
        now, encoding = "", "utf-8"
    else:
        raw = _check_target(store, store.state_of(key, keep=True))
        if raw is None:
            raise _Refused("it is not a regular file now; not restored")
        now, encoding = _decode(raw)
    bom = now.startswith(BOM)
    new = revert(before, after, now.removeprefix(BOM))
    if new is None:
        if not force:
            raise _Refused("the text around the agent's change was edited since; restore with force to put "
                           "back the text from before the turn")
        if buffer is None:
            raise _Refused("its earlier text was an editor buffer's, which is never written to disk, even "
                           "when forced; open the file in the editor and restore again")
        new = before
    if not new and target.kind == "absent" and disk.kind != "absent":
        # the turn created the file: undone, it is gone (an editor's empty buffer is no file)
        return _DiskItem(key, State("absent"), None, disk)
    new = (BOM if bom else "") + new
    if new == now:
        return None
    if buffer is not None:
        return _BufferItem(key, now, new, encoding)
    data = new.encode(encoding)
    mode = disk.mode if disk.kind == "file" else target.mode
    return _DiskItem(key, of_bytes(data, mode, store.blobs, store.max_bytes), data, disk)


def _plan_disk(store: Store, key: str, target: State, force: bool) -> _DiskItem | None:
    _check_path(store.workspace, key)
    data = _check_target(store, target)
    now = store.state_of(key)
    if now.same(target):
        return None
    last = store.last_state(key)
    if not force and last is not None and not now.same_content(last):
        raise _Refused("changed outside the agent since its last write; restore with force to overwrite")
    if not force and now.kind == "file" and now.size > store.max_bytes:
        raise _Refused(f"its current content is too large to checkpoint ({now.size} bytes), so this "
                       "restore could not be undone; restore with force to overwrite")
    return _DiskItem(key, target, data, now)


def _reason(e: OSError) -> str:
    if isinstance(e, SymlinkInPath):
        return "a directory on its path was replaced by a symlink; not restored"
    return f"could not restore: {e.strerror or e}"


@contextlib.contextmanager
def _one_restore_at_a_time(store: Store) -> Iterator[None]:
    """An exclusive lock (flock) on the session's restore.lock, for the whole restore: two daemons
    that restore one session at once would write one journal path, and one's end would delete the
    other's journal."""
    try:
        fd = os.open(store.journal.with_name("restore.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except FileNotFoundError:  # no checkpoint folder: nothing to restore, nothing to lock
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _unlink_if_ours(path: Path, fd: int) -> bool:
    """Unlink `path` if it is still the file open as `fd` (not one another restore put there since)."""
    mine = os.fstat(fd)
    try:
        now = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if (now.st_dev, now.st_ino) != (mine.st_dev, mine.st_ino):
        log.warning("%s: another restore's journal, left in place", path)
        return False
    os.unlink(path)
    return True


def restore(store: Store, turn_id: str, paths: list[str] | None = None, force: bool = False,
            as_turn: str | None = None, editor: Editor | None = None) -> RestoreResult:
    """Restore turn `turn_id` and every later one (only `paths` of them, when given). `as_turn` is
    the id the restore is recorded under (default: a fresh "restore-..." id); `editor`: the buffers
    edits went into (None: none is open). One restore of a session at a time, across daemons."""
    with _one_restore_at_a_time(store):
        return _restore(store, turn_id, paths, force, as_turn, editor)


def _restore(store: Store, turn_id: str, paths: list[str] | None, force: bool, as_turn: str | None,
             editor: Editor | None) -> RestoreResult:
    if store.journal.exists():  # one this daemon left halfway (its load finishes a killed one's)
        finish_unfinished(store)
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
    restored: list[str] = []
    disk: list[_DiskItem] = []
    buffers: list[_BufferItem] = []
    for key, target in targets.items():  # the plan: nothing is written yet
        try:
            last = store.last_state(key)
            if target.editor or (last is not None and last.editor):
                item = _plan_text(store, key, target, force, editor)
            else:
                item = _plan_disk(store, key, target, force)
            if isinstance(item, _DiskItem):
                disk.append(item)
            elif isinstance(item, _BufferItem):
                buffers.append(item)
            else:
                restored.append(key)  # already as it was
        except _Refused as e:
            conflicts.append({"path": key, "reason": str(e)})
        except OSError as e:
            conflicts.append({"path": key, "reason": _reason(e)})
    if not disk and not buffers:
        return {"turnId": None, "restored": restored, "conflicts": conflicts, "inEditor": [], "note": UNTRACKED_NOTE}
    rid = store.begin_turn(as_turn or f"restore-{uuid.uuid4().hex[:8]}", f"restore {turn_id}", kind="restore",
                           restore_of=turn_id)
    for item in disk:  # what each path holds now is kept first: the restore's own undo needs it
        store.record_before_write(rid, item.key)
    with _Journal(store.journal, rid, [(i.key, i.target) for i in disk]):
        for item in disk:
            try:
                with path_lock(store.workspace / item.key):  # the file tools' lock: no write between
                    if not store.state_of(item.key).same_content(item.now):
                        raise _Refused("it changed while it was being restored; restore again")
                    _put(store.workspace, item.key, item.target, item.data)
                restored.append(item.key)
            except PathBusy:
                conflicts.append({"path": item.key, "reason": "another session is writing it; restore again"})
            except _Refused as e:
                conflicts.append({"path": item.key, "reason": str(e)})
            except OSError as e:
                conflicts.append({"path": item.key, "reason": _reason(e)})
            finally:
                store.record_after_write(rid, item.key)  # whatever is there now, even after a failure
    for b in buffers:
        store.record_before_write(rid, b.key, content=b.now.encode(b.encoding, errors="replace"))
        why = None
        try:
            why = editor.apply(b.key, b.now, b.new) if editor is not None else "no editor"
        finally:
            done = b.new if why is None else b.now
            store.record_after_write(rid, b.key, content=done.encode(b.encoding, errors="replace"))
        if why is None:
            restored.append(b.key)
        else:
            conflicts.append({"path": b.key, "reason": f"the editor did not apply the change: {why}"})
    order = list(targets)
    restored.sort(key=order.index)  # the order the turns wrote them in
    conflicts.sort(key=lambda c: order.index(c["path"]) if c["path"] in order else -1)
    in_editor = [b.key for b in buffers if b.key in restored]
    return {"turnId": rid, "restored": restored, "conflicts": conflicts, "inEditor": in_editor,
            "note": UNTRACKED_NOTE}


class _Journal:
    """The plan of a restore on disk while it is applied, under an exclusive lock (flock) held for
    as long as it runs: another daemon's recovery leaves a live restore alone."""

    def __init__(self, path: Path, turn_id: str, items: list[tuple[str, State]]):
        self.path, self.turn_id, self.items = path, turn_id, items
        self.fd = -1

    def __enter__(self) -> _Journal:
        if not self.items:
            return self
        tmp = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex[:8]}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # the lock travels with the file through the rename
            plan = {"turn": self.turn_id, "items": [{"path": k, "state": s.to_json()} for k, s in self.items]}
            os.write(fd, json.dumps(plan, ensure_ascii=True).encode("ascii"))
            os.fsync(fd)
            os.replace(tmp, self.path)
            _fsync_dir(self.path.parent)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self.fd = fd
        return self

    def __exit__(self, kind: object, error: object, tb: object) -> None:
        if self.fd < 0:
            return
        try:
            if kind is None and _unlink_if_ours(self.path, self.fd):  # done (each path's failure is reported)
                _fsync_dir(self.path.parent)
            # else stopped halfway (killed, interrupted, the index unwritable): the journal stays,
            # and the next load or restore finishes it
        finally:
            os.close(self.fd)


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def finish_unfinished(store: Store) -> list[str]:
    """Finish a restore a killed daemon left half done (its journal); the paths finished now. A path
    is put back only if it still holds what it held before the restore; one changed since by someone
    else stays as it is (logged). The journal is untrusted: paths are confined, modes masked."""
    try:
        fd = os.open(store.journal, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    done: list[str] = []
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return []  # a restore running in another daemon right now
        if os.fstat(fd).st_nlink == 0:
            return []  # finished while we waited
        with os.fdopen(os.dup(fd), "rb") as f:
            plan = json.loads(f.read())
        turn = store.turn(str(plan["turn"]))
        for row in plan["items"]:
            try:
                key = confined(str(row["path"]))
                target = State.from_json(row["state"], key)
                if _finish(store, turn, key, target):
                    done.append(key)
            except (ValueError, KeyError, TypeError, AttributeError, OSError, _Refused) as e:
                log.warning("%s: unfinished restore of %r not finished: %s", store.journal, row, e)
        _unlink_if_ours(store.journal, fd)
        log.warning("%s: finished a restore a stopped daemon left half done (%s)", store.journal,
                    ", ".join(done) or "nothing left to do")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        log.warning("%s: damaged restore journal dropped (%s)", store.journal, e)
        with contextlib.suppress(OSError):
            _unlink_if_ours(store.journal, fd)
    finally:
        os.close(fd)
    return done


def _finish(store: Store, turn: Turn | None, key: str, target: State) -> bool:
    now = store.state_of(key)
    before = turn.before.get(key) if turn is not None else None
    if not now.same(target):
        if before is None or not now.same_content(before):
            log.warning("%s changed since the restore began: left as it is", key)
            return False
        _put(store.workspace, key, target, _check_target(store, target))
    if turn is not None and before is not None:
        store.record_after_write(turn.id, key)
    return True


def conversation_note(result: RestoreResult, turn_id: str) -> str:
    """What the model is told, so it does not rely on file contents it saw before the restore."""
    parts = [f"The person restored files to their state before turn {turn_id}."]
    if result["restored"]:
        parts.append("Restored: " + ", ".join(result["restored"]) + ". Read them again before editing them.")
    if result["conflicts"]:
        parts.append("Not restored: " + "; ".join(f"{c['path']} ({c['reason']})" for c in result["conflicts"]) + ".")
    parts.append(UNTRACKED_NOTE)
    return " ".join(parts)
