"""One open session as this daemon runs it (SessionRuntime), built once when the session is opened
(made new, or loaded from disk) from the parts App hands it (SessionParts): its conversation and
file, its tools (sub-agents bound, the MCP servers' tools), its checkpoints, its sharing with other
daemons, and the model it uses. A prompt is then one pass down a pipeline on it:

    prompt: a slash command (commands/), or a turn:
        the session's model -> lock + catch-up (sessions/sharing) -> turn id and checkpoint (checkpoints/undo)
        -> room: compaction (sessions/room) -> MCP servers settled -> run_turn (agent/)
        -> end of turn: its record in the session, its `changes` (checkpoints/undo)

and events flow out through the Frontend the face gives for the turn (ports). Nothing below calls
back up into this module or App: the ReAct loop gets the session's conversation, registry, a
ToolContext per call (ToolContext.for_call) and the session's usage sink (Session.record_usage);
making room gets the Compactor; the MCP servers' tools come through a slot in the registry.
What spans sessions (config, store, model clients, MCP servers, sharing, App's list of open
sessions for /new and /switch) comes in SessionParts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toycoder_daemon.agent.hooks.engine import HookBook, HookSpec
from toycoder_daemon.agent.react import TurnResult, repair_tool_calls, run_turn
from toycoder_daemon.agent.subagent import AgentRuntime, SubAgent, subagent_tool
from toycoder_daemon.app.attachments import Attached, Attacher
from toycoder_daemon.app.session_hooks import BLOCKED_PROMPT, SessionHooks, hooks_of
from toycoder_daemon.app.session_mcp import McpHub
from toycoder_daemon.app.settings import Models
from toycoder_daemon.app.trust import WorkspaceTrust
from toycoder_daemon.checkpoints import RestoreResult
from toycoder_daemon.checkpoints.undo import Checkpoints, SessionCheckpoints
from toycoder_daemon.commands.builtin import commands
from toycoder_daemon.commands.context import CommandContext, SessionDirectory
from toycoder_daemon.commands.custom import CommandRow, CustomCommand, CustomCommands, listing
from toycoder_daemon.config.model import Config, ProviderConfig
from toycoder_daemon.core.errors import BadInput, ConfigError, ProviderError, SessionBusy, ToyCoderError
from toycoder_daemon.core.messages import Message
from toycoder_daemon.core.ports import Event, Frontend, ModelsInfo, TextDelta
from toycoder_daemon.llm.base import ChatModel, Usage
from toycoder_daemon.prompts.manager import PromptManager
from toycoder_daemon.sessions.context import Compaction
from toycoder_daemon.sessions.conversation import Conversation, Mark, Stored
from toycoder_daemon.sessions.fork import AtTurn, before_turn, turn_ids
from toycoder_daemon.sessions.room import Compactor, RoomMaker
from toycoder_daemon.sessions.session import FileSink, Session
from toycoder_daemon.sessions.sharing import Sharing
from toycoder_daemon.sessions.store import SessionFile, SessionStore, SessionSummary
from toycoder_daemon.sessions.titles import write_title
from toycoder_daemon.tools.base import ToolContext
from toycoder_daemon.tools.registry import ToolRegistry
from toycoder_daemon.tools.settings import ToolSettings
from toycoder_daemon.tools.workspace import Workspace

log = logging.getLogger(__name__)

FrontendFactory = Callable[[str, str], Frontend]
"""(session id, turn id) -> the Frontend the turn's events go to (the wire face's)."""


@dataclass
class PromptOutcome:
    turn_id: str
    result: TurnResult
    action: dict[str, Any] | None = None


def _no_info(summary: SessionSummary, turn_id: str) -> None:
    pass


@dataclass
class Outlets:
    """News about sessions for the wire face to send (App.on_session_info sets it)."""

    session_info: Callable[[SessionSummary, str], None] = _no_info
    """A session's title (the model's, /title) or mode changed; with the id of the turn that changed
    it ("" outside a turn)."""


@dataclass(frozen=True)
class SessionParts:
    """What App hands every session it opens: what spans sessions."""

    workspace: Workspace
    config: Config
    prompts: PromptManager
    store: SessionStore
    settings: ToolSettings
    tools: ToolRegistry
    """The catalog each session's registry is forked from."""
    agents: list[tuple[SubAgent, str]]
    """The sub-agents (with their descriptions) each session binds to its registry and models."""
    mcp: McpHub
    checkpoints: Checkpoints
    sharing: Sharing
    models: Models
    outlets: Outlets
    sessions: SessionDirectory
    """App's open sessions, for /new, /clear, /switch and /sessions."""
    background: set[asyncio.Task[Any]] = field(default_factory=set)
    """Work in the background (the model's title after a turn, the start-up preload), cancelled at shutdown."""
    hooks: HookBook | None = None
    """The hooks in effect (the config's, a trusted workspace's)."""
    trust: WorkspaceTrust | None = None
    """The workspace's settings file and whether it is trusted (asked before a turn)."""
    attacher: Attacher | None = None
    """Resolves a prompt's context items and mentions (app/attachments.py)."""
    custom: CustomCommands | None = None
    """The workspace's and the user's custom slash commands (commands/custom.py)."""

    @property
    def planners(self) -> frozenset[str]:
        return frozenset(agent.name for agent, _ in self.agents if agent.seeds_plan)


