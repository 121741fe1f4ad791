"""The Agent Client Protocol face (`toycoder-daemon --acp`): the same App, for ACP clients (Zed,
CodeCompanion.nvim, avante.nvim, agent-shell...). Newline-delimited JSON-RPC 2.0 on stdio, protocol
version 1, through the `agent-client-protocol` SDK's Connection, from the first line to the last.

Every message is read, dispatched and answered by the SDK's Connection, with the router the SDK
builds for an Agent (`build_agent_router`, plus the `session/delete` route 0.12.1 lacks) behind one
handler of ours (`handler`: raw `mcpServers` checked, a client's bad notification logged in one
line). It reads and writes the streams ndjson.py wraps (stdin on a thread, any kind of stdin; frames
only to the protocol stream faces.main kept). One App per distinct `cwd` of session/new or
session/load; a session belongs to the App that created or loaded it. See docs/protocol.md, "The
ACP face", for the mapping.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from acp import (
    PROTOCOL_VERSION,
    RequestError,
)
from acp.agent.router import build_agent_router
from acp.core import Connection
from acp.meta import AGENT_METHODS
from acp.router import MessageRouter
from acp.schema import (
    AgentCapabilities,
    AuthenticateResponse,
    ClientCapabilities,
    ForkSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptCapabilities,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionDeleteCapabilities,
    SessionForkCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionModeState,
    SessionResumeCapabilities,
    SetSessionConfigOptionResponse,
)
from pydantic import ValidationError

from toycoder_daemon import __version__
from toycoder_daemon.app.application import App
from toycoder_daemon.commands.custom import CommandRow
from toycoder_daemon.config.model import data_dir
from toycoder_daemon.core.errors import SessionBusy, ToyCoderError
from toycoder_daemon.core.ports import OUTPUT
from toycoder_daemon.core.util.background import Background
from toycoder_daemon.faces.acp import (
    auth as acp_auth,
)
from toycoder_daemon.faces.acp import (
    client as acp_client,
)
from toycoder_daemon.faces.acp import (
    config_options as acp_config,
)
from toycoder_daemon.faces.acp import (
    fs as acp_fs,
)
from toycoder_daemon.faces.acp import (
    mcp as acp_mcp,
)
from toycoder_daemon.faces.acp import (
    sessions as acp_sessions,
)
from toycoder_daemon.faces.acp import (
    turn as acp_turn,
)
from toycoder_daemon.faces.acp.content import commands_update, plan_now, replay
from toycoder_daemon.faces.acp.frontend import AcpFrontend
from toycoder_daemon.faces.acp.terminal import Terminals
from toycoder_daemon.rpc.ndjson import open_stdio
from toycoder_daemon.rpc.outbox import Outbox, written
from toycoder_daemon.sessions.catalog import BadCursor, Catalog, page
from toycoder_daemon.sessions.session import Session
from toycoder_daemon.sessions.store import SessionSummary
from toycoder_daemon.wire import codes as wire

log = logging.getLogger(__name__)
T = TypeVar("T")

ACP_NOTIFICATIONS = frozenset(m for m in AGENT_METHODS.values()
                              if m == "session/cancel" or m.startswith("document/did"))
"""Client -> agent methods that take no id (a request to one of them is refused with an answer)."""
ACP_REQUESTS = frozenset(AGENT_METHODS.values()) - ACP_NOTIFICATIONS
"""Client -> agent methods that take an id (a notification to one of them is dropped, logged)."""


def bad_dirs(make: Callable[[], T]) -> T:
    """`make()`, with a bad additionalDirectories item answered -32602."""
    try:
        return make()
    except ValueError as e:
        raise RequestError.invalid_params({"additionalDirectories": str(e)}) from None


def acp_errors(handler: Any) -> Any:
    """Core errors -> JSON-RPC errors: ACP's code for a missing session, ours for the rest."""

    @functools.wraps(handler)
    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return await handler(*args, **kwargs)
        except ToyCoderError as e:
            if (error := acp_turn.core_error(e)) is None:
                raise
            raise RequestError(*error) from None

    return wrapped


class SdkClient:
    """acp_client.RawClient over the SDK's Connection (send_notification, send_request): the dicts
    go out as they are, with no model built or validated per update."""

    def __init__(self, conn: Connection):
        self._conn = conn

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self._conn.send_notification(method, params)

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        try:
            return await self._conn.send_request(method, params)
        except RequestError as e:
            raise acp_client.ClientError(e.code, str(e), e.data) from None

    async def session_update(self, session_id: str, update: dict[str, Any]) -> None:
        await self.notify(acp_client.SESSION_UPDATE, {"sessionId": session_id, "update": update})


