"""Sub-agents through the real daemon: the planner, its updates tagged with parentToolCallId on the
wire. Explorer, permission, usage and cancel: test_subagents.py, in-process."""

from __future__ import annotations

from helpers import new_session
from rpc import Daemon

from toycoder_daemon.testing.fake_llm import FakeLLM


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
    assert tool_msg["content"].startswith("1. Read src/app.py\n2. Add subtract()\n3. Add tests\n\n[These 3 steps")
    updates = daemon.updates(sid)
    parent = next(u["update"]["toolCallId"] for u in updates if u["update"]["kind"] == "tool_call")
    tagged = [u for u in updates if u.get("parentToolCallId") == parent]
    assert "".join(u["update"]["text"] for u in tagged if u["update"]["kind"] == "text_delta").startswith("1. Read")
    assert daemon.streamed_text(sid) == "Let me plan.Here is the plan."  # the planner's text is not the reply
    offered = {t["function"]["name"]: t["function"] for t in llm.requests[0]["body"]["tools"]}
    assert "ordered, executable steps" in offered["planner"]["description"]
    assert offered["planner"]["parameters"]["required"] == ["query"]
