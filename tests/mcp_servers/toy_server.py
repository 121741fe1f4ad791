"""A small MCP tool server for the McpManager tests (the SDK's MCPServer, formerly FastMCP).

    python toy_server.py                      # stdio
    python toy_server.py --start-delay 30     # stdio, but sleeps before answering anything
    python toy_server.py --spawn-child --linger --tag X   # leaves a child; ignores stdin EOF and SIGTERM
    python toy_server.py --stubborn --start-delay 60      # ignores SIGTERM from the start (SIGKILL ends it)
    python toy_server.py --http 0 [--require-header NAME=VALUE]
        # streamable HTTP on 127.0.0.1 at /mcp; the bound port is the first stdout line
    python toy_server.py --http 0 --sse       # the older HTTP+SSE transport at /sse

Everything this server logs goes to its stderr, never to stdout (the stdio protocol channel).
"""

from __future__ import annotations

import signal
import sys

if "--stubborn" in sys.argv:  # before the imports below (the SDK's take a second or more on a loaded machine): a
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # SIGTERM during them must find the server stubborn already

import argparse
import asyncio
import base64
import os
import socket
import subprocess
import time
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import CallToolResult, EmbeddedResource, ImageContent, TextContent, TextResourceContents

# A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

server = MCPServer("toy", instructions="Test server for toycoder's MCP client.")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def fail(message: str = "this tool always fails") -> str:
    """Raise an error (the result has isError: true)."""
    raise ToolError(message)


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep for the given number of seconds, then answer."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def image() -> Image:
    """Return a 1x1 PNG image."""
    return Image(data=PNG, format="png")


@server.tool()
def structured() -> CallToolResult:
    """Return structured content only, with no text content."""
    return CallToolResult(content=[], structured_content={"answer": 42, "items": ["a", "b"]})


@server.tool()
def resource() -> CallToolResult:
    """Return an embedded text resource."""
    return CallToolResult(content=[EmbeddedResource(
        type="resource",
        resource=TextResourceContents(uri="file:///notes.txt", mime_type="text/plain", text="resource body"),
    )])


@server.tool()
def mixed() -> CallToolResult:
    """Return text and an image together."""
    return CallToolResult(content=[
        TextContent(type="text", text="here is a picture"),
        ImageContent(type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png"),
    ])


@server.tool()
def env_probe(names: list[str]) -> dict[str, str | None]:
    """Report the value of each named environment variable (null when it is not set)."""
    return {n: os.environ.get(n) for n in names}


@server.tool()
def cwd() -> str:
    """Return the server's working directory."""
    return os.getcwd()


@server.tool()
def crash() -> str:
    """Exit the server process at once, without answering."""
    os._exit(3)


@server.tool(name="dotted.name")
def dotted() -> str:
    """A tool whose name holds a dot."""
    return "dotted"


LONG_NAME = "a_tool_with_an_extremely_long_name_that_goes_on_and_on_past_the_limit"


@server.tool(name=LONG_NAME)
def long_one() -> str:
    """A tool whose name is longer than 64 characters."""
    return "long"


@server.prompt(description="Review a file for one concern.")
def review(path: str, focus: str = "bugs") -> str:
    """A prompt: `/mcp:<server>:review <path> [focus]` (positional or key=value)."""
    return f"Review {path}, looking for {focus}."


@server.resource("toy://notes/today", name="today", mime_type="text/plain")
def notes_today() -> str:
    """A resource: `@<server>:toy://notes/today`."""
    return "buy milk"


@server.resource("toy://notes/day/{day}", name="day", mime_type="text/plain")
def notes_of(day: str) -> str:
    """A resource template: `@<server>:toy://notes/day/monday`."""
    return f"notes of {day}"


def _require_header(app: Any, name: str, value: str) -> Any:
    """ASGI wrapper: 401 unless the request carries the header."""
    want = (name.lower().encode(), value.encode())

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and want not in [(k.lower(), v) for k, v in scope.get("headers", [])]:
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"missing header"})
            return
        await app(scope, receive, send)

    return wrapped


async def serve_http(port: int, require_header: str | None, sse: bool = False) -> None:
    import uvicorn

    # --sse: the older HTTP+SSE transport (GET /sse, POST /messages/), as the SDK's server side serves it
    app: Any = server.sse_app(host="127.0.0.1") if sse else server.streamable_http_app(host="127.0.0.1")
    if require_header:
        name, _, value = require_header.partition("=")
        app = _require_header(app, name, value)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None, metavar="PORT")
    parser.add_argument("--require-header", default=None, metavar="NAME=VALUE")
    parser.add_argument("--sse", action="store_true", help="with --http: serve HTTP+SSE at /sse instead")
    parser.add_argument("--start-delay", type=float, default=0.0)
    parser.add_argument("--spawn-child", action="store_true",
                        help="start a long sleeping child process (same process group) first")
    parser.add_argument("--linger", action="store_true",
                        help="after stdin closes, ignore SIGTERM and keep running")
    parser.add_argument("--stubborn", action="store_true", help="ignore SIGTERM from the start")
    parser.add_argument("--tag", default="", help="ignored: marks the command line for the tests")
    opts = parser.parse_args()  # --stubborn: SIGTERM is ignored already (at the top)
    if opts.spawn_child:
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "child", opts.tag],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    if opts.start_delay:
        time.sleep(opts.start_delay)
    if opts.http is not None:
        asyncio.run(serve_http(opts.http, opts.require_header, opts.sse))
        return
    print("toy server: stdio", file=sys.stderr, flush=True)
    server.run("stdio")
    if opts.linger:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(300)


if __name__ == "__main__":
    main()
