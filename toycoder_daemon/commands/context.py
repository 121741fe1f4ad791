"""What a slash command may use: the session it runs in, the person's frontend, the session's host
(its runtime: models, compaction, checkpoints, MCP servers) and the daemon's sessions (App), both
through small interfaces (commands never import the app)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from toycoder_daemon.agent.hooks.engine import HookSpec
from toycoder_daemon.commands.custom import CommandRow, CustomCommand
from toycoder_daemon.core.ports import Event, Frontend, ModelsInfo
from toycoder_daemon.llm.base import ChatModel
from toycoder_daemon.sessions.context import Compaction
from toycoder_daemon.sessions.session import Session
from toycoder_daemon.sessions.store import SessionSummary
from toycoder_daemon.tools.settings import ToolSettings


class CheckpointHost(Protocol):
    """The session's checkpoints (checkpoints.undo.SessionCheckpoints)."""

    def rows(self) -> Sequence[Mapping[str, Any]]:
        """Turns that changed files, oldest first: {turnId, kind, createdAt, prompt, files, restoreOf}."""

    def undo_redo(self) -> tuple[str | None, str | None]:
        """(the turn /undo restores, the restore /redo restores); None: nothing to do."""

    async def restore(self, turn_ref: str, paths: list[str] | None, force: bool, frontend: Frontend | None,
                      as_turn: str | None = None) -> Mapping[str, Any]:
        """{turnId, restored, conflicts: [{path, reason}], note}; raises ToyCoderError for an unknown turn."""


class CommandHost(Protocol):
    """The session the command runs in, as the app runs it (app.runtime.SessionRuntime)."""

    @property
    def settings(self) -> ToolSettings:
        """The tools' settings (the sandbox policy for /tools)."""

    @property
    def checkpoints(self) -> CheckpointHost: ...

    def models_info(self) -> ModelsInfo: ...

    def set_model(self, provider: str | None, model: str) -> ModelsInfo: ...

    def model_for(self, session: Session | None, role: str | None = None) -> ChatModel: ...

    async def compact(self, frontend: Frontend, *, force: bool = False) -> Compaction | None: ...

    async def settle_mcp(self, emit: Callable[[Event], None] | None = None) -> None:
        """What a turn waits for before asking the model: the MCP servers (the config's, the
        session's client's) started and each ready or failed; a longer wait is shown through `emit`."""

    def command_rows(self) -> tuple[list[CommandRow], list[CustomCommand]]:
        """Every slash command of the session (built-in, custom, MCP prompts), and the custom ones a
        built-in hides."""

    def mcp_status(self) -> list[dict[str, Any]] | None:
        """The MCP servers' status rows: the config's, then those the session's client gave (with
        `origin: "client"`); None when there are none."""

    def hooks_in_effect(self) -> tuple[list[HookSpec], str | None]:
        """The hooks that run (the user's, then a trusted workspace's), and a line on the workspace's
        settings file (None when it has none)."""


class SessionDirectory(Protocol):
    """The daemon's sessions (App): what /new, /clear, /switch and /sessions use."""

    def new_session(self, title: str | None = None) -> Session: ...

    async def load(self, session_id: str) -> Session:
        """A session by id, loaded from disk (off the event loop) when it is not open here."""

    def list_sessions(self) -> list[SessionSummary]: ...


@dataclass
class CommandContext:
    host: CommandHost
    sessions: SessionDirectory
    session: Session
    frontend: Frontend
    args: list[str] = field(default_factory=list)
    """The arguments, split like a shell would."""
    raw: str = ""
    """The text after the command name, as typed (stripped)."""
    turn_id: str = ""
    """The turn the command runs as (a restore is recorded under it)."""
