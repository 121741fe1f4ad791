"""Issue 33, SSE MCP servers: the HTTP+SSE transport through the mcp SDK's SSE client, against the
toy server served by the SDK's server side (`sse_app`) on 127.0.0.1, port 0: from the config
(`transport: sse`, the LSP face) and from an ACP client (`type: "sse"`, mcpCapabilities.sse)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp import text_block
from acp.schema import HttpHeader, SseMcpServer
from acp_client import acp_face, new_session
from helpers import write_config

from toycoder_daemon.config.model import McpServerConfig
from toycoder_daemon.testing.fake_llm import FakeLLM
from toycoder_daemon.tools.mcp.manager import McpManager


async def test_an_sse_server_from_the_config_serves_its_tools(http_server: Any, workspace: Path) -> None:
    url, _ = http_server("--sse", "--require-header", "X-Toy-Auth=letmein")
    m = McpManager({"events": McpServerConfig(url=url, transport="sse", headers={"X-Toy-Auth": "letmein"},
                                              permission="safe"),
                    "noauth": McpServerConfig(url=url, transport="sse")}, workspace)
    try:
        await m.start()
        assert await m.wait_ready(15)
        rows = {r["name"]: r for r in m.status()}
        assert rows["events"]["status"] == "ready" and rows["events"]["transport"] == "sse"
        assert rows["noauth"]["status"] == "failed"  # the headers go with every request
        add = next(t for t in m.tools() if t.name == "mcp__events__add")
        assert await add.func(None, a=20, b=22) == "42"
    finally:
        await m.aclose()


async def test_lsp_turn_calls_a_config_sse_server(start_daemon, http_server: Any, llm: FakeLLM) -> None:
    url, _ = http_server("--sse")
    llm.add({"tool_calls": [{"name": "mcp__events__add", "arguments": {"a": 2, "b": 40}}]},
            {"text": "42 it is", "expect": {"last_tool_contains": "42"}})
    d = await start_daemon(extra=f"mcp_servers:\n  events: {{url: '{url}', transport: sse, permission: safe}}\n")
    sid = (await d.call("toycoder/session/new", {}))["sessionId"]
    out = await d.call("toycoder/prompt", {"sessionId": sid, "text": "add"})
    assert out["text"] == "42 it is" and llm.violations == []


async def test_acp_client_sse_server(tmp_path: Path, http_server: Any, llm: FakeLLM, workspace: Path) -> None:
    url, _ = http_server("--sse", "--require-header", "X-Toy-Auth=letmein")
    llm.add({"tool_calls": [{"name": "mcp__events__add", "arguments": {"a": 2, "b": 40}}]},
            {"text": "42 it is", "expect": {"last_tool_contains": "42"}})
    async with acp_face(tmp_path, llm, config=write_config(tmp_path / "c.yaml", llm)) as (conn, editor, _):
        assert editor.frames[0]["result"]["agentCapabilities"]["mcpCapabilities"]["sse"] is True
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[SseMcpServer(
            type="sse", name="events", url=url, headers=[HttpHeader(name="X-Toy-Auth", value="letmein")])])).session_id
        other = await new_session(conn, workspace)
        resp = await conn.prompt(session_id=sid, prompt=[text_block("add 2 and 40")])
        assert resp.stop_reason == "end_turn" and editor.text() == "42 it is"
        assert "mcp__events__add" in [t["function"]["name"] for t in llm.requests[0]["body"]["tools"]]
        assert llm.violations == [] and other != sid
