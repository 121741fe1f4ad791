"""Wire types of checkpoints (issue 11): toycoder/checkpoint/list and /restore, and the `changes`
update a turn that changed files ends with. Rows in protocol.py's method table; re-exported there."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from toycoder_daemon.wire.base import Wire

FileStatus = Literal["created", "modified", "deleted"]


class CheckpointFile(Wire):
    path: str
    """Relative to the workspace root."""
    status: FileStatus
    added: int | None = None
    """Lines added; absent when either side is not text (binary, too large to keep, a symlink)."""
    removed: int | None = None
    """Lines removed; absent like `added`."""


class ChangedFileInfo(CheckpointFile):
    uri: str
    """The file's absolute file:// URI."""


class CheckpointInfo(Wire):
    turn_id: str
    """The turn's id (the `turnId` of its toycoder/prompt answer and updates); restore takes it."""
    created_at: str
    prompt: str
    """The first line of the turn's prompt ("restore <turn>" for a restore)."""
    files: list[CheckpointFile]


class CheckpointList(Wire):
    checkpoints: list[CheckpointInfo]
    """Turns that changed files, oldest first."""


class RestoreParams(Wire):
    session_id: str = Field(min_length=1)
    turn_id: str = Field(min_length=1)
    """A turn id (or a unique prefix of one, or its number)."""
    paths: list[str] | None = None
    """Only these files (relative to the workspace root, or absolute); default: every file."""
    force: bool | None = None
    """Overwrite files changed outside the agent since its last write (default: they are conflicts)."""


class RestoreConflict(Wire):
    path: str
    reason: str


class RestoreResult(Wire):
    restored: list[str]
    """Paths (relative to the workspace root) now as they were before the turn."""
    conflicts: list[RestoreConflict]
    """Paths left as they are, each with the reason."""
    turn_id: str | None = None
    """The restore's own checkpoint (restore it to undo this restore); absent when nothing was written."""
    note: str
    """What undo cannot track (files changed by run_command or outside ToyCoder)."""


class ChangesUpdate(Wire):
    kind: Literal["changes"] = "changes"
    files: list[ChangedFileInfo]
    """The turn's net change per file (sent once, at the end of a turn or restore that changed files)."""
