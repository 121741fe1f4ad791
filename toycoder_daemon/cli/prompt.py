"""Line editing: prompt_toolkit with a history file, completion of the daemon's slash commands and of
`@` mentions (toycoder/mentions/complete)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
from prompt_toolkit.completion import CompleteEvent, Completer, Completion, merge_completers
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings


class SlashCompleter(Completer):
    """Completes `/name` (and aliases) from toycoder/commands/list; nothing else."""

    def __init__(self) -> None:
        self.commands: list[dict[str, Any]] = []

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or " " in text:
            return
        word = text[1:].lower()
        for cmd in self.commands:
            for name in [cmd["name"], *cmd.get("aliases", [])]:
                if name.startswith(word):
                    yield Completion("/" + name, start_position=-len(text), display=cmd.get("usage") or "/" + name,
                                     display_meta=cmd.get("help", "") if name == cmd["name"] else f"= /{cmd['name']}")


_MENTION = re.compile(r"(?:^|\s)@(\S*)$")


class MentionCompleter(Completer):
    """Completes `@prefix` at the cursor with what the daemon says it may name (files, folders, MCP
    resources); `lookup(prefix)` is the daemon's toycoder/mentions/complete items (the caller turns a
    failed lookup into none: completion must never break typing)."""

    def __init__(self, lookup: Callable[[str], list[dict[str, Any]]] | None = None) -> None:
        self.lookup = lookup

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        at = _MENTION.search(document.text_before_cursor)
        if at is None or self.lookup is None:
            return
        prefix = at.group(1)
        for item in self.lookup(prefix):
            label = item["label"]
            yield Completion("@" + label, start_position=-len(prefix) - 1, display="@" + label,
                             display_meta=item.get("kind", ""))


def _history(path: Path) -> History:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(exist_ok=True)
        return FileHistory(str(path))
    except OSError:
        return InMemoryHistory()


class LineEditor:
    def __init__(self, history_file: Path):
        self.completer = SlashCompleter()
        self.mentions = MentionCompleter()
        keys = KeyBindings()

        @keys.add("c-c")
        def _(event: Any) -> None:  # a line in progress is cleared; on an empty line Ctrl-C means "exit?"
            buf = event.app.current_buffer
            if buf.text:
                buf.reset()
            else:
                event.app.exit(exception=KeyboardInterrupt)

        @keys.add("escape", "enter")
        def _(event: Any) -> None:  # Alt-Enter / Esc Enter: a new line in the prompt
            event.app.current_buffer.insert_text("\n")

        self.session: PromptSession[str] = PromptSession(
            history=_history(history_file), completer=merge_completers([self.completer, self.mentions]),
            complete_while_typing=True,
            auto_suggest=AutoSuggestFromHistory(), key_bindings=keys, enable_history_search=False)

    def set_commands(self, commands: list[dict[str, Any]]) -> None:
        self.completer.commands = commands

    def set_mentions(self, lookup: Callable[[str], list[dict[str, Any]]]) -> None:
        self.mentions.lookup = lookup

    def prompt(self, interrupted: Callable[[], bool] | None = None, mode: str = "") -> str:
        """The next line; KeyboardInterrupt for Ctrl-C on an empty line, also when `interrupted()` says
        a Ctrl-C came before prompt_toolkit had the terminal; EOFError for Ctrl-D."""

        def pre_run() -> None:  # prompt_toolkit handles SIGINT from here on
            if interrupted is not None and interrupted():
                self.session.app.exit(exception=KeyboardInterrupt)

        # the session's mode stands before the arrow; the default (ask) dim, the others stand out
        tag = [("ansibrightblack" if mode == "ask" else "ansiyellow", f"{mode} ")] if mode else []
        return self.session.prompt(FormattedText([*tag, ("ansigreen bold", "❯ ")]), pre_run=pre_run)

    def ask(self, message: str) -> str:
        """A one-off line (an answer to ask_user): no history, no completion."""
        return PromptSession().prompt(FormattedText([("ansicyan", message)]))