class ToyCoderAgent:
    """The acp.Agent implementation: one small method per ACP method."""

    def __init__(self, config_path: str | None = None):
        self.config_path = config_path
        self.raw: SdkClient = None  # type: ignore[assignment]  # set with the connection (serve_acp)
        self.client_name = ""
        """The client's clientInfo.name (told to other daemons while its turns run)."""
        self.caps = acp_turn.Caps()
        self._announced: dict[str, list[CommandRow]] = {}
        """The commands last announced to each session (available_commands_update)."""
        self.terminals: Terminals | None = None  # set when the client declares terminals (terminal.py)
        self.apps: dict[Path, App] = {}
        self.initialized = False
        """initialize was received: until then every other request is refused (`handler`)."""
        self.answered_initialize = False
        """An initialize succeeded (a later bad one does not close the gate again)."""
        self.owner: dict[str, App] = {}
        self.told: acp_sessions.Told = {}
        self.told_options: dict[str, list[dict[str, Any]]] = {}
        """What the client was last told of each open session's config options (`_tell_options`)."""
        self._setting: set[str] = set()
        """Sessions whose set_config_option is being answered (the answer carries the options)."""
        """What the client was last told of each open session's title and mode (acp_sessions.hook)."""
        self._prompts: set[asyncio.Task[Any]] = set()
        self._starting: set[asyncio.Task[Any]] = set()
        """Prompts on their way to their turn (App.prompt loads the session, takes its lock)."""
        self._ending = False
        """The input ended (shutdown): no turn starts from now on."""
        self.later = Background().run  # work that goes after the current answer

    @functools.cached_property
    def catalog(self) -> Catalog:
        """Every workspace's sessions, for session/list and session/delete (which take no App). Made
        at its first use: the data dir comes from the environment, which an agent prepared in the
        fork server (`prepare`) must not read."""
        return Catalog(data_dir())

    set_session_mode = acp_sessions.set_session_mode  # session/set_mode
    delete_session = acp_errors(acp_sessions.delete_session)  # session/delete (routed by acp_sessions.route_delete)

    def app_for(self, cwd: str) -> App:
        p = Path(cwd)
        if not p.is_absolute() or not p.is_dir():
            raise RequestError.invalid_params({"cwd": f"not an absolute path to a directory: {cwd!r}"})
        key = p.resolve()
        app = self.apps.get(key)
        if app is None:
            app = self.apps[key] = App.open(key, self.config_path)
            self.catalog.use(app.store.index, app.workspace.root)  # lists read nothing this App wrote itself
            app.on_notice = lambda level, message: log.warning("%s", message)  # ACP has no message to show
            app.sharing.client = self.client_name
            acp_sessions.hook(app, self.owner, lambda sid, u: self.raw.session_update(sid, u), self.later, replay,
                              self.told, lambda sid: AcpFrontend(self.raw, app, sid, can_elicit=self.caps.elicit))
            told_info = app.on_session_info

            def info(summary: SessionSummary, turn_id: str, app: App = app) -> None:
                told_info(summary, turn_id)  # its updates are queued first
                if self.owner.get(summary.id) is app:
                    self.later(self._tell_options(app, summary.id))

            app.on_session_info = info
            self.later(app.start())
            log.info("workspace %s, config %s", app.workspace.root, app.config_path or "(built-in defaults)")
        return app

    def app_of(self, session_id: str) -> App:
        app = self.owner.get(session_id)
        if app is None:
            raise RequestError(acp_client.RESOURCE_NOT_FOUND, f"session not found: {session_id} (not open on this connection: "
                               "use session/new or session/load first)", {"sessionId": session_id})
        return app

    async def _send(self, session_id: str, updates: list[dict[str, Any]]) -> None:
        for update in updates:
            await self.raw.session_update(session_id, update)

    async def _tell_opening(self, app: App, session_id: str) -> None:
        """After a session's answer: what the person should know as it opens (its model server takes no
        tools, with the fix), as an agent message, the way a turn says it."""
        notice = await app.opening_notice(session_id)
        if notice and self.owner.get(session_id) is app:
            await self.raw.session_update(session_id, acp_client.chunk(notice + "\n\n"))

    async def _announce_commands(self, session_id: str, *, if_changed: bool = False) -> None:
        """The session's commands; `if_changed` (after each prompt): only when they changed since they
        were last announced (a custom command's file, an MCP server's prompts)."""
        app = self.owner.get(session_id)
        rows = app.command_rows(session_id)[0] if app is not None else []
        if not if_changed or self._announced.get(session_id) != rows:
            self._announced[session_id] = rows
            await self.raw.session_update(session_id, commands_update(rows))

    async def _options(self, app: App, s: Session) -> list[Any]:
        """The session's config options for its answer, remembered as what its client was told. They
        never wait for the provider's list of models (a request that might outlast the input, and delay
        every answer): `_tell_options` asks right after it."""
        opts = await acp_config.options(app, s)
        self.told_options[s.id] = acp_config.dumped(opts)
        self.later(self._tell_options(app, s.id, ask=True))
        return opts

    async def _tell_options(self, app: App, session_id: str, *, ask: bool = False) -> None:
        """A change made by /model, /mode or set_mode, or (`ask`) the provider's list of models:
        `config_option_update` when the options differ from what the client was last told.

        The provider is asked first (its model client keeps the list); the options are then built,
        compared and remembered with no suspension in between, from the session as it is now: built
        before the request, they could be older than an answer given meanwhile (a set_config_option),
        and both remembering them and telling them would be wrong."""
        s = app.live.get(session_id)
        if s is None:
            return
        if ask and not app.config_error:  # a broken config has no model option
            await acp_config.served_info(app, s, ask=True)
        if app.live.get(session_id) is not s or self.owner.get(session_id) is not app or session_id in self._setting:
            return  # gone, or set_config_option's answer tells the client
        opts = acp_config.dumped(await acp_config.options(app, s))  # no request: no suspension
        if opts != self.told_options.get(session_id):
            self.told_options[session_id] = opts
            await self.raw.session_update(session_id, {"sessionUpdate": "config_option_update", "configOptions": opts})
        if not ask:  # a switch to another provider: its list is asked for after
            self.later(self._tell_options(app, session_id, ask=True))

    @acp_errors
    async def set_config_option(self, config_id: str, session_id: str, value: Any, **_: Any) -> SetSessionConfigOptionResponse:
        """session/set_config_option: switch the model or the mode; answers every option."""
        app = self.app_of(session_id)
        self._setting.add(session_id)
        try:
            acp_config.apply(app, session_id, config_id, value)
            return SetSessionConfigOptionResponse(config_options=await self._options(app, app.live[session_id]))
        except SessionBusy as e:
            raise RequestError(wire.SESSION_BUSY, str(e), {"sessionId": session_id}) from None
        finally:
            self._setting.discard(session_id)

    # ---- lifecycle and sessions ---------------------------------------------------------------

    async def initialize(self, protocol_version: int, client_capabilities: ClientCapabilities | None = None,
                         client_info: Any = None, **_: Any) -> InitializeResponse:
        # where the client sent capabilities it cannot read, the SDK puts its defaults as a plain dict
        caps = client_capabilities if isinstance(client_capabilities, ClientCapabilities) else None
        name = getattr(client_info, "name", None) or (client_info.get("name") if isinstance(client_info, dict) else None)
        self.client_name = name if isinstance(name, str) else ""
        self.terminals = Terminals(usable=True) if caps and caps.terminal else None
        can_read, can_write = acp_fs.declared(caps)
        self.caps = acp_turn.Caps(elicit=bool(caps and caps.elicitation and caps.elicitation.form is not None),
                                  read=can_read, write=can_write)
        self.answered_initialize = True
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True, prompt_capabilities=PromptCapabilities(image=True, embedded_context=True),
                mcp_capabilities=acp_mcp.CAPABILITIES,
                session_capabilities=SessionCapabilities(list=SessionListCapabilities(), close=SessionCloseCapabilities(),
                                                         resume=SessionResumeCapabilities(),
                                                         delete=SessionDeleteCapabilities(),
                                                         fork=SessionForkCapabilities())),
            agent_info=Implementation(name="toycoder-daemon", title="ToyCoder", version=__version__),
            auth_methods=list(acp_auth.METHODS),
        )

    async def authenticate(self, method_id: str, **_: Any) -> AuthenticateResponse:
        """The client ran the "setup" method (toycoder-daemon --setup): read the config anew."""
        if method_id != acp_auth.METHOD_ID:
            raise RequestError.invalid_params({"methodId": f"unknown auth method {method_id!r}; this agent has 'setup'"})
        await acp_auth.reopen_idle(self.apps, self.owner)
        return AuthenticateResponse()

    @acp_errors
    async def new_session(self, cwd: str, mcp_servers: Any = None, additional_directories: list[str] | None = None,
                          **_: Any) -> NewSessionResponse:
        app = self.app_for(cwd)
        if acp_auth.unusable(app) is not None:  # the setup may have run since: read the config again
            await acp_auth.reopen_idle(self.apps, self.owner, Path(cwd).resolve())
            app = self.app_for(cwd)
            if (why := acp_auth.unusable(app)) is not None:
                raise acp_auth.required(why)
        servers = acp_mcp.specs(mcp_servers)  # an unsupported one is refused before a session is made
        s = bad_dirs(lambda: app.new_session(None, additional_directories))
        self.owner[s.id] = app
        acp_sessions.opened(self.told, s)
        await acp_mcp.start(self, app, s.id, servers)
        options = await self._options(app, s)  # before anything is queued to go after the answer
        self.later(self._announce_commands(s.id))  # queued after the answer
        self.later(self._tell_opening(app, s.id))
        return NewSessionResponse(session_id=s.id, modes=SessionModeState.model_validate(acp_sessions.mode_state(s.mode)),
                                  config_options=options)

    @acp_errors
    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None,
                           additional_directories: list[str] | None = None, **_: Any) -> LoadSessionResponse:
        app = self.app_for(cwd)
        s = await app.load(session_id)  # open here from now on: it hears turns made elsewhere
        if additional_directories is not None:  # the client's list replaces the stored one
            bad_dirs(lambda: app.set_additional_directories(s.id, additional_directories))
        self.owner[s.id] = app
        title = acp_sessions.opened(self.told, s)
        await acp_mcp.start(self, app, s.id, acp_mcp.specs(mcp_servers))
        # a turn running in another daemon is not replayed: it comes live, from its start
        for update in replay(s.transcript(before_turn=app.sharing.running_elsewhere(s)), app) + title:
            await self.raw.session_update(s.id, update)
        options = await self._options(app, s)
        self.later(self._announce_commands(s.id))
        self.later(self._tell_opening(app, s.id))
        return LoadSessionResponse(modes=SessionModeState.model_validate(acp_sessions.mode_state(s.mode)),
                                   config_options=options)

    @acp_errors
    async def resume_session(self, cwd: str, session_id: str, mcp_servers: Any = None,
                             additional_directories: list[str] | None = None, **_: Any) -> ResumeSessionResponse:
        """session/load without the replay: the client already shows the history."""
        app = self.app_for(cwd)
        s = await app.load(session_id)
        if additional_directories is not None:
            bad_dirs(lambda: app.set_additional_directories(s.id, additional_directories))
        self.owner[s.id] = app
        acp_sessions.opened(self.told, s)  # the client shows the session already, its title included
        await acp_mcp.start(self, app, s.id, acp_mcp.specs(mcp_servers))
        options = await self._options(app, s)
        self.later(self._send(s.id, plan_now(s)))  # after the answer: resume replays nothing before it
        self.later(self._announce_commands(s.id))
        self.later(self._tell_opening(app, s.id))
        return ResumeSessionResponse(modes=SessionModeState.model_validate(acp_sessions.mode_state(s.mode)),
                                     config_options=options)

    @acp_errors
    async def fork_session(self, cwd: str, session_id: str, mcp_servers: Any = None, toycoder: Any = None,
                           additional_directories: list[str] | None = None, **_: Any) -> ForkSessionResponse:
        """A new session with the history of `session_id` (of `cwd`'s workspace), before turn
        `_meta.toycoder.atTurn` when given (a turn id or index); the original is unchanged. Nothing
        is replayed: a client that wants the cut history shown loads the fork."""
        app = self.app_for(cwd)
        servers = acp_mcp.specs(mcp_servers)
        at_turn = toycoder.get("atTurn") if isinstance(toycoder, dict) else None
        try:
            s = app.fork_session(session_id, at_turn)
        except ValueError as e:
            raise RequestError.invalid_params({"_meta": {"toycoder": {"atTurn": str(e)}}}) from None
        if additional_directories is not None:  # else the original's
            bad_dirs(lambda: app.set_additional_directories(s.id, additional_directories))
        self.owner[s.id] = app
        acp_sessions.opened(self.told, s)
        await acp_mcp.start(self, app, s.id, servers)
        options = await self._options(app, s)
        self.later(self._announce_commands(s.id))
        self.later(self._tell_opening(app, s.id))
        return ForkSessionResponse(session_id=s.id, modes=SessionModeState.model_validate(acp_sessions.mode_state(s.mode)),
                                   config_options=options)

    @acp_errors
    async def close_session(self, session_id: str, **_: Any) -> None:
        """The client is done with the session here (a running turn is cancelled); it stays on disk."""
        app = self.app_of(session_id)
        await app.close_session(session_id)
        del self.owner[session_id]
        self.told.pop(session_id, None)
        self.told_options.pop(session_id, None)

    @acp_errors
    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None, **_: Any) -> ListSessionsResponse:
        """Every workspace's sessions in the data dir (with `cwd`, that workspace's), newest first,
        a page at a time; no App is opened to list them."""
        where = None
        if cwd is not None:
            if not Path(cwd).is_absolute():
                raise RequestError.invalid_params({"cwd": f"not an absolute path: {cwd!r}"})
            where = Path(cwd).resolve()
        rows = await asyncio.to_thread(self.catalog.list, where)  # file I/O: off the loop
        try:
            chunk, next_cursor = page(rows, cursor)
        except BadCursor as e:
            raise RequestError.invalid_params({"cursor": str(e)}) from None
        return ListSessionsResponse(next_cursor=next_cursor, sessions=[
            SessionInfo(session_id=r.summary.id, cwd=r.cwd, title=r.summary.title or None,
                        updated_at=wire.iso_time(r.summary.updated_at),
                        additional_directories=list(r.summary.additional_directories) or None)
            for r in chunk
        ])

    # ---- turns --------------------------------------------------------------------------------

    @acp_errors
    async def prompt(self, prompt: list[Any], session_id: str, **_: Any) -> dict[str, Any]:
        app = self.app_of(session_id)
        if self._ending:  # the input ended before this prompt's task ran: its turn never starts
            return acp_turn.answer("cancelled")
        me = asyncio.current_task()
        if me:
            self._prompts.add(me)
            self._starting.add(me)
        try:
            answer = await acp_turn.run_prompt(app, session_id, prompt, self.raw, self.caps, self.terminals,
                                               begun=lambda: self._starting.discard(me))
            self.later(self._announce_commands(session_id, if_changed=True))  # new custom commands show
            return answer
        except acp_turn.EmptyPrompt as e:
            raise RequestError.invalid_params({"prompt": str(e)}) from None
        except asyncio.CancelledError:
            if not self._ending or me not in self._starting:
                raise
            return acp_turn.answer("cancelled")  # shutdown cancelled it before its turn began
        finally:
            if me:
                self._prompts.discard(me)
                self._starting.discard(me)

    async def cancel(self, session_id: str, **_: Any) -> None:
        app = self.owner.get(session_id)
        if app is None:
            return
        try:
            app.cancel(session_id)  # the running session/prompt answers stopReason "cancelled"
        except ToyCoderError as e:
            log.info("cancel %s: %s", session_id, e)

    async def shutdown(self) -> None:
        """stdin closed: end every turn, let the prompts answer ("cancelled"), close the Apps. A
        prompt still on its way to its turn (App.prompt loads the session and takes its lock first)
        is cancelled too: App.shutdown cannot see a turn not begun, and would close its files."""
        self._ending = True
        for task in self._starting:
            task.cancel()  # ToyCoderAgent.prompt answers it as cancelled
        for app in self.apps.values():
            await app.shutdown()
        if self._prompts:
            await asyncio.wait(self._prompts, timeout=2.0)



