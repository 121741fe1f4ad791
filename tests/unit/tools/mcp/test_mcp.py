"""McpManager against real MCP servers: tests/mcp_servers/toy_server.py over stdio and over
streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import mcp_types as mt
import pytest
import pytest_asyncio
from helpers import TOY_MCP_SERVER, processes_with
from mcp.client.session import ClientSession
from mcp.shared.message import SessionMessage
from waiting import scaled, wait_until_async

from toycoder_daemon.config.model import McpServerConfig
from toycoder_daemon.core.util import secrets
from toycoder_daemon.tools.base import ToolError
from toycoder_daemon.tools.mcp import stdio as mcp_stdio
from toycoder_daemon.tools.mcp.manager import McpManager, object_schema, result_text, tool_name
from toycoder_daemon.tools.mcp.spec import McpServerSpec
from toycoder_daemon.tools.mcp.stdio import StdioChild, encode_message, parse_line

NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass(frozen=True)
class PlainSpec:
    """A server spec that is not the config model: McpManager only needs McpServerSpec's shape."""
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    transport: str = "http"
    permission: Literal["safe", "sensitive", "dangerous"] = "safe"
    enabled: bool = True
    start_timeout: float = 30.0
    call_timeout: float = 0.5


def stdio(*args: str, **kw: Any) -> McpServerConfig:
    return McpServerConfig(command=sys.executable, args=[TOY_MCP_SERVER, *args], **kw)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def __call__(self, name: str, status: str, message: str) -> None:
        self.events.append((name, status, message))

    def of(self, name: str) -> list[tuple[str, str]]:
        return [(s, m) for n, s, m in self.events if n == name]


@pytest.fixture
async def managers(workspace: Path) -> AsyncIterator[Callable[..., Any]]:
    """managers(servers, **kw) -> a started McpManager, waited ready; all closed at teardown."""
    made: list[McpManager] = []

    async def make(servers: dict[str, McpServerConfig], *, wait: float = 15.0, **kw: Any) -> McpManager:
        m = McpManager(servers, workspace, **kw)
        made.append(m)
        await m.start()
        assert await m.wait_ready(wait)
        return m

    yield make
    for m in made:
        await m.aclose()


SHARED = pytest.mark.asyncio(loop_scope="module")
"""Tests that only call well-behaved tools share one server (and the module's event loop)."""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[McpManager]:
    """One stdio server, "toy.srv", started with MY_API_TOKEN in our environment."""
    workspace = tmp_path_factory.mktemp("shared-ws")
    saved = os.environ.get("MY_API_TOKEN")
    os.environ["MY_API_TOKEN"] = "sk-very-secret-value"
    os.environ["TOYCODER_PLAIN_VAR"] = "plain"
    try:
        m = McpManager({"toy.srv": stdio(env={"SERVER_API_KEY": "given-to-the-server"}, call_timeout=1.5)},
                       workspace)
        await m.start()
        assert await m.wait_ready(15)
    finally:
        if saved is None:
            os.environ.pop("MY_API_TOKEN", None)
        else:
            os.environ["MY_API_TOKEN"] = saved
        os.environ.pop("TOYCODER_PLAIN_VAR", None)
    m.workspace = workspace  # type: ignore[attr-defined]
    yield m
    await m.aclose()


def by_name(m: McpManager) -> dict[str, Any]:
    return {t.name: t for t in m.tools()}


def status_of(m: McpManager, name: str) -> dict[str, Any]:
    return next(s for s in m.status() if s["name"] == name)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


# --- pure helpers -------------------------------------------------------------------------------


