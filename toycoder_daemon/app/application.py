"""Composition root: the only place that builds and wires config, models, tools, sessions and
prompts. App keeps what spans sessions (the config, the store, the model clients, the MCP servers,
the list of open sessions) and hands it to each session it opens (runtime.SessionRuntime),
where prompts run.

The wire faces (faces/lsp/server.py, faces/acp/agent.py) build it with `App.open` and call these
methods, passing a `Frontend` factory; nothing here knows about JSON-RPC. Tests build it directly
with a scripted model factory and a store on a temp dir (tests/inproc_app.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from toycoder_daemon.agent.hooks.engine import HookBook, HookPolicy, specs_from
from toycoder_daemon.app.attachments import Attacher
from toycoder_daemon.app.factories import openai_models, subagents, tool_catalog, tool_settings
from toycoder_daemon.app.runtime import (
    FrontendFactory,
    Outlets,
    PromptOutcome,
    SessionParts,
    SessionRuntime,
    command_rows,
    read_only,
)
from toycoder_daemon.app.session_mcp import McpHub
from toycoder_daemon.app.settings import Models
from toycoder_daemon.app.trust import WorkspaceTrust
from toycoder_daemon.checkpoints import Checkpoint, CheckpointStore, FileDiff, RestoreResult
from toycoder_daemon.checkpoints.undo import ChangesOfStore, Checkpoints
from toycoder_daemon.commands.custom import CommandRow, CustomCommand, CustomCommands
from toycoder_daemon.config.model import Config, data_dir, load_config
from toycoder_daemon.core.errors import BadInput, ConfigError, SessionBusy, SessionDeleted
from toycoder_daemon.core.ports import Event, Frontend, ModelsInfo, ToolSummary
from toycoder_daemon.core.util import environ_scrub, secrets
from toycoder_daemon.llm.base import ChatModel
from toycoder_daemon.llm.pool import ModelFactory, ModelPool
from toycoder_daemon.prompts.manager import PromptManager
from toycoder_daemon.sessions.catalog import Catalog, Listed, listed
from toycoder_daemon.sessions.context import Compaction
from toycoder_daemon.sessions.fork import AtTurn
from toycoder_daemon.sessions.session import Session, TranscriptEntry
from toycoder_daemon.sessions.sharing import Sharing
from toycoder_daemon.sessions.store import SessionStore, SessionSummary
from toycoder_daemon.tools.base import ToolError
from toycoder_daemon.tools.search.file_index import FileIndex
from toycoder_daemon.tools.workspace import Workspace

log = logging.getLogger(__name__)

__all__ = ["App", "FrontendFactory", "PromptOutcome"]


class OpenSessions(Mapping[str, Session]):
    """The sessions of App's open runtimes, by id (read-only)."""

    def __init__(self, runtimes: dict[str, SessionRuntime]):
        self._runtimes = runtimes

    def __getitem__(self, session_id: str) -> Session:
        return self._runtimes[session_id].session

    def __iter__(self) -> Iterator[str]:
        return iter(self._runtimes)

    def __len__(self) -> int:
        return len(self._runtimes)


def directories(dirs: list[str] | None) -> tuple[str, ...]:
    """A client's additionalDirectories, checked: absolute paths to directories, resolved, once each."""
    out: list[str] = []
    for d in dirs or ():
        p = Path(d)
        if not p.is_absolute() or not p.is_dir():
            raise ValueError(f"additionalDirectories: not an absolute path to a directory: {d!r}")
        if str(p.resolve()) not in out:
            out.append(str(p.resolve()))
    return tuple(out)


def _preload_llm(urls: list[str | None]) -> None:
    """The streaming client's modules and the providers' CA store, loaded in a thread: imported on the
    event loop they would hold up the requests that come right after initialize (a first `@`)."""
    from toycoder_daemon.llm import http_stream, openai_client  # noqa: F401  (loaded now, not in the first turn)

    http_stream.preload(urls)


