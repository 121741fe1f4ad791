"""What a slash command may use: the session it runs in, the person's frontend, and a small host
interface that App implements (commands never import the app)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ..ports import Frontend, ModelsInfo
from ..sessions.context import Compaction
from ..sessions.session import Session
from ..sessions.store import SessionSummary
from ..tools.settings import ToolSettings


class CommandHost(Protocol):
    settings: ToolSettings
    """The tools' settings (the sandbox policy for /tools)."""

    def new_session(self, title: str | None = None) -> Session: ...

    async def load(self, session_id: str) -> Session:
        """A session by id, loaded from disk (off the event loop) when it is not live."""

    def list_sessions(self) -> list[SessionSummary]: ...

    def models_info(self, session_id: str | None) -> ModelsInfo: ...

    def set_model(self, session_id: str, provider: str | None, model: str) -> ModelsInfo: ...

    async def compact(self, s: Session, frontend: Frontend, *, force: bool = False) -> Compaction | None: ...

    def mcp_status(self) -> list[dict[str, Any]] | None:
        """The MCP servers' status rows; None when none is configured."""


@dataclass
class CommandContext:
    host: CommandHost
    session: Session
    frontend: Frontend
    args: list[str] = field(default_factory=list)
    """The arguments, split like a shell would."""
    raw: str = ""
    """The text after the command name, as typed (stripped)."""
