"""Checkpoints: each turn's file writes recorded per session, so any turn can be undone (store.py
says what they cannot track)."""

from .restore import UNTRACKED_NOTE, Conflict, RestoreResult, UnknownCheckpoint, conversation_note
from .state import Recorded
from .store import Checkpoint, CheckpointStore, FileChange

__all__ = ["UNTRACKED_NOTE", "Checkpoint", "CheckpointStore", "Conflict", "FileChange", "Recorded", "RestoreResult",
           "UnknownCheckpoint", "conversation_note"]
