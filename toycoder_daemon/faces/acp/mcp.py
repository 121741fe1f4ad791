"""The ACP client's `mcpServers` (session/new, load, resume): stdio, http and sse servers are started for
that session (session_mcp.McpHub); any other transport is refused with -32602 naming the server
and the transport, never dropped without a word.

The SDK's request models skip list items they cannot validate (an unknown `type`, a missing field),
so the raw params are checked first (`check_raw`, called by agent.handler before the SDK's router);
`specs` refuses what the SDK did parse but we do not support (acp).
"""

from __future__ import annotations

import logging
from typing import Any

from acp import RequestError
from acp.schema import HttpMcpServer, McpCapabilities, McpServerStdio, SseMcpServer
from pydantic import BaseModel, ValidationError

from toycoder_daemon.app.application import App
from toycoder_daemon.app.session_mcp import ClientServer
from toycoder_daemon.faces.acp import client as acp_client
from toycoder_daemon.wire import codes

log = logging.getLogger(__name__)

CAPABILITIES = McpCapabilities(http=True, sse=True)
"""agentCapabilities.mcpCapabilities."""
SESSION_METHODS = frozenset({"session/new", "session/load", "session/resume"})
TRANSPORTS: dict[str, type[BaseModel]] = {"stdio": McpServerStdio, "http": HttpMcpServer, "sse": SseMcpServer}


def refused(name: Any, transport: str, why: str) -> RequestError:
    shown = f"'{name}'" if isinstance(name, str) else "(unnamed)"
    return RequestError(codes.INVALID_PARAMS, f"MCP server {shown}: {why}",
                        {"mcpServers": {"name": name, "transport": transport, "reason": why}})


def check_raw(params: Any) -> None:
    """Every `mcpServers` item is a stdio (no `type`, or "stdio"), http or sse server with its fields, and
    the names are distinct; else -32602. Other shapes of the list itself are left to the SDK."""
    servers = params.get("mcpServers") if isinstance(params, dict) else None
    if not isinstance(servers, list):
        return
    names: set[str] = set()
    for item in servers:
        if not isinstance(item, dict):
            raise refused(None, "?", f"an item of mcpServers is not an object: {item!r:.80}")
        name, transport = item.get("name"), item.get("type", "stdio")
        if not isinstance(transport, str):  # (a list is not hashable: the lookup below would raise)
            raise refused(name, "?", f"type must be a string, not {transport!r:.80}")
        if transport not in TRANSPORTS:
            raise refused(name, transport, f"the {transport!r} transport is not supported "
                          "(ToyCoder connects to stdio, http and sse MCP servers)")
        try:
            TRANSPORTS[transport].model_validate(item)
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "(server)"
            raise refused(name, transport, f"{where}: {err['msg']}") from None
        if item["name"] in names:
            raise refused(name, transport, "two servers have this name")
        names.add(item["name"])


def specs(mcp_servers: list[Any] | None) -> dict[str, ClientServer]:
    """The SDK's server models -> what McpHub starts; acp and anything else is -32602."""
    out: dict[str, ClientServer] = {}
    for m in mcp_servers or []:
        name: str = getattr(m, "name", "")
        if isinstance(m, McpServerStdio):
            spec = ClientServer(command=m.command, args=tuple(m.args), env={v.name: v.value for v in m.env})
        elif isinstance(m, HttpMcpServer):
            spec = ClientServer(url=m.url, headers={h.name: h.value for h in m.headers})
        elif isinstance(m, SseMcpServer):
            spec = ClientServer(url=m.url, headers={h.name: h.value for h in m.headers}, transport="sse")
        else:
            transport = str(getattr(m, "type", type(m).__name__))
            raise refused(name, transport, f"the {transport!r} transport is not supported "
                          "(ToyCoder connects to stdio, http and sse MCP servers)")
        if name in out:
            raise refused(name, "stdio" if spec.command else spec.transport, "two servers have this name")
        out[name] = spec
    return out


async def start(agent: Any, app: App, session_id: str, servers: dict[str, ClientServer]) -> None:
    """The session's client servers are `servers` from now on (the same ones keep running). A server
    that fails or stops is told to the client as an agent thought (and logged); the session goes on.
    `agent` is the ToyCoderAgent: its `owner`, `raw` and `later` (sent after the current answer)."""

    def on_status(server: str, status: str, message: str) -> None:
        if status == "ready" or agent.owner.get(session_id) is not app:  # closed meanwhile: nobody to tell
            return
        text = f"MCP server '{server}' (from the client) {status}: {message}\n"
        agent.later(agent.raw.session_update(session_id, acp_client.chunk(text, "agent_thought_chunk")))

    await app.mcp.set_session_servers(session_id, servers, on_status)
