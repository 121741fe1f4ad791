"""`@path` completion in the terminal's prompt (issue 29): prompt_toolkit completes the `@prefix` at the
cursor with what the daemon's toycoder/mentions/complete lists (the real daemon's answer:
tests/editors/terminal/test_terminal_mentions_daemon.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from toycoder_daemon.cli.prompt import LineEditor


def completions(editor: LineEditor, text: str) -> list[tuple[str, int, str]]:
    """What the prompt offers with the cursor at the end of `text`: (text, start position, meta)."""
    got = editor.session.completer.get_completions(Document(text), CompleteEvent(completion_requested=True))  # type: ignore[union-attr]
    return [(c.text, c.start_position, c.display_meta_text) for c in got]


def test_at_prefix_completes_from_the_lookup_and_slash_commands_still_complete(tmp_path: Path) -> None:
    asked: list[str] = []

    def lookup(prefix: str) -> list[dict[str, Any]]:
        asked.append(prefix)
        return [{"label": "calc.py", "kind": "file", "uri": "file:///w/calc.py"},
                {"label": "calendar/", "kind": "folder", "uri": "file:///w/calendar"}]

    editor = LineEditor(tmp_path / "history")
    editor.set_commands([{"name": "help", "usage": "/help", "help": "List the commands."}])
    assert completions(editor, "explain @cal") == []  # no lookup yet: nothing, and no error
    editor.set_mentions(lookup)
    assert completions(editor, "explain @cal") == [("@calc.py", -4, "file"), ("@calendar/", -4, "folder")]
    assert completions(editor, "@") == [("@calc.py", -1, "file"), ("@calendar/", -1, "folder")]
    assert asked == ["cal", ""]
    # an @ inside a word (an e-mail address) and a finished mention are not completed
    assert completions(editor, "mail me@cal") == [] and completions(editor, "see @calc.py ") == []
    assert asked == ["cal", ""]
    assert completions(editor, "/he") == [("/help", -3, "List the commands.")]
