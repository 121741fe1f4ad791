"""The Agent Client Protocol face (`toycoder-daemon --acp`): the same App, for ACP clients (Zed,
CodeCompanion.nvim, avante.nvim, agent-shell...). Newline-delimited JSON-RPC 2.0 on stdio, protocol
version 1, through the `agent-client-protocol` SDK's AgentSideConnection.

The SDK is given our own streams: stdin is read on a thread (any kind of stdin works), and frames
are written only to the protocol stream __main__ kept (a private dup of the original fd 1).
One App per distinct `cwd` of session/new or session/load; a session belongs to the App that
created or loaded it. See docs/protocol.md, "The ACP face", for the mapping.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from acp import (
    PROTOCOL_VERSION,
    RequestError,
)
from acp.core import AgentSideConnection
from acp.meta import AGENT_METHODS
from acp.schema import (
    AgentCapabilities,
    ClientCapabilities,
    Implementation,
    InitializeRequest,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptCapabilities,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionDeleteCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionModeState,
    SessionResumeCapabilities,
)
from pydantic import ValidationError

from . import __version__, acp_client, acp_fs, acp_mcp, acp_sessions, acp_turn
from . import protocol as wire
from .acp_content import commands_update, plan_now, replay
from .acp_early_link import Replies
from .acp_fast import StdinPump
from .acp_terminal import Terminals
from .app import App
from .background import Background
from .coalesce import OUTPUT
from .errors import ToyCoderError
from .ndjson import FrameTransport, LineTransport
from .outbox import Outbox, written

log = logging.getLogger(__name__)

RESOURCE_NOT_FOUND = acp_sessions.RESOURCE_NOT_FOUND
ACP_NOTIFICATIONS = frozenset(m for m in AGENT_METHODS.values()
                              if m == "session/cancel" or m.startswith("document/did"))
"""Client -> agent methods that take no id (a request to one of them is refused with an answer)."""


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
    """acp_client.RawClient over the SDK connection's JSON-RPC layer (`conn._conn`, pinned 0.12.1):
    the dicts go out as they are, with no model built or validated per update."""

    def __init__(self, conn: AgentSideConnection):
        self._rpc = conn._conn

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self._rpc.send_notification(method, params)

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        try:
            return await self._rpc.send_request(method, params)
        except RequestError as e:
            raise acp_client.ClientError(e.code, str(e), e.data) from None

    def ids_after(self, used: int) -> None:
        """Request ids below `used` were acp_early's (the client's answers to them go there)."""
        self._rpc._next_request_id = max(self._rpc._next_request_id, used)

    async def session_update(self, session_id: str, update: dict[str, Any]) -> None:
        await self.notify(acp_client.SESSION_UPDATE, {"sessionId": session_id, "update": update})


class ToyCoderAgent:
    """The acp.Agent implementation: one small method per ACP method."""

    def __init__(self, config_path: str | None = None):
        self.config_path = config_path
        self.conn: Any = None
        self.raw: SdkClient = None  # type: ignore[assignment]  # set with conn
        self.client_capabilities: ClientCapabilities | None = None
        self.caps = acp_turn.Caps()
        self.terminals: Terminals | None = None  # set when the client declares terminals (acp_terminal)
        self.apps: dict[Path, App] = {}
        self.owner: dict[str, App] = {}
        self.told: acp_sessions.Told = {}
        """What the client was last told of each open session's title and mode (acp_sessions.hook)."""
        self._prompts: set[asyncio.Task[Any]] = set()
        self._starting: set[asyncio.Task[Any]] = set()
        """This path's prompts on their way to their turn (App.prompt loads the session, takes its lock)."""
        self._ending = False
        """The input ended (shutdown): no turn starts from now on."""
        self._later = Background().run  # work that goes after the current answer

    set_session_mode = acp_sessions.set_session_mode  # session/set_mode
    delete_session = acp_sessions.delete_session  # session/delete (routed by acp_sessions.route_delete)

    def on_connect(self, conn: Any) -> None:
        self.conn = conn
        self.raw = SdkClient(conn)

    def app_for(self, cwd: str) -> App:
        p = Path(cwd)
        if not p.is_absolute() or not p.is_dir():
            raise RequestError.invalid_params({"cwd": f"not an absolute path to a directory: {cwd!r}"})
        key = p.resolve()
        app = self.apps.get(key)
        if app is None:
            app = App.open(key, self.config_path)
            self.adopt({key: app}, {})
        return app

    def adopt(self, apps: dict[Path, App], sessions: dict[str, App], *, started: bool = False,
              turns: list[asyncio.Task[Any]] | None = None) -> None:
        """Wire Apps (and sessions) opened here, or by acp_early.py before the SDK was in (`started`:
        it started them and announced the sessions' commands; `turns`: its prompts still running)."""
        self._prompts.update(turns or [])
        for key, app in apps.items():
            self.apps[key] = app
            app.on_notice = lambda level, message: log.warning("%s", message)  # ACP has no message to show
            acp_sessions.hook(app, self.owner, lambda sid, u: self.raw.session_update(sid, u), self._later, replay,
                              self.told)
            if not started:
                self._later(app.start())
            log.info("workspace %s, config %s", app.workspace.root, app.config_path or "(built-in defaults)")
        self.owner.update(sessions)
        if started:  # what acp_early told the client is carried over (EarlyAcp.adopted_by): news since still goes out
            return
        for session_id, app in sessions.items():
            acp_sessions.opened(self.told, app.peek(session_id))
            self._later(self._announce_commands(session_id))

    def app_of(self, session_id: str) -> App:
        app = self.owner.get(session_id)
        if app is None:
            raise RequestError(RESOURCE_NOT_FOUND, f"session not found: {session_id} (not open on this connection: "
                               "use session/new or session/load first)", {"sessionId": session_id})
        return app

    async def _send(self, session_id: str, updates: list[dict[str, Any]]) -> None:
        for update in updates:
            await self.raw.session_update(session_id, update)

    async def _announce_commands(self, session_id: str) -> None:
        await self.raw.session_update(session_id, commands_update())

    # ---- lifecycle and sessions ---------------------------------------------------------------

    async def initialize(self, protocol_version: int, client_capabilities: ClientCapabilities | None = None,
                         client_info: Any = None, **_: Any) -> InitializeResponse:
        self.client_capabilities = client_capabilities
        self.terminals = Terminals(usable=True) if client_capabilities and client_capabilities.terminal else None
        caps = client_capabilities
        can_read, can_write = acp_fs.declared(caps)
        self.caps = acp_turn.Caps(elicit=bool(caps and caps.elicitation and caps.elicitation.form is not None),
                                  read=can_read, write=can_write)
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True, prompt_capabilities=PromptCapabilities(embedded_context=True),
                mcp_capabilities=acp_mcp.CAPABILITIES,
                session_capabilities=SessionCapabilities(list=SessionListCapabilities(), close=SessionCloseCapabilities(),
                                                         resume=SessionResumeCapabilities(),
                                                         delete=SessionDeleteCapabilities())),
            agent_info=Implementation(name="toycoder-daemon", title="ToyCoder", version=__version__),
        )

    async def took_initialize(self, params: dict[str, Any]) -> None:
        """The first `initialize` was answered before the SDK was imported (acp_fast.py): record it."""
        try:
            req = InitializeRequest.model_validate(params)
        except ValidationError as e:  # the fast path checked the shape; the details are the SDK's
            log.info("answered initialize had odd params: %s", str(e).splitlines()[0])
            return
        await self.initialize(req.protocol_version, req.client_capabilities, req.client_info)

    @acp_errors
    async def new_session(self, cwd: str, mcp_servers: Any = None, **_: Any) -> NewSessionResponse:
        app = self.app_for(cwd)
        servers = acp_mcp.specs(mcp_servers)  # an unsupported one is refused before a session is made
        s = app.new_session()
        self.owner[s.id] = app
        acp_sessions.opened(self.told, s)
        await acp_mcp.start(self, app, s.id, servers)
        self._later(self._announce_commands(s.id))  # queued after the answer
        return NewSessionResponse(session_id=s.id, modes=SessionModeState.model_validate(acp_sessions.mode_state(s.mode)))

    @acp_errors
    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None, **_: Any) -> LoadSessionResponse:
        app = self.app_for(cwd)
        s = await app.load(session_id)  # open here from now on: it hears turns made elsewhere
        self.owner[s.id] = app
        title = acp_sessions.opened(self.told, s)
        await acp_mcp.start(self, app, s.id, acp_mcp.specs(mcp_servers))
        for update in replay(s.transcript(), app) + title:
            await self.raw.session_update(s.id, update)
        self._later(self._announce_commands(s.id))
        return LoadSessionResponse(modes=SessionModeState.model_validate(acp_sessions.mode_state(s.mode)))

    @acp_errors
    async def resume_session(self, cwd: str, session_id: str, mcp_servers: Any = None, **_: Any) -> ResumeSessionResponse:
        """session/load without the replay: the client already shows the history."""
        app = self.app_for(cwd)
        s = await app.load(session_id)
        self.owner[s.id] = app
        acp_sessions.opened(self.told, s)  # the client shows the session already, its title included
        await acp_mcp.start(self, app, s.id, acp_mcp.specs(mcp_servers))
        self._later(self._send(s.id, plan_now(s)))  # after the answer: resume replays nothing before it
        self._later(self._announce_commands(s.id))
        return ResumeSessionResponse(modes=SessionModeState.model_validate(acp_sessions.mode_state(s.mode)))

    @acp_errors
    async def close_session(self, session_id: str, **_: Any) -> None:
        """The client is done with the session here (a running turn is cancelled); it stays on disk."""
        app = self.app_of(session_id)
        await app.close_session(session_id)
        del self.owner[session_id]
        self.told.pop(session_id, None)

    @acp_errors
    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None, **_: Any) -> ListSessionsResponse:
        apps = [self.app_for(cwd)] if cwd else list(self.apps.values())
        listed = [(app, await asyncio.to_thread(app.list_sessions)) for app in apps]  # file I/O: off the loop
        return ListSessionsResponse(sessions=[
            SessionInfo(session_id=r.id, cwd=str(app.workspace.root), title=r.title or None,
                        updated_at=wire.iso_time(r.updated_at))
            for app, rows in listed for r in rows
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
            return await acp_turn.run_prompt(app, session_id, prompt, self.raw, self.caps, self.terminals,
                                             begun=lambda: self._starting.discard(me))
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


# ---- stdio ------------------------------------------------------------------------------------

def quiet_client_mistakes(conn: AgentSideConnection) -> None:
    """A notification with bad params is the client's mistake: one info line, not the SDK's logged
    traceback (requests already get their -32602 answer without one)."""
    inner = conn._conn._handler

    async def handler(method: str, params: Any, is_notification: bool) -> Any:
        try:
            return await inner(method, params, is_notification)
        except (ValidationError, RequestError) as e:
            if not is_notification:
                raise
            log.info("notification %s ignored: %s", method, str(e).splitlines()[0])
            return None

    conn._conn._handler = handler


async def serve_acp(out: BinaryIO | Outbox, config_path: str | None = None, *,
                    reader: asyncio.StreamReader | StdinPump | Replies | None = None, on_end: Callable[[], None] | None = None,
                    answered: dict[str, Any] | None = None, prepare: Callable[[ToyCoderAgent], Any] = lambda agent: None) -> int:
    """Serve ACP on stdin (or `reader`: __main__'s pump, or a stream when tests drive the face
    in-process) and `out` until the input ends; returns the exit code. `answered` holds the params
    of an `initialize` already answered (acp_fast.py). `on_end` is called when the input ends;
    `prepare` gets the agent first.
    With an Outbox (the daemon's stdout) frames are written by its thread, under the backpressure
    rule (outbox.py)."""
    if reader is None:
        reader = StdinPump()
    read = functools.partial(reader.read, 1 << 16) if isinstance(reader, asyncio.StreamReader) else reader.read
    outbox = out if isinstance(out, Outbox) else None
    if outbox is not None:
        OUTPUT.set(outbox)  # the SDK's tasks (and so the turns) start from this task's context
        if isinstance(reader, StdinPump):
            reader.gate = outbox.wait_input
    transport = LineTransport(read, FrameTransport(out).write,  # type: ignore[arg-type]  # Outbox is file-like
                              notifications=ACP_NOTIFICATIONS)
    agent = ToyCoderAgent(config_path)
    if answered is not None:
        await agent.took_initialize(answered)
    # ToyCoderAgent has the methods we support; the SDK answers method-not-found for the others
    conn = AgentSideConnection(agent, transport, listening=False,  # type: ignore[arg-type]
                               use_unstable_protocol=True)  # session/close and session/resume are routed as unstable
    acp_sessions.route_delete(conn, agent)
    quiet_client_mistakes(conn)
    acp_mcp.guard(conn)  # mcpServers the SDK would drop (unknown transports) are refused, not ignored
    prepare(agent)  # acp_early.py: what it opened before the SDK was in
    try:
        await conn.listen()
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
    return 0