def _session(parts: SessionParts, session_id: str, *, title: str = "", meta: dict[str, Any] | None = None,
             mtime: float = 0.0) -> Session:
    """A new session (`title`), or a stored one from its settings (`meta`), with its own registry."""
    tools = parts.tools.fork()
    if meta is None:
        return Session(id=session_id, title=title, tools=tools)
    return Session.restore(session_id, meta, mtime, tools)


def _bind(parts: SessionParts, s: Session, stored: list[Stored], file: SessionFile | None = None,
          system: str = "") -> Session:
    """`s` with its conversation (written to `file`; none: a read-only copy) and its tools: its
    sub-agents bound to its registry, models and conversation, the MCP servers its client gave."""
    s.file = file
    s.messages = Conversation(system, stored, FileSink(file, functools.partial(s.meta, ends=True)) if file else None)
    s.planners = parts.planners
    lent = AgentRuntime(s.tools, functools.partial(parts.models.of, s), s.add_usage, s.messages.snapshot, s.planners,
                        hooks_of(parts.hooks, s))
    for agent, description in parts.agents:
        s.tools.register(subagent_tool(agent, description, lent))
    s.tools.add_own_source(parts.mcp.tools_of(s.id))
    return s


def command_rows(parts: SessionParts, session_id: str | None) -> tuple[list[CommandRow], list[CustomCommand]]:
    """Every slash command (built-in, custom, the MCP prompts of the session's servers, or of the
    config's without a session) and the custom ones a built-in hides (/help warns)."""
    builtin = [CommandRow(c.name, c.usage, c.help, "builtin", tuple(c.aliases)) for c in commands.all()]
    return listing(builtin, parts.custom.all() if parts.custom else {}, parts.mcp.prompts(session_id))


def read_only(parts: SessionParts, session_id: str) -> Session:
    """A copy of a stored session read from disk without taking its lock, to look at (load,
    tools/list, models/list): looking at history never blocks another editor."""
    meta, stored, mtime = parts.store.read(session_id)
    s = _bind(parts, _session(parts, session_id, meta=meta, mtime=mtime), stored)
    s.messages.repair(repair_tool_calls(s.messages.history()))  # without a file: nothing is written
    return s