class App:
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
        # a key written into base_url's userinfo (`https://user:KEY@host`) is a key too
        secrets.register([v for p in self.config.providers.values() for v in secrets.url_secrets(p.base_url)])
        self.models = Models(self.config, self.config_error, ModelPool(model_factory or openai_models(self.config)))
        self.store = store or SessionStore(data_dir(), self.workspace.root)
        self.catalog = Catalog(self.store.data_dir)
        self.catalog.use(self.store.index, self.workspace.root)
        self.settings = tool_settings(self.config)
        self.checkpoints = Checkpoints(self.store.data_dir, self.workspace.root)
        self.sharing = Sharing()
        self.sharing.on_deleted = self._deleted_elsewhere
        self.on_session_deleted: Callable[[str], None] = lambda session_id: None
        """Set by the wire face: tell a session's clients that another daemon deleted it."""
        self._deleted: set[str] = set()
        """Sessions another daemon deleted while this one had them open: asked for again, they are
        SessionDeleted ("deleted in another editor"), not just not found."""
        agents = subagents(self.config, self.prompts)
        self.tools = tool_catalog(self.config, agents)
        self.mcp = McpHub(self.config.mcp_servers, self.workspace.root, self.tools)  # the config's and each session's
        self._outlets = Outlets()
        self.trust = WorkspaceTrust(self.workspace.root, self.store.data_dir, self.tools.gate)
        user_hooks = specs_from(self.config.hooks, "user", str(self.config_path or "the config"))
        self.hooks = HookBook(self.workspace.root, self.settings,
                              HookPolicy(self.config.hooks_on_error, self.config.hooks_max_continuations,
                                         self.config.hooks_workspace_sandbox),
                              lambda: [*user_hooks, *self.trust.hook_specs()])
        self.files = FileIndex(self.workspace.root, self.store.data_dir / "files")
        """The workspace's files as rg lists them: mention completion, what a prompt may attach (the
        last whole listing is kept in the data dir for the next daemon's first `@`)."""
        self.parts = SessionParts(self.workspace, self.config, self.prompts, self.store, self.settings, self.tools,
                                  agents, self.mcp, self.checkpoints, self.sharing, self.models, self._outlets, self,
                                  hooks=self.hooks, trust=self.trust,
                                  attacher=Attacher(self.workspace, self.settings, self.store.data_dir / "images",
                                                    self.files),
                                  custom=CustomCommands(self.workspace.root, self.config.commands.paths))
        self.runtimes: dict[str, SessionRuntime] = {}
        """The sessions this daemon has open."""
        self.live = OpenSessions(self.runtimes)
        self._loading: dict[str, asyncio.Future[SessionRuntime]] = {}
        self.on_commands_changed: Callable[[list[CommandRow]], None] = lambda rows: None
        """Set by the wire face: the command list without a session (`command_rows(None)`) changed."""
        self.commands_poll = 1.0
        """Seconds between looks at the command list (custom commands' files: one stat each)."""
        self._commands_watch: asyncio.Future[None] | None = None
        self.preload_after = 0.5
        """Seconds after `start` before the streaming client's modules load, unless a session opens
        sooner (see `start`)."""
        self._preload_now = asyncio.Event()
        self.preloading: asyncio.Task[None] | None = None
        """The start-up preload (one per App: a second `start` does not load or log again)."""
        self.preload_began = False
        """The preload's thread was started (what waited for a session or `preload_after` is over)."""
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
        """Background start-up after initialize: the workspace's files are listed (for the first `@`
        completion) and MCP servers connect (a turn that comes first starts them itself: mcp.settle).
        The streaming client's imports (~0.1 s) and CA store (~50 ms, for TLS providers) load when a
        session opens (a prompt may come next) or `preload_after` seconds later, whichever is first:
        loaded at once, their thread held the GIL against the requests that come right after
        initialize (a first `@` on a 3-file tree took 40-120 ms instead of ~12). A turn that comes
        before them imports what it needs itself."""
        self.files.start()
        if self._commands_watch is None:
            self._commands_watch = asyncio.ensure_future(self._watch_commands())
        await self.mcp.start()
        if not self.config_error and self.preloading is None:
            urls = [p.base_url for p in self.config.providers.values() if p.api_keys]
            self.preloading = task = asyncio.ensure_future(self._preload(urls))
            self.parts.background.add(task)  # cancelled by shutdown (a thread already loading finishes)
            task.add_done_callback(self.parts.background.discard)

    async def _preload(self, urls: list[str | None]) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._preload_now.wait(), self.preload_after)
        self.preload_began = True
        try:
            await asyncio.to_thread(_preload_llm, urls)
        except Exception as e:  # logged here, once: a turn imports what it needs itself (its error is the turn's)
            log.warning("the model client's preload failed: %s: %s", type(e).__name__, e)

    # ---- what the wire face sets -------------------------------------------------------------

    @property
    def on_notice(self) -> Callable[[str, str], None]:
        """Set by the wire face: show a message to the person (level: info|warning|error)."""
        return self.mcp.on_notice

    @on_notice.setter
    def on_notice(self, show: Callable[[str, str], None]) -> None:
        self.mcp.on_notice = show

    @property
    def on_session_info(self) -> Callable[[SessionSummary, str], None]:
        """Set by the wire face: a session's title (the model's, /title) or mode changed; with the id of
        the turn that changed it ("" outside a turn)."""
        return self._outlets.session_info

    @on_session_info.setter
    def on_session_info(self, tell: Callable[[SessionSummary, str], None]) -> None:
        self._outlets.session_info = tell

    # ---- open sessions ------------------------------------------------------------------------

    def _opened(self, runtime: SessionRuntime) -> SessionRuntime:
        self.runtimes[runtime.session.id] = runtime
        self._preload_now.set()  # a prompt may come next
        return runtime

    def _deleted_elsewhere(self, session_id: str) -> None:
        """Another daemon deleted a session this one has open: it is closed here (its file, its MCP
        servers; it is never written again) and its clients are told, once."""
        runtime = self.runtimes.pop(session_id, None)
        if session_id in self._deleted and runtime is None:
            return
        self._deleted.add(session_id)
        log.warning("session %s was deleted in another daemon: closed here", session_id)
        if runtime is not None:
            runtime.release()
            self.mcp.close_later(session_id)
        self.on_session_deleted(session_id)

    @contextlib.contextmanager
    def _writing(self, session_id: str) -> Iterator[SessionRuntime]:
        """The open session, for a settings change: if its write finds the session deleted by
        another daemon (before the poll did), it is closed here and its clients are told."""
        try:
            yield self._open_now(session_id)
        except SessionDeleted:
            self._deleted_elsewhere(session_id)
            raise

    def _not_deleted(self, session_id: str) -> None:
        if session_id in self._deleted:
            raise SessionDeleted(session_id)

    def _open_now(self, session_id: str) -> SessionRuntime:
        self._not_deleted(session_id)
        runtime = self.runtimes.get(session_id)
        return runtime if runtime is not None else self._opened(SessionRuntime.open(self.parts, session_id))

    async def _open(self, session_id: str) -> SessionRuntime:
        """The session's runtime: open already, or loaded from disk (the file is read and repaired
        in a worker thread); concurrent loads of one session share the first."""
        self._not_deleted(session_id)
        runtime = self.runtimes.get(session_id)
        if runtime is not None:
            return runtime
        pending = self._loading.get(session_id)
        if pending is None:
            pending = self._loading[session_id] = asyncio.ensure_future(self._load(session_id))
            pending.add_done_callback(lambda _: self._loading.pop(session_id, None))
        return await asyncio.shield(pending)

    async def _load(self, session_id: str) -> SessionRuntime:
        return self._opened(await SessionRuntime.load(self.parts, session_id))

    def new_session(self, title: str | None = None, additional_directories: list[str] | None = None) -> Session:
        """ValueError for an additional directory that is not an absolute path to a directory."""
        dirs = directories(additional_directories)
        return self._opened(SessionRuntime.create(self.parts, title, dirs)).session

    async def opening_notice(self, session_id: str) -> str | None:
        """What the face tells the person as a session opens, in the background after its answer: that
        the session's model server takes no tools, with the fix (SessionRuntime.opening_notice)."""
        runtime = self.runtimes.get(session_id)
        return await runtime.opening_notice() if runtime is not None else None

    def set_additional_directories(self, session_id: str, dirs: list[str]) -> None:
        """The session's extra roots from now on (a client's session/load or resume that gives them);
        ValueError as for new_session."""
        self._open_now(session_id).session.set_additional_directories(directories(dirs))

    def fork_session(self, session_id: str, at_turn: AtTurn = None) -> Session:
        """A new session, open here, with the history of `session_id` before turn `at_turn` (all of
        it: None); the original is unchanged. SessionBusy while a turn runs in it here (its history
        is half written); ValueError for a turn it does not have."""
        runtime = self.runtimes.get(session_id)
        if runtime is not None and runtime.session.busy:
            raise SessionBusy(session_id)
        return self._opened(SessionRuntime.fork(self.parts, self.peek(session_id), at_turn)).session

    def session(self, session_id: str) -> Session:
        """An open session, or one loaded from disk (made valid for the model if a turn was cut)."""
        return self._open_now(session_id).session

    async def load(self, session_id: str) -> Session:
        """`session` for async callers: the file is read (and repaired) in a worker thread, and
        concurrent loads of one session share the first."""
        return (await self._open(session_id)).session

    def peek(self, session_id: str) -> Session:
        """A session to read (load, tools/list, models/list): the open one, or a copy read from disk
        without taking its lock, so looking at history never blocks another editor."""
        self._not_deleted(session_id)
        runtime = self.runtimes.get(session_id)
        return runtime.session if runtime is not None else read_only(self.parts, session_id)

    def list_sessions(self) -> list[SessionSummary]:
        """This workspace's stored sessions with messages, newest first (catalog.listed). Blocking."""
        return listed(self.store.list())

    def list_all(self) -> list[Listed]:
        """Every workspace's sessions with messages, newest first, each with its workspace. Blocking."""
        return self.catalog.list()

    async def close_session(self, session_id: str) -> None:
        """This daemon stops having the session open (a running turn is cancelled first); it stays
        on disk, and any daemon (this one too) can load it again."""
        runtime = self.runtimes.get(session_id)
        if runtime is None:
            return
        await runtime.stop()
        if self.runtimes.get(session_id) is runtime:
            del self.runtimes[session_id]
        runtime.release()
        await runtime.end_hooks("close")
        await self.mcp.close_session(session_id)  # the servers its client gave stop with it

    def delete_session(self, session_id: str) -> None:
        runtime = self.runtimes.get(session_id)
        if runtime is not None and runtime.session.busy:
            raise SessionBusy(session_id)
        self.store.delete(session_id)  # refused while another daemon's turn runs: then it stays open here
        if runtime is not None:
            del self.runtimes[session_id]
            runtime.release()
            self.mcp.close_later(session_id)
            task = asyncio.ensure_future(runtime.end_hooks("delete"))  # this call is synchronous
            self.parts.background.add(task)
            task.add_done_callback(self.parts.background.discard)
        self.checkpoints.delete(session_id)

    # ---- turns --------------------------------------------------------------------------------

    async def prompt(self, session_id: str, text: str, frontend_for: FrontendFactory, *,
                     close_on_switch: bool = True, context: list[dict[str, Any]] | None = None) -> PromptOutcome:
        """Run a turn (or a slash command) in the session (SessionRuntime.prompt). `close_on_switch=False`:
        the client keeps the session open after /new, /switch or /clear (an ACP client picks its
        sessions and ends them with session/close), so its MCP servers and file stay as they are."""
        try:
            outcome = await (await self._open(session_id)).prompt(text, frontend_for, context)
        except SessionDeleted:  # found by the turn's writes (its lock found it first: begin_turn)
            self._deleted_elsewhere(session_id)
            raise
        action = outcome.action
        if close_on_switch and action and action.get("kind") == "switch" and action.get("sessionId") != session_id:
            await self.close_session(session_id)  # /new, /switch, /clear: this daemon moves on
        return outcome

    async def compact(self, s: Session, frontend: Frontend, *, force: bool = False) -> Compaction | None:
        """Compact the session's context when it is over the thresholds (or when forced)."""
        return await (await self._open(s.id)).compact(frontend, force=force)

    def cancel(self, session_id: str) -> bool:
        runtime = self.runtimes.get(session_id)
        if runtime is None:
            self.peek(session_id)  # SessionNotFound for an unknown id
            return False
        return runtime.cancel() or self.sharing.cancel_elsewhere(session_id)  # a turn heard live: its daemon's

    async def shutdown(self, timeout: float = 2.0) -> None:
        """End every turn (which kills their child processes), close files and model clients."""
        turns = [r.session.turn for r in self.runtimes.values() if r.session.turn and not r.session.turn.done()]
        for t in [*turns, *self.parts.background]:
            t.cancel()
        if turns:
            await asyncio.wait(turns, timeout=timeout)
        from toycoder_daemon.tools.shell.run_command import kill_all

        kill_all()  # whatever a turn did not manage to stop in time
        self.sharing.close()
        if self._commands_watch is not None:
            self._commands_watch.cancel()
        await self.files.aclose()
        for runtime in self.runtimes.values():
            runtime.release()
        await self.mcp.aclose()
        await self.models.pool.aclose()

    # ---- the editor as context: mentions and MCP resources (issue 29) ---------------------------

    def command_rows(self, session_id: str | None) -> tuple[list[CommandRow], list[CustomCommand]]:
        """Every slash command (built-in, custom, the MCP prompts of the session's servers, or of the
        config's without a session) and the custom ones a built-in hides."""
        if session_id:
            self.peek(session_id)  # SessionNotFound for an unknown id
        return command_rows(self.parts, session_id)

    async def _watch_commands(self) -> None:
        """Tell the face when the command list changes while the daemon runs: a custom command's
        Markdown file added, edited or removed, an MCP server's prompts once it is ready."""
        told = self.command_rows(None)[0]
        while True:
            await asyncio.sleep(self.commands_poll)
            try:
                rows = self.command_rows(None)[0]
            except Exception:  # a folder gone mid-scan: look again next time
                log.exception("reading the command list failed")
                continue
            if rows != told:
                told = rows
                self.on_commands_changed(rows)

    async def complete_mentions(self, session_id: str | None, prefix: str, limit: int) -> list[tuple[str, str, str]]:
        """(label, kind, uri) for `@prefix`: MCP resources (`server:uri`) when the prefix names a
        server, workspace files and folders (as rg lists them), then resources whose name matches."""
        out: list[tuple[str, str, str]] = []
        resources = self.resources(session_id)
        server, colon, _ = prefix.partition(":")
        if colon and server in self.mcp.servers(session_id):
            # a template's uri (`toy://notes/{day}`) is offered to be filled in: its variables in braces
            named = [(r[0], r[1]) for r in resources]
            named += [(s.name, t.uri_template) for s in self.mcp.ready_servers(session_id) for t in s.templates]
            return [(f"{s}:{u}", "resource", u) for s, u in named if f"{s}:{u}".startswith(prefix)][:limit]
        try:
            for label, kind in await self.files.complete(prefix, limit):
                out.append((label, kind, (self.workspace.root / label).as_uri()))
        except ToolError as e:  # rg missing or failing: the resources can still be offered
            log.debug("no file completion: %s", e)  # FileIndex logged the failure, once
        low = prefix.lower()
        out += [(f"{r[0]}:{r[1]}", "resource", r[1]) for r in resources
                if low in f"{r[0]}:{r[1]}".lower() or low in r[2].lower()]
        return out[:limit]

    def resources(self, session_id: str | None) -> list[tuple[str, str, str, str | None]]:
        """(server, uri, name, mime type) of every resource the session's ready MCP servers list."""
        return [(s.name, str(r.uri), r.name, r.mime_type) for s in self.mcp.ready_servers(session_id)
                for r in s.resources]

    # ---- checkpoints (checkpoints/undo.py) ----------------------------------------------------------------

    def transcript(self, s: Session) -> list[TranscriptEntry]:
        """The session's history with a `changes` entry after each turn that changed files, as a
        client opening it is shown (a turn running in another daemon comes live instead)."""
        runtime = self.runtimes.get(s.id)
        return s.transcript(runtime.checkpoints.changes() if runtime is not None else
                            ChangesOfStore(self.checkpoints.store(s.id)), before_turn=self.sharing.running_elsewhere(s))

    def _checkpoint_store(self, session_id: str) -> CheckpointStore:
        """The open session's store, else one read for the look (SessionNotFound for an unknown id)."""
        runtime = self.runtimes.get(session_id)
        if runtime is not None:
            return runtime.checkpoints.store
        return self.checkpoints.store(self.peek(session_id).id)

    def checkpoint_list(self, session_id: str) -> list[Checkpoint]:
        return self._checkpoint_store(session_id).list()

    def checkpoint_diff(self, session_id: str, turn_ref: str, path: str) -> FileDiff:
        """What a turn did to one file, as a unified diff (CheckpointStore.diff; `turn_ref` as
        restore reads it). UnknownCheckpoint for a turn that did not change it; BadInput for a
        path outside the workspace."""
        store = self._checkpoint_store(session_id)
        try:
            return store.diff(store.resolve(turn_ref), path)
        except ValueError as e:
            raise BadInput(str(e)) from None

    async def restore(self, session_id: str, turn_ref: str, paths: list[str] | None = None, force: bool = False,
                      frontend_for: FrontendFactory | None = None) -> RestoreResult:
        """Restore a turn and every later one (checkpoints/undo.py); SessionBusy while a turn runs."""
        return await (await self._open(session_id)).restore(turn_ref, paths, force, frontend_for)

    # ---- settings, tools and models -----------------------------------------------------------

    def set_mode(self, session_id: str, mode: str) -> SessionSummary:
        """ValueError for an unknown mode; SessionBusy while another daemon's turn runs."""
        with self._writing(session_id) as runtime:
            return runtime.set_mode(mode)

    def tool_infos(self, session_id: str) -> list[ToolSummary]:
        s = self.peek(session_id)
        return [ToolSummary(t.name, t.description, t.level, s.tools.is_enabled(t.name), t.source) for t in s.tools.list()]

    def set_tool_enabled(self, session_id: str, name: str, enabled: bool) -> None:
        with self._writing(session_id) as runtime:
            runtime.set_tool_enabled(name, enabled)

    async def settle_mcp(self, session_id: str, emit: Callable[[Event], None] | None = None) -> None:
        await self.mcp.settle(session_id, emit)

    def mcp_status(self, session_id: str | None = None) -> list[dict[str, Any]] | None:
        return self.mcp.status(session_id)

    def model_for(self, session: Session | None, role: str | None = None) -> ChatModel:
        """The session's model, or the provider's model for a role ("fast" for summaries)."""
        return self.models.of(session, role)

    def models_info(self, session_id: str | None) -> ModelsInfo:
        return self.models.info(self.peek(session_id) if session_id else None)

    def set_model(self, session_id: str, provider: str | None, model: str) -> ModelsInfo:
        with self._writing(session_id) as runtime:
            return runtime.set_model(provider, model)
