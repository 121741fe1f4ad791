"""The App's MCP servers: the config's, shared by every session, and those an ACP client gives one
session in session/new, load or resume. Both run on the same McpManager (tools/mcp/manager.py); a client's
servers are started for that session alone, their tools are in that session's registry only, and
they stop when the session closes (session/close, delete; /new and /switch on the ACP face leave it
open, as the client still holds it) and when the daemon exits.

    hub = McpHub(config.mcp_servers, root, app.tools)
    hub.on_notice = face.show_message                       # the config's servers' failures
    s.tools.add_own_source(hub.tools_of(s.id))              # every session (runtime._bind)
    await hub.set_session_servers(s.id, {"files": ClientServer(command=...)}, on_status)
    await hub.settle(s.id, frontend.emit)                   # before a turn: all started, or failed
    await hub.close_session(s.id)                           # session/close (App.close_session)
    await hub.aclose()                                      # daemon exit: no process left behind

The MCP SDK is imported only when a server is configured or given (it costs start-up time).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toycoder_daemon.core.ports import Event, Level, McpWaiting
from toycoder_daemon.tools.registry import ToolSlot

if TYPE_CHECKING:
    from toycoder_daemon.commands.custom import McpPrompt
    from toycoder_daemon.tools.mcp.manager import McpManager, McpServerSpec
    from toycoder_daemon.tools.mcp.server import McpServer
    from toycoder_daemon.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

StatusCallback = Callable[[str, str, str], None]
SHOW_WAIT_AFTER = 0.5
"""Seconds a turn waits for starting MCP servers before the person is told (McpWaiting): a server
that is ready sooner is not worth a line."""
WORKSPACE_SOURCE = "workspace-mcp"
"""The `source` of a trusted workspace's servers' tools."""
CLIENT_SOURCE = "client-mcp"
"""The `source` of a client server's tools (`client-mcp:<server>`, as /tools shows them)."""


@dataclass
class ClientServer:
    """One server an ACP client gave (an McpServerSpec): a stdio `command` or an HTTP `url`. Its
    tools ask before each call (sensitive) unless the person allows them always, as config ones do."""

    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    transport: str = "http"
    """For a `url`: "http" or "sse"."""
    cwd: str | None = None
    permission: Level = "sensitive"
    enabled: bool = True
    start_timeout: float = 30.0
    call_timeout: float = 120.0


@dataclass
class _SessionServers:
    servers: dict[str, ClientServer]
    on_status: StatusCallback
    manager: McpManager | None = None

    def status(self, server: str, status: str, message: str) -> None:
        if status == "ready":
            log.info("MCP server %s (from the client) ready: %s", server, message)
        else:
            log.warning("MCP server %s (from the client) %s: %s", server, status, message)
        self.on_status(server, status, message)