# ---- the connection -----------------------------------------------------------------------------

def handler(agent: ToyCoderAgent) -> Callable[[str, Any, bool], Any]:
    """The Connection's one method handler: the SDK's router for an Agent, which validates params
    (-32602), answers -32601 for methods ToyCoderAgent lacks, and calls the agent, with two things
    around it: raw `mcpServers` are checked before the router's models drop items they cannot read
    (acp_mcp.check_raw), and a notification with bad params, the client's mistake, is one info
    line, not the SDK's logged traceback (a request gets its error answer without one)."""
    # session/close and session/resume are routed as unstable in 0.12.1
    router: MessageRouter = build_agent_router(agent, use_unstable_protocol=True)  # type: ignore[arg-type]
    acp_sessions.route_delete(router, agent)

    async def handle(method: str, params: Any, is_notification: bool) -> Any:
        if method == AGENT_METHODS["initialize"] and not is_notification:
            # open the gate as initialize is read: what was written after it in the same breath
            # runs as a task of its own, maybe before initialize's body does
            agent.initialized = True
            try:
                return await router(method, params, False)
            except BaseException:
                agent.initialized = agent.answered_initialize
                raise
        if not agent.initialized:
            # as the LSP face, nothing is served before initialize (its capabilities decide how);
            # not LSP's -32002, which is ACP's "resource not found" (a client would take the
            # session for gone)
            if is_notification:
                log.info("notification %s before initialize ignored", method)
                return None
            raise RequestError(wire.INVALID_REQUEST, f"Invalid request: {method} before initialize "
                               "(send initialize first)")
        if not is_notification:
            if method in acp_mcp.SESSION_METHODS:
                acp_mcp.check_raw(params)
            return await router(method, params, False)
        try:
            return await router(method, params, True)
        except (ValidationError, RequestError) as e:
            log.info("notification %s ignored: %s", method, str(e).splitlines()[0])
            return None

    return handle


