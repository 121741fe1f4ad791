"""MCP (Model Context Protocol) tool servers: their tools become ordinary registry tools.

    manager = McpManager(config.mcp_servers, workspace_root, on_status=...)
    registry.add_source(manager.tools)
    await manager.start()          # returns at once; servers connect in the background
    ...
    await manager.aclose()         # at daemon exit: every server is shut down, no process left behind

Each configured server is owned by one long-lived asyncio task (`_Server._run`). That task enters
the SDK's async context managers (the stdio or streamable-HTTP transport, then `ClientSession`),
does the `initialize` handshake, lists the tools, then waits for a stop request or for the
connection to end, and exits its contexts itself. anyio cancel scopes and task groups must be
entered and exited by the same task, so no other task ever enters or exits them; other tasks
(tool calls from turns) only send requests through the session, which the SDK allows.

- stdio servers run `command args` in `cwd` (default: the workspace root) in their own process
  group, with `secrets.child_env()` plus the server's configured `env` (configured entries win,
  even secret-looking ones: that is how a server is given its token), and stdin/stdout as the
  protocol channel. Their stderr goes to a pipe read by a thread: lines are logged at debug level
  and the last ones are quoted when the server fails. It never reaches the daemon's stdout.
- Remote servers (`url`) use streamable HTTP with the configured `headers` on every request.
- Values of configured headers and env entries with secret-looking names (KEY, TOKEN, ...,
  Authorization, Cookie) are registered with `secrets`, so logs redact them.
- Tools are named `mcp__<server>__<tool>`, sanitised to `^[a-zA-Z0-9_-]{1,64}$`; `level` is the
  server's configured permission. A tool's result becomes the observation text; `isError`
  becomes a ToolError (a failed observation).
- A server that cannot start (bad command, crash, handshake error, `start_timeout`) is reported
  through `on_status(name, "failed", reason)`; one that dies later through "stopped". Its tools
  disappear from `tools()`, and a call in flight fails with a ToolError instead of hanging.
- A server's `call_timeout` (seconds, default 120) bounds one tools/call. An observation longer than the tools config's
  `output_max_bytes` is shortened in the middle, like run_command's output.

Not supported (yet): MCP resources and resource templates (listing, reading, subscribing),
prompts, completion, sampling, elicitation, roots, logging notifications (`logging/setLevel`),
progress notifications, the tool list changing after connect (`notifications/tools/list_changed`
is ignored; reconnect by restarting the daemon), automatic reconnect/restart of a server that
stopped (for HTTP, one failed connection ends the SDK's transport, so the server is "stopped"
until the daemon restarts), OAuth for remote servers (use a static `Authorization` header in `headers`), the legacy
HTTP+SSE transport, output schema use beyond the SDK's own validation, tool annotations
(`readOnlyHint` etc. do not change the permission level), and images/audio reaching the model
(they are described in text). The connection uses the `initialize` handshake (protocol
2025-11-25 and earlier), which every server supports; the SDK's 2026 `server/discover`
negotiation is not attempted.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import os
import re
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from .. import __version__, secrets
from ..config import McpServerConfig
from .base import Tool, ToolContext, ToolError
from .mcp_naming import _hash, object_schema, sanitize, tool_name
from .mcp_results import _cap, result_text

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

log = logging.getLogger(__name__)

DEFAULT_CALL_TIMEOUT = 120.0
"""Seconds one tools/call may take (a server's `call_timeout` overrides it)."""
STOP_GRACE = 10.0
"""Seconds aclose waits for a server's task to shut down by itself before cancelling it.
(The SDK's stdio shutdown is bounded: stdin closed, 2 s, SIGTERM to the group, 2 s, SIGKILL.)"""
MAX_TOOL_PAGES = 50
"""Cap on tools/list pages, so a server paginating forever cannot hang the start."""
STDERR_TAIL_LINES = 20

StatusCallback = Callable[[str, str, str], None]


# --- errors ------------------------------------------------------------------------------------

def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in _leaves(e)]
    return [exc]


def _describe_exc(exc: BaseException) -> str:
    msgs: list[str] = []
    for e in _leaves(exc):
        if isinstance(e, MCPError) and e.error.code == mt.CONNECTION_CLOSED:
            m = "the server closed the connection"
        elif isinstance(e, MCPError):
            m = f"{e.error.message} (MCP error {e.error.code})"
        elif isinstance(e, OSError) and e.strerror:
            m = f"{e.strerror}: {e.filename}" if e.filename else e.strerror
        else:
            m = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        if m not in msgs:
            msgs.append(m)
    return "; ".join(msgs) or type(exc).__name__


# --- the transport's read stream, watched for its end ---------------------------------------------

