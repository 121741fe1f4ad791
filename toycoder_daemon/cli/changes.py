"""The one line a turn's `changes` update becomes: "2 files changed +10 −3: a.py, b.py"."""

from __future__ import annotations

from typing import Any

MAX_NAMES = 6  # more than this and the line says how many others, so it stays one line


def changes_line(files: list[dict[str, Any]], restore_of: str | None = None) -> str:
    """Counts are summed over the files that have them (a binary file's are null: left out).
    `restore_of` (the update's restoreOf): a restore's line, "Restored …", taken back with /redo."""
    n = len(files)
    added = sum(f.get("added") or 0 for f in files)
    removed = sum(f.get("removed") or 0 for f in files)
    names = [str(f.get("path", "?")) for f in files[:MAX_NAMES]]
    if n > MAX_NAMES:
        names.append(f"{n - MAX_NAMES} more")
    noun = "file" if n == 1 else "files"
    line = f"{n} {noun} changed +{added} \u2212{removed}: {', '.join(names)}"
    return f"Restored {line} · Redo: /redo" if restore_of else line

