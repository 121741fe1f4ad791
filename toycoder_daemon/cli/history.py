"""A resumed session's history (`toycoder --session ID`, /switch): the transcript the daemon sends,
drawn like the live turn was: each tool call with how it ended, a reply cut short marked as such,
each turn's usage and stop reason, the files a turn changed, and the session's plan (last)."""

from __future__ import annotations

from typing import Any

from rich.markdown import Markdown
from rich.text import Text

from toycoder_daemon.cli.changes import changes_line
from toycoder_daemon.cli.plan import plan_text
from toycoder_daemon.cli.render import STATUS, TurnView, short

STOPS = {"cancelled": "cancelled", "max_steps": "stopped at the step limit", "error": "failed"}


def show_transcript(view: TurnView, entries: list[dict[str, Any]]) -> None:
    results = {e.get("toolCallId"): e for e in entries if e.get("role") == "tool"}
    width = view.console.width
    turn: dict[str, Any] | None = None  # the user entry of the turn being drawn: its end is its footer
    for e in entries:
        role, text = e.get("role"), e.get("text") or ""
        if role == "user":
            _footer(view, turn)
            turn = e
            view.print(Text("❯ ", style="bold green") + Text(text, style="bold"))
            if e.get("context"):  # what was attached, as chips
                view.print(Text("  " + "  ".join(f"[{c.get('label', c.get('type', ''))}]" for c in e["context"]),
                                style="cyan"))
        elif role == "assistant":
            if text.strip():
                view.print(Markdown(text) if view.live_ok else Text(text))
            if e.get("interrupted"):
                view.print(Text("  (reply interrupted)", style="yellow"))
        elif role == "tool_call":
            view.print(_tool_line(e, results.get(e.get("toolCallId")), width))
        elif role == "changes" and e.get("files"):
            view.print(Text(changes_line(e["files"], e.get("restoreOf")), style="bold"))
        elif role == "plan" and e.get("entries"):
            view.print(plan_text(e["entries"]))
    _footer(view, turn)


def _footer(view: TurnView, turn: dict[str, Any] | None) -> None:
    """The turn's usage and, unless it simply ended, how it stopped (as the live turn's last line)."""
    if turn is None or not turn.get("stopReason"):
        return  # no turn yet, or one recorded before the daemon stored its end
    u = turn.get("usage") or {}
    line = Text(f"  {u.get('promptTokens', 0):,} tokens in · {u.get('completionTokens', 0):,} out", style="dim")
    if note := STOPS.get(turn["stopReason"]):
        line.append(f" · {note}", style="yellow")
    view.print(line)


def _tool_line(call: dict[str, Any], result: dict[str, Any] | None, width: int) -> Text:
    """`✓ read_file {"path": "a"}  ok`, or `✗ … failed: <first line of the error>`; a call with no
    result (the daemon stopped mid-call) keeps the plain `·`."""
    status = (result or {}).get("status") or ("completed" if result else "")
    icon, style, word = STATUS.get(status, ("·", "dim", status))
    line = Text("  ")
    line.append(icon + " ", style=style)
    line.append(f"{call.get('name')} {short(call.get('text') or '', max(20, width - 40))}", style="dim")
    if word:
        line.append(f"  {word}", style=style)
    if status == "failed" and result:
        first = next((ln for ln in (result.get("text") or "").splitlines() if ln.strip()), "")
        line.append(": " + short(first, max(20, width - len(line.plain) - 4)), style="red")
    return line
