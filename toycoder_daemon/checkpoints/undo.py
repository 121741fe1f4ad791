"""The app's side of checkpoints: where each session's CheckpointStore lives, an open session's
turn ids, the `changes` a turn reports, restores with the note the model gets, and the transcript's
`changes` entries. The store itself (checkpoints/) knows nothing of sessions or frontends.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

from toycoder_daemon.checkpoints import Checkpoint, CheckpointStore, FileChange, RestoreResult, conversation_note
from toycoder_daemon.checkpoints.store import DEFAULT_MAX_BYTES
from toycoder_daemon.core.messages import UserMessage
from toycoder_daemon.core.ports import ChangedFile, EditorTextUnknown, FilesChanged, Frontend
from toycoder_daemon.sessions.conversation import prompt_turns
from toycoder_daemon.sessions.session import Session, TranscriptEntry
from toycoder_daemon.tools.workspace import Workspace

EDITOR_WAIT = 60.0
"""How long a restore waits for the editor to serve or apply a buffer's text."""


def changed_files(root: Path, files: list[FileChange]) -> tuple[ChangedFile, ...]:
    return tuple(ChangedFile(f["path"], (root / f["path"]).as_uri(), f["status"], f["added"], f["removed"],
                             f["inEditor"])
                 for f in files)


def summary(files: tuple[ChangedFile, ...]) -> str:
    """"2 files changed +12 -3" (line counts of text files only)."""
    added = sum(f.added or 0 for f in files)
    removed = sum(f.removed or 0 for f in files)
    return f"{len(files)} file{'s' if len(files) != 1 else ''} changed +{added} -{removed}"


class Checkpoints:
    """Where the checkpoint stores of one workspace's sessions live (under the daemon's data dir)."""

    def __init__(self, data_dir: Path, workspace: Path):
        self.data_dir, self.workspace = data_dir, workspace
        self.max_bytes = DEFAULT_MAX_BYTES
        """Files larger than this are not kept (the tool result says undo cannot bring them back)."""

    def store(self, session_id: str) -> CheckpointStore:
        """The session's store, its index read now (a session opened here keeps its own: SessionCheckpoints)."""
        return CheckpointStore(self.data_dir, self.workspace, session_id, max_bytes=self.max_bytes)

    def delete(self, session_id: str) -> None:
        self.store(session_id).delete()


class SessionCheckpoints:
    """One open session's checkpoints: its turns' ids, the `changes` each turn reports, restores
    with the note the model gets."""

    def __init__(self, s: Session, store: CheckpointStore, workspace: Workspace | None = None):
        self.session, self.store, self.workspace = s, store, workspace

    def undo_redo(self) -> tuple[str | None, str | None]:
        """(the turn /undo restores, the restore /redo restores): CheckpointStore.undo_redo."""
        return self.store.undo_redo()

    def changes_of(self) -> ChangesOfStore:
        """Session.transcript's `changes_of` as the store is now."""
        return ChangesOfStore(self.store)

    def next_turn(self) -> str:
        """The session's next turn id, skipping ids its checkpoints or its history already have
        (turn numbers restart with the daemon, and a turn that changed no file has no checkpoint:
        a second editor's daemon reusing its id mixed two turns in every client that tells turns
        apart), so a turn's id and its checkpoint id are the same."""
        s = self.session
        known = {t.id for t in self.store.turns}
        known.update(prompt_turns(s.messages.records()))
        s.turn_seq += 1
        while f"{s.id}-{s.turn_seq}" in known:
            s.turn_seq += 1
        return f"{s.id}-{s.turn_seq}"

    def report(self, turn_id: str, frontend: Frontend) -> tuple[ChangedFile, ...]:
        """Send the turn's `changes` (when it changed files); returns them."""
        files = changed_files(self.store.workspace, self.store.changes(turn_id))
        if files:
            turn = self.store.turn(turn_id)
            frontend.emit(FilesChanged(turn_id, files, restore_of=(turn.restore_of if turn else "") or None))
        return files

    def rows(self) -> list[Checkpoint]:
        return self.store.list()

    def changes(self) -> ChangesOfStore:
        return ChangesOfStore(self.store)

    async def restore(self, turn_ref: str, paths: list[str] | None, force: bool, frontend: Frontend | None,
                      as_turn: str | None = None) -> RestoreResult:
        """Restore a turn (CheckpointStore.resolve reads `turn_ref`) and every later one (the store
        refuses conflicts unless forced), tell the model in a note, and report the restore's
        changes so editors reload the files."""
        store = self.store
        turn_id = store.resolve(turn_ref)
        editor = (_Buffers(asyncio.get_running_loop(), self.workspace, frontend)
                  if frontend is not None and self.workspace is not None else None)
        work = asyncio.ensure_future(asyncio.to_thread(store.restore, turn_id, paths, force, as_turn, editor))
        try:
            result = await asyncio.shield(work)
        except asyncio.CancelledError:  # the thread writes the files either way: finish, note, answer
            result = await work
        if result["restored"] or result["conflicts"]:
            note: UserMessage = {"role": "user", "content": conversation_note(result, turn_id), "note": True}
            if result["turnId"]:
                note["turn"] = result["turnId"]
            self.session.messages.append(note)
        if result["turnId"] and frontend is not None:
            self.report(result["turnId"], frontend)
        return result


class _Buffers:
    """restore.Editor over the frontend, called from the restore's thread: the editor's open
    buffers (an LSP client's open documents, or what an ACP client serves) and applyEdit."""

    def __init__(self, loop: asyncio.AbstractEventLoop, workspace: Workspace, frontend: Frontend):
        self.loop, self.workspace, self.frontend = loop, workspace, frontend

    def text(self, key: str) -> str | None:
        p = self.workspace.root / key
        if p in self.workspace.open_documents:
            return self.workspace.open_documents[p]
        if not self.frontend.can_apply_edit():
            return None  # edits cannot go through it: the disk is the truth
        try:
            return asyncio.run_coroutine_threadsafe(self.frontend.editor_text(p), self.loop).result(EDITOR_WAIT)
        except (EditorTextUnknown, FutureTimeout):
            return None

    def apply(self, key: str, before: str, after: str) -> str | None:
        p = self.workspace.root / key
        if not self.frontend.can_apply_edit():
            return "the editor cannot apply edits"
        try:
            done = asyncio.run_coroutine_threadsafe(self.frontend.apply_edit(p, before, after),
                                                    self.loop).result(EDITOR_WAIT)
        except FutureTimeout:
            return "the editor did not answer"
        if done.applied and p in self.workspace.open_documents:
            self.workspace.open_documents[p] = after  # until its didChange arrives
        return None if done.applied else (done.reason or "no reason given")


class ChangesOfStore:
    """Session.transcript's `changes_of` over one store (the list is computed once)."""

    def __init__(self, store: CheckpointStore):
        self.root = store.workspace
        self.by_turn = {c["turnId"]: c for c in store.list()}

    def __call__(self, turn_id: str) -> TranscriptEntry | None:
        c = self.by_turn.get(turn_id)
        if c is None:
            return None
        files = changed_files(self.root, c["files"])
        text = summary(files) if c["kind"] != "restore" else f"restored ({summary(files)})"
        return TranscriptEntry("changes", text, turn_id=turn_id, files=files, restore_of=c["restoreOf"] or None)
