"""Custom slash commands from Markdown files (issue 29), as Claude Code, codex and opencode load them.

    .toycoder/commands/review.md          -> /review          (the workspace's)
    .toycoder/commands/git/commit.md      -> /git:commit      (a sub-folder: name:sub)
    <commands.paths>/...                  -> the workspace's too (e.g. `.claude/commands`)
    $XDG_CONFIG_HOME/toycoder/commands/   -> the user's (default ~/.config/toycoder/commands)

A file is optional YAML front matter (`description`, `argument-hint`, `model`) and a body: the prompt,
where `$ARGUMENTS` is everything after the name and `$1`..`$9` the arguments split like a shell would.
A command only expands into a prompt: nothing runs from its text.

Resolution: a built-in command wins over a custom one of the same name (/help warns about it); a
workspace command wins over a user command. The folders are scanned again when anything in them
changed (names and modification times), so edits show without a restart.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 256 * 1024
_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_POSITIONAL = re.compile(r"\$([1-9])")


@dataclass(frozen=True)
class CustomCommand:
    name: str
    description: str
    argument_hint: str
    model: str | None
    body: str
    source: str
    """workspace, user, or the `commands.paths` folder it came from."""
    path: Path

    @property
    def usage(self) -> str:
        return f"/{self.name}" + (f" {self.argument_hint}" if self.argument_hint else "")

    def expand(self, raw: str) -> str:
        """The prompt: `$ARGUMENTS` -> `raw`, `$1`..`$9` -> the shell-split arguments (missing: "").
        A body that uses neither gets the arguments appended after a blank line."""
        try:
            args = shlex.split(raw)
        except ValueError:
            args = raw.split()
        uses = "$ARGUMENTS" in self.body or _POSITIONAL.search(self.body) is not None
        text = self.body.replace("$ARGUMENTS", raw)
        text = _POSITIONAL.sub(lambda m: args[int(m.group(1)) - 1] if int(m.group(1)) <= len(args) else "", text)
        if not uses and raw:
            text = f"{text.rstrip()}\n\n{raw}"
        return text.strip()


def parse(path: Path, name: str, source: str) -> CustomCommand | None:
    try:
        with path.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        log.info("custom command %s unreadable: %s", path, e)
        return None
    if len(data) > MAX_FILE_BYTES:
        log.info("custom command %s is over %d bytes: left out", path, MAX_FILE_BYTES)
        return None
    text = data.decode("utf-8", "replace")
    meta: dict[str, object] = {}
    if m := _FRONT.match(text):
        import yaml  # only when a command has front matter

        try:
            loaded = yaml.safe_load(m.group(1))
            meta = loaded if isinstance(loaded, dict) else {}
        except yaml.YAMLError as e:
            log.info("custom command %s: front matter unreadable (%s): used as none", path, e)
        text = text[m.end():]
    body = text.strip()
    if not body:
        return None
    first = next((line.strip().lstrip("# ") for line in body.splitlines() if line.strip()), "")
    description = str(meta.get("description") or first)[:200]
    hint = meta.get("argument-hint") or meta.get("argument_hint") or ""
    model = meta.get("model")
    return CustomCommand(name, description, str(hint), str(model) if model else None, body, source, path)


def _files(folder: Path) -> Iterable[tuple[str, Path]]:
    """(command name, file) of every .md under `folder`; a sub-folder's become `sub:name`."""
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        rel = Path(dirpath).relative_to(folder)
        for f in sorted(filenames):
            if f.endswith(".md") and not f.startswith("."):
                yield ":".join([*rel.parts, f[:-3]]), Path(dirpath) / f


