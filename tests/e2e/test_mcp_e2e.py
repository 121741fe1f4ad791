"""MCP servers through the real daemon: start-up in the background, tools to the model, permission,
failures reported to the editor, /mcp, and no process left behind."""

from __future__ import annotations

import sys

from helpers import TOY_MCP_SERVER, processes_with, unique_marker
from rpc import Daemon
from waiting import wait_until_async

from toycoder_daemon.testing.fake_llm import FakeLLM


def mcp_config(tag: str) -> str:
    return (
        "mcp_servers:\n"
        f"  toy: {{command: {sys.executable}, args: [{TOY_MCP_SERVER}, --tag, {tag}], permission: safe}}\n"
        f"  guarded: {{command: {sys.executable}, args: [{TOY_MCP_SERVER}, --tag, {tag}]}}\n"
        "  broken: {command: /nonexistent/mcp-server, start_timeout: 5}\n"
    )


async def mcp_tools(d: Daemon, sid: str) -> dict[str, dict]:
    async def ready() -> dict[str, dict] | None:
        tools = {t["name"]: t for t in (await d.call("toycoder/tools/list", {"sessionId": sid}))["tools"]}
        return tools if "mcp__toy__add" in tools and "mcp__guarded__add" in tools else None

    return await wait_until_async(ready, 20, "the MCP servers' tools", interval=0.1)


async def test_mcp_tools_through_the_daemon(start_daemon, llm: FakeLLM) -> None:
    tag = unique_marker("toycoder-e2e-mcp")
    d = await start_daemon(extra=mcp_config(tag))
    sid = (await d.call("toycoder/session/new", {}))["sessionId"]
    tools = await mcp_tools(d, sid)
    assert tools["mcp__toy__add"]["source"] == "mcp:toy" and tools["mcp__toy__add"]["permission"] == "safe"
    assert tools["mcp__guarded__echo"]["permission"] == "sensitive"
    warning = await d.wait_for(lambda: [n for n in d.notifications if n["method"] == "window/showMessage"
                                        and "broken" in n["params"]["message"]])
    assert warning[0]["params"]["type"] == 2  # a warning; the daemon and the other servers go on

    asked: list[dict] = []
    d.handlers["toycoder/requestPermission"] = lambda p: asked.append(p) or {"decision": "reject"}
    llm.add(
        {"tool_calls": [{"name": "mcp__toy__add", "arguments": {"a": 2, "b": 40}},
                        {"name": "mcp__toy__fail", "arguments": {}},
                        {"name": "mcp__guarded__echo", "arguments": {"text": "hi"}}]},
        {"text": "2 + 40 = 42"},
    )
    result = await d.call("toycoder/prompt", {"sessionId": sid, "text": "add"})
    assert result["text"] == "2 + 40 = 42"
    offered = {t["function"]["name"]: t["function"] for t in llm.requests[0]["body"]["tools"]}
    assert offered["mcp__toy__add"]["parameters"]["properties"].keys() == {"a", "b"}
    outs = [u["update"] for u in d.updates(sid) if u["update"]["kind"] == "tool_result"]
    assert outs[0] == {**outs[0], "status": "completed", "output": "42"}
    assert outs[1]["status"] == "failed" and "always fails" in outs[1]["output"]
    assert outs[2]["status"] == "denied" and asked[0]["tool"] == "mcp__guarded__echo"

    listing = (await d.call("toycoder/prompt", {"sessionId": sid, "text": "/mcp"}))["text"]
    assert "toy" in listing and "ready" in listing and "failed" in listing
    assert processes_with(tag)
    await d.close()
    await wait_until_async(lambda: processes_with(tag) == [], what="the MCP servers to exit with the daemon")
