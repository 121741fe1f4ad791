"""One configured MCP server: its connection, owned by one long-lived asyncio task, and its tools.

The task (`McpServer.run`) enters the transport (our own stdio child, or the SDK's streamable HTTP)
and the SDK's `ClientSession`, does the `initialize` handshake, lists the tools, then waits for a
stop request or for the connection to end, and exits its contexts itself. anyio cancel scopes and
task groups must be entered and exited by the same task, so no other task enters or exits them;
tool calls from turns only send requests through the session, which the SDK allows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from toycoder_daemon import __version__
from toycoder_daemon.core.util import secrets
from toycoder_daemon.tools.base import Tool, ToolContext, ToolError
from toycoder_daemon.tools.mcp.naming import object_schema, tool_name
from toycoder_daemon.tools.mcp.results import cap_output, result_text
from toycoder_daemon.tools.mcp.spec import McpServerSpec, server_cwd, server_env, transport_of
from toycoder_daemon.tools.mcp.stdio import StdioChild

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

log = logging.getLogger(__name__)

MAX_TOOL_PAGES = 50
"""Cap on tools/list pages, so a server paginating forever cannot hang the start."""

Notify = Callable[[str, str, str], None]


# --- errors ------------------------------------------------------------------------------------

def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in _leaves(e)]
    return [exc]


def describe_exc(exc: BaseException) -> str:
    """One line for the person: every distinct failure inside an exception group, joined."""
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

class WatchedReadStream:
    """Wraps a transport's read stream: calls `on_end` once when it ends (the server process
    exited, the connection closed). Other attributes (the SDK looks for `last_context`) are
    delegated to the wrapped stream."""

    def __init__(self, inner: Any, on_end: Callable[[], None]):
        self._inner = inner
        self._on_end = on_end
        self._ended = False

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            self._on_end()

    async def receive(self) -> SessionMessage | Exception:
        try:
            item: SessionMessage | Exception = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._end()
            raise
        return item

    def __aiter__(self) -> WatchedReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> WatchedReadStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


# --- one server ------------------------------------------------------------------------------------

class McpServer:
    """State: "disabled", "starting", "ready", "failed" or "stopped"; `tools` while ready."""

    def __init__(self, name: str, name_part: str, spec: McpServerSpec, workspace_root: Path, notify: Notify,
                 *, source: str = "mcp"):
        self.name = name
        self.source = source
        self.name_part = name_part
        self.spec = spec
        self.workspace_root = workspace_root
        self._notify = notify
        self.call_timeout = float(spec.call_timeout)
        self.transport = transport_of(spec)
        self.state = "starting" if spec.enabled else "disabled"
        self.error: str | None = None
        self.tools: list[Tool] = []
        self.resources: list[mt.Resource] = []
        """Its resources (resources/list, first page), while ready: `@server:uri` mentions."""
        self.templates: list[mt.ResourceTemplate] = []
        """Its resource templates (first page), while ready: mention completion offers them."""
        self.prompts: list[mt.Prompt] = []
        """Its prompts (prompts/list, first page), while ready: `/mcp:server:prompt` commands."""
        self.session: ClientSession | None = None
        self.task: asyncio.Task[None] | None = None
        self.child: StdioChild | None = None
        """The stdio server's process, once spawned."""
        self._scope: anyio.CancelScope | None = None
        self._wake = asyncio.Event()
        self._settled = asyncio.Event()
        self._stopping = False
        self._timed_out = False
        """Missed its start_timeout: reported failed at once, its stop goes on in the task."""

    # -- lifecycle (all of it runs in self.task) --

    def launch(self) -> None:
        self.task = asyncio.create_task(self.run(), name=f"mcp-server-{self.name}")

    def request_stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self.state == "starting" and self._scope is not None:
            self._scope.cancel()  # still in the handshake: abandon it (the contexts unwind in their task)

    def _connection_ended(self) -> None:
        """The transport's read stream ended (runs in the SDK's reader task)."""
        if self.state == "ready" and not self._stopping:
            # At once, before the SDK fails the calls in flight: no new call can start.
            self.state = "stopped"
            self.error = "the connection closed"  # the details come once it is torn down
            self.session = None
            self.tools = []
        self._wake.set()

    def _time_out(self) -> None:
        """At the start_timeout, while still in the handshake: failed and reported now, so a turn
        waiting for it goes on; stopping the process (up to EXIT_GRACE + TERM_GRACE for one that
        ignores SIGTERM) continues in the task, off the turn's path."""
        if self.state != "starting" or self._stopping:
            return
        self._timed_out = True
        self.state = "failed"
        self.error = self._reason(f"no answer to the MCP handshake within {self.spec.start_timeout:g}s",
                                  self.child.recent_stderr() if self.child else [])
        self._settled.set()
        self._notify(self.name, "failed", self.error)
        if self._scope is not None:
            self._scope.cancel()

    async def wait_settled(self) -> None:
        """Until the server is ready, or has failed or stopped and said so (at once if it was never
        launched): a turn that waited for it sees the failure reported before the model does."""
        if self.task is not None:
            await self._settled.wait()
            if self.state == "starting":  # failed: its report waits for the reason (stderr's tail, 0.5 s at most)
                await asyncio.wait([self.task])

    async def run(self) -> None:
        ready = False
        failure: str | None = None
        scope = anyio.CancelScope()
        self._scope = scope
        timer = asyncio.get_running_loop().call_later(max(0.1, self.spec.start_timeout), self._time_out)
        try:
            with scope:
                async with contextlib.AsyncExitStack() as stack:
                    read, write = await stack.enter_async_context(self._open_transport())
                    watched = WatchedReadStream(read, self._connection_ended)
                    session = await stack.enter_async_context(ClientSession(
                        watched, write, client_info=mt.Implementation(name="toycoder", version=__version__),
                    ))
                    init = await session.initialize()
                    listed = await self._list_tools(session)
                    resources, templates, prompts = await self._list_extras(session, init.capabilities)
                    timer.cancel()
                    if not self._stopping and not self._timed_out:
                        self.tools = self._make_tools(listed)
                        self.resources, self.templates, self.prompts = resources, templates, prompts
                        self.session = session
                        self.state = "ready"
                        ready = True
                        self._settled.set()
                        self._notify(self.name, "ready", f"{len(self.tools)} tools")
                        await self._wake.wait()
                        # Stopping or lost: the tools go before the contexts are torn down.
                        if not self._stopping:
                            self.error = "the connection closed"  # the details come once it is torn down
                        self.state = "stopped"
                    self.session = None
                    self.tools = []
        except asyncio.CancelledError:
            self.state = "stopped"
            raise
        except Exception as e:  # includes exception groups from the SDK's task groups
            failure = describe_exc(e)
            if isinstance(e, BaseExceptionGroup) or not isinstance(e, (OSError, MCPError)):
                log.debug("MCP server %s: %s", self.name, failure, exc_info=True)
        finally:
            timer.cancel()
            self.session = None
            self.tools = []
            self.resources, self.templates, self.prompts = [], [], []
            self._settled.set()
        if self._timed_out:  # reported at the timeout; whatever the stop raised is its own kill's
            self.state = "failed"
            return
        if self._stopping:
            self.state = "stopped"
            return
        if ready:
            self.state = "stopped"
            self.error = await self._ending_reason(failure)
            self._notify(self.name, "stopped", self.error)
        else:
            self.state = "failed"
            self.error = await self._ending_reason(
                failure or "the server closed the connection during the handshake")
            self._notify(self.name, "failed", self.error)

    async def _ending_reason(self, reason: str | None) -> str:
        """What went wrong, with the exit code and the last stderr lines of a stdio server."""
        return self._reason(reason or "the connection closed",
                            await self.child.stderr_tail() if self.child else [])

    def _reason(self, reason: str, tail: list[str]) -> str:
        code = self.child.returncode if self.child else None
        if code is not None and code != 0:
            reason += f" (exit code {code})" if code > 0 else f" (killed by signal {-code})"
        if tail:
            reason += "; stderr: " + "".join(secrets.clip(" | ".join(tail), 0, 800)[:2])
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

    async def _list_extras(self, session: ClientSession, caps: mt.ServerCapabilities
                           ) -> tuple[list[mt.Resource], list[mt.ResourceTemplate], list[mt.Prompt]]:
        """Its resources, resource templates and prompts when it declares them; a server that fails to
        list them still serves its tools."""
        resources: list[mt.Resource] = []
        templates: list[mt.ResourceTemplate] = []
        prompts: list[mt.Prompt] = []
        try:
            if caps.resources is not None:
                resources = list((await session.list_resources()).resources)
                templates = list((await session.list_resource_templates()).resource_templates)
            if caps.prompts is not None:
                prompts = list((await session.list_prompts()).prompts)
        except (MCPError, anyio.ClosedResourceError, anyio.BrokenResourceError) as e:
            log.info("MCP server %s: its resources or prompts could not be listed: %s", self.name, e)
        return resources, templates, prompts

    async def _ask(self, what: str, request: Callable[[ClientSession], Any]) -> Any:
        """One request besides a tool call (resources/read, prompts/get); ValueError with the reason."""
        session = self.session
        if session is None or self.state != "ready":
            raise ValueError(f"MCP server {self.name} is not running ({self.state})")
        try:
            return await asyncio.wait_for(request(session), self.call_timeout)
        except MCPError as e:
            raise ValueError(f"{what}: {e.error.message} (error {e.error.code})") from None
        except asyncio.TimeoutError:
            raise ValueError(f"{what}: no answer within {self.call_timeout:g}s") from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            raise ValueError(f"MCP server {self.name} closed the connection") from None

    async def read_resource(self, uri: str) -> str:
        """The resource's text contents (a binary one is named, not shown)."""
        result = await self._ask(f"resources/read {uri}", lambda s: s.read_resource(uri))
        parts: list[str] = []
        for c in getattr(result, "contents", None) or ():
            text = getattr(c, "text", None)
            parts.append(text if isinstance(text, str) else
                         f"[binary resource {c.uri} ({getattr(c, 'mime_type', None) or 'unknown type'})]")
        return "\n".join(parts)

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> str:
        """The prompt's messages as one text (each message's text; other content named)."""
        result = await self._ask(f"prompts/get {name}", lambda s: s.get_prompt(name, arguments))
        out: list[str] = []
        for m in getattr(result, "messages", None) or ():
            c = m.content
            text = getattr(c, "text", None)
            if text is None and getattr(c, "resource", None) is not None:
                text = getattr(c.resource, "text", None)
            out.append(text if isinstance(text, str) else f"[{getattr(c, 'type', 'content')} from {self.name}]")
        return "\n\n".join(out)

    def kill(self) -> None:
        """Last resort at aclose, for a task that did not finish: SIGKILL the process group."""
        if self.child is not None:
            self.child.kill()

    # -- transports --

    def _open_transport(self) -> contextlib.AbstractAsyncContextManager[tuple[Any, Any]]:
        s = self.spec
        if s.command and s.url:
            raise ValueError("set either command (stdio) or url (HTTP), not both")
        if s.url:
            return self._sse() if transport_of(s) == "sse" else self._http()
        if s.command:
            return self._stdio()
        raise ValueError("no command or url configured")

    @contextlib.asynccontextmanager
    async def _stdio(self) -> AsyncIterator[tuple[Any, Any]]:
        assert self.spec.command is not None
        child = StdioChild(self.name, self.spec.command, self.spec.args, env=server_env(self.spec),
                           cwd=server_cwd(self.spec, self.workspace_root))
        self.child = child
        async with child.connect() as streams:
            try:
                yield streams
            except BaseException:
                if self.state == "starting" or self._timed_out:
                    # Abandoned in the handshake (timeout, aclose): it is not answering, so do not
                    # wait for it to notice its stdin closing.
                    child.signal_group(signal.SIGTERM)
                raise

    def _url(self) -> str:
        url = self.spec.url
        assert url is not None
        if not re.match(r"https?://", url):
            raise ValueError(f"url must start with http:// or https://, got {url!r}")
        return url

    @contextlib.asynccontextmanager
    async def _http(self) -> AsyncIterator[tuple[Any, Any]]:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        url = self._url()
        # The SDK's own defaults for its HTTP client: 30 s, and 300 s to read a held stream.
        timeout = httpx2.Timeout(30.0, read=300.0)
        async with (httpx2.AsyncClient(headers=dict(self.spec.headers), timeout=timeout) as client,
                    streamable_http_client(url, http_client=client) as streams):
            yield streams

    @contextlib.asynccontextmanager
    async def _sse(self) -> AsyncIterator[tuple[Any, Any]]:
        """The older HTTP+SSE transport, through the SDK's SSE client (the same timeouts as _http)."""
        from mcp.client.sse import sse_client

        url = self._url()
        async with sse_client(url, headers=dict(self.spec.headers), timeout=30.0, sse_read_timeout=300.0) as streams:
            yield streams

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
            return cap_output(await self.call(remote, arguments), ctx)

        def title(args: dict[str, Any]) -> str:
            return f"mcp {server}/{remote}"

        text = " ".join((t.description or t.title or "").split())
        return Tool(
            name=name,
            description=f"[MCP server {server}] {text}".rstrip(),
            level=self.spec.permission,
            func=call,
            args_model=None,
            source=f"{self.source}:{server}",
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
            raise ToolError(f"MCP server {self.name}: {describe_exc(e)}") from None
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
