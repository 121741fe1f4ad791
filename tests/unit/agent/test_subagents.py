"""Sub-agents in-process: the planner's own context, a config-declared explorer restricted to its
tools, a sub-agent's sensitive tool asking the person, usage, cancel. test_subagents_e2e.py keeps
one subprocess run."""

from __future__ import annotations

import asyncio
from pathlib import Path

from inproc_app import InProc, eventually

from toycoder_daemon.core.ports import ToolCallFinished, ToolCallStarted

EXPLORER = {"agents": {
    "explorer": {"tools": ["read_file", "list_directory"], "model": "fast", "max_steps": 4},
    "scribe": {"prompt": "explorer", "tools": ["write_file"], "description": "Writes notes."},
}}


def call(name: str, **args: object) -> dict:
    return {"tool_calls": [{"name": name, "arguments": args}]}


async def test_planner_has_its_own_context_and_its_events_are_tagged(inproc) -> None:
    p: InProc = inproc()
    p.script.add(
        {"text": "Let me plan.", **call("planner", query="Add a subtract() function with tests")},
        {"text": "1. Read src/app.py\n2. Add subtract()\n3. Add tests", "chunk_size": 5},
        {"text": "Here is the plan."},
    )
    sid = p.new_session()
    assert (await p.prompt(sid, "plan a subtract feature")).result.text == "Here is the plan."
    planner = p.script.calls[1]
    assert "planning assistant" in planner["messages"][0]["content"]
    assert planner["messages"][1] == {"role": "user", "content": "Add a subtract() function with tests"}
    assert len(planner["messages"]) == 2 and planner["tools"] is None
    tool_msg = [m for m in p.script.calls[2]["messages"] if m["role"] == "tool"][0]
    assert tool_msg["content"].startswith("1. Read src/app.py\n2. Add subtract()\n3. Add tests\n\n[These 3 steps")
    parent = next(e for e in p.frontend.of(sid) if isinstance(e, ToolCallStarted)).tool_call_id
    tagged = [e for e in p.frontend.of(sid, "text_delta") if e.parent_tool_call_id == parent]
    assert "".join(e.text for e in tagged).startswith("1. Read")  # type: ignore[union-attr]
    assert p.frontend.streamed_text(sid) == "Let me plan.Here is the plan."  # the planner's text is not the reply
    offered = {t["function"]["name"]: t["function"] for t in p.script.calls[0]["tools"]}
    assert "ordered, executable steps" in offered["planner"]["description"]
    assert offered["planner"]["parameters"]["required"] == ["query"]


async def test_explorer_uses_only_its_tools(inproc, workspace: Path) -> None:
    p: InProc = inproc(EXPLORER)
    p.script.add(
        call("explorer", query="What does src/app.py define?", context="The user cares about math helpers."),
        call("read_file", path="src/app.py"),
        call("write_file", path="pwned.txt", content="x"),
        {"text": "It defines add(a, b)."},
        {"text": "The explorer says: add(a, b)."},
    )
    sid = p.new_session()
    assert (await p.prompt(sid, "explore")).result.text == "The explorer says: add(a, b)."
    first = p.script.calls[1]
    assert "read-only code explorer" in first["messages"][0]["content"]
    assert "The user cares about math helpers." in first["messages"][0]["content"]
    assert first["model"] == "fake-fast"
    assert {t["function"]["name"] for t in first["tools"]} == {"read_file", "list_directory"}
    outs = [e for e in p.frontend.of(sid) if isinstance(e, ToolCallFinished) and e.parent_tool_call_id]
    assert outs[0].status == "completed" and "return a + b" in outs[0].output
    assert outs[1].status == "failed" and "unknown tool 'write_file'" in outs[1].output
    assert not (workspace / "pwned.txt").exists() and p.frontend.requests == []
    main_obs = [m for m in p.script.calls[4]["messages"] if m["role"] == "tool"][0]
    assert main_obs["content"] == "It defines add(a, b)."


async def test_subagent_with_a_sensitive_tool_asks_and_its_tokens_count(inproc, workspace: Path) -> None:
    p: InProc = inproc(EXPLORER)
    p.frontend.default_decision = "allow_once"

    def used(reply: dict, prompt: int, completion: int) -> dict:
        return {**reply, "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}

    p.script.add(used(call("scribe", query="note it"), 10, 1),
                 used(call("write_file", path="notes.txt", content="noted\n"), 20, 2),  # the scribe's calls
                 used({"text": "written"}, 100, 7),
                 used({"text": "ok"}, 30, 3))
    sid = p.new_session()
    await p.prompt(sid, "take a note")
    asked = p.frontend.requests
    assert asked and asked[0].tool == "write_file" and asked[0].preview and asked[0].preview["kind"] == "diff"
    assert (workspace / "notes.txt").read_text() == "noted\n"
    assert p.app.session(sid).turn_usage.total_tokens == 173  # the turn's tokens include the scribe's
    assert "160 prompt, 13 completion, 173 total" in (await p.command(sid, "/usage")).result.text


async def test_each_session_binds_its_own_subagents(inproc) -> None:
    p: InProc = inproc(EXPLORER)
    a, b = p.app.session(p.new_session()), p.app.session(p.new_session())
    assert a.tools.get("explorer") is not b.tools.get("explorer")
    assert p.app.tools.get("explorer") is not None  # the catalog still describes it (faces look names up)


async def test_cancel_reaches_the_subagent(inproc) -> None:
    p: InProc = inproc(EXPLORER)
    p.script.add(call("explorer", query="look"), {"text": ["thinking", " more"], "chunk_delay": 3600})
    sid = p.new_session()
    turn = p.start_prompt(sid, "go")
    await eventually(lambda: any(e.parent_tool_call_id for e in p.frontend.of(sid, "text_delta")),
                     "the explorer's first delta")
    assert p.app.cancel(sid)
    assert (await asyncio.wait_for(turn, 10)).result.stop_reason == "cancelled"
    finished = [e for e in p.frontend.of(sid) if isinstance(e, ToolCallFinished) and not e.parent_tool_call_id]
    assert finished[0].status == "cancelled"
    p.script.add({"text": "fine"})
    assert (await p.prompt(sid, "again")).result.text == "fine"
    assert p.script.violations == []
