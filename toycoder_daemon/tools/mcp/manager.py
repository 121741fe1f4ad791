"""MCP (Model Context Protocol) tool servers: their tools become ordinary registry tools.

    manager = McpManager(config.mcp_servers, workspace_root, on_status=...)
    registry.add_source(manager.tools)
    await manager.start()          # returns at once; servers connect in the background
    ...
    await manager.aclose()         # at daemon exit: every server is shut down, no process left behind

`servers` maps names to anything shaped like `McpServerSpec` (spec.py): the config model
fits it, so tools/ does not import config; so does app.session_mcp.ClientServer (the servers an ACP
client gives one session get a manager of their own, `source="client-mcp"`). Each server is owned by one long-lived asyncio task
(server.McpServer); a stdio server's process is spawned by us (stdio.StdioChild), so its
PID and process group are ours to stop and reap.

- stdio servers run `command args` in `cwd` (default: the workspace root) in their own session
  (so their own process group), with `secrets.child_env()` plus the server's configured `env`
  (configured entries win, even secret-looking ones: that is how a server is given its token),
  and stdin/stdout as the protocol channel. Their stderr goes to a pipe read by a thread: lines
  are logged at debug level and the last ones are quoted when the server fails. It never reaches
  the daemon's stdout.
- Remote servers (`url`) use streamable HTTP with the configured `headers` on every request.
- Values of configured headers and env entries with secret-looking names (KEY, TOKEN, ...,
  Authorization, Cookie) are registered with `secrets`, so logs redact them.
- Tools are named `mcp__<server>__<tool>`, sanitised to `^[a-zA-Z0-9_-]{1,64}$`; `level` is the
  server's configured permission. A tool's result becomes the observation text; `isError`
  becomes a ToolError (a failed observation).
- A server that cannot start (bad command, crash, handshake error, `start_timeout`) is reported
  through `on_status(name, "failed", reason)`; one that dies later through "stopped". Its tools
  disappear from `tools()`, and a call in flight fails with a ToolError instead of hanging.
- A server's `call_timeout` (seconds, default 120) bounds one tools/call. An observation longer
  than the tools config's `output_max_bytes` is shortened in the middle, like run_command's output.
- aclose: stdin closed, then SIGTERM, then SIGKILL to each stdio server's process group (2 s
  apart), then whatever is left in the group is killed; a task that still hangs is cancelled.

Not supported (yet): MCP resources and resource templates (listing, reading, subscribing),
prompts, completion, sampling, elicitation, roots, logging notifications (`logging/setLevel`),
progress notifications, the tool list changing after connect (`notifications/tools/list_changed`
is ignored; reconnect by restarting the daemon), automatic reconnect/restart of a server that
stopped (for HTTP, one failed connection ends the SDK's transport, so the server is "stopped"
until the daemon restarts), OAuth for remote servers (use a static `Authorization` header in
`headers`), the legacy HTTP+SSE transport, output schema use beyond the SDK's own validation, tool annotations
(`readOnlyHint` etc. do not change the permission level), and images/audio reaching the model
(they are described in text). The connection uses the `initialize` handshake (protocol
2025-11-25 and earlier), which every server supports; the SDK's 2026 `server/discover`
negotiation is not attempted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from toycoder_daemon.tools.base import Tool
from toycoder_daemon.tools.mcp.naming import object_schema, sanitize, short_hash, tool_name
from toycoder_daemon.tools.mcp.results import result_text
from toycoder_daemon.tools.mcp.server import McpServer
from toycoder_daemon.tools.mcp.spec import McpServerSpec, register_secrets

__all__ = ["McpManager", "McpServerSpec", "StatusCallback", "object_schema", "result_text", "tool_name"]

log = logging.getLogger(__name__)

STOP_GRACE = 10.0
"""Seconds aclose waits for a server's task to shut down by itself before cancelling it (the
stdio shutdown is bounded: stdin closed, 2 s, SIGTERM to the group, 2 s, SIGKILL)."""

StatusCallback = Callable[[str, str, str], None]


class McpManager:
    """The configured MCP servers: started in the background, their tools offered while ready."""

    def __init__(self, servers: Mapping[str, McpServerSpec], workspace_root: Path,
                 on_status: StatusCallback | None = None, *, source: str = "mcp", taken: Iterable[str] = ()):
        """`source` labels the tools (`<source>:<server>`); `taken`: name parts another manager uses, so
        a session's servers never shadow the config's (a clash gets a hash suffix, as between names)."""
        self.workspace_root = Path(workspace_root)
        self._on_status = on_status
        self._servers: dict[str, McpServer] = {}
        used: set[str] = set(taken)
        for name, spec in servers.items():
            register_secrets(spec)
            part = sanitize(name)
            if part in used:  # two server names that sanitise alike stay apart
                part = f"{part}_{short_hash(name)}"
            used.add(part)
            self._servers[name] = McpServer(name, part, spec, self.workspace_root, self._notify, source=source)
        self._started = False

    @property
    def parts(self) -> set[str]:
        """The servers' name parts in tool names (`mcp__<part>__<tool>`)."""
        return {s.name_part for s in self._servers.values()}

    def _notify(self, name: str, status: str, message: str) -> None:
        log.debug("MCP server %s %s: %s", name, status, message)  # the app logs on_status itself
        if self._on_status is None:
            return
        try:
            self._on_status(name, status, message)
        except Exception:
            log.exception("on_status callback failed for MCP server %s", name)

    async def start(self) -> None:
        """Start every enabled server in its own background task; returns at once."""
        if self._started:
            return
        self._started = True
        for s in self._servers.values():
            if s.spec.enabled:
                s.launch()

    @property
    def start_limit(self) -> float:
        """Seconds by which every enabled server has settled: each fails at its own start_timeout
        (reported then; its process is stopped afterwards, off the waiter's path) or, for another
        failure, a little later (its report waits for the stderr tail), so this never outlasts the slowest."""
        return max((s.spec.start_timeout for s in self._servers.values() if s.spec.enabled), default=0.0) + 5.0

    def starting(self) -> list[str]:
        """The enabled servers not yet ready, failed or stopped (what wait_ready would wait for)."""
        return [name for name, s in self._servers.items() if s.spec.enabled and s.state == "starting"]

    async def wait_ready(self, timeout: float) -> bool:
        """Wait until every enabled server is ready, failed or stopped (at most `timeout` s).
        True if they all settled in time; never raises on timeout."""
        waits = [asyncio.ensure_future(s.wait_settled()) for s in self._servers.values() if s.task is not None]
        if not waits:
            return True
        try:  # tasks, not a gather: one cancelled with its waiter leaves no exception unretrieved
            _, pending = await asyncio.wait(waits, timeout=timeout)
            return not pending
        finally:
            for w in waits:
                w.cancel()

    def tools(self) -> list[Tool]:
        """The tools of the servers that are ready now."""
        out: list[Tool] = []
        for s in self._servers.values():
            if s.state == "ready":
                out.extend(s.tools)
        return out

    def status(self) -> list[dict[str, Any]]:
        return [s.status() for s in self._servers.values()]

    def names(self) -> list[str]:
        return list(self._servers)

    def server(self, name: str) -> McpServer | None:
        return self._servers.get(name)

    def ready(self) -> list[McpServer]:
        """The servers that are ready now (their resources and prompts)."""
        return [s for s in self._servers.values() if s.state == "ready"]

    def pids(self) -> dict[str, int]:
        """The process group id of each stdio server still running or not yet reaped (its launcher's
        pid: stdio.py)."""
        return {name: s.child.pid for name, s in self._servers.items() if s.child is not None and s.child.pid}

    async def aclose(self) -> None:
        """Shut every server down; a task that does not finish within STOP_GRACE is cancelled and
        its process group killed."""
        running = [s for s in self._servers.values() if s.task is not None and not s.task.done()]
        for s in running:
            s.request_stop()
        tasks = [s.task for s in running if s.task is not None]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=STOP_GRACE)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending, timeout=3.0)
            for s in running:
                if s.task in pending:
                    s.kill()
        for s in self._servers.values():
            if s.state in ("starting", "ready"):
                s.state = "stopped"