REHEARSED_INITIALIZE = {"protocolVersion": 1, "clientInfo": {"name": "toycoder-prepare", "version": "0"},
                        "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}}

_prepared: tuple[ToyCoderAgent, Callable[[str, Any, bool], Any]] | None = None
"""An agent and its handler made before the fork (`prepare`): taken by the process's first serve_acp."""


def prepare() -> None:
    """For the fork server (warm/server.py's PREPARE): what the face does before it can answer
    `initialize` and that no launch decides. One `initialize` goes through a throwaway agent's handler
    (the SDK's router: params validated, our answer built and dumped as the Connection dumps it), so
    that code is specialised before the fork; then the agent and handler a child serves with are made
    (~3 ms of each child's CPU before its first answer otherwise: the router inspects the agent's
    methods' signatures). It reads no environment, cwd, HOME or config (the catalog waits for its
    first use; config_path is the launch's, set by serve_acp), starts no thread and runs no loop:
    the handler's initialize awaits nothing, so its coroutine is driven by hand."""
    global _prepared
    rehearse()
    agent = ToyCoderAgent()
    _prepared = (agent, handler(agent))


def rehearse() -> None:
    """One `initialize` through a throwaway agent's handler, answered into nothing (`prepare`)."""
    coro = handler(ToyCoderAgent())(AGENT_METHODS["initialize"], REHEARSED_INITIALIZE, False)
    try:
        coro.send(None)
    except StopIteration as done:
        if isinstance(done.value, InitializeResponse):
            done.value.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_unset=True)
    else:  # it awaited something after all: not run here
        coro.close()