class _WatchedReadStream:
    """Wraps a transport's read stream: calls `on_end` once when it ends (the server process
    exited, the connection closed). Everything else is delegated (e.g. `last_context`)."""

    def __init__(self, inner: Any, on_end: Callable[[], None]):
        self._inner = inner
        self._on_end = on_end
        self._ended = False

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            self._on_end()

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._end()
            raise

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedReadStream:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


# --- one server ------------------------------------------------------------------------------------

class _Server:
    def __init__(self, name: str, name_part: str, config: McpServerConfig, workspace_root: Path,
                 notify: Callable[[str, str, str], None], call_timeout: float):
        self.name = name
        self.name_part = name_part
        self.config = config
        self.workspace_root = workspace_root
        self._notify = notify
        # The server's own `call_timeout` when the config sets it, else the manager's default.
        self.call_timeout = float(config.call_timeout) if "call_timeout" in config.model_fields_set else call_timeout
        self.transport = "http" if config.url and not config.command else "stdio"
        self.state = "starting" if config.enabled else "disabled"
        self.error: str | None = None
        self.tools: list[Tool] = []
        self.session: ClientSession | None = None
        self.task: asyncio.Task[None] | None = None
        self.pid: int | None = None
        self._process: Any = None
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._stderr_thread: threading.Thread | None = None
        self._stderr_lock = threading.Lock()
        self._scope: anyio.CancelScope | None = None
        self._wake: asyncio.Event | None = None
        self._settled: asyncio.Event | None = None
        self._stopping = False
        self._lost = False

    # -- lifecycle (all of it runs in self.task) --

    def launch(self) -> None:
        self._wake = asyncio.Event()
        self._settled = asyncio.Event()
        self.task = asyncio.create_task(self._run(), name=f"mcp-server-{self.name}")

    def request_stop(self) -> None:
        self._stopping = True
        if self._wake is not None:
            self._wake.set()
        if self.state == "starting" and self._scope is not None:
            self._scope.cancel()  # still in the handshake: abandon it (the contexts unwind in their task)

    def _connection_ended(self) -> None:
        """The transport's read stream ended (runs in the SDK's reader task)."""
        self._lost = True
        if self.state == "ready" and not self._stopping:
            # At once, before the SDK fails the calls in flight: no new call can start.
            self.state = "stopped"
            self.error = "the connection closed"  # the details come once it is torn down
            self.session = None
            self.tools = []
        if self._wake is not None:
            self._wake.set()

    def _settle(self) -> None:
        if self._settled is not None:
            self._settled.set()

    async def wait_settled(self) -> None:
        if self._settled is not None:
            await self._settled.wait()

    async def _run(self) -> None:
        ready = False
        failure: str | None = None
        scope = anyio.CancelScope(deadline=anyio.current_time() + max(0.1, self.config.start_timeout))
        self._scope = scope
        try:
            with scope:
                async with AsyncExitStack() as stack:
                    read, write = await stack.enter_async_context(self._open_transport())
                    watched = _WatchedReadStream(read, self._connection_ended)
                    session = await stack.enter_async_context(ClientSession(
                        watched, write,
                        client_info=mt.Implementation(name="toycoder", version=__version__),
                    ))
                    await session.initialize()
                    listed = await self._list_tools(session)
                    if not self._stopping:
                        self.tools = self._make_tools(listed)
                        self.session = session
                        self.state = "ready"
                        ready = True
                        scope.deadline = math.inf  # the start timeout no longer applies
                        self._settle()
                        self._notify(self.name, "ready", f"{len(self.tools)} tools")
                        assert self._wake is not None
                        await self._wake.wait()
                    # Stopping or lost: the tools go before the contexts are torn down.
                    if not self._stopping:
                        self.error = "the connection closed"  # the details come once it is torn down
                    self.state = "stopped"
                    self.session = None
                    self.tools = []
            if scope.cancelled_caught and not self._stopping and not ready:
                failure = f"no answer to the MCP handshake within {self.config.start_timeout:g}s"
                self._process = None  # its exit code is our own kill: not worth quoting
        except asyncio.CancelledError:
            self.state = "stopped"
            raise
        except Exception as e:  # includes exception groups from the SDK's task groups
            failure = _describe_exc(e)
            if isinstance(e, BaseExceptionGroup) or not isinstance(e, (OSError, MCPError)):
                log.debug("MCP server %s: %s", self.name, failure, exc_info=True)
        finally:
            self.session = None
            self.tools = []
            self._sweep()
            self._settle()
        if self._stopping:
            self.state = "stopped"
            return
        if ready:
            self.state = "stopped"
            self.error = await self._ending_reason(failure)
            self._notify(self.name, "stopped", self.error)
        else:
            self.state = "failed"
            self.error = await self._ending_reason(failure or "the server closed the connection during the handshake")
            self._notify(self.name, "failed", self.error)

    async def _ending_reason(self, reason: str | None) -> str:
        """What went wrong, with the exit code and the last stderr lines of a stdio server."""
        if reason is None:
            reason = "the connection closed"
        code = getattr(self._process, "returncode", None)
        if code is not None and code != 0 and self.transport == "stdio":
            reason += f" (exit code {code})" if code > 0 else f" (killed by signal {-code})"
        thread = self._stderr_thread
        for _ in range(25):  # let the stderr thread read the last lines
            if thread is None or not thread.is_alive():
                break
            await asyncio.sleep(0.02)
        with self._stderr_lock:
            tail = [line for line in list(self._stderr_tail)[-3:] if line.strip()]
        if tail:
            reason += "; stderr: " + secrets.redact(" | ".join(tail))[-800:]
        return reason

    async def _list_tools(self, session: ClientSession) -> list[mt.Tool]:
        tools: list[mt.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_TOOL_PAGES):
            params = mt.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    # -- transports --

    def _open_transport(self) -> Any:
        c = self.config
        if c.command and c.url:
            raise ValueError("set either command (stdio) or url (HTTP), not both")
        if c.url:
            return self._http()
        if c.command:
            return self._stdio()
        raise ValueError("no command or url configured")

    @asynccontextmanager
    async def _stdio(self) -> AsyncIterator[Any]:
        c = self.config
        assert c.command is not None
        env = secrets.child_env()
        env.update(c.env)
        cwd = Path(c.cwd).expanduser() if c.cwd else self.workspace_root
        if not cwd.is_absolute():
            cwd = self.workspace_root / cwd
        params = StdioServerParameters(command=c.command, args=list(c.args), env=env, cwd=str(cwd))
        read_fd, write_fd = os.pipe()
        errlog = os.fdopen(write_fd, "w")
        self._start_stderr_reader(read_fd)
        try:
            cm = stdio_client(params, errlog=errlog)
            async with cm as streams:
                errlog.close()  # the child has its copy; ours would keep the pipe open forever
                self._process = _peek_process(cm)
                self.pid = getattr(self._process, "pid", None)
                try:
                    yield streams
                except BaseException:
                    if self.state == "starting" and self.pid is not None:
                        # Abandoned in the handshake (timeout, aclose): it is not answering, so
                        # do not let the SDK wait for it to notice its stdin closing.
                        with suppress(ProcessLookupError, PermissionError):
                            os.killpg(self.pid, signal.SIGTERM)
                    raise
        finally:
            errlog.close()

    @asynccontextmanager
    async def _http(self) -> AsyncIterator[Any]:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        c = self.config
        assert c.url is not None
        if not re.match(r"https?://", c.url):
            raise ValueError(f"url must start with http:// or https://, got {c.url!r}")
        # The SDK's own defaults (mcp.shared._httpx_utils): 30 s, and 300 s to read a held stream.
        timeout = httpx2.Timeout(30.0, read=300.0)
        async with httpx2.AsyncClient(headers=dict(c.headers), timeout=timeout) as client:
            async with streamable_http_client(c.url, http_client=client) as streams:
                yield streams

    def _start_stderr_reader(self, fd: int) -> None:
        name = self.name
        tail = self._stderr_tail
        lock = self._stderr_lock

        def pump() -> None:
            with os.fdopen(fd, "rb") as f:
                for raw in f:
                    line = raw.decode("utf-8", errors="replace").rstrip()
                    with lock:
                        tail.append(line)
                    log.debug("MCP server %s stderr: %s", name, secrets.redact(line))

        self._stderr_thread = threading.Thread(target=pump, name=f"mcp-stderr-{name}", daemon=True)
        self._stderr_thread.start()

    def _sweep(self) -> None:
        """SIGKILL whatever is left in the stdio server's process group (its own session, so
        nothing else is in it): after the SDK's shutdown, only children the server left behind."""
        if self.pid is not None:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            if getattr(self._process, "returncode", None) is not None:
                self.pid = None  # reaped: the number may be reused, never signal it again

    def kill(self) -> None:
        """Last resort at aclose, for a task that did not finish: kill the process group."""
        self._sweep()

    # -- tools --

    def _make_tools(self, listed: list[mt.Tool]) -> list[Tool]:
        taken: set[str] = set()
        tools: list[Tool] = []
        for t in listed:
            name = tool_name(self.name_part, t.name, taken)
            taken.add(name)
            tools.append(self._make_tool(name, t))
        return tools

    def _make_tool(self, name: str, t: mt.Tool) -> Tool:
        server, remote = self.name, t.name

        async def call(ctx: ToolContext, /, **arguments: Any) -> str:
            return _cap(await self.call(remote, arguments), ctx)

        def title(args: dict[str, Any]) -> str:
            return f"mcp {server}/{remote}"

        text = " ".join((t.description or t.title or "").split())
        return Tool(
            name=name,
            description=f"[MCP server {server}] {text}".rstrip(),
            level=self.config.permission,
            func=call,
            args_model=None,
            source=f"mcp:{server}",
            parameters=object_schema(t.input_schema),
            title=title,
        )

    async def call(self, remote: str, arguments: dict[str, Any]) -> str:
        session = self.session
        if session is None or self.state != "ready":
            why = f": {self.error}" if self.error else ""
            raise ToolError(f"MCP server {self.name} is not running ({self.state}{why})")
        try:
            result = await session.call_tool(remote, arguments, read_timeout_seconds=self.call_timeout)
        except MCPError as e:
            if e.error.code == mt.CONNECTION_CLOSED:
                raise ToolError(f"MCP server {self.name} closed the connection before answering "
                                f"(the server stopped)") from None
            if e.error.code == mt.REQUEST_TIMEOUT:
                raise ToolError(f"MCP server {self.name} did not answer {remote} within "
                                f"{self.call_timeout:g}s") from None
            raise ToolError(f"MCP server {self.name}: {e.error.message} (error {e.error.code})") from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            raise ToolError(f"MCP server {self.name} closed the connection (the server stopped)") from None
        except Exception as e:  # a malformed result, an output-schema mismatch, a transport error
            raise ToolError(f"MCP server {self.name}: {_describe_exc(e)}") from None
        text = result_text(result)
        if result.is_error:
            raise ToolError(text or f"{remote} failed (the server gave no message)")
        return text or "(no output)"

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "status": self.state, "tools": len(self.tools),
                               "transport": self.transport}
        if self.error and self.state in ("failed", "stopped"):
            out["error"] = self.error
        return out


