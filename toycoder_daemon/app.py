"""Composition root: the only place that builds and wires config, model, tools, sessions and prompts.

The wire faces (server.py, later acp.py) call these methods and pass a `Frontend` factory; nothing
here knows about JSON-RPC.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import secrets
from .agent.react import TurnResult, repair_tool_calls, run_turn
from .agent.subagent import SubAgent, subagent_tool
from .commands.builtin import commands
from .config import Config, ConfigError, data_dir, load_config
from .errors import ProviderError, SessionBusy
from .llm.base import ChatModel, Usage
from .ports import Compacted, Frontend
from .prompts.manager import PromptManager
from .sessions.context import Compaction, compact, needs_compaction
from .sessions.session import MessageLog, Session
from .sessions.store import SessionStore, SessionSummary
from .tools.ask import ask_user
from .tools.base import ToolContext
from .tools.edit import edit_file, write_file
from .tools.files import list_directory, read_file
from .tools.permission import PermissionGate
from .tools.registry import ToolRegistry
from .tools.search import glob_search, grep_search
from .tools.shell import run_command

log = logging.getLogger(__name__)

FrontendFactory = Callable[[str, str], Frontend]
INTERRUPTED = "interrupted: the daemon stopped before this tool call finished"


@dataclass(frozen=True)
class ToolSummary:
    name: str
    description: str
    level: str
    enabled: bool
    source: str


@dataclass(frozen=True)
class ProviderSummary:
    name: str
    base_url: str | None
    models: dict[str, str]
    key_count: int
    """How many API keys are configured (the keys themselves never leave the daemon)."""


@dataclass(frozen=True)
class ModelsInfo:
    provider: str
    model: str
    """The current choice (of the session, or the default)."""
    providers: list[ProviderSummary]


@dataclass
class PromptOutcome:
    turn_id: str
    result: TurnResult
    action: dict[str, Any] | None = None


class App:
    def __init__(self, workspace_root: str | Path, config_path: str | None = None):
        from .tools.workspace import Workspace

        self.workspace = Workspace(workspace_root)
        self.config_error: ConfigError | None = None
        try:
            self.config, self.config_path = load_config(config_path)
            self.prompts = PromptManager(self.workspace.root, self.config.prompts_file)
            for name, decl in self.config.agents.items():
                if (decl.prompt or name) not in self.prompts.roles:
                    raise ConfigError(f"config: agents.{name}: no prompt template named '{decl.prompt or name}'")
        except ConfigError as e:
            log.error("%s", e)
            self.config_error, self.config, self.config_path = e, Config(), None
            self.prompts = PromptManager(self.workspace.root)
        secrets.register([k for p in self.config.providers.values() for k in p.api_keys])
        self.store = SessionStore(data_dir(), self.workspace.root)
        self.live: dict[str, Session] = {}
        self.tools = self._build_tools()
        self._models: dict[tuple[str, str], ChatModel] = {}
        self.on_notice: Callable[[str, str], None] = lambda level, message: None
        """Set by the wire face: show a message to the person (level: info|warning|error)."""
        self.mcp: Any = None
        if self.config.mcp_servers:
            from .tools.mcp import McpManager  # the MCP SDK is only imported when servers are configured

            self.mcp = McpManager(self.config.mcp_servers, self.workspace.root, on_status=self._mcp_status)
            self.tools.add_source(self.mcp.tools)

    async def start(self) -> None:
        """Background start-up after initialize: MCP servers connect and the model SDK is imported
        (~0.5 s) while the person types their first prompt."""
        if self.mcp:
            await self.mcp.start()
        if not self.config_error:
            import importlib

            await asyncio.to_thread(importlib.import_module, "openai")

    def _mcp_status(self, server: str, status: str, message: str) -> None:
        if status == "ready":
            log.info("MCP server %s ready: %s", server, message)
        else:
            log.warning("MCP server %s %s: %s", server, status, message)
            self.on_notice("warning", f"ToyCoder: MCP server '{server}' {status}: {message}")

    # ---- wiring -------------------------------------------------------------------------------

    def _build_tools(self) -> ToolRegistry:
        perms = self.config.permissions
        registry = ToolRegistry(PermissionGate(perms.allow, perms.deny))
        for t in (read_file, list_directory, glob_search, grep_search, write_file, edit_file, run_command, ask_user):
            registry.register(t)
        agents = [SubAgent("planner", "planner", self.prompts.system("planner"), [], "default", 1)]
        for name, d in self.config.agents.items():
            role = d.prompt or name
            agents.append(SubAgent(name, role, self.prompts.system(role), d.tools, d.model, d.max_steps))
        for agent in agents:
            described = self.config.agents[agent.name].description if agent.name in self.config.agents else None
            registry.register(subagent_tool(agent, described or self.prompts.description(agent.prompt)))
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

    def model_for(self, session: Session | None, role: str | None = None) -> ChatModel:
        """The session's model, or the provider's model for a role ("fast" for summaries)."""
        provider_name, model_name = self.current_model(session)
        if role:
            model_name = getattr(self.config.providers[provider_name].models, role)
        key = (provider_name, model_name)
        model = self._models.get(key)
        if model is None:
            from .llm.openai_client import OpenAIChatModel

            provider = self.config.providers[provider_name]
            if not provider.api_keys:
                raise ProviderError(
                    provider_name,
                    "no API key configured: set OPENAI_API_KEY (or the provider's api_keys in config.yaml)",
                )
            a = self.config.agent
            model = OpenAIChatModel(
                provider_name, model_name, provider.base_url, provider.api_keys,
                max_retries=a.max_retries, retry_interval=a.retry_interval, max_retry_delay=a.max_retry_delay,
                max_retry_seconds=a.max_retry_seconds, request_timeout=a.request_timeout,
            )
            self._models[key] = model
        return model

    # ---- sessions -----------------------------------------------------------------------------

    def _save_meta(self, s: Session) -> None:
        if s.file:
            s.file.write_meta(s.meta())

    def _attach(self, s: Session, file: Any, stored: list[dict[str, Any]]) -> Session:
        s.file = file
        s.on_meta_change = self._save_meta
        s.messages = MessageLog([{"role": "system", "content": self.prompts.system("main")}, *stored], file.append)
        self.live[s.id] = s
        return s

    def new_session(self, title: str | None = None) -> Session:
        s = Session(id=self.store.new_id(), title=(title or "").strip(), tools=self.tools.fork())
        return self._attach(s, self.store.create(s.id, s.meta()), [])

    def session(self, session_id: str) -> Session:
        """A live session, or one loaded from disk (made valid for the model if a turn was cut)."""
        s = self.live.get(session_id)
        if s is not None:
            return s
        file, meta, stored = self.store.open(session_id)
        try:
            s = self._restore(session_id, meta, file.path.stat().st_mtime)
            repaired = repair_tool_calls(stored, INTERRUPTED)
            if repaired is not stored:
                log.info("session %s: answered tool calls left open by an interrupted turn", s.id)
                file.rewrite(s.meta(), repaired)
            self._attach(s, file, repaired)
        except BaseException:
            file.close()  # never keep the lock of a session that failed to load
            raise
        return s

    def peek(self, session_id: str) -> Session:
        """A session to read (load, tools/list, models/list): the live one, or a copy read from disk
        without taking its lock, so looking at history never blocks another editor."""
        s = self.live.get(session_id)
        if s is not None:
            return s
        meta, stored, mtime = self.store.read(session_id)
        s = self._restore(session_id, meta, mtime)
        s.messages = MessageLog([{"role": "system", "content": ""}, *repair_tool_calls(stored, INTERRUPTED)])
        return s

    def _restore(self, session_id: str, meta: dict[str, Any], mtime: float) -> Session:
        s = Session(id=session_id, title=meta.get("title") or "", tools=self.tools.fork(),
                    created_at=meta.get("createdAt", mtime), updated_at=mtime, provider=meta.get("provider"),
                    model=meta.get("model"), usage=Usage(*(meta.get("usage") or (0, 0, 0))))
        for name, enabled in (meta.get("toolOverrides") or {}).items():
            if s.tools.get(name):
                s.tools.set_enabled(name, bool(enabled))
                s.tool_overrides[name] = bool(enabled)
        s.tools.gate.always = {n for n in meta.get("always") or () if s.tools.get(n)}
        return s

    def list_sessions(self) -> list[SessionSummary]:
        """Stored sessions, newest first; untitled empty ones (clients open sessions eagerly) only
        while this daemon has them open."""
        return [r for r in self.store.list() if r.message_count or r.title or r.id in self.live]

    def delete_session(self, session_id: str) -> None:
        s = self.live.get(session_id)
        if s is not None:
            if s.busy:
                raise SessionBusy(session_id)
            s.file.close()
            del self.live[session_id]
        self.store.delete(session_id)

    # ---- turns --------------------------------------------------------------------------------

    async def prompt(self, session_id: str, text: str, frontend_for: FrontendFactory) -> PromptOutcome:
        s = self.session(session_id)
        if s.busy:
            raise SessionBusy(session_id)
        is_command = text.lstrip().startswith("/")
        model = None if is_command else self.model_for(s)
        s.turn_seq += 1
        turn_id = f"{s.id}-{s.turn_seq}"
        frontend = frontend_for(s.id, turn_id)
        work = self._run_command(s, text, frontend) if is_command else self._run_turn(s, text, model, frontend)
        turn = s.turn = asyncio.ensure_future(work)
        cancelled = (TurnResult("cancelled", "", Usage(), 0), None)
        try:
            result, action = await asyncio.shield(turn)
        except asyncio.CancelledError:
            # Either the request itself was cancelled ($/cancelRequest; the shield kept the turn
            # running, so end it now), or toycoder/cancel reached the turn before its first step
            # (then it never ran and awaiting it raises). Both answer normally, as cancelled.
            if not turn.cancelled():
                turn.cancel()
            try:
                result, action = await turn
            except asyncio.CancelledError:
                result, action = cancelled
        return PromptOutcome(turn_id, result, action)

    async def _run_command(self, s: Session, text: str, frontend: Frontend) -> tuple[TurnResult, dict | None]:
        try:
            out = await commands.run(text, app=self, session=s, frontend=frontend)
        except asyncio.CancelledError:
            return TurnResult("cancelled", "", Usage(), 0), None
        return TurnResult("command", out.text, Usage(), 0), out.action

    async def _run_turn(self, s: Session, text: str, model: ChatModel, frontend: Frontend) -> tuple[TurnResult, None]:
        spent = [Usage()]  # this turn's tokens, sub-agents included (reported even when cancelled)

        def count_usage(u: Usage) -> None:
            s.usage = s.usage + u
            spent[0] = spent[0] + u

        def add_usage(u: Usage) -> None:
            count_usage(u)
            s.context_mark = (u.prompt_tokens + u.completion_tokens, len(s.messages) + 1)

        def model_for_role(role: str) -> ChatModel:
            return self.model_for(s, None if role == "default" else role)

        def context(tool_call_id: str) -> ToolContext:
            return ToolContext(self.workspace, frontend, tool_call_id, self.config.tools, s.tools, model_for_role,
                               count_usage)

        try:
            await self.compact(s, frontend)
            s.title_from(text)
            s.messages.append({"role": "user", "content": text})
            return await run_turn(
                model, s.messages, s.tools, frontend,
                max_steps=self.config.agent.max_steps, make_context=context, on_usage=add_usage,
            ), None
        except asyncio.CancelledError:
            log.info("turn cancelled in session %s", s.id)
            return TurnResult("cancelled", "", spent[0], 0), None
        finally:
            s.changed()  # records usage, grants and the time of this turn

    async def compact(self, s: Session, frontend: Frontend, *, force: bool = False) -> Compaction | None:
        """Compact the session's context when it is over the thresholds (or when forced)."""
        cfg = self.config.session
        if not force and not needs_compaction(s.messages, s.context_mark, cfg.max_messages, cfg.max_context_tokens):
            return None
        try:
            model = self.model_for(s, "fast")
        except (ProviderError, ConfigError) as e:
            log.warning("no model for the summary: %s", e)
            model = None
        done = await compact(list(s.messages), model, self.prompts.system("summarizer"), cfg.compress_keep_recent)
        if done is None:
            return None
        s.messages[:] = done.messages  # list-level replace: not an append, rewritten below
        s.context_mark = (0, 0)
        if s.file:
            s.file.rewrite(s.meta(), [m for m in s.messages if m.get("role") != "system"])
        frontend.emit(Compacted(done.strategy, done.before, done.after))  # type: ignore[arg-type]
        return done

    def cancel(self, session_id: str) -> bool:
        s = self.peek(session_id)
        if not s.busy:
            return False
        assert s.turn is not None
        s.turn.cancel()
        return True

    async def shutdown(self, timeout: float = 2.0) -> None:
        """End every turn (which kills their child processes), close files and model clients."""
        turns = [s.turn for s in self.live.values() if s.busy]
        for t in turns:
            t.cancel()  # type: ignore[union-attr]
        if turns:
            await asyncio.wait(turns, timeout=timeout)  # type: ignore[arg-type]
        from .tools.shell import kill_all

        kill_all()  # whatever a turn did not manage to stop in time
        for s in self.live.values():
            if s.file:
                s.file.close()
        if self.mcp:
            await self.mcp.aclose()
        for m in self._models.values():
            close = getattr(m, "aclose", None)
            if close:
                try:
                    await close()
                except Exception:
                    pass

    # ---- tools and models ---------------------------------------------------------------------

    def tool_infos(self, session_id: str) -> list[ToolSummary]:
        s = self.peek(session_id)
        return [ToolSummary(t.name, t.description, t.level, s.tools.is_enabled(t.name), t.source) for t in s.tools.list()]

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

