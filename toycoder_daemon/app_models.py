"""The App's per-session settings: which model a session uses, which tools it has enabled (and the
MCP servers' state), the title the fast model writes after the first turn. A base class of App (app.py), kept apart so the
composition root stays small."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from .config import Config
from .errors import ConfigError, ProviderError, SessionBusy
from .llm.base import ChatModel
from .ports import ModelsInfo, ProviderSummary, ToolSummary
from .sessions.session import Session
from .sessions.store import SessionSummary
from .sessions.titles import write_title

if TYPE_CHECKING:
    from .factories import ModelFactory
    from .session_mcp import McpHub


log = logging.getLogger(__name__)


class ModelSettings:
    config: Config
    live: dict[str, Session]
    _background: set[asyncio.Task[Any]]
    config_error: ConfigError | None
    model_factory: ModelFactory
    _models: dict[tuple[str, str], ChatModel]
    mcp: McpHub

    def peek(self, session_id: str) -> Session:
        raise NotImplementedError  # App's

    def session(self, session_id: str) -> Session:
        raise NotImplementedError  # App's

    def _require_config(self) -> Config:
        if self.config_error:
            raise self.config_error
        return self.config

    def current_model(self, session: Session | None = None) -> tuple[str, str]:
        cfg = self._require_config()
        name, provider = cfg.provider(session.provider if session else None)
        return name, (session.model if session and session.model else provider.models.default)

    def model_for(self, session: Session | None, role: str | None = None) -> ChatModel:
        """The session's model, or the provider's model for a role ("fast" for summaries)."""
        provider_name, model_name = self.current_model(session)
        if role:
            model_name = getattr(self.config.providers[provider_name].models, role)
        key = (provider_name, model_name)
        model = self._models.get(key)
        if model is None:
            model = self._models[key] = self.model_factory(provider_name, model_name)
        return model

    def title_after_first_turn(self, s: Session, prompt: str, reply: str) -> None:
        """The fast model titles the session in the background (the turn has answered already)."""
        if not self.config.agent.auto_title or s.title_by not in ("", "prompt"):
            return
        if sum(1 for m in s.messages if m["role"] == "user") != 1:
            return
        task = asyncio.ensure_future(self._write_title(s, prompt, reply))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _write_title(self, s: Session, prompt: str, reply: str) -> None:
        try:
            title = await write_title(self.model_for(s, "fast"), prompt, reply)
            if title and s.title_by != "user" and self.live.get(s.id) is s:  # /title meanwhile wins
                s.set_title(title, "model")
        except (ProviderError, ConfigError, SessionBusy) as e:  # busy: another daemon's turn; keep ours
            log.info("session %s: no title from the model: %s", s.id, e)

    def set_mode(self, session_id: str, mode: str) -> SessionSummary:
        """ValueError for an unknown mode; SessionBusy while another daemon's turn runs."""
        s = self.session(session_id)
        s.set_mode(mode)
        return s.summary()

    # ---- tools and models ---------------------------------------------------------------------

    def tool_infos(self, session_id: str) -> list[ToolSummary]:
        s = self.peek(session_id)
        return [ToolSummary(t.name, t.description, t.level, s.tools.is_enabled(t.name), t.source) for t in s.tools.list()]

    async def settle_mcp(self, session_id: str) -> None:
        await self.mcp.settle(session_id)

    def mcp_status(self, session_id: str | None = None) -> list[dict[str, Any]] | None:
        return self.mcp.status(session_id)

    def set_tool_enabled(self, session_id: str, name: str, enabled: bool) -> None:
        s = self.session(session_id)
        if s.tools.get(name) is None:
            raise KeyError(name)
        s.set_tool_enabled(name, enabled)

    def models_info(self, session_id: str | None) -> ModelsInfo:
        s = self.peek(session_id) if session_id else None
        provider, model = self.current_model(s)
        return ModelsInfo(provider, model, [ProviderSummary(n, p.base_url, p.models.model_dump(), len(p.api_keys))
                                            for n, p in self.config.providers.items()])

    def set_model(self, session_id: str, provider: str | None, model: str) -> ModelsInfo:
        s = self.session(session_id)
        cfg = self._require_config()
        name, p = cfg.provider(provider or s.provider)
        s.provider = name
        s.model = p.models.model_dump().get(model, model)  # "default"/"fast" name a role
        s.changed()
        return self.models_info(session_id)