def test_tool_names_are_sanitised_and_unique() -> None:
    assert tool_name("toy", "add") == "mcp__toy__add"
    assert tool_name("toy", "dotted.name") == "mcp__toy__dotted_name"
    assert tool_name("my_srv", "a b/c:d") == "mcp__my_srv__a_b_c_d"
    long_a = tool_name("toy", "x" * 80 + "a")
    long_b = tool_name("toy", "x" * 80 + "b")
    assert len(long_a) == 64 and len(long_b) == 64 and long_a != long_b
    assert NAME_RE.match(long_a) and NAME_RE.match(long_b)
    taken = {tool_name("toy", "a_b")}
    clash = tool_name("toy", "a.b", taken)
    assert clash not in taken and NAME_RE.match(clash) and clash.startswith("mcp__toy__a_b_")


def test_object_schema() -> None:
    given = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    assert object_schema(given) == given and object_schema(given) is not given
    assert object_schema(None) == {"type": "object", "properties": {}}
    assert object_schema({}) == {"type": "object", "properties": {}}
    assert object_schema({"type": "string"}) == {"type": "object", "properties": {}}
    assert object_schema({"properties": {"a": {}}}) == {"type": "object", "properties": {"a": {}}}


def test_result_text_describes_every_kind_of_content() -> None:
    result = mt.CallToolResult(content=[
        mt.TextContent(type="text", text="hello"),
        mt.ImageContent(type="image", data="AAAA", mime_type="image/png"),
        mt.AudioContent(type="audio", data="AAAAAAAA", mime_type="audio/wav"),
        mt.EmbeddedResource(type="resource", resource=mt.BlobResourceContents(
            uri="file:///x.bin", mime_type="application/octet-stream", blob="AAAA")),
        mt.ResourceLink(type="resource_link", uri="file:///y.txt", name="y"),
    ], structured_content={"ignored": True})
    text = result_text(result)
    assert text.splitlines() == [
        "hello", "[image: image/png, 3 bytes]", "[audio: audio/wav, 6 bytes]",
        "[resource: file:///x.bin, application/octet-stream, 3 bytes]", "[resource link: file:///y.txt y]",
    ]


# --- stdio servers ------------------------------------------------------------------------------


@SHARED
async def test_tools_are_listed_with_names_schemas_source_and_level(shared: McpManager) -> None:
    tools = by_name(shared)
    assert {"mcp__toy_srv__add", "mcp__toy_srv__echo", "mcp__toy_srv__dotted_name"} <= set(tools)
    assert all(NAME_RE.match(n) for n in tools)
    long = [n for n in tools if n.startswith("mcp__toy_srv__a_tool_with_an_extremely_long_name")]
    assert len(long) == 1 and len(long[0]) == 64

    add = tools["mcp__toy_srv__add"]
    assert add.args_model is None and add.source == "mcp:toy.srv"
    assert {t.level for t in tools.values()} == {"sensitive"}  # the default permission
    assert add.description == "[MCP server toy.srv] Add two integers."
    assert add.parameters is not None
    assert add.parameters["type"] == "object" and add.parameters["required"] == ["a", "b"]
    assert add.parameters["properties"]["a"]["type"] == "integer"
    assert add.schema()["function"]["parameters"] == add.parameters
    assert add.validate({"a": 1, "b": 2}) == {"a": 1, "b": 2}
    assert add.describe_call({"a": 1, "b": 2}) == "mcp toy.srv/add"
    assert tools["mcp__toy_srv__image"].parameters == {"properties": {}, "type": "object", "title": "imageArguments"}
    assert status_of(shared, "toy.srv") == {"name": "toy.srv", "status": "ready", "tools": 13, "transport": "stdio"}