def _peek_process(cm: Any) -> Any:
    """The anyio Process of a suspended stdio_client (the SDK does not expose it): used for the
    exit code in messages and as a last-resort kill target. None if it cannot be found."""
    try:
        return cm.gen.ag_frame.f_locals.get("process")
    except AttributeError:
        return None


# --- the manager -----------------------------------------------------------------------------------

class McpManager:
    """The configured MCP servers: started in the background, their tools offered while ready."""

    def __init__(self, servers: dict[str, McpServerConfig], workspace_root: Path,
                 on_status: StatusCallback | None = None, *, call_timeout: float = DEFAULT_CALL_TIMEOUT):
        self.workspace_root = Path(workspace_root)
        self._on_status = on_status
        self._servers: dict[str, _Server] = {}
        used: set[str] = set()
        for name, cfg in servers.items():
            # Tokens given to a server stay out of logs and out of other children's environments.
            secrets.register([v for k, v in {**cfg.headers, **cfg.env}.items()
                              if secrets.SECRET_NAME.search(k) or k.lower() in ("authorization", "cookie")])
            part = sanitize(name)
            if part in used:  # two server names that sanitise alike stay apart
                part = f"{part}_{_hash(name)}"
            used.add(part)
            self._servers[name] = _Server(name, part, cfg, self.workspace_root, self._notify, call_timeout)
        self._started = False

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
            if s.config.enabled:
                s.launch()

    async def wait_ready(self, timeout: float) -> bool:
        """Wait until every enabled server is ready, failed or stopped (at most `timeout` s).
        True if they all settled in time; never raises on timeout."""
        waits = [s.wait_settled() for s in self._servers.values() if s.task is not None]
        if not waits:
            return True
        try:
            await asyncio.wait_for(asyncio.gather(*waits), timeout)
            return True
        except asyncio.TimeoutError:
            return False

    def tools(self) -> list[Tool]:
        """The tools of the servers that are ready now."""
        out: list[Tool] = []
        for s in self._servers.values():
            if s.state == "ready":
                out.extend(s.tools)
        return out

    def status(self) -> list[dict[str, Any]]:
        return [s.status() for s in self._servers.values()]

    async def aclose(self) -> None:
        """Shut every server down: stdio servers get stdin closed, then SIGTERM, then SIGKILL
        (the SDK's bounded sequence); a task that still does not finish is cancelled and its
        process group killed."""
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
                if s.task is not None and s.task in pending:
                    s.kill()
        for s in self._servers.values():
            if s.state in ("starting", "ready"):
                s.state = "stopped"
