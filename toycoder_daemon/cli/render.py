"""Rendering a turn with Rich: the reply as Markdown while it streams, tools as status lines.

On a terminal the reply being streamed lives in a transient `rich.live.Live` area together with a
spinner per running tool; whatever is final (a finished reply, a finished tool call, a notice) is
printed above it once and never redrawn. A reply taller than the screen is committed block by
block (at blank lines outside code fences) so the live area stays small and never flickers or
scrolls. Elsewhere (a pipe, a file) the text is written as it arrives, without colours.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markdown import Markdown
from rich.spinner import Spinner
from rich.text import Text

from toycoder_daemon.cli.changes import changes_line
from toycoder_daemon.cli.panels import permission_panel
from toycoder_daemon.cli.plan import plan_text

STATUS = {  # tool_result status -> icon, style, word
    "completed": ("✓", "green", "ok"),
    "failed": ("✗", "red", "failed"),
    "denied": ("⊘", "yellow", "denied"),
    "cancelled": ("■", "yellow", "cancelled"),
}


def short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


@dataclass
class _Call:
    id: str
    name: str
    title: str
    parent: str | None
    depth: int
    start: float = field(default_factory=time.monotonic)
    spinner: Spinner | None = None
    header_shown: bool = False
    """A header line was printed because a sub-agent's activity follows it."""
    waited: float = 0.0
    """Seconds spent waiting for the person's answer while this call ran (not the tool's time)."""