@SHARED
async def test_calls_return_text_structured_images_and_resources(shared: McpManager) -> None:
    tools = by_name(shared)

    async def call(name: str, **args: Any) -> str:
        return await tools[f"mcp__toy_srv__{name}"].func(None, **args)

    assert await call("add", a=2, b=40) == "42"
    assert await call("echo", text="héllo\nworld") == "héllo\nworld"
    assert await call("structured") == '{"answer": 42, "items": ["a", "b"]}'
    assert await call("image") == "[image: image/png, 70 bytes]"
    assert await call("mixed") == "here is a picture\n[image: image/png, 70 bytes]"
    assert await call("resource") == "[resource: file:///notes.txt]\nresource body"
    assert await call("dotted_name") == "dotted"
    with pytest.raises(ToolError, match="this tool always fails"):
        await call("fail")
    with pytest.raises(ToolError, match="custom failure"):
        await call("fail", message="custom failure")
    with pytest.raises(ToolError, match="validation error"):  # the server rejects the arguments: isError
        await call("add", a="not a number", b=1)
    # A tool argument named like our own ctx parameter still reaches the server.
    assert await call("echo", text="ctx") == "ctx"


@SHARED
async def test_a_cancelled_call_propagates_and_the_server_keeps_working(shared: McpManager) -> None:
    slow = by_name(shared)["mcp__toy_srv__slow"]
    task = asyncio.create_task(slow.func(None, seconds=30))
    await asyncio.sleep(0.3)  # let the request reach the server
    task.cancel()
    with pytest.raises(asyncio.CancelledError):  # at once, not after the 30 s the server would take
        await asyncio.wait_for(task, 10)
    assert status_of(shared, "toy.srv")["status"] == "ready"
    assert await by_name(shared)["mcp__toy_srv__echo"].func(None, text="still here") == "still here"
    assert await slow.func(None, seconds=0.05) == "slept 0.05"


@SHARED
async def test_a_call_that_takes_too_long_fails_and_the_server_keeps_working(shared: McpManager) -> None:
    tools = by_name(shared)  # call_timeout: 1.5 in the server's config
    with pytest.raises(ToolError, match=r"did not answer slow within 1.5s"):
        await asyncio.wait_for(tools["mcp__toy_srv__slow"].func(None, seconds=30), 15)
    assert await tools["mcp__toy_srv__add"].func(None, a=1, b=1) == "2"


@SHARED
async def test_secrets_stay_out_of_the_server_env_but_configured_env_is_given(shared: McpManager) -> None:
    tools = by_name(shared)
    seen = await tools["mcp__toy_srv__env_probe"].func(
        None, names=["MY_API_TOKEN", "SERVER_API_KEY", "TOYCODER_PLAIN_VAR"])
    assert '"MY_API_TOKEN": null' in seen
    assert "sk-very-secret-value" not in seen
    assert '"SERVER_API_KEY": "given-to-the-server"' in seen
    assert '"TOYCODER_PLAIN_VAR": "plain"' in seen  # an ordinary variable is passed on
    assert secrets.redact("key=given-to-the-server") == "key=***"  # a configured secret is redacted from logs
    assert await tools["mcp__toy_srv__cwd"].func(None) == str(shared.workspace.resolve())  # type: ignore[attr-defined]


async def test_a_server_that_cannot_start_is_reported_and_others_work(managers: Any) -> None:
    seen = Recorder()

    def on_status(name: str, status: str, message: str) -> None:
        seen(name, status, message)
        raise RuntimeError("a broken callback must not break the manager")

    m = await managers({
        "missing": McpServerConfig(command="/nonexistent/toycoder-mcp-server"),
        "exits": McpServerConfig(command=sys.executable,
                                 args=["-c", "import sys; print('boom', file=sys.stderr); sys.exit(7)"]),
        "nothing": McpServerConfig(),
        "off": stdio(enabled=False),
        "toy": stdio(),
    }, on_status=on_status)
    assert [s for s, _ in seen.of("missing")] == ["failed"]
    assert "No such file or directory" in seen.of("missing")[0][1]
    exits = seen.of("exits")
    assert [s for s, _ in exits] == ["failed"] and "exit code 7" in exits[0][1] and "boom" in exits[0][1]
    assert seen.of("nothing") == [("failed", "ValueError: no command or url configured")]
    assert seen.of("off") == []
    assert seen.of("toy") == [("ready", "13 tools")]
    assert status_of(m, "missing")["status"] == "failed" and "No such file" in status_of(m, "missing")["error"]
    assert status_of(m, "off") == {"name": "off", "status": "disabled", "tools": 0, "transport": "stdio"}
    assert {t.source for t in m.tools()} == {"mcp:toy"}
    assert await by_name(m)["mcp__toy__add"].func(None, a=3, b=4) == "7"