class SessionRuntime:
    def __init__(self, parts: SessionParts, s: Session, busy_elsewhere: bool = False):
        """`busy_elsewhere`: opened while another daemon held it (its turn runs)."""
        self.parts, self.session = parts, s
        self.checkpoints = SessionCheckpoints(s, parts.checkpoints.store(s.id), parts.workspace)
        self.compactor = Compactor(s, parts.config.session, functools.partial(parts.prompts.system, "summarizer"))
        self.closed = False
        self._shown: tuple[str, str, str | None, str | None] = (s.title, s.mode, s.provider, s.model)
        self.hooks = SessionHooks(s, parts.hooks, parts.trust, parts.mcp, parts.models, parts.prompts)
        self.compactor.before = self.hooks.pre_compact
        # its clients hear about turns other daemons make in it
        parts.sharing.watch(s, self.checkpoints.changes_of, busy_elsewhere)
        self._tools_check: asyncio.Task[str | None] | None = None
        self._told_at_open = False
        """The face tells the session's client, as it opens, what the tools check finds (opening_notice)."""

    # ---- opening ------------------------------------------------------------------------------

    @classmethod
    def create(cls, parts: SessionParts, title: str | None = None, dirs: tuple[str, ...] = ()) -> SessionRuntime:
        s = _session(parts, parts.store.new_id(), title=(title or "").strip())
        s.additional_directories = dirs
        return cls(parts, _bind(parts, s, [], parts.store.create(s.id, s.meta()), parts.prompts.system("main")))

    @classmethod
    def fork(cls, parts: SessionParts, source: Session, at_turn: AtTurn = None) -> SessionRuntime:
        """A new session with `source`'s history before `at_turn` (all of it: None) and its settings;
        `source` is not touched. ValueError for an unknown turn."""
        records = before_turn(source.messages.records(), at_turn)
        kept = set(turn_ids(records))
        meta = {**source.meta(), "createdAt": time.time(), "title": f"{source.title or 'session'} (fork)",
                "titleBy": "user", "turnEnds": {t: e for t, e in source.turn_ends.items() if t in kept}}
        s = _session(parts, parts.store.new_id(), meta=meta, mtime=time.time())
        file = parts.store.create(s.id, {**meta, "id": s.id})
        with file.closed_on_error():
            batch: list[Message] = []
            for r in [*records, None]:  # messages in batches, marks where they were
                if not isinstance(r, dict) and batch:
                    file.append(batch)
                    batch = []
                if isinstance(r, Mark):
                    file.mark(r)
                elif isinstance(r, dict):
                    batch.append(r)
            return cls(parts, _bind(parts, s, records, file, parts.prompts.system("main")))

    @classmethod
    def open(cls, parts: SessionParts, session_id: str) -> SessionRuntime:
        """The stored session (made valid for the model if a turn was cut), its file held open."""
        file, meta, stored = parts.store.open(session_id)
        with file.closed_on_error():
            s, rewrite = cls._restored(parts, session_id, file, meta, stored)
            if rewrite:
                file.rewrite(s.meta(ends=True), s.messages.records())
            busy = not file.held  # open() could not take it: another daemon's turn runs
            file.release()  # taken by open() for the repair; from now on only turns hold it
            return cls(parts, s, busy)

    @classmethod
    async def load(cls, parts: SessionParts, session_id: str) -> SessionRuntime:
        """`open` for async callers: the file is read (and repaired) in a worker thread."""
        file, meta, stored = await asyncio.to_thread(parts.store.open, session_id)
        with file.closed_on_error():
            s, rewrite = cls._restored(parts, session_id, file, meta, stored)
            if rewrite:
                await asyncio.to_thread(file.rewrite, s.meta(ends=True), s.messages.records())
            busy = not file.held
            file.release()
            return cls(parts, s, busy)

    @staticmethod
    def _restored(parts: SessionParts, session_id: str, file: SessionFile, meta: dict[str, Any],
                  stored: list[Stored]) -> tuple[Session, bool]:
        """The session, and whether its file must be rewritten: tool calls a killed daemon left
        open were answered before later messages (answers at the end are appended)."""
        s = _bind(parts, _session(parts, session_id, meta=meta, mtime=file.path.stat().st_mtime), stored, file,
                  parts.prompts.system("main"))
        history = s.messages.history()
        repaired = repair_tool_calls(history) if file.held else history  # else: a turn runs elsewhere
        if repaired is history:
            return s, False
        log.info("session %s: answered tool calls left open by an interrupted turn", s.id)
        return s, s.messages.repair(repaired)

    # ---- the pipeline -------------------------------------------------------------------------

    async def prompt(self, text: str, frontend_for: FrontendFactory,
                     context: list[dict[str, Any]] | None = None) -> PromptOutcome:
        """Run a turn (or a slash command): SessionBusy while one runs here or in another daemon.
        `context`: the editor's context items (wire shapes); a refused one (or mention) is BadInput,
        raised before anything is recorded or sent."""
        s, parts = self.session, self.parts
        if s.busy:
            raise SessionBusy(s.id)
        typed, model = text, None
        if text.lstrip().startswith("/"):  # a custom command or MCP prompt becomes the turn's prompt
            expansion = await self.expand(text)
            if expansion is not None:
                text, named = expansion
                model = parts.models.named(s, named) if named else parts.models.of(s)
        else:
            model = parts.models.of(s)
        await parts.sharing.begin_turn(s, self.checkpoints.changes_of)  # the lock, and what other daemons wrote meanwhile
        turn_id = self.checkpoints.next_turn()
        frontend = parts.sharing.published(s, turn_id, text, frontend_for(s.id, turn_id), self.cancel)  # live elsewhere too
        work = (self._command(text, frontend, turn_id) if model is None
                else self._turn(text, model, frontend, turn_id, context or [], typed))
        turn = s.turn = asyncio.ensure_future(work)
        parts.sharing.release_after(s, turn)
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
        self._push_info(turn_id)
        if result.stop_reason == "end_turn":
            self._title_after_first_turn(typed, result.text)
        return PromptOutcome(turn_id, result, action)

    def tool_scope(self) -> tuple[Workspace, ToolSettings]:
        """The workspace and settings the session's tools get: its additionalDirectories are roots
        like the workspace's, and writable for the sandbox (its policy's `writable` input)."""
        dirs, parts = self.session.additional_directories, self.parts
        if not dirs:
            return parts.workspace, parts.settings
        run = parts.settings.run_command
        return (parts.workspace.with_roots(dirs),
                dataclasses.replace(parts.settings, run_command=dataclasses.replace(run, writable=(*run.writable, *dirs))))

    async def _command(self, text: str, frontend: Frontend, turn_id: str) -> tuple[TurnResult, dict[str, Any] | None]:
        try:  # a restore the command makes is recorded under the turn's id
            out = await commands.run(text, CommandContext(self, self.parts.sessions, self.session, frontend,
                                                          turn_id=turn_id))
        except asyncio.CancelledError:
            return TurnResult("cancelled", "", Usage(), 0), None
        return TurnResult("command", out.text, Usage(), 0), out.action

    async def attach(self, text: str, context: list[dict[str, Any]], frontend: Frontend) -> Attached | None:
        """The prompt's context items and mentions resolved (BadInput for a refused one, or for an
        image the session's model does not take)."""
        parts = self.parts
        if parts.attacher is None or (not context and "@" not in text):
            return None
        attached = await parts.attacher.resolve(text, context, frontend, parts.mcp.servers(self.session.id),
                                                functools.partial(parts.mcp.read_resource, self.session.id))
        if attached.images:
            info = parts.models.info(self.session)
            if info.model not in parts.config.providers.get(info.provider, ProviderConfig()).vision_models:
                raise BadInput(f"the model {info.model} does not take images "
                               f"(providers.{info.provider}.vision_models lists those that do)")
        return attached

    async def expand(self, text: str) -> tuple[str, str | None] | None:
        """`/name args` as a prompt (and the model its front matter names) when `name` is a custom
        command or `mcp:<server>:<prompt>`; None for a built-in or unknown command (the registry
        answers those). A built-in wins over a custom command of the same name. BadInput when an
        MCP prompt's arguments are wrong or the server fails."""
        name, _, rest = text.strip().lstrip("/").partition(" ")
        if commands.get(name) is not None:
            return None
        parts = self.parts
        custom = parts.custom.get(name) if parts.custom else None
        if custom is not None:
            return custom.expand(rest.strip()), custom.model
        if not name.startswith("mcp:"):
            return None
        await parts.mcp.settle(self.session.id)
        prompt = next((p for p in parts.mcp.prompts(self.session.id) if p.command == name), None)
        if prompt is None:
            return None
        try:
            return await parts.mcp.get_prompt(self.session.id, prompt.server, prompt.name, prompt.bind(rest.strip())), None
        except ValueError as e:
            raise BadInput(str(e)) from None

    def command_rows(self) -> tuple[list[CommandRow], list[CustomCommand]]:
        return command_rows(self.parts, self.session.id)

    async def _turn(self, text: str, model: ChatModel, frontend: Frontend, turn_id: str,
                    items: list[dict[str, Any]], typed: str) -> tuple[TurnResult, dict[str, Any] | None]:
        s, parts = self.session, self.parts
        attached = await self.attach(text, items, frontend)  # refused: before anything is recorded or sent
        s.turn_usage = Usage()  # this turn's tokens, sub-agents included (reported even when cancelled)
        store = self.checkpoints.store
        checkpoint = store.begin_turn(turn_id, typed)
        workspace, settings = self.tool_scope()
        context = ToolContext(workspace, frontend, "", settings, checkpoints=store, checkpoint_turn=checkpoint)
        summary = parts.models.later(s, "fast")
        room = RoomMaker(s, frontend, model, parts.config.session,
                         functools.partial(self.compactor, frontend, summary, force=True))
        result = TurnResult("error", "", s.turn_usage, 0)  # unless the turn ends otherwise
        try:
            context_added = await self.hooks.before_turn(text, frontend)
            if context_added is None:  # nothing of the prompt reaches the model
                frontend.emit(TextDelta(BLOCKED_PROMPT))
                return (result := TurnResult("end_turn", BLOCKED_PROMPT, s.turn_usage, 0)), None
            await self.compactor(frontend, summary, window=model)
            await parts.mcp.settle(s.id, frontend.emit)  # the config's servers and the session's: started or failed
            s.ask(text, checkpoint, attached, typed)  # after compaction: the prompt is never summarised
            if context_added:
                s.messages.append({"role": "user", "content": f"[context from hooks]\n{context_added}", "turn": checkpoint})
            notice = await self.no_tools_notice()  # known before the first request: it goes without tools
            told = notice if self._told_at_open else None
            result = await run_turn(model, s.messages, s.tools, frontend, max_steps=parts.config.agent.max_steps,
                                    make_context=context.for_call, on_usage=s.record_usage, make_room=room,
                                    hooks=self.hooks.hooks, told=told)
            return result, None
        except asyncio.CancelledError:
            log.info("turn cancelled in session %s", s.id)
            s.ask(text, checkpoint, attached, typed)  # cancelled while compacting or waiting for MCP servers: kept, as later
            return (result := TurnResult("cancelled", "", s.turn_usage, 0)), None
        finally:  # records usage, grants, the time of this turn and how it ended (a reload shows it)
            s.end_turn(checkpoint, result.stop_reason, s.turn_usage)
            self.checkpoints.report(checkpoint, frontend)  # cancelled turns' writes too

    async def no_tools_notice(self) -> str | None:
        """The notice when the session's model server says it takes no tools (llm/tools_ignored.py), asked
        once per opening (in the background after the session's answer, or by its first turn): the
        first request then goes without tools, and the person knows why before it."""
        if self._tools_check is None:
            self._tools_check = asyncio.ensure_future(self._check_tools())
        return await asyncio.shield(self._tools_check)

    async def _check_tools(self) -> str | None:
        try:
            model = self.parts.models.of(self.session)
        except ToyCoderError as e:  # a broken config or provider: its turns say so
            log.info("session %s: no tools check: %s", self.session.id, e)
            return None
        ask, say = getattr(model, "tools_supported", None), getattr(model, "no_tools_notice", None)
        if ask is None or say is None:  # a scripted model: nothing to ask
            return None
        await ask()
        notice = say()
        return notice if isinstance(notice, str) else None

    async def opening_notice(self) -> str | None:
        """What the face tells the person as the session opens (after its answer): the no-tools notice.
        Its turns then do not say it again."""
        self._told_at_open = True
        return await self.no_tools_notice()

    async def end_hooks(self, reason: str) -> None:
        await self.hooks.end(reason)

    async def restore(self, turn_ref: str, paths: list[str] | None, force: bool,
                      frontend_for: FrontendFactory | None) -> RestoreResult:
        """Restore a turn and every later one (checkpoints/undo.py), as a turn of its own (so it can
        be undone); SessionBusy while a turn runs."""
        s, sharing = self.session, self.parts.sharing
        if s.busy:
            raise SessionBusy(s.id)
        await sharing.begin_turn(s, self.checkpoints.changes_of)
        turn_id = self.checkpoints.next_turn()
        frontend = frontend_for(s.id, turn_id) if frontend_for else None
        work = s.turn = asyncio.ensure_future(self.checkpoints.restore(turn_ref, paths, force, frontend, turn_id))
        sharing.release_after(s, work)
        return await asyncio.shield(work)  # the files are written either way: the answer says which

    def cancel(self) -> bool:
        s = self.session
        if not s.busy:
            return False
        assert s.turn is not None
        s.turn.cancel()
        return True

    async def stop(self) -> None:
        """A running turn is cancelled and waited for (up to 5 s)."""
        turn = self.session.turn
        if turn is not None and not turn.done():
            turn.cancel()
            await asyncio.wait([turn], timeout=5.0)

    def release(self) -> None:
        """This daemon stops having the session open: no more polling, its file (and lock) closed."""
        self.closed = True
        self.parts.sharing.unwatch(self.session.id)
        if self.session.file:
            self.session.file.close()

    # ---- what commands and App's requests do in the session (commands.context.CommandHost) -----

    @property
    def settings(self) -> ToolSettings:
        return self.parts.settings

    async def compact(self, frontend: Frontend, *, force: bool = False) -> Compaction | None:
        """Compact the session's context when it is over the thresholds (or when forced)."""
        s, models = self.session, self.parts.models
        return await self.compactor(frontend, models.later(s, "fast"), window=models.made(s), force=force)

    def model_for(self, session: Session | None, role: str | None = None) -> ChatModel:
        return self.parts.models.of(session, role)

    def models_info(self) -> ModelsInfo:
        return self.parts.models.info(self.session)

    def set_model(self, provider: str | None, model: str) -> ModelsInfo:
        self.parts.models.choose(self.session, provider, model)
        self._changed()
        return self.models_info()

    def set_mode(self, mode: str) -> SessionSummary:
        """ValueError for an unknown mode."""
        self.session.set_mode(mode)
        self._changed()
        return self.session.summary()

    def set_tool_enabled(self, name: str, enabled: bool) -> None:
        s = self.session
        if s.tools.get(name) is None:
            raise KeyError(name)
        s.set_tool_enabled(name, enabled)
        self._changed()

    async def settle_mcp(self, emit: Callable[[Event], None] | None = None) -> None:
        """What a turn waits for before asking the model (McpHub.settle)."""
        await self.parts.mcp.settle(self.session.id, emit)

    def mcp_status(self) -> list[dict[str, Any]] | None:
        return self.parts.mcp.status(self.session.id)

    def hooks_in_effect(self) -> tuple[list[HookSpec], str | None]:
        return self.hooks.in_effect()

    # ---- news for the session's clients ------------------------------------------------------

    def _changed(self) -> None:
        """Its settings changed outside a turn: the clients hear of a new title or mode now (a
        turn's change goes out when it ends, after its own updates)."""
        if not self.session.busy:
            self._push_info("")

    def _push_info(self, turn_id: str) -> None:
        """The prompt's line as title is not news (the client sent the prompt): the model's, /title's,
        a mode change and a model change (/model, models/set: ACP clients show a model picker) are."""
        s = self.session
        shown, self._shown = self._shown, (s.title, s.mode, s.provider, s.model)
        if shown != self._shown and (s.title_by != "prompt" or shown[1:] != self._shown[1:]):
            self.parts.outlets.session_info(s.summary(), turn_id)

    def _title_after_first_turn(self, prompt: str, reply: str) -> None:
        """The fast model titles the session in the background (the turn has answered already)."""
        s = self.session
        if not self.parts.config.agent.auto_title or s.title_by not in ("", "prompt"):
            return
        if sum(1 for m in s.messages if m["role"] == "user") != 1:
            return
        task = asyncio.ensure_future(self._write_title(prompt, reply))
        self.parts.background.add(task)
        task.add_done_callback(self.parts.background.discard)

    async def _write_title(self, prompt: str, reply: str) -> None:
        s = self.session
        try:
            title = await write_title(self.parts.models.of(s, "fast"), prompt, reply)
            if title and s.title_by != "user" and not self.closed:  # /title meanwhile wins
                s.set_title(title, "model")
                self._changed()
        except (ProviderError, ConfigError, SessionBusy) as e:  # busy: another daemon's turn; keep ours
            log.info("session %s: no title from the model: %s", s.id, e)
