"""CommandRegistry: `/name args` -> a handler, with aliases, help and "did you mean"."""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from toycoder_daemon.commands.context import CommandContext


@dataclass
class CommandResult:
    text: str
    action: dict[str, Any] | None = None
    """For the client to follow: {"kind": "switch", "sessionId": ...} or {"kind": "quit"}."""


class CommandError(Exception):
    """A command used wrongly; the message is shown to the person."""


Handler = Callable[[CommandContext], Awaitable[CommandResult]]


@dataclass
class Command:
    name: str
    usage: str
    help: str
    handler: Handler
    aliases: list[str] = field(default_factory=list)


class CommandRegistry:
    def __init__(self) -> None:
        self._commands: dict[str, Command] = {}
        self._names: dict[str, Command] = {}

    def add(self, name: str, usage: str, help: str, aliases: list[str] | None = None) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            cmd = Command(name, usage, help, handler, aliases or [])
            self._commands[name] = cmd
            for n in [name, *cmd.aliases]:
                self._names[n] = cmd
            return handler

        return register

    def all(self) -> list[Command]:
        return list(self._commands.values())

    def get(self, name: str) -> Command | None:
        return self._names.get(name.lstrip("/"))

    async def run(self, text: str, context: CommandContext) -> CommandResult:
        """Run `/name args...` (the context's args and raw are filled from the text); unknown
        names suggest the closest command."""
        name, _, rest = text.strip().lstrip("/").partition(" ")
        cmd = self.get(name)
        if cmd is None:
            import difflib  # a mistyped command only: not in every new process

            close = difflib.get_close_matches(name, list(self._names), n=1, cutoff=0.5)
            hint = f"; did you mean /{close[0]}?" if close else ""
            return CommandResult(f"unknown command /{name}{hint} (/help lists them)")
        try:
            args = shlex.split(rest)
        except ValueError:
            args = rest.split()
        try:
            return await cmd.handler(replace(context, args=args, raw=rest.strip()))
        except CommandError as e:
            return CommandResult(f"{e}\nusage: {cmd.usage}")