def _agent(config_path: str | None) -> tuple[ToyCoderAgent, Callable[[str, Any, bool], Any]]:
    """The prepared agent and handler if this process has them unused, else new ones."""
    global _prepared
    made, _prepared = _prepared, None
    if made is None:
        agent = ToyCoderAgent()
        made = (agent, handler(agent))
    made[0].config_path = config_path
    return made


async def serve_acp(out: BinaryIO | Outbox, config_path: str | None = None, *, stdin: int = 0,
                    on_end: Callable[[], None] | None = None) -> int:
    """Serve ACP on `stdin` (an fd: the daemon's 0, or a pipe when tests drive the face in-process)
    and `out` until the input ends; returns the exit code. `on_end` is called when the input ends.
    With an Outbox (the daemon's stdout) frames are written by its thread, under the backpressure
    rule (outbox.py): above its hard limit stdin is not read."""
    outbox = out if isinstance(out, Outbox) else None
    if outbox is not None:
        OUTPUT.set(outbox)  # the SDK's tasks (and so the turns) start from this task's context
    stdio = await open_stdio(out, stdin, notifications=ACP_NOTIFICATIONS, requests=ACP_REQUESTS,  # type: ignore[arg-type]  # file-like
                             gate=outbox.wait_input if outbox is not None else None)
    agent, handle = _agent(config_path)
    conn = Connection(handle, stdio.writer, stdio.reader, listening=False)
    agent.raw = SdkClient(conn)
    try:
        await conn.main_loop()
    finally:
        log.info("stdin closed: shutting down")
        if on_end is not None:
            on_end()
        await agent.shutdown()
        try:
            await asyncio.wait_for(conn.close(), 2.0)
        except asyncio.TimeoutError:
            log.warning("ACP connection did not close in time")
        await written(out)  # what is queued goes out (the client may still read) within the exit grace
        stdio.close()
    return 0
