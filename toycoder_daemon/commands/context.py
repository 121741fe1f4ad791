"""What a slash command may use: the session it runs in, the person's frontend, and a small host
interface that App implements (commands never import the app)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..llm.base import ChatModel
from ..ports import Frontend, ModelsInfo
from ..sessions.context import Compaction
from ..sessions.session import Session
from ..sessions.store import SessionSummary
from ..tools.settings import ToolSettings


class CheckpointHost(Protocol):
    """The sessions' checkpoints (the app's undo.Checkpoints)."""

    def rows(self, session_id: str, live: bool) -> Sequence[Mapping[str, Any]]:
        """Turns that changed files, oldest first: {turnId, kind, createdAt, prompt, files}."""

    async def restore(self, s: Session, turn_ref: str, paths: list[str] | None, force: bool,
                      frontend: Frontend | None, as_turn: str | None = None) -> Mapping[str, Any]:
        """{turnId, restored, conflicts: [{path, reason}], note}; raises ToyCoderError for an unknown turn."""


class CommandHost(Protocol):
    settings: ToolSettings
    """The tools' settings (the sandbox policy for /tools)."""

    @property
    def checkpoints(self) -> CheckpointHost: ...

    def new_session(self, title: str | None = None) -> Session: ...

    async def load(self, session_id: str) -> Session:
        """A session by id, loaded from disk (off the event loop) when it is not live."""

    def list_sessions(self) -> list[SessionSummary]: ...

    def models_info(self, session_id: str | None) -> ModelsInfo: ...

    def set_model(self, session_id: str, provider: str | None, model: str) -> ModelsInfo: ...

    def model_for(self, session: Session | None, role: str | None = None) -> ChatModel: ...

    async def compact(self, s: Session, frontend: Frontend, *, force: bool = False) -> Compaction | None: ...

    async def settle_mcp(self, session_id: str) -> None:
        """What a turn waits for before asking the model: the MCP servers (the config's, the
        session's client's) started and each ready or failed."""

    def mcp_status(self, session_id: str | None = None) -> list[dict[str, Any]] | None:
        """The MCP servers' status rows: the config's, then those the session's client gave (with
        `origin: "client"`); None when there are none."""


@dataclass
class CommandContext:
    host: CommandHost
    session: Session
    frontend: Frontend
    args: list[str] = field(default_factory=list)
    """The arguments, split like a shell would."""
    raw: str = ""
    """The text after the command name, as typed (stripped)."""
    turn_id: str = ""
    """The turn the command runs as (a restore is recorded under it)."""