async def test_a_server_that_does_not_answer_in_time_fails(managers: Any) -> None:
    seen = Recorder()
    tag = uuid.uuid4().hex
    started = time.monotonic()
    m = await managers({"sleepy": stdio("--start-delay", "60", "--tag", tag, start_timeout=0.5)}, on_status=seen)
    assert time.monotonic() - started < scaled(8)
    assert seen.of("sleepy") == [("failed", "no answer to the MCP handshake within 0.5s")]
    assert status_of(m, "sleepy")["status"] == "failed" and m.tools() == []
    # reported at the timeout; the process is stopped after it (close stdin, TERM), off the waiter's path
    await wait_until_async(lambda: processes_with(tag) == [], what="the timed-out server to be stopped")
    assert seen.of("sleepy") == [("failed", "no answer to the MCP handshake within 0.5s")]  # once


async def test_a_timed_out_server_that_ignores_sigterm_is_reported_before_it_is_killed(managers: Any) -> None:
    """Its stop takes EXIT_GRACE + TERM_GRACE before the SIGKILL: who waits for the server hears of
    the failure at its timeout, while the process still runs, and the kill still comes."""
    seen = Recorder()
    tag = uuid.uuid4().hex
    m = await managers({"stuck": stdio("--stubborn", "--start-delay", "60", "--tag", tag, start_timeout=0.5)},
                       on_status=seen)
    assert seen.of("stuck") == [("failed", "no answer to the MCP handshake within 0.5s")]
    assert status_of(m, "stuck")["status"] == "failed" and m.starting() == []
    assert processes_with(tag) != []  # reported first; the SIGKILL is seconds away
    await wait_until_async(lambda: processes_with(tag) == [], what="the stubborn server to be killed")
    assert seen.of("stuck") == [("failed", "no answer to the MCP handshake within 0.5s")]
    assert status_of(m, "stuck")["status"] == "failed"


async def test_a_server_that_dies_is_reported_stopped_and_calls_fail(managers: Any) -> None:
    seen = Recorder()
    m = await managers({"toy": stdio(), "other": stdio()}, on_status=seen)
    tools = by_name(m)
    in_flight = asyncio.create_task(tools["mcp__toy__slow"].func(None, seconds=30))
    await asyncio.sleep(0.3)
    started = time.monotonic()
    with pytest.raises(ToolError, match="closed the connection"):
        await tools["mcp__toy__crash"].func(None)
    with pytest.raises(ToolError, match="closed the connection"):
        await asyncio.wait_for(in_flight, scaled(5))
    assert time.monotonic() - started < scaled(5)
    assert status_of(m, "toy")["status"] == "stopped" and not any(t.source == "mcp:toy" for t in m.tools())
    # the details (exit code, stderr) come once the connection is torn down
    await wait_until_async(lambda: len(seen.of("toy")) == 2, what="the stopped status")
    assert [s for s, _ in seen.of("toy")] == ["ready", "stopped"]
    assert status_of(m, "toy")["status"] == "stopped" and "exit code 3" in status_of(m, "toy")["error"]
    assert "exit code 3" in seen.of("toy")[1][1]
    assert not any(t.source == "mcp:toy" for t in m.tools())
    with pytest.raises(ToolError, match="not running"):
        await tools["mcp__toy__add"].func(None, a=1, b=2)
    assert await tools["mcp__other__add"].func(None, a=1, b=2) == "3"


