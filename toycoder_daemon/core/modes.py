"""A session's permission modes (enforced by tools/permission.py; the faces list them:
the LSP face's `initialize` answer, the ACP face's session modes)."""

from __future__ import annotations

MODES: dict[str, tuple[str, str]] = {
    "ask": ("Ask", "Ask before every file edit and command (safe tools run)"),
    "accept-edits": ("Accept edits", "Edit files inside the workspace without asking; commands still ask"),
    "read-only": ("Read only", "No file writes and no commands: read, search and plan only"),
}
"""id -> (name, description)."""


def available_modes() -> list[dict[str, str]]:
    """initialize's `availableModes` (LSP face)."""
    return [{"id": m, "name": name, "description": d} for m, (name, d) in MODES.items()]
