"""The compact list a `plan` update becomes: one line per entry, a mark for its status."""

from __future__ import annotations

from typing import Any

from rich.text import Text

MARKS = {"completed": ("✓", "green"), "in_progress": ("▸", "bold cyan"), "pending": ("○", "dim")}


def plan_text(entries: list[dict[str, Any]]) -> Text:
    """The whole plan each time (the daemon sends it whole): a header with the count done, then the entries."""
    done = sum(1 for e in entries if e.get("status") == "completed")
    out = Text(f"plan {done}/{len(entries)}", style="bold")
    for e in entries:
        mark, style = MARKS.get(str(e.get("status")), ("○", "dim"))
        out.append(f"\n  {mark} ", style=style)
        content = str(e.get("content", ""))
        out.append(content, style="dim strike" if e.get("status") == "completed" else
                   ("bold" if e.get("status") == "in_progress" else ""))
        if e.get("priority") == "high" and e.get("status") != "completed":
            out.append(" !", style="yellow")
    return out