class TurnView:
    """Renders one conversation's updates; `begin()`/`end()` bracket each turn."""

    def __init__(self, console: Console, *, live: bool | None = None, quiet: bool = False, progress: bool = False):
        self.console = console
        self.quiet = quiet
        """Show no updates (one-shot mode without --verbose); questions and errors still show."""
        self.progress = progress
        """With `quiet`: the main agent's tool calls still get their one line each (`-p` on a terminal)."""
        self.live_ok = (console.is_terminal if live is None else live) and not quiet
        self._live: Live | None = None
        self.text = ""  # the main agent's reply, not yet printed for good
        self.committed_in_reply = False
        self.calls: dict[str, _Call] = {}
        self.child_text: dict[str, str] = {}
        self.status = "thinking…"
        self._thinking = Spinner("dots", style="cyan")
        self._at_line_start = True  # plain mode: where the cursor is
        self.started = time.monotonic()
        self.tool_statuses: list[str] = []
        self._asked_at: float | None = None  # when a permission prompt or question went up
        self.title = ""
        self.mode = ""  # the session's permission mode, shown in the prompt

    def set_session(self, info: dict[str, Any]) -> None:
        """Record the current session's title and mode (new, load, switch) without printing them."""
        self.title = str(info.get("title") or "")
        self.mode = str(info.get("mode") or self.mode)

    # ---- turn lifecycle -------------------------------------------------------------------------

    def begin(self) -> None:
        self.text, self.committed_in_reply, self.status = "", False, "thinking…"
        self.calls.clear()
        self.child_text.clear()
        self.tool_statuses = []
        self.started = time.monotonic()
        self.resume()

    def end(self, result: dict[str, Any] | None) -> None:
        self.commit_text()
        for parent in list(self.child_text):
            self._flush_child(parent, final=True)
        self.pause()
        if result is None or self.quiet:
            return
        elapsed = time.monotonic() - self.started
        u = result.get("usage") or {}
        stop = result.get("stopReason")
        note = {"cancelled": "cancelled", "max_steps": "stopped at the step limit"}.get(stop or "", "")
        if stop == "max_steps" and result.get("text"):
            self.console.print(Text(result["text"], style="yellow"))
        line = Text(f"  {u.get('promptTokens', 0):,} tokens in · {u.get('completionTokens', 0):,} out"
                    f" · {elapsed:.1f}s", style="dim")
        if note:
            line.append(f" · {note}", style="yellow")
        self.console.print(line)

    def pause(self) -> None:
        """Stop the live area (before asking something, or at the end of a turn)."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def resume(self) -> None:
        if self._asked_at is not None:  # the person answered: the calls waiting meanwhile do not count it
            waited, self._asked_at = time.monotonic() - self._asked_at, None
            for call in self.calls.values():
                call.waited += waited
        if self.live_ok and self._live is None:
            self._live = Live(console=self.console, get_renderable=self._tail, auto_refresh=True,
                              refresh_per_second=12, transient=True, redirect_stdout=False, redirect_stderr=False)
            self._live.start()

    def set_status(self, status: str) -> None:
        self.status = status
        if not self.live_ok:
            self.note(status)

    def _tail(self) -> RenderableType:
        parts: list[RenderableType] = []
        if self.text:
            parts.append(Markdown(self.text))
        running = [c for c in list(self.calls.values())]
        for c in running:
            if c.spinner is None:
                c.spinner = Spinner("dots", style="cyan")
            c.spinner.text = Text(f"{'  ' * c.depth}{self._title(c)}  {time.monotonic() - c.start - c.waited:.1f}s",
                                  style="dim")
            parts.append(c.spinner)
        if not running and self.status:
            self._thinking.text = Text(self.status, style="dim")
            parts.append(self._thinking)
        return Group(*parts)

    # ---- output helpers -------------------------------------------------------------------------

    def print(self, *renderables: RenderableType) -> None:
        if not self._at_line_start:
            self.console.file.write("\n")
            self._at_line_start = True
        self.console.print(*renderables)

    def note(self, message: str, style: str = "dim") -> None:
        self.print(Text(message, style=style))

    def _title(self, call: _Call) -> str:
        return short(call.title, max(20, self.console.width - 24 - 4 * call.depth))

    # ---- updates --------------------------------------------------------------------------------

    def update(self, params: dict[str, Any]) -> None:
        """One toycoder/update params object."""
        u = params.get("update") or {}
        parent = params.get("parentToolCallId")
        kind = u.get("kind")
        if self.quiet:
            if self.progress and not parent and kind == "tool_call":
                self._tool_call(u, parent)
            elif self.progress and not parent and kind == "tool_result":
                self._tool_result(u)
            elif kind == "tool_result":
                self.tool_statuses.append(u.get("status", "completed"))
            return
        if kind == "text_delta":
            if parent:
                self._child_text(parent, u.get("text", ""))
            else:
                self._text(u.get("text", ""))
        elif kind == "tool_call":
            self._tool_call(u, parent)
        elif kind == "tool_result":
            self._tool_result(u)
        elif kind == "retry":
            self._retry(u, parent)
        elif kind == "mcp_wait":
            self._mcp_wait(u)
        elif kind == "hook":
            self.commit_text()
            self.note(hook_line(u), HOOK_STYLES.get(u.get("outcome", ""), "dim"))
        elif kind == "compaction":
            self.commit_text()
            self.note(f"⟳ context compacted ({u.get('strategy')}): {u.get('before')} → {u.get('after')} messages",
                      "yellow")
        elif kind == "changes":
            self.commit_text()
            self.note(changes_line(u.get("files") or [], u.get("restoreOf")), "cyan")
        elif kind == "plan":
            self.commit_text()
            self.print(plan_text(u.get("entries") or []))
        elif kind == "session_info":
            self._session_info(u.get("session") or {})
        elif kind == "session_deleted":  # another editor deleted it: the daemon's one line, as sent
            self.commit_text()
            self.note(str(u.get("message") or ""), "red")
        # usage: the running total; the turn's result carries the final one

    def _session_info(self, info: dict[str, Any]) -> None:
        """A new title (the fast model's, /title) or mode (/mode): say what changed, once."""
        title, mode = str(info.get("title") or ""), str(info.get("mode") or "")
        self.commit_text()
        if title and title != self.title:
            self.note(f"title: {title}", "cyan")
        if mode and mode != self.mode:
            self.note(f"mode: {mode}", "cyan")
        self.set_session(info)

    def _text(self, text: str) -> None:
        self.status = ""
        if not self.live_ok:
            self.console.file.write(text)
            self.console.file.flush()
            if text:
                self._at_line_start = text.endswith("\n")
            self.text += text  # kept only so a retry knows there was something
            return
        self.text += text
        # Keep the live area well inside the screen: commit finished blocks once it grows tall.
        limit = max(6, self.console.height - 8)
        if self._estimated_lines(self.text) > limit:
            stable, rest = split_stable(self.text)
            if not stable:
                stable, rest = split_stable(self.text, force=True)
            if stable:
                self._print_over_live(rest, Markdown(stable), "")
                self.committed_in_reply = True

    def _estimated_lines(self, text: str) -> int:
        width = max(20, self.console.width)
        return sum(max(1, -(-len(line) // width)) for line in text.split("\n"))

    def commit_text(self) -> None:
        """The reply so far is final: print it for good."""
        self.committed_in_reply = self.committed_in_reply or bool(self.text.strip())
        if self.live_ok and self.text.strip():
            self._print_over_live("", Markdown(self.text))
        elif not self.live_ok and not self._at_line_start:
            self.console.file.write("\n")
            self._at_line_start = True
        self.text = ""

    def _print_over_live(self, rest: str, *renderables: Any) -> None:
        """Print text for good and leave `rest` in the live area. Rich redraws the live area right
        after a print, from `_tail`: the printed text must be gone from it by then, or it shows
        twice for a frame. The Live's lock keeps its refresh thread from drawing in between."""
        with getattr(self._live, "_lock", None) or contextlib.nullcontext():
            self.text = rest
            self.console.print(*renderables)

    def _tool_call(self, u: dict[str, Any], parent: str | None) -> None:
        if parent:
            self._show_header(parent)
            self._flush_child(parent, final=True)
        else:
            self.commit_text()
            self.committed_in_reply = False  # the next reply starts after the tools
        depth = (self.calls[parent].depth + 1) if parent in self.calls else (1 if parent else 0)
        title = u.get("title") or u.get("name") or "tool"
        self.calls[u.get("toolCallId", "")] = _Call(u.get("toolCallId", ""), u.get("name") or title, title, parent,
                                                    depth)
        self.status = ""

    def _show_header(self, call_id: str) -> None:
        call = self.calls.get(call_id)
        if call is None or call.header_shown:
            return
        if call.parent:
            self._show_header(call.parent)
        call.header_shown = True
        line = Text("  " * (call.depth + 1))
        line.append("▸ ", style="cyan")
        line.append(self._title(call), style="bold")
        self.print(line)

    def _tool_result(self, u: dict[str, Any]) -> None:
        call_id = u.get("toolCallId", "")
        self._flush_child(call_id, final=True)
        call = self.calls.pop(call_id, None) or _Call(call_id, call_id, call_id, None, 0)
        status = u.get("status", "completed")
        self.tool_statuses.append(status)
        icon, style, word = STATUS.get(status, ("?", "white", status))
        line = Text("  " * (call.depth + 1))
        line.append(icon + " ", style=style)
        line.append(call.name if call.header_shown else self._title(call), style="bold")
        line.append(f"  {word}", style=style)
        line.append(f" {time.monotonic() - call.start - call.waited:.1f}s", style="dim")
        if call.waited >= 0.1:
            line.append(f" · {call.waited:.1f}s waiting for you", style="dim")
        if status == "failed":
            first = next((ln for ln in (u.get("output") or "").splitlines() if ln.strip()), "")
            line.append(": " + short(first, max(20, self.console.width - len(line.plain) - 4)), style="red")
        self.print(line)
        if not self.calls:
            self.status = "thinking…"

    def _child_text(self, parent: str, text: str) -> None:
        self._show_header(parent)
        self.child_text[parent] = self.child_text.get(parent, "") + text
        self._flush_child(parent)

    def _flush_child(self, parent: str, final: bool = False) -> None:
        """Print a sub-agent's finished lines, indented and dim."""
        buf = self.child_text.get(parent, "")
        if not buf:
            return
        lines = buf.split("\n")
        done, rest = (lines, "") if final else (lines[:-1], lines[-1])
        self.child_text[parent] = rest
        depth = self.calls[parent].depth + 1 if parent in self.calls else 1
        for line in done:
            if final and not line.strip() and line is done[-1]:
                continue
            self.print(Text("  " * (depth + 1) + "│ " + line, style="dim"))
        if final:
            self.child_text.pop(parent, None)

    def _retry(self, u: dict[str, Any], parent: str | None) -> None:
        reason = f"↻ retrying (attempt {u.get('attempt')}, in {u.get('delaySeconds')}s): {u.get('reason', '')}"
        if parent:
            self.child_text.pop(parent, None)
        elif self.live_ok:
            self.text = ""  # the partial reply goes; the retried one streams in its place
            if self.committed_in_reply:
                reason += " (the partial reply above is discarded)"
        elif self.text:
            reason += " (the partial reply above is discarded)"
            self.text = ""
        self.note(reason, "yellow")

    def _mcp_wait(self, u: dict[str, Any]) -> None:
        """The spinner's line says what the turn waits for; at its end, which servers failed (their
        reasons come as the daemon's warnings). Without a live area each is a line of its own."""
        servers, failed = u.get("servers") or [], u.get("failed") or []
        if u.get("state") == "waiting":
            self.set_status(f"starting MCP servers: {', '.join(servers)}…")
            return
        self.status = "thinking…"
        if failed:
            self.note(f"MCP servers failed: {', '.join(failed)}", "yellow")
        elif not self.live_ok:
            self.note(f"MCP servers ready: {', '.join(servers)}")

    # ---- asking ---------------------------------------------------------------------------------

    def permission(self, params: dict[str, Any], page: Callable[[str], bool] | None = None) -> None:
        """Show what a permission request is about (the caller then asks or applies a policy).

        With `page` (a terminal to ask on), a preview taller than the screen goes to it whole, so
        it can be scrolled before the question; page(ansi_text) says whether it was shown."""
        self.commit_text()
        self.pause()
        self._asked_at = time.monotonic()
        if page is not None and self.console.is_terminal:
            with self.console.capture() as capture:
                self.console.print(permission_panel(params, False, self.console))
            rendered = capture.get()
            lines = rendered.count("\n")
            if lines > self.console.height - 3 and page(rendered):
                self.note(f"{params.get('title') or params.get('tool')}: {lines} lines shown in the pager",
                          "bold")
                return
        self.print(permission_panel(params, True, self.console))

    def trust(self, params: dict[str, Any]) -> None:
        """What a workspace's settings file would add, before the trust question."""
        self.commit_text()
        self.pause()
        self._asked_at = time.monotonic()
        adds = params.get("adds") or {}
        self.print(Text("? ", style="bold cyan") + Text(f"{params.get('settingsPath')} wants to add:", style="bold"))
        for label, key in (("hook", "hooks"), ("MCP server", "mcpServers"), ("allow rule", "allow"), ("agent", "agents")):
            for item in adds.get(key) or []:
                self.print(Text(f"  {label}: {item}"))

    def question(self, params: dict[str, Any]) -> None:
        self.commit_text()
        self.pause()
        self._asked_at = time.monotonic()
        self.print(Text("? ", style="bold cyan") + Text(params.get("question", ""), style="bold"))
        for i, option in enumerate(params.get("options") or [], 1):
            self.print(Text(f"  {i}. {option}"))


HOOK_STYLES = {"ok": "dim", "blocked": "yellow", "failed": "red", "timeout": "red"}


def hook_line(u: dict[str, Any]) -> str:
    """A `hook` update in one line: event, command, outcome, time, and the reason's first line."""
    reason = (u.get("reason") or "").strip().splitlines()
    why = f": {short(reason[0], 120)}" if reason else ""
    return f"⚓ hook {u.get('event')} `{short(str(u.get('command', '')), 60)}` {u.get('outcome')} " \
           f"({u.get('durationMs', 0)} ms){why}"


# ---- where streamed Markdown can be cut: the part later text cannot change is printed for good (the
# terminal's live area keeps only the rest)

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def split_stable(text: str, force: bool = False) -> tuple[str, str]:
    """Split streamed Markdown into a prefix that later text cannot change, and the rest.

    The prefix ends at the last blank line (or closing fence) outside code fences. With `force`
    and no such place, it ends at the last complete line, closing an open fence there (the rest
    reopens it). The last line is never included: it may still grow. ("", text) if nothing fits.
    """
    lines = text.split("\n")
    fence: tuple[str, int, str, int] | None = None  # marker char, marker length, opening line, its index
    cut: int | None = None  # lines[:cut] is stable; lines[cut] is skipped when it is blank
    last_line: tuple[int, tuple[str, int, str, int] | None] | None = None
    for i, line in enumerate(lines[:-1]):
        m = _FENCE.match(line)
        if fence is None:
            if m:
                fence = (m.group(1)[0], len(m.group(1)), line, i)
            elif not line.strip() and i > 0:
                cut = i
        elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= fence[1] and not m.group(2).strip():
            fence = None
            cut = i + 1
        last_line = (i + 1, fence)
    if cut is not None:
        rest = lines[cut:]
        if rest and not rest[0].strip():
            rest = rest[1:]
        return "\n".join(lines[:cut]), "\n".join(rest)
    if force and last_line is not None:
        n, open_fence = last_line
        if open_fence is not None and open_fence[3] == n - 1:
            return "", text  # only the fence's opening line: nothing worth printing yet
        stable, rest = lines[:n], lines[n:]
        if open_fence is not None:
            stable = stable + [open_fence[0] * open_fence[1]]
            rest = [open_fence[2]] + rest
        return "\n".join(stable), "\n".join(rest)
    return "", text
