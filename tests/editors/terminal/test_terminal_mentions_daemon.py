"""`@path` completion in the terminal's prompt against the real daemon (issue 29): the daemon lists the
workspace's files for the prefix, before and after a session exists, and nothing once it is gone."""

from __future__ import annotations

import sys
from pathlib import Path

from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from rich.console import Console

from toycoder_daemon.cli.client import ChatClient
from toycoder_daemon.cli.prompt import LineEditor
from toycoder_daemon.cli.render import TurnView
from toycoder_daemon.cli.rpc import Connection, initialize


def completions(editor: LineEditor, text: str) -> list[str]:
    got = editor.session.completer.get_completions(Document(text), CompleteEvent(completion_requested=True))  # type: ignore[union-attr]
    return [c.text for c in got]


def test_the_daemon_lists_workspace_files_for_the_prefix(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "calc.py").write_text("x = 1\n")
    (ws / "pkg" / "calculus.py").write_text("y = 2\n")
    (ws / "notes.md").write_text("n\n")
    conn = Connection([sys.executable, "-m", "toycoder_daemon"], cwd=str(ws))
    try:
        client = ChatClient(conn, TurnView(Console(width=100), live=False), approve="ask")
        initialize(conn, str(ws))
        editor = LineEditor(tmp_path / "history")
        editor.set_mentions(client.mentions)  # before a session: the config's resources only
        offered = [text for text in completions(editor, "explain @cal")]
        assert "@calc.py" in offered and "@notes.md" not in offered
        client.new_session()
        offered = [text for text in completions(editor, "explain @pkg/")]
        assert "@pkg/calculus.py" in offered and "@calc.py" not in offered
        conn.close()
        assert client.mentions("cal") == []  # the daemon gone: no completions, no error
    finally:
        conn.close()