class CustomCommands:
    """The custom commands of one workspace (App keeps one); `all()` scans again when a file changed."""

    def __init__(self, workspace: Path, paths: Iterable[str] = (), user_dir: Path | None = None):
        self.folders: list[tuple[Path, str]] = [(workspace / ".toycoder" / "commands", "workspace")]
        self.folders += [((workspace / p).resolve(), p) for p in paths]
        self.folders.append((user_dir or user_commands_dir(), "user"))
        self._stamp: tuple[object, ...] | None = None
        self._commands: dict[str, CustomCommand] = {}

    def _scan_stamp(self) -> tuple[object, ...]:
        """Every command file with its modification time and size: what changed since the last scan."""
        stamp: list[object] = []
        for folder, _ in self.folders:
            for _, path in _files(folder) if folder.is_dir() else ():
                try:
                    st = path.stat()
                    stamp.append((str(path), st.st_mtime_ns, st.st_size))
                except OSError:
                    stamp.append((str(path), None))
        return tuple(stamp)

    def all(self) -> dict[str, CustomCommand]:
        """name -> command; the first folder that has a name wins (workspace before user)."""
        stamp = self._scan_stamp()
        if stamp != self._stamp:
            commands: dict[str, CustomCommand] = {}
            for folder, source in self.folders:
                for name, path in _files(folder) if folder.is_dir() else ():
                    if name not in commands and (cmd := parse(path, name, source)) is not None:
                        commands[name] = cmd
            self._commands, self._stamp = commands, stamp
        return self._commands

    def get(self, name: str) -> CustomCommand | None:
        return self.all().get(name.lstrip("/"))


@dataclass(frozen=True)
class CommandRow:
    """One slash command as lists show it (commands/list, /help, ACP available_commands_update)."""

    name: str
    usage: str
    help: str
    source: str = "builtin"
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class McpPrompt:
    """An MCP server's prompt, offered as `/mcp:<server>:<name>`."""

    server: str
    name: str
    description: str
    arguments: tuple[tuple[str, bool], ...]
    """(name, required) in the server's order: positional arguments fill them in turn."""

    @property
    def command(self) -> str:
        return f"mcp:{self.server}:{self.name}"

    def bind(self, raw: str) -> dict[str, str]:
        """The arguments from `key=value` and positional words; ValueError naming what is wrong."""
        try:
            words = shlex.split(raw)
        except ValueError:
            words = raw.split()
        names = [n for n, _ in self.arguments]
        out: dict[str, str] = {}
        positional: list[str] = []
        for w in words:
            key, eq, value = w.partition("=")
            if eq and key in names:
                out[key] = value
            else:
                positional.append(w)
        free = [n for n in names if n not in out]
        if len(positional) > len(free):
            if not free:
                raise ValueError(f"/{self.command} takes no more arguments (it has {', '.join(names) or 'none'})")
            positional[len(free) - 1:] = [" ".join(positional[len(free) - 1:])]  # the last one takes the rest
        out.update(zip(free, positional, strict=False))
        missing = [n for n, required in self.arguments if required and n not in out]
        if missing:
            raise ValueError(f"/{self.command}: missing {', '.join(missing)} (positional, or key=value)")
        return out

    def row(self) -> CommandRow:
        args = " ".join(f"<{n}>" if required else f"[{n}]" for n, required in self.arguments)
        return CommandRow(self.command, f"/{self.command}" + (f" {args}" if args else ""),
                          self.description or f"MCP prompt {self.name} of {self.server}", f"mcp:{self.server}")


def listing(builtin: Iterable[CommandRow], custom: dict[str, CustomCommand],
            prompts: Iterable[McpPrompt]) -> tuple[list[CommandRow], list[CustomCommand]]:
    """Every command as lists show them, and the custom ones a built-in hides (/help warns)."""
    rows = list(builtin)
    taken = {n for r in rows for n in (r.name, *r.aliases)}
    hidden = [c for name, c in custom.items() if name in taken]
    rows += [CommandRow(c.name, c.usage, c.description, c.source) for name, c in custom.items() if name not in taken]
    rows += [p.row() for p in prompts]
    return rows, hidden


def user_commands_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "toycoder" / "commands"
