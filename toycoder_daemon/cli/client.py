"""One conversation with the daemon: turns, Ctrl-C, and the daemon's questions to the person.

Only the wire protocol is used (method names from `toycoder_daemon.wire.protocol`); the agent core is
never imported.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from rich.text import Text

from toycoder_daemon.cli.render import TurnView
from toycoder_daemon.cli.rpc import Connection, DaemonExited, RpcError
from toycoder_daemon.wire import protocol as wire

try:  # POSIX terminals; elsewhere there is no key-at-a-time input and Ctrl-C just interrupts
    import termios
except ImportError:  # pragma: no cover
    termios = None  # type: ignore[assignment]

DECISIONS = {"y": "allow_once", "a": "allow_always", "n": "reject"}
SAID = {"allow_once": ("allowed once", "green"), "allow_always": ("always allowed in this session", "green"),
        "reject": ("denied", "yellow")}


def page(text: str, out: IO[str]) -> bool:
    """Show `text` (with ANSI colours) in the person's pager: $PAGER, else `less` with LESS=FRX
    when LESS is unset (as git does: colours, and the last screen stays). False when `out` is no
    terminal or there is no pager to run."""
    command = os.environ.get("PAGER", "").strip() or "less"
    try:
        if not out.isatty():
            return False
        out.flush()
        env = {**os.environ, "LESS": os.environ.get("LESS", "FRX")}
        proc = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, stdout=out, env=env)
    except (OSError, ValueError):
        return False
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError):  # the person quit before the end
        proc.stdin.write(text.encode("utf-8", "replace"))
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.close()
    return proc.wait() not in (126, 127)  # the shell's "not executable" and "not found"


def stdin_is_tty() -> bool:
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


class TurnGuard:
    """While a turn runs: Ctrl-C only counts (the client cancels over the wire), and the terminal
    neither echoes keys over the live display nor waits for Enter (a permission answer is one key)."""

    def __init__(self) -> None:
        self.interrupts = 0
        self._attrs: Any = None
        self._handler: Any = None
        self.tty = stdin_is_tty() and termios is not None

    def _on_sigint(self, signum: int, frame: Any) -> None:
        self.interrupts += 1

    def __enter__(self) -> TurnGuard:
        self.interrupts = 0
        self._handler = signal.signal(signal.SIGINT, self._on_sigint)
        if self.tty:
            fd = sys.stdin.fileno()
            self._attrs = termios.tcgetattr(fd)
            quiet = termios.tcgetattr(fd)
            quiet[3] &= ~(termios.ECHO | termios.ICANON)  # ISIG stays: Ctrl-C still signals
            quiet[6][termios.VMIN], quiet[6][termios.VTIME] = 1, 0
            termios.tcsetattr(fd, termios.TCSANOW, quiet)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._attrs is not None:
            termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, self._attrs)
            self._attrs = None
        signal.signal(signal.SIGINT, self._handler)

    def cooked(self) -> _Cooked:
        """The terminal as it was before the turn (to read a line with echo)."""
        return _Cooked(self._attrs)

    @contextlib.contextmanager
    def paging(self) -> Iterator[None]:
        """The terminal as it was, and Ctrl-C left to the pager (it does not cancel the turn)."""
        handler = signal.signal(signal.SIGINT, lambda signum, frame: None)  # not SIG_IGN: the pager resets it
        try:
            with self.cooked():
                yield
        finally:
            signal.signal(signal.SIGINT, handler)

    def read_key(self, valid: str, withdrawn: Callable[[], bool]) -> str | None:
        """One key out of `valid`; None on Ctrl-C, Esc, EOF, or when the daemon withdrew the question."""
        fd = sys.stdin.fileno()
        termios.tcflush(fd, termios.TCIFLUSH)  # keys typed ahead never answer a permission prompt
        seen = self.interrupts
        while True:
            if self.interrupts != seen or withdrawn():
                return None
            ready, _, _ = select.select([fd], [], [], 0.1)
            if not ready:
                continue
            key = os.read(fd, 1).decode("utf-8", "ignore").lower()
            if not key or key in ("\x1b", "\x04"):
                return None
            if key in valid:
                return key


class _Cooked:
    def __init__(self, attrs: Any):
        self.attrs = attrs
        self.saved: Any = None

    def __enter__(self) -> None:
        if self.attrs is not None:
            fd = sys.stdin.fileno()
            self.saved = termios.tcgetattr(fd)
            termios.tcsetattr(fd, termios.TCSANOW, self.attrs)

    def __exit__(self, *exc: Any) -> None:
        if self.saved is not None:
            termios.tcsetattr(sys.stdin.fileno(), termios.TCSANOW, self.saved)


@dataclass
class Outcome:
    result: dict[str, Any] | None = None
    error: RpcError | None = None
    tool_statuses: list[str] = field(default_factory=list)
    unasked: list[str] = field(default_factory=list)
    """The tool calls denied because nobody could be asked (no terminal, no --approve)."""

    @property
    def denied_only(self) -> bool:
        """Every tool call of the turn was denied (and there was at least one)."""
        return bool(self.tool_statuses) and all(s == "denied" for s in self.tool_statuses)

    def exit_code(self) -> int:
        if self.error is not None or self.result is None:
            return 1
        stop = self.result.get("stopReason")
        if stop == "cancelled":
            return 130
        if self.unasked:
            return 5
        if self.denied_only:
            return 3
        if stop in ("max_steps", "max_tokens"):
            return 4
        return 0


class ChatClient:
    """Runs turns of one session (which can change: `/new`, `/switch`) and answers the daemon."""

    def __init__(self, conn: Connection, view: TurnView, *, approve: str = "ask",
                 on_update: Callable[[dict[str, Any]], None] | None = None, line_reader: Callable[[str], str | None]
                 | None = None, trust_workspace: bool = False):
        self.conn = conn
        self.view = view
        self.approve = approve
        self.trust_workspace = trust_workspace
        """--trust-workspace: the workspace's settings apply for this run without asking."""
        self.on_update = on_update
        self.line_reader = line_reader
        self.session_id = ""
        self.context: list[dict[str, Any]] = []
        """Context items for the next prompt (/attach)."""
        self.guard = TurnGuard()
        self._cancel_sent = False
        self._unasked: list[str] = []

    # ---- sessions -------------------------------------------------------------------------------

    def new_session(self) -> dict[str, Any]:
        info: dict[str, Any] = self.conn.call(wire.SESSION_NEW, {}, on_notification=self.notification)
        self.session_id = info["sessionId"]
        self.view.set_session(info)
        return info

    def mentions(self, prefix: str) -> list[dict[str, Any]]:
        """What `@prefix` may name (toycoder/mentions/complete), for the prompt's completion. Asked at the
        idle prompt, when nothing else reads the connection; a slow or failed answer completes nothing,
        as completion must never break typing."""
        try:
            result = self.conn.call(wire.MENTIONS_COMPLETE, {"sessionId": self.session_id or None, "prefix": prefix,
                                                             "limit": 50}, timeout=2)
        except (RpcError, DaemonExited):
            return []
        return list(result["items"])

    def load_session(self, session_id: str) -> dict[str, Any]:
        """Load by id, or by a unique prefix of one; sets the current session."""
        loaded: dict[str, Any]
        try:
            loaded = self.conn.call(wire.SESSION_LOAD, {"sessionId": session_id}, on_notification=self.notification)
        except RpcError as e:
            if e.code != wire.SESSION_NOT_FOUND:
                raise
            sessions = self.conn.call(wire.SESSION_LIST, {})["sessions"]
            ids = [s["sessionId"] for s in sessions if s["sessionId"].startswith(session_id)]
            if len(ids) != 1:
                raise RpcError(e.code, f"no session {session_id!r} in this workspace" if not ids else
                               f"{session_id!r} matches {len(ids)} sessions: {', '.join(ids)}") from None
            loaded = self.conn.call(wire.SESSION_LOAD, {"sessionId": ids[0]}, on_notification=self.notification)
        self.session_id = loaded["session"]["sessionId"]
        self.view.set_session(loaded["session"])
        return loaded

    def set_model(self, spec: str) -> dict[str, Any]:
        provider, _, model = spec.rpartition(":")
        params: dict[str, Any] = {"sessionId": self.session_id, "model": model}
        if provider:
            params["provider"] = provider
        result: dict[str, Any] = self.conn.call(wire.MODELS_SET, params, on_notification=self.notification)
        return result

    # ---- a turn ---------------------------------------------------------------------------------

    def run_turn(self, text: str) -> Outcome:
        self.view.begin()
        self._cancel_sent = False
        self._unasked = []
        outcome = Outcome()
        try:
            with self.guard:
                params: dict[str, Any] = {"sessionId": self.session_id, "text": text}
                if self.context:
                    params["context"], self.context = self.context, []
                outcome.result = self.conn.call(wire.PROMPT, params,
                                                on_notification=self.notification, on_request=self.request,
                                                on_idle=self._idle)
        except RpcError as e:
            outcome.error = e
        finally:
            outcome.tool_statuses = list(self.view.tool_statuses)
            outcome.unasked = list(self._unasked)
            self.view.end(outcome.result if outcome.result and outcome.result.get("stopReason") != "command"
                          else None)
        return outcome

    def _idle(self) -> None:
        if self.guard.interrupts and not self._cancel_sent:
            self._cancel_sent = True
            self.conn.request_nowait(wire.CANCEL, {"sessionId": self.session_id})
            self.view.set_status("cancelling…")
        if self.guard.interrupts >= 3:  # the daemon does not answer the cancel: leave
            raise KeyboardInterrupt

    # ---- the daemon's messages ------------------------------------------------------------------

    def notification(self, msg: dict[str, Any]) -> None:
        method, params = msg.get("method"), msg.get("params") or {}
        if method == wire.UPDATE:
            if self.on_update:
                self.on_update(params)
            self.view.update(params)
        elif method == "window/showMessage":
            kind = params.get("type", 3)
            style = {1: "bold red", 2: "yellow"}.get(kind, "dim")
            # quiet (-p): an error is said again by the request it fails; a warning (a server that takes
            # no tools, an MCP server that failed) by nothing else
            if not self.view.quiet or kind == 2:
                self.view.note(f"toycoder-daemon: {params.get('message', '')}", style)

    def request(self, method: str, params: dict[str, Any], msg_id: Any) -> Any:
        if method == wire.REQUEST_PERMISSION:
            return self.permission(params, msg_id)
        if method == wire.ASK_USER:
            return self.question(params, msg_id)
        if method == wire.WORKSPACE_TRUST:
            return self.workspace_trust(params, msg_id)
        raise RpcError(wire.METHOD_NOT_FOUND, f"toycoder does not handle {method}")

    def _can_ask(self) -> bool:
        return self.approve == "ask" and self.guard.tty

    def permission(self, params: dict[str, Any], msg_id: Any) -> dict[str, str]:
        view = self.view
        shown = self._can_ask() or not view.quiet  # quiet and nobody to ask: the one-shot's last line says it
        if shown:
            view.permission(params, page=self._page if self._can_ask() else None)
        if self.approve in ("allow", "deny"):
            decision = "allow_once" if self.approve == "allow" else "reject"
            how = f"(--approve {self.approve})"
        elif not self._can_ask():
            decision, how = "reject", "(no terminal to ask on; use --approve allow|deny)"
            self._unasked.append(str(params.get("title") or params.get("tool") or "a tool call"))
        else:
            view.console.print(Text.assemble(("Allow? ", "bold"), ("y", "bold green"), " yes, once · ",
                                             ("a", "bold green"), " always (this session) · ", ("n", "bold red"),
                                             " no "), end="")
            key = self.guard.read_key("yan", lambda: msg_id in self.conn.cancelled_requests)
            view.console.print()
            decision = DECISIONS.get(key or "n", "reject")
            how = "" if key else "(no answer)"
        said, style = SAID[decision]
        if shown:
            view.note(f"  → {said} {how}".rstrip(), style)
        view.resume()
        return {"decision": decision}

    def workspace_trust(self, params: dict[str, Any], msg_id: Any) -> dict[str, str]:
        """Asked on the terminal; without one (a headless run) "deny" unless --trust-workspace."""
        view = self.view
        view.trust(params)
        if self.trust_workspace:
            decision, how = "once", "(--trust-workspace)"
        elif not self._can_ask():
            decision, how = "deny", "(no terminal to ask on; --trust-workspace trusts it for one run)"
        else:
            view.console.print(Text.assemble(("Trust it? ", "bold"), ("t", "bold green"), " trust (remembered) · ",
                                             ("o", "bold green"), " once · ", ("n", "bold red"), " no "), end="")
            key = self.guard.read_key("ton", lambda: msg_id in self.conn.cancelled_requests)
            view.console.print()
            decision, how = {"t": "trust", "o": "once"}.get(key or "n", "deny"), "" if key else "(no answer)"
        style = "red" if decision == "deny" else "green"
        view.note(f"  → {'not trusted: only its deny rules apply' if decision == 'deny' else decision} {how}".rstrip(),
                  style)
        view.resume()
        return {"decision": decision}

    def _page(self, text: str) -> bool:
        with self.guard.paging():
            return page(text, self.view.console.file)

    def question(self, params: dict[str, Any], msg_id: Any) -> dict[str, Any]:
        view = self.view
        options = params.get("options") or []
        if self.approve == "ask" or not view.quiet:
            view.question(params)
        answer: str | None
        if not self._can_ask():
            # Nobody to ask: take the first option (like a default), or tell the model there is no answer.
            answer = options[0] if options else None
            if not view.quiet:
                view.note(f"  → {answer} (answered automatically)" if answer else "  → (no answer: not asked)")
        else:
            hint = "a number, or your own answer" if options else "your answer"
            with self.guard.cooked():
                answer = self._read_line(f"answer ({hint}; empty to skip) › ")
            if answer and answer.isdigit() and 1 <= int(answer) <= len(options):
                answer = options[int(answer) - 1]
                view.note(f"  → {answer}", "green")
            elif not answer:
                view.note("  → skipped (the agent goes on without an answer)", "yellow")
        view.resume()
        return {"answer": answer} if answer else {"cancelled": True}

    def _read_line(self, prompt: str) -> str | None:
        try:
            if self.line_reader is not None:
                line = self.line_reader(prompt)
            else:
                self.view.console.print(prompt, end="")
                line = sys.stdin.readline()
                if not line:
                    return None
        except KeyboardInterrupt:  # Ctrl-C on a question: skip it and cancel the turn
            self.guard.interrupts += 1
            return None
        except EOFError:
            return None
        return (line or "").strip() or None
