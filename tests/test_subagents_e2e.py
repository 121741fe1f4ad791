"""Sub-agents through the real daemon: the planner, a config-declared explorer, permission, usage, cancel."""

from __future__ import annotations

import asyncio
from pathlib import Path

from helpers import new_session
from rpc import Daemon
from waiting import scaled

from toycoder_daemon.testing.fake_llm import FakeLLM

EXPLORER = ("agents:\n  explorer:\n    tools: [read_file, list_directory]\n    model: fast\n    max_steps: 4\n"
            "  scribe:\n    prompt: explorer\n    tools: [write_file]\n    description: Writes notes.\n")


def call(name: str, **args) -> dict:
    return {"tool_calls": [{"name": name, "arguments": args}]}


async def test_planner_has_its_own_context_and_its_events_are_tagged(daemon: Daemon, llm: FakeLLM) -> None:
    llm.add(
        {"text": "Let me plan.", **call("planner", query="Add a subtract() function with tests")},
        {"text": "1. Read src/app.py\n2. Add subtract()\n3. Add tests", "chunk_size": 5},
        {"text": "Here is the plan."},
    )
    sid = await new_session(daemon)
    result = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "plan a subtract feature"})
    assert result["text"] == "Here is the plan."
    planner_req = llm.requests[1]["body"]
    assert "planning assistant" in planner_req["messages"][0]["content"]
    assert planner_req["messages"][1] == {"role": "user", "content": "Add a subtract() function with tests"}
    assert len(planner_req["messages"]) == 2 and "tools" not in planner_req
    tool_msg = [m for m in llm.requests[2]["body"]["messages"] if m["role"] == "tool"][0]
    assert tool_msg["content"] == "1. Read src/app.py\n2. Add subtract()\n3. Add tests"
    updates = daemon.updates(sid)
    parent = next(u["update"]["toolCallId"] for u in updates if u["update"]["kind"] == "tool_call")
    tagged = [u for u in updates if u.get("parentToolCallId") == parent]
    assert "".join(u["update"]["text"] for u in tagged if u["update"]["kind"] == "text_delta").startswith("1. Read")
    assert daemon.streamed_text(sid) == "Let me plan.Here is the plan."  # the planner's text is not the reply
    offered = {t["function"]["name"]: t["function"] for t in llm.requests[0]["body"]["tools"]}
    assert "ordered, executable steps" in offered["planner"]["description"]
    assert offered["planner"]["parameters"]["required"] == ["query"]


async def test_explorer_uses_only_its_tools(start_daemon, llm: FakeLLM, workspace: Path) -> None:
    d = await start_daemon(extra=EXPLORER)
    llm.add(
        call("explorer", query="What does src/app.py define?", context="The user cares about math helpers."),
        call("read_file", path="src/app.py"),
        call("write_file", path="pwned.txt", content="x"),
        {"text": "It defines add(a, b)."},
        {"text": "The explorer says: add(a, b)."},
    )
    sid = await new_session(d)
    result = await d.call("toycoder/prompt", {"sessionId": sid, "text": "explore"})
    assert result["text"] == "The explorer says: add(a, b)."
    first = llm.requests[1]["body"]
    assert "read-only code explorer" in first["messages"][0]["content"]
    assert "The user cares about math helpers." in first["messages"][0]["content"]
    assert first["model"] == "fake-fast"
    assert {t["function"]["name"] for t in first["tools"]} == {"read_file", "list_directory"}
    outs = [u["update"] for u in d.updates(sid) if u["update"]["kind"] == "tool_result" and u.get("parentToolCallId")]
    assert outs[0]["status"] == "completed" and "return a + b" in outs[0]["output"]
    assert outs[1]["status"] == "failed" and "unknown tool 'write_file'" in outs[1]["output"]
    assert not (workspace / "pwned.txt").exists() and d.requests_seen == []
    main_obs = [m for m in llm.requests[4]["body"]["messages"] if m["role"] == "tool"][0]
    assert main_obs["content"] == "It defines add(a, b)."


async def test_subagent_with_a_sensitive_tool_asks_the_editor(start_daemon, llm: FakeLLM, workspace: Path) -> None:
    d = await start_daemon(extra=EXPLORER)
    asked: list[dict] = []
    d.handlers["toycoder/requestPermission"] = lambda p: asked.append(p) or {"decision": "allow_once"}
    def used(reply: dict, prompt: int, completion: int) -> dict:
        return {**reply, "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}

    llm.add(used(call("scribe", query="note it"), 10, 1),
            used(call("write_file", path="notes.txt", content="noted\n"), 20, 2),  # the scribe's calls
            used({"text": "written"}, 100, 7),
            used({"text": "ok"}, 30, 3))
    sid = await new_session(d)
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "take a note"})
    assert asked and asked[0]["tool"] == "write_file" and asked[0]["preview"]["kind"] == "diff"
    assert (workspace / "notes.txt").read_text() == "noted\n"
    usage = await d.call("toycoder/prompt", {"sessionId": sid, "text": "/usage"})
    assert "160 prompt, 13 completion, 173 total" in usage["text"]  # main agent + scribe


async def test_cancel_reaches_the_subagent(start_daemon, llm: FakeLLM) -> None:
    d = await start_daemon(extra=EXPLORER)
    llm.add(call("explorer", query="look"), {"text": "thinking " * 200, "chunk_delay": 0.02})
    sid = await new_session(d)
    _, fut = d.request_future("toycoder/prompt", {"sessionId": sid, "text": "go"})
    await d.wait_for(lambda: any(u.get("parentToolCallId") for u in d.updates(sid)))
    await d.call("toycoder/cancel", {"sessionId": sid})
    assert (await asyncio.wait_for(fut, scaled(10)))["result"]["stopReason"] == "cancelled"
    finished = [u["update"] for u in d.updates(sid) if u["update"]["kind"] == "tool_result" and not u.get("parentToolCallId")]
    assert finished[0]["status"] == "cancelled"
    llm.add({"text": "fine"})
    assert (await d.call("toycoder/prompt", {"sessionId": sid, "text": "again"}))["text"] == "fine"
    assert llm.violations == []
