"""The terminal client and hooks: a `hook` update is one line; the workspace trust question is asked
on the terminal, and a run without one (headless) never trusts unless --trust-workspace."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from toycoder_daemon.cli.client import ChatClient
from toycoder_daemon.cli.main import parse_args
from toycoder_daemon.cli.render import TurnView
from toycoder_daemon.wire import protocol as wire

TRUST = {"root": "/w", "settingsPath": "/w/.toycoder/settings.yaml",
         "adds": {"hooks": ["make lint"], "mcpServers": ["npx srv"], "allow": ["run_command(make *)"],
                  "agents": ["repo_planner: tools none; model fast"]}}


class Conn:
    cancelled_requests: set[Any] = set()


def client(*, tty: bool, trust: bool = False, key: str | None = None) -> tuple[ChatClient, io.StringIO]:
    out = io.StringIO()
    c = ChatClient(Conn(), TurnView(Console(file=out, width=100), live=False), approve="ask",  # type: ignore[arg-type]
                   trust_workspace=trust)
    c.guard.tty = tty
    c.guard.read_key = lambda keys, cancelled: key  # type: ignore[method-assign]  # the key the person presses
    return c, out


def test_a_hook_update_is_one_line() -> None:
    out = io.StringIO()
    view = TurnView(Console(file=out, width=100), live=False)
    view.update({"sessionId": "s", "turnId": "t", "update": {
        "kind": "hook", "event": "PreToolUse", "command": "ruff check", "outcome": "failed", "durationMs": 12,
        "reason": "exit code 127: ruff: not found\nmore"}})
    assert out.getvalue().strip() == "⚓ hook PreToolUse `ruff check` failed (12 ms): exit code 127: ruff: not found"


def test_trust_is_asked_on_the_terminal() -> None:
    c, out = client(tty=True, key="t")
    assert c.request(wire.WORKSPACE_TRUST, TRUST, 1) == {"decision": "trust"}
    shown = out.getvalue()
    assert "hook: make lint" in shown and "MCP server: npx srv" in shown and "allow rule: run_command(make *)" in shown
    assert "agent: repo_planner: tools none; model fast" in shown
    assert client(tty=True, key="o")[0].request(wire.WORKSPACE_TRUST, TRUST, 1) == {"decision": "once"}
    assert client(tty=True, key=None)[0].request(wire.WORKSPACE_TRUST, TRUST, 1) == {"decision": "deny"}


def test_headless_never_trusts_unless_told() -> None:
    c, out = client(tty=False)
    assert c.request(wire.WORKSPACE_TRUST, TRUST, 1) == {"decision": "deny"}
    assert "--trust-workspace" in out.getvalue()
    assert client(tty=False, trust=True)[0].request(wire.WORKSPACE_TRUST, TRUST, 1) == {"decision": "once"}
    assert parse_args(["-p", "hi", "--trust-workspace"]).trust_workspace
    assert not parse_args(["-p", "hi"]).trust_workspace
