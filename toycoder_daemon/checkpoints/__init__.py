"""Checkpoints: each turn's file writes recorded per session, so any turn can be undone (store.py
says what they cannot track); `undo` is the per-session service the app and commands use.

May import: `core`, `config`, `llm`, `tools`, `agent`, `sessions`.
"""

from toycoder_daemon.checkpoints.restore import (
    UNTRACKED_NOTE,
    Conflict,
    RestoreResult,
    UnknownCheckpoint,
    conversation_note,
)
from toycoder_daemon.checkpoints.state import Recorded
from toycoder_daemon.checkpoints.store import Checkpoint, CheckpointStore, FileChange, FileDiff

__all__ = ["UNTRACKED_NOTE", "Checkpoint", "CheckpointStore", "Conflict", "FileChange", "FileDiff", "Recorded", "RestoreResult",
           "UnknownCheckpoint", "conversation_note"]