class McpHub:
    def __init__(self, servers: Mapping[str, McpServerSpec], workspace_root: Path, tools: ToolRegistry):
        self.root = Path(workspace_root)
        self.on_notice: Callable[[str, str], None] = lambda level, message: None
        """Set by the wire face (App.on_notice): show a message to the person (level: info|warning|error)."""
        self.shared: McpManager | None = None
        if servers:
            from toycoder_daemon.tools.mcp.manager import McpManager

            self.shared = McpManager(servers, self.root, on_status=self._shared_status)
            tools.add_source(self.shared.tools)
        self.workspace: McpManager | None = None
        """A trusted workspace's servers (`.toycoder/settings.yaml`, app/trust.py), for every session."""
        self._workspace_specs: dict[str, McpServerSpec] = {}
        self._workspace_tools = ToolSlot()
        tools.add_source(self._workspace_tools)
        self._sessions: dict[str, _SessionServers] = {}
        self._slots: dict[str, ToolSlot] = {}
        """Each session's client servers' tools, kept for its id (a registry made before the servers
        were given, or after they changed, sees the current ones)."""
        self._lock = asyncio.Lock()  # one change of a session's servers at a time (two loads race)
        self._closing: set[asyncio.Task[None]] = set()
        self.show_wait_after = SHOW_WAIT_AFTER

    def _shared_status(self, server: str, status: str, message: str) -> None:
        if status == "ready":
            log.info("MCP server %s ready: %s", server, message)
        else:
            log.warning("MCP server %s %s: %s", server, status, message)
            self.on_notice("warning", f"ToyCoder: MCP server '{server}' {status}: {message}")

    async def start(self) -> None:
        """The config's servers connect in the background (after initialize)."""
        if self.shared:
            await self.shared.start()

    async def set_workspace_servers(self, servers: Mapping[str, McpServerSpec]) -> None:
        """The trusted workspace's servers are now `servers` ({} when it is not, or no longer,
        trusted): the same ones keep running, others are stopped and these started."""
        async with self._lock:
            if dict(servers) == self._workspace_specs:
                return
            self._workspace_specs = dict(servers)
            old, self.workspace = self.workspace, None
            self._workspace_tools.source = None
            if old is not None:
                await old.aclose()
            if not servers:
                return
            from toycoder_daemon.tools.mcp.manager import McpManager

            self.workspace = McpManager(servers, self.root, on_status=self._shared_status, source=WORKSPACE_SOURCE,
                                        taken=self.shared.parts if self.shared else ())
            self._workspace_tools.source = self.workspace.tools
            await self.workspace.start()

    # ---- one session's servers ------------------------------------------------------------------

    def tools_of(self, session_id: str) -> ToolSlot:
        """The tool source of one session: its client servers' tools while they are ready."""
        return self._slots.setdefault(session_id, ToolSlot())

    async def set_session_servers(self, session_id: str, servers: Mapping[str, ClientServer],
                                  on_status: StatusCallback) -> None:
        """The session's client servers are now `servers`: the same ones keep running (loading a
        session twice starts nothing twice), others are stopped and these started in the background.
        `on_status(server, status, message)` hears "ready", "failed" and "stopped"."""
        async with self._lock:
            current = self._sessions.get(session_id)
            if current is not None and current.servers == dict(servers):
                current.on_status = on_status
                return
            await self._stop(session_id)
            if not servers:
                return
            from toycoder_daemon.tools.mcp.manager import McpManager

            entry = self._sessions[session_id] = _SessionServers(dict(servers), on_status)
            entry.manager = McpManager(servers, self.root, on_status=entry.status, source=CLIENT_SOURCE,
                                       taken=self.shared.parts if self.shared else ())
            self.tools_of(session_id).source = entry.manager.tools
            await entry.manager.start()

    async def settle(self, session_id: str, emit: Callable[[Event], None] | None = None) -> None:
        """Before a turn: wait until the config's servers and the session's are ready or have failed
        (each bounded by its start_timeout; a failure is reported first), so the model is offered
        their tools from the first turn. The config's start now if App.start has not started them
        yet (a new process's first turn comes before it). Nothing to wait for: nothing is awaited
        and nothing emitted. A wait longer than SHOW_WAIT_AFTER is shown through `emit`: an
        McpWaiting "waiting" naming the servers, and "done" (with those that failed) at its end."""
        entry = self._sessions.get(session_id)
        managers = [m for m in (self.shared, self.workspace, entry.manager if entry else None) if m is not None]
        if self.shared:
            await self.shared.start()  # once: App.start's later call does nothing
        names = [(m, name) for m in managers for name in m.starting()]
        if not names:
            return
        waits = [asyncio.ensure_future(m.wait_ready(m.start_limit)) for m in managers]
        try:
            _, pending = await asyncio.wait(waits, timeout=self.show_wait_after if emit else None)
            if not pending or emit is None:
                return
            servers = tuple(name for _, name in names)
            emit(McpWaiting("waiting", servers))
            try:
                await asyncio.wait(waits)
            finally:  # also when the turn is cancelled meanwhile: the client's line ends either way
                states = {(id(m), row["name"]): row["status"] for m in managers for row in m.status()}
                failed = tuple(n for m, n in names if states.get((id(m), n)) in ("failed", "stopped"))
                emit(McpWaiting("done", servers, failed))
        finally:
            for w in waits:
                w.cancel()

    async def close_session(self, session_id: str) -> None:
        async with self._lock:
            await self._stop(session_id)

    def close_later(self, session_id: str) -> None:
        """close_session for synchronous callers (delete): the stop runs in a task aclose waits for."""
        if session_id in self._sessions:
            task = asyncio.ensure_future(self.close_session(session_id))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def _stop(self, session_id: str) -> None:
        entry = self._sessions.pop(session_id, None)
        if session_id in self._slots:
            self._slots[session_id].source = None
        if entry is not None and entry.manager is not None:
            await entry.manager.aclose()

    # ---- all of them ------------------------------------------------------------------------------

    def status(self, session_id: str | None = None) -> list[dict[str, Any]] | None:
        """The config's servers' rows, then the session's client servers' (`origin: "client"`); None
        when there are none."""
        rows = self.shared.status() if self.shared else []
        if self.workspace is not None:
            rows += [{**row, "origin": "workspace"} for row in self.workspace.status()]
        entry = self._sessions.get(session_id) if session_id else None
        if entry is not None and entry.manager is not None:
            rows += [{**row, "origin": "client"} for row in entry.manager.status()]
        return rows or None

    def _managers(self, session_id: str | None) -> list[McpManager]:
        """The session's client servers' manager first (they name what the session was given), then the config's."""
        entry = self._sessions.get(session_id) if session_id else None
        return [m for m in (entry.manager if entry else None, self.shared) if m is not None]

    def servers(self, session_id: str | None) -> frozenset[str]:
        """The names of the servers a session has (configured or given), whatever their state."""
        return frozenset(n for m in self._managers(session_id) for n in m.names())

    def ready_servers(self, session_id: str | None) -> list[McpServer]:
        seen: set[str] = set()
        out = []
        for m in self._managers(session_id):
            for s in m.ready():
                if s.name not in seen:
                    seen.add(s.name)
                    out.append(s)
        return out

    def prompts(self, session_id: str | None) -> list[McpPrompt]:
        """The prompts of the session's ready servers, as `/mcp:<server>:<prompt>` commands."""
        from toycoder_daemon.commands.custom import McpPrompt

        return [McpPrompt(s.name, p.name, " ".join((p.description or p.title or "").split()),
                          tuple((a.name, bool(a.required)) for a in p.arguments or ()))
                for s in self.ready_servers(session_id) for p in s.prompts]

    async def get_prompt(self, session_id: str, server: str, name: str, arguments: dict[str, str]) -> str:
        """prompts/get on the session's server `server`; ValueError with the reason."""
        for s in self.ready_servers(session_id):
            if s.name == server:
                return await s.get_prompt(name, arguments)
        raise ValueError(f"MCP server {server!r} is not running")

    async def read_resource(self, session_id: str, server: str, uri: str) -> str:
        """resources/read on the session's server `server`; ValueError with the reason."""
        await self.settle(session_id)
        for s in self.ready_servers(session_id):
            if s.name == server:
                return await s.read_resource(uri)
        raise ValueError(f"MCP server {server!r} is not running")

    def pids(self, session_id: str) -> dict[str, int]:
        """The stdio processes of a session's client servers (tests check they are gone after close)."""
        entry = self._sessions.get(session_id)
        return entry.manager.pids() if entry and entry.manager else {}

    async def aclose(self) -> None:
        """Every server, the config's and every session's, stopped together."""
        managers = [e.manager for e in self._sessions.values() if e.manager is not None]
        self._sessions.clear()
        for slot in self._slots.values():
            slot.source = None
        if self.shared:
            managers.append(self.shared)
        if self.workspace is not None:
            managers.append(self.workspace)
            self.workspace, self._workspace_tools.source = None, None
        await asyncio.gather(*(m.aclose() for m in managers), *self._closing)
