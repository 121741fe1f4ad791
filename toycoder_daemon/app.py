"""Composition root: the only place that builds and wires config, model, tools, sessions and prompts.

The wire faces (server.py, later acp.py) call these methods and pass a `Frontend` factory; nothing
here knows about JSON-RPC.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from . import secrets
from .agent.events import Frontend
from .agent.react import TurnResult, run_turn
from .config import Config, ConfigError, load_config
from .errors import ProviderError, SessionBusy
from .llm.base import ChatModel, Usage
from .prompts.manager import PromptManager
from .sessions.store import Session, SessionStore
from .tools.base import ToolContext
from .tools.ask import ask_user
from .tools.edit import edit_file, write_file
from .tools.files import list_directory, read_file
from .tools.permission import PermissionGate
from .tools.registry import ToolRegistry
from .tools.shell import run_command
from .tools.workspace import Workspace

log = logging.getLogger(__name__)

FrontendFactory = Callable[[str, str], Frontend]


@dataclass
class PromptOutcome:
    turn_id: str
    result: TurnResult


class App:
    def __init__(self, workspace_root: str | Path, config_path: str | None = None):
        self.workspace = Workspace(workspace_root)
        self.config_error: ConfigError | None = None
        try:
            self.config, self.config_path = load_config(config_path)
        except ConfigError as e:
            log.error("%s", e)
            self.config_error, self.config, self.config_path = e, Config(), None
        secrets.register([k for p in self.config.providers.values() for k in p.api_keys])
        self.prompts = PromptManager()
        self.sessions = SessionStore()
        self.tools = self._build_tools()
        self._models: dict[tuple[str, str], ChatModel] = {}

    # ---- wiring -------------------------------------------------------------------------------

    def _build_tools(self) -> ToolRegistry:
        perms = self.config.permissions
        registry = ToolRegistry(PermissionGate(perms.allow, perms.deny))
        for t in (read_file, list_directory, write_file, edit_file, run_command, ask_user):
            registry.register(t)
        for name in self.config.tools.enabled:
            if registry.get(name):
                registry.set_enabled(name, True)
        return registry

    def _require_config(self) -> Config:
        if self.config_error:
            raise self.config_error
        return self.config

    def current_model(self, session: Session | None = None) -> tuple[str, str]:
        cfg = self._require_config()
        name, provider = cfg.provider(session.provider if session else None)
        return name, (session.model if session and session.model else provider.models.default)

    def model_for(self, session: Session) -> ChatModel:
        provider_name, model_name = self.current_model(session)
        key = (provider_name, model_name)
        model = self._models.get(key)
        if model is None:
            from .llm.openai_client import OpenAIChatModel

            cfg = self.config
            provider = cfg.providers[provider_name]
            if not provider.api_keys:
                raise ProviderError(
                    provider_name,
                    "no API key configured: set OPENAI_API_KEY (or the provider's api_keys in config.yaml)",
                )
            a = cfg.agent
            model = OpenAIChatModel(
                provider_name, model_name, provider.base_url, provider.api_keys,
                max_retries=a.max_retries, retry_interval=a.retry_interval, max_retry_delay=a.max_retry_delay,
                max_retry_seconds=a.max_retry_seconds, request_timeout=a.request_timeout,
            )
            self._models[key] = model
        return model

    # ---- sessions -----------------------------------------------------------------------------

    def new_session(self, title: str | None = None) -> Session:
        s = Session(id=self.sessions.new_id(), title=(title or "").strip(), tools=self.tools.fork())
        s.messages.append({"role": "system", "content": self.prompts.system("main", self.workspace.root)})
        return self.sessions.add(s)

    # ---- turns --------------------------------------------------------------------------------

    async def prompt(self, session_id: str, text: str, frontend_for: FrontendFactory) -> PromptOutcome:
        s = self.sessions.get(session_id)
        if s.busy:
            raise SessionBusy(session_id)
        model = self.model_for(s)
        s.turn_seq += 1
        turn_id = f"{s.id}-{s.turn_seq}"
        frontend = frontend_for(s.id, turn_id)
        s.title_from(text)
        s.messages.append({"role": "user", "content": text})
        s.turn = asyncio.create_task(self._run_turn(s, model, frontend), name=f"turn {turn_id}")
        try:
            result = await asyncio.shield(s.turn)
        except asyncio.CancelledError:
            # The request itself was cancelled ($/cancelRequest): end the turn, answer normally.
            s.turn.cancel()
            result = await s.turn
        return PromptOutcome(turn_id, result)

    async def _run_turn(self, s: Session, model: ChatModel, frontend: Frontend) -> TurnResult:
        def context(tool_call_id: str) -> ToolContext:
            return ToolContext(self.workspace, frontend, tool_call_id, self.config.tools)

        def add_usage(u: Usage) -> None:
            s.usage = s.usage + u

        turn_usage = Usage()
        try:
            return await run_turn(
                model, s.messages, s.tools, frontend,
                max_steps=self.config.agent.max_steps, make_context=context, on_usage=add_usage,
            )
        except asyncio.CancelledError:
            log.info("turn cancelled in session %s", s.id)
            return TurnResult("cancelled", "", turn_usage, 0)
        finally:
            s.updated_at = time.time()

    def cancel(self, session_id: str) -> bool:
        s = self.sessions.get(session_id)
        if not s.busy:
            return False
        assert s.turn is not None
        s.turn.cancel()
        return True

    async def shutdown(self, timeout: float = 2.0) -> None:
        """End every turn (which kills their child processes) and close model clients."""
        turns = [s.turn for s in self.sessions.all() if s.busy]
        for t in turns:
            t.cancel()  # type: ignore[union-attr]
        if turns:
            await asyncio.wait(turns, timeout=timeout)  # type: ignore[arg-type]
        from .tools.shell import kill_all

        kill_all()  # whatever a turn did not manage to stop in time
        for m in self._models.values():
            close = getattr(m, "aclose", None)
            if close:
                try:
                    await close()
                except Exception:
                    pass

    # ---- tools and models ---------------------------------------------------------------------

    def tool_infos(self, session_id: str) -> list[dict[str, Any]]:
        s = self.sessions.get(session_id)
        return [
            {"name": t.name, "description": t.description, "permission": t.level,
             "enabled": s.tools.is_enabled(t.name), "source": t.source}
            for t in s.tools.list()
        ]

    def set_tool_enabled(self, session_id: str, name: str, enabled: bool) -> None:
        s = self.sessions.get(session_id)
        if s.tools.get(name) is None:
            raise KeyError(name)
        s.tools.set_enabled(name, enabled)

    def models_info(self, session_id: str | None) -> dict[str, Any]:
        s = self.sessions.get(session_id) if session_id else None
        provider, model = self.current_model(s)
        return {
            "current": {"provider": provider, "model": model},
            "providers": [
                {"name": n, "baseUrl": p.base_url, "models": p.models.model_dump(), "keyCount": len(p.api_keys)}
                for n, p in self.config.providers.items()
            ],
        }

    def set_model(self, session_id: str, provider: str | None, model: str) -> dict[str, Any]:
        s = self.sessions.get(session_id)
        cfg = self._require_config()
        name, p = cfg.provider(provider or s.provider)
        s.provider = name
        s.model = p.models.model_dump().get(model, model)  # "default"/"fast" name a role
        return self.models_info(session_id)