async def test_aclose_leaves_no_process_behind(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The stdio shutdown: close stdin, wait, SIGTERM the group, wait, SIGKILL. Shorter waits
    # (2 s each by default) keep the test fast; the sequence is the same.
    monkeypatch.setattr(mcp_stdio, "EXIT_GRACE", 0.5)
    monkeypatch.setattr(mcp_stdio, "TERM_GRACE", 0.5)
    tag = uuid.uuid4().hex
    m = McpManager({
        "plain": stdio("--tag", tag),
        "parent": stdio("--spawn-child", "--tag", tag),  # exits on stdin EOF, its child does not
        "stubborn": stdio("--linger", "--tag", tag),  # ignores stdin EOF and SIGTERM
    }, workspace)
    await m.start()
    assert await m.wait_ready(15)
    assert [s["status"] for s in m.status()] == ["ready", "ready", "ready"]
    assert len(processes_with(tag)) == 4  # three servers and the child
    groups = m.pids()
    assert set(groups) == {"plain", "parent", "stubborn"}
    for pid in groups.values():  # each server's launcher leads its own session, so its own process group
        assert os.getsid(pid) == pid and os.getpgid(pid) == pid
        assert any(os.getpgid(p) == pid for p in processes_with(tag))  # the server runs in that group
    started = time.monotonic()
    await m.aclose()
    assert time.monotonic() - started < scaled(5)
    assert processes_with(tag) == []
    # Killed grandchildren linger as zombies until init reaps them; then the groups are empty.
    await wait_until_async(lambda: not any(group_alive(g) for g in groups.values()), what="every server's group to be gone")
    assert m.pids() == {}  # reaped, so the numbers are forgotten
    assert [s["status"] for s in m.status()] == ["stopped", "stopped", "stopped"]
    assert m.tools() == []


async def test_aclose_during_the_handshake(workspace: Path) -> None:
    tag = uuid.uuid4().hex
    seen = Recorder()
    m = McpManager({"sleepy": stdio("--start-delay", "60", "--tag", tag)}, workspace, on_status=seen)
    await m.start()
    await asyncio.sleep(0.3)  # not earlier: aclose right as the child starts can return before it exits
    await m.aclose()
    assert processes_with(tag) == []
    assert status_of(m, "sleepy")["status"] == "stopped" and seen.events == []


# --- streamable HTTP ------------------------------------------------------------------------------


async def test_streamable_http_server(managers: Any, http_server: Any) -> None:
    url, _ = http_server("--require-header", "X-Toy-Auth=letmein")
    seen = Recorder()
    m = await managers({
        "web": McpServerConfig(url=url, headers={"X-Toy-Auth": "letmein"}, permission="safe"),
        "noauth": McpServerConfig(url=url),
    }, on_status=seen)
    assert status_of(m, "web") == {"name": "web", "status": "ready", "tools": 13, "transport": "http"}
    assert status_of(m, "noauth")["status"] == "failed"
    tools = by_name(m)
    assert tools["mcp__web__add"].source == "mcp:web" and tools["mcp__web__add"].level == "safe"
    assert await tools["mcp__web__add"].func(None, a=20, b=22) == "42"
    assert await tools["mcp__web__image"].func(None) == "[image: image/png, 70 bytes]"
    assert await tools["mcp__web__structured"].func(None) == '{"answer": 42, "items": ["a", "b"]}'
    with pytest.raises(ToolError, match="this tool always fails"):
        await tools["mcp__web__fail"].func(None)
    task = asyncio.create_task(tools["mcp__web__slow"].func(None, seconds=30))
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await tools["mcp__web__echo"].func(None, text="after cancel") == "after cancel"


async def test_streamable_http_server_that_goes_away(managers: Any, http_server: Any) -> None:
    url, proc = http_server()
    seen = Recorder()
    m = await managers({"web": McpServerConfig(url=url)}, on_status=seen)
    tools = by_name(m)
    assert await tools["mcp__web__echo"].func(None, text="hi") == "hi"
    proc.kill()
    proc.wait()
    with pytest.raises(ToolError):
        await asyncio.wait_for(tools["mcp__web__echo"].func(None, text="hi"), 10)
    await wait_until_async(lambda: status_of(m, "web")["status"] == "stopped", what="the server to be stopped")
    assert status_of(m, "web")["status"] == "stopped"
    assert [s for s, _ in seen.of("web")] == ["ready", "stopped"]
    assert m.tools() == []


# --- server specs and the stdio transport ---------------------------------------------------------


def test_the_config_model_is_a_server_spec() -> None:
    spec: McpServerSpec = McpServerConfig(command="x")  # the structural type the manager takes
    assert isinstance(spec, McpServerSpec) and isinstance(PlainSpec(), McpServerSpec)
    assert not isinstance(object(), McpServerSpec)


async def test_any_object_shaped_like_a_spec_configures_a_server(managers: Any, workspace: Path) -> None:
    (workspace / "sub").mkdir()
    m = await managers({"plain": PlainSpec(command=sys.executable, args=(TOY_MCP_SERVER,), cwd="sub",
                                           env={"SERVER_API_KEY": "k"})})
    tools = by_name(m)
    assert {t.level for t in tools.values()} == {"safe"}
    assert await tools["mcp__plain__cwd"].func(None) == str((workspace / "sub").resolve())
    seen = json.loads(await tools["mcp__plain__env_probe"].func(None, names=["SERVER_API_KEY"]))
    assert seen == {"SERVER_API_KEY": "k"}
    with pytest.raises(ToolError, match=r"did not answer slow within 0.5s"):  # the spec's call_timeout
        await tools["mcp__plain__slow"].func(None, seconds=30)


def test_stdio_lines_parse_and_encode() -> None:
    request = mt.JSONRPCRequest(jsonrpc="2.0", id=7, method="tools/list")
    line = encode_message(SessionMessage(request))
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    parsed = parse_line(line.rstrip(b"\n"))
    assert isinstance(parsed, SessionMessage) and parsed.message == request
    assert isinstance(parse_line(b"not json"), ValueError)
    assert isinstance(parse_line(b'{"jsonrpc": "2.0"}'), ValueError)


async def test_a_cancelled_connection_kills_and_reaps_the_whole_group(workspace: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcp_stdio, "EXIT_GRACE", 0.3)
    monkeypatch.setattr(mcp_stdio, "TERM_GRACE", 0.3)
    tag = uuid.uuid4().hex
    # Ignores stdin EOF and SIGTERM, and leaves a child in its group.
    child = StdioChild("stubborn", sys.executable, [TOY_MCP_SERVER, "--spawn-child", "--linger", "--tag", tag],
                       env=secrets.child_env(), cwd=workspace)
    connected = asyncio.Event()

    async def hold() -> None:
        async with child.connect() as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            connected.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(hold())
    await asyncio.wait_for(connected.wait(), 15)
    pgid = child.pid
    assert pgid is not None and os.getpgid(pgid) == pgid
    await wait_until_async(lambda: len(processes_with(tag)) == 2, what="the server and its child")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
    await wait_until_async(lambda: processes_with(tag) == [] and not group_alive(pgid), what="the server's group to be gone")
    assert child.returncode is not None and child.returncode < 0  # killed, and reaped
    assert child.pid is None


async def test_stderr_is_kept_for_messages_and_never_mixed_into_the_protocol(workspace: Path) -> None:
    child = StdioChild("toy", sys.executable, [TOY_MCP_SERVER], env=secrets.child_env(), cwd=workspace)
    async with child.connect() as (read, write), ClientSession(read, write) as session:
        await session.initialize()  # the server wrote to stderr first: the handshake is unharmed
        assert (await session.call_tool("echo", {"text": "hi"})).content[0].text == "hi"  # type: ignore[union-attr]
    assert await child.stderr_tail() == ["toy server: stdio"]
    assert child.returncode == 0  # it exited by itself once its stdin closed
