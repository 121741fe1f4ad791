"""Composition root: the only place that builds and wires config, model, tools, sessions and prompts.

The wire faces (server.py, acp.py) build it with `App.open` and call these methods, passing a
`Frontend` factory; nothing here knows about JSON-RPC. Tests build it directly with a scripted
model factory and a store on a temp dir (tests/inproc_app.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import environ_scrub, secrets
from .agent.react import TurnResult, repair_tool_calls, run_turn
from .agent.subagent import AgentRuntime, Role, subagent_tool
from .app_models import ModelSettings
from .checkpoints import Checkpoint, RestoreResult
from .commands.builtin import commands
from .commands.context import CommandContext
from .config import Config, data_dir, load_config
from .errors import ConfigError, ProviderError, SessionBusy
from .factories import ModelFactory, openai_models, subagents, tool_catalog, tool_settings
from .llm.base import ChatModel, Usage
from .messages import Message
from .ports import Compacted, Frontend
from .prompts.manager import PromptManager
from .session_mcp import McpHub
from .sessions.conversation import Conversation
from .sessions.room import Compaction, RoomMaker, compact, over_budget  # context.py's compaction, and room after overflows
from .sessions.session import FileSink, Session, TranscriptEntry
from .sessions.store import SessionFile, SessionStore, SessionSummary
from .shared_sessions import Sharing
from .tools.base import ToolContext
from .tools.workspace import Workspace
from .undo import ChangesOfStore, Checkpoints
from .warm import idle

log = logging.getLogger(__name__)

FrontendFactory = Callable[[str, str], Frontend]
INTERRUPTED = "interrupted: the daemon stopped before this tool call finished"


@dataclass
class PromptOutcome:
    turn_id: str
    result: TurnResult
    action: dict[str, Any] | None = None


class App(ModelSettings):
    def __init__(self, workspace_root: str | Path, config: Config, *, model_factory: ModelFactory | None = None,
                 store: SessionStore | None = None, config_error: ConfigError | None = None,
                 config_path: Path | None = None):
        """`config_error`: the config could not be loaded (`config` is then the defaults); the app
        still starts so the face can report it, and every model call raises it."""
        self.workspace = Workspace(workspace_root)
        self.config, self.config_path, self.config_error = config, config_path, config_error
        try:
            self.prompts = PromptManager(self.workspace.root, config.prompts_file)
            for name, decl in config.agents.items():
                if (decl.prompt or name) not in self.prompts.roles:
                    raise ConfigError(f"config: agents.{name}: no prompt template named '{decl.prompt or name}'")
        except ConfigError as e:
            log.error("%s", e)
            self.config_error, self.config, self.config_path = e, Config(), None
            self.prompts = PromptManager(self.workspace.root)
        secrets.register([k for p in self.config.providers.values() for k in p.api_keys])
        self.model_factory = model_factory or openai_models(self.config)
        self.store = store or SessionStore(data_dir(), self.workspace.root)
        self.settings = tool_settings(self.config)
        self.checkpoints = Checkpoints(self.store.data_dir, self.workspace.root)
        self.sharing = Sharing(lambda s, new: s.transcript(ChangesOfStore(self.checkpoints.of(s.id)), new), INTERRUPTED)
        self.live: dict[str, Session] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._titles_shown: dict[str, tuple[str, str]] = {}
        self.on_session_info: Callable[[SessionSummary, str], None] = lambda summary, turn_id: None
        """Set by the wire face: a session's title (the model's, /title) or mode changed; with the id of
        the turn that changed it ("" outside a turn)."""
        self._loading: dict[str, asyncio.Future[Session]] = {}
        self._agents = subagents(self.config, self.prompts)
        self.tools = tool_catalog(self.config, self._agents)
        self._models: dict[tuple[str, str], ChatModel] = {}
        self.on_notice: Callable[[str, str], None] = lambda level, message: None
        """Set by the wire face: show a message to the person (level: info|warning|error)."""
        self.mcp = McpHub(self.config.mcp_servers, self.workspace.root, self.tools,
                          lambda level, message: self.on_notice(level, message))  # the config's and each session's
        idle.configured(self.config.daemon.warm_idle_minutes)
        environ_scrub.scrub()  # last: every config secret is registered (McpHub's too); before any command

    @classmethod
    def open(cls, workspace_root: str | Path, config_path: str | None = None) -> App:
        """What the faces call: load the config (a broken one is reported, not fatal) and build."""
        try:
            config, path = load_config(config_path)
        except ConfigError as e:
            log.error("%s", e)
            return cls(workspace_root, Config(), config_error=e)
        return cls(workspace_root, config, config_path=path)

    async def start(self) -> None:
        """Background start-up after initialize: MCP servers connect and the streaming client's
        imports (~0.1 s) and CA store (~50 ms, for TLS providers) load while the person types their
        first prompt (a turn that comes first starts the MCP servers itself: mcp.settle)."""
        await self.mcp.start()
        if not self.config_error:
            from .llm import http_stream, openai_client  # noqa: F401  (loaded now, not in the first turn)

            urls = [p.base_url for p in self.config.providers.values() if p.api_keys]
            await asyncio.to_thread(http_stream.preload, urls)

    # ---- wiring -------------------------------------------------------------------------------

    def _session_tools(self, s: Session) -> None:
        """Bind the session's sub-agents to its registry, its models and its token count."""

        def model_for_role(role: Role) -> ChatModel:
            return self.model_for(s, None if role == "default" else role)

        planners = s.planners = frozenset(agent.name for agent, _ in self._agents if agent.seeds_plan)
        runtime = AgentRuntime(s.tools, model_for_role, s.add_usage, lambda: s.messages, planners)
        for agent, description in self._agents:
            s.tools.register(subagent_tool(agent, description, runtime))
        s.tools.add_own_source(self.mcp.tools_of(s.id))  # the MCP servers its ACP client gave, if any

    # ---- sessions -----------------------------------------------------------------------------

    def _save_meta(self, s: Session) -> None:
        if s.file:
            s.file.write_meta(s.meta())
        if not s.busy:  # a turn's change goes out when it ends (prompt), after its own updates
            self._push_info(s, "")

    def _push_info(self, s: Session, turn_id: str) -> None:
        """The prompt's line as title is not news (the client sent the prompt): the model's, /title's
        and a mode change are."""
        shown = self._titles_shown.get(s.id, ("", ""))
        self._titles_shown[s.id] = (s.title, s.mode)
        if shown != (s.title, s.mode) and (s.title_by != "prompt" or shown[1] != s.mode):
            self.on_session_info(s.summary(), turn_id)

    def _new(self, session_id: str, title: str = "", meta: dict[str, Any] | None = None,
             mtime: float | None = None) -> Session:
        if meta is None:
            s = Session(id=session_id, title=title, tools=self.tools.fork())
        else:
            s = Session.restore(session_id, meta, mtime or 0.0, self.tools.fork())
        self._session_tools(s)
        return s

    def _attach(self, s: Session, file: SessionFile, stored: list[Message]) -> Session:
        s.file = file
        s.on_meta_change = self._save_meta
        s.messages = Conversation(self.prompts.system("main"), stored, FileSink(file, s.meta))
        self.live[s.id] = s
        self._titles_shown[s.id] = (s.title, s.mode)
        self.sharing.watch(s)  # its clients hear about turns other daemons make in it
        return s

    def new_session(self, title: str | None = None) -> Session:
        s = self._new(self.store.new_id(), (title or "").strip())
        return self._attach(s, self.store.create(s.id, s.meta()), [])

    def session(self, session_id: str) -> Session:
        """A live session, or one loaded from disk (made valid for the model if a turn was cut)."""
        s = self.live.get(session_id)
        if s is not None:
            return s
        file, meta, stored = self.store.open(session_id)
        with file.closed_on_error():
            s, messages = self._restore(session_id, file, meta, stored)
            if messages is not stored:
                file.rewrite(s.meta(), messages)
            file.release()  # taken by open() for the repair; from now on only turns hold it
            return self._attach(s, file, messages)

    async def load(self, session_id: str) -> Session:
        """`session` for async callers: the file is read (and repaired) in a worker thread, and
        concurrent loads of one session share the first."""
        s = self.live.get(session_id)
        if s is not None:
            return s
        pending = self._loading.get(session_id)
        if pending is None:
            pending = self._loading[session_id] = asyncio.ensure_future(self._load(session_id))
            pending.add_done_callback(lambda _: self._loading.pop(session_id, None))
        return await asyncio.shield(pending)

    async def _load(self, session_id: str) -> Session:
        file, meta, stored = await asyncio.to_thread(self.store.open, session_id)
        with file.closed_on_error():
            s, messages = self._restore(session_id, file, meta, stored)
            if messages is not stored:
                await asyncio.to_thread(file.rewrite, s.meta(), messages)
            file.release()
            return self._attach(s, file, messages)

    def _restore(self, session_id: str, file: SessionFile, meta: dict[str, Any],
                 stored: list[Message]) -> tuple[Session, list[Message]]:
        s = self._new(session_id, meta=meta, mtime=file.path.stat().st_mtime)
        repaired = repair_tool_calls(stored, INTERRUPTED) if file.held else stored  # else: a turn runs elsewhere
        if repaired is not stored:
            log.info("session %s: answered tool calls left open by an interrupted turn", s.id)
        return s, repaired

    def peek(self, session_id: str) -> Session:
        """A session to read (load, tools/list, models/list): the live one, or a copy read from disk
        without taking its lock, so looking at history never blocks another editor."""
        s = self.live.get(session_id)
        if s is not None:
            return s
        meta, stored, mtime = self.store.read(session_id)
        s = self._new(session_id, meta=meta, mtime=mtime)
        s.messages = Conversation("", repair_tool_calls(stored, INTERRUPTED))
        return s

    def list_sessions(self) -> list[SessionSummary]:
        """Stored sessions, newest first; untitled empty ones (clients open sessions eagerly) only
        while this daemon has them open."""
        return [r for r in self.store.list() if r.message_count or r.title or r.id in self.live]

    async def close_session(self, session_id: str) -> None:
        """This daemon stops having the session open (a running turn is cancelled first); it stays
        on disk, and any daemon (this one too) can load it again."""
        s = self.live.get(session_id)
        if s is None:
            return
        if s.turn is not None and not s.turn.done():
            s.turn.cancel()
            await asyncio.wait([s.turn], timeout=5.0)
        self.sharing.unwatch(session_id)
        if self.live.pop(session_id, None) is not None and s.file:
            s.file.close()
        await self.mcp.close_session(session_id)  # the servers its client gave stop with it

    def delete_session(self, session_id: str) -> None:
        s = self.live.get(session_id)
        if s is not None and s.busy:
            raise SessionBusy(session_id)
        self.store.delete(session_id)  # refused while another daemon's turn runs: then it stays open here
        if s is not None:
            if s.file:
                s.file.close()
            self.live.pop(session_id, None)
            self.sharing.unwatch(session_id)
            self.mcp.close_later(session_id)
        self.checkpoints.delete(session_id)

    # ---- turns --------------------------------------------------------------------------------

    async def prompt(self, session_id: str, text: str, frontend_for: FrontendFactory, *,
                     close_on_switch: bool = True) -> PromptOutcome:
        """Run a turn (or a slash command). `close_on_switch=False`: the client keeps the session open
        after /new, /switch or /clear (an ACP client picks its sessions and ends them with
        session/close), so its MCP servers and file stay as they are."""
        s = await self.load(session_id)
        if s.busy:
            raise SessionBusy(session_id)
        model = None if text.lstrip().startswith("/") else self.model_for(s)
        await self.sharing.begin_turn(s)  # the lock, and what other daemons wrote meanwhile
        turn_id = self.checkpoints.next_turn(s)
        frontend = frontend_for(s.id, turn_id)
        work = self._run_command(s, text, frontend) if model is None else self._run_turn(s, text, model, frontend)
        turn = s.turn = asyncio.ensure_future(work)
        self.sharing.release_after(s, turn)
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
        self._push_info(s, turn_id)
        if result.stop_reason == "end_turn":
            self.title_after_first_turn(s, text, result.text)
        if close_on_switch and action and action.get("kind") == "switch" and action.get("sessionId") != s.id:
            await self.close_session(s.id)  # /new, /switch, /clear: this daemon moves on
        return PromptOutcome(turn_id, result, action)

    async def _run_command(self, s: Session, text: str,
                           frontend: Frontend) -> tuple[TurnResult, dict[str, Any] | None]:
        try:  # the turn's id is the one prompt() made (next_turn); a restore records under it
            out = await commands.run(text, CommandContext(self, s, frontend, turn_id=f"{s.id}-{s.turn_seq}"))
        except asyncio.CancelledError:
            return TurnResult("cancelled", "", Usage(), 0), None
        return TurnResult("command", out.text, Usage(), 0), out.action

    async def _run_turn(self, s: Session, text: str, model: ChatModel,
                        frontend: Frontend) -> tuple[TurnResult, dict[str, Any] | None]:
        s.turn_usage = Usage()  # this turn's tokens, sub-agents included (reported even when cancelled)
        checkpoints = self.checkpoints.of(s.id)
        checkpoint = checkpoints.begin_turn(f"{s.id}-{s.turn_seq}", text)  # the same id (next_turn)

        def add_usage(u: Usage) -> None:
            s.add_usage(u)
            s.context_mark = (u.prompt_tokens + u.completion_tokens, len(s.messages) + 1) if u.total_tokens else s.context_mark

        def context(tool_call_id: str) -> ToolContext:
            return ToolContext(self.workspace, frontend, tool_call_id, self.settings, checkpoints=checkpoints,
                               checkpoint_turn=checkpoint)

        result = TurnResult("error", "", s.turn_usage, 0)  # unless the turn ends otherwise
        try:
            await self.compact(s, frontend)
            await self.mcp.settle(s.id, frontend.emit)  # the config's servers and the session's: started or failed
            s.ask(text, checkpoint)  # after compaction: the prompt is never summarised
            result = await run_turn(
                model, s.messages, s.tools, frontend, max_steps=self.config.agent.max_steps, make_context=context,
                on_usage=add_usage, make_room=RoomMaker(s, frontend, model, self.config.session, self.compact))
            return result, None
        except asyncio.CancelledError:
            log.info("turn cancelled in session %s", s.id)
            s.ask(text, checkpoint)  # cancelled while compacting or waiting for MCP servers: kept, as later
            return (result := TurnResult("cancelled", "", s.turn_usage, 0)), None
        finally:  # records usage, grants, the time of this turn and how it ended (a reload shows it)
            s.end_turn(checkpoint, result.stop_reason, s.turn_usage)
            self.checkpoints.report(checkpoints, checkpoint, frontend)  # cancelled turns' writes too

    async def compact(self, s: Session, frontend: Frontend, *, force: bool = False) -> Compaction | None:
        """Compact the session's context when it is over the thresholds (or when forced)."""
        cfg = self.config.session
        if not force and not over_budget(s, cfg, self._models.get(self.current_model(s))):
            return None
        try:
            model = self.model_for(s, "fast")
        except (ProviderError, ConfigError) as e:
            log.warning("no model for the summary: %s", e)
            model = None
        done = await compact(s.messages.snapshot(), model, self.prompts.system("summarizer"), cfg.compress_keep_recent,
                             s.planners)
        if done is None:
            return None
        s.context_mark = (0, 0)
        await s.messages.replace_all(done.messages)  # rewrites the session file off the event loop
        frontend.emit(Compacted(done.strategy, done.before, done.after))
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
        turns = [s.turn for s in self.live.values() if s.turn is not None and not s.turn.done()]
        for t in [*turns, *self._background]:
            t.cancel()
        if turns:
            await asyncio.wait(turns, timeout=timeout)
        from .tools.shell import kill_all

        kill_all()  # whatever a turn did not manage to stop in time
        self.sharing.close()
        for s in self.live.values():
            if s.file:
                s.file.close()
        await self.mcp.aclose()
        for m in self._models.values():
            close = getattr(m, "aclose", None)
            if close:
                with contextlib.suppress(Exception):
                    await close()

    # ---- checkpoints (undo.py) ----------------------------------------------------------------

    def transcript(self, s: Session) -> list[TranscriptEntry]:
        """The session's history with a `changes` entry after each turn that changed files."""
        return s.transcript(ChangesOfStore(self.checkpoints.of(s.id, live=s.id in self.live)))

    def checkpoint_list(self, session_id: str) -> list[Checkpoint]:
        return self.checkpoints.rows(self.peek(session_id).id, live=session_id in self.live)

    async def restore(self, session_id: str, turn_ref: str, paths: list[str] | None = None, force: bool = False,
                      frontend_for: FrontendFactory | None = None) -> RestoreResult:
        """Restore a turn and every later one (undo.py); SessionBusy while a turn runs."""
        s = await self.load(session_id)
        if s.busy:
            raise SessionBusy(session_id)
        await self.sharing.begin_turn(s)
        turn_id = self.checkpoints.next_turn(s)  # recorded as a turn of its own, so it can be undone
        frontend = frontend_for(s.id, turn_id) if frontend_for else None
        work = s.turn = asyncio.ensure_future(self.checkpoints.restore(s, turn_ref, paths, force, frontend, turn_id))
        self.sharing.release_after(s, work)
        return await asyncio.shield(work)  # the files are written either way: the answer says which
