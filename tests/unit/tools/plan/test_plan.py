"""The update_plan tool: the model keeps a plan; clients get it whole each time (LSP update kind
`plan`, ACP `plan`), statuses changing as the work goes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp import text_block
from acp_client import acp_face
from acp_client import new_session as acp_new_session
from helpers import new_session, plan_call, write_config
from inproc_app import InProc

from toycoder_daemon.core.ports import PlanUpdated, ToolCallFinished
from toycoder_daemon.testing.fake_llm import FakeLLM

STEPS = [plan_call(("read the code", "in_progress"), ("fix the bug", "pending")),
         plan_call(("read the code", "completed"), ("fix the bug", "in_progress")),
         {"text": "done"}]


async def test_the_model_keeps_a_plan(inproc) -> None:
    p: InProc = inproc()
    p.script.add(*STEPS, {"tool_calls": [{"name": "update_plan", "arguments": {"entries": []}}]}, {"text": "ok"})
    sid = p.new_session()
    await p.prompt(sid, "fix it")
    plans = [e for e in p.frontend.of(sid) if isinstance(e, PlanUpdated)]
    assert [[(x.content, x.status) for x in e.entries] for e in plans] == [
        [("read the code", "in_progress"), ("fix the bug", "pending")],
        [("read the code", "completed"), ("fix the bug", "in_progress")]]
    assert plans[0].entries[0].priority == "high"
    assert "1/2 completed" in p.script.calls[2]["messages"][-1]["content"]
    await p.prompt(sid, "again")
    assert "at least one entry" in p.script.calls[-1]["messages"][-1]["content"]
    ended = [e for e in p.frontend.of(sid) if isinstance(e, ToolCallFinished)]
    assert [e.status for e in ended][-1] == "failed"  # a refused plan is not shown as done


async def test_lsp_plan_updates(start_daemon, llm: FakeLLM) -> None:
    d = await start_daemon()
    llm.add(*STEPS)
    sid = await new_session(d)
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "fix it"})
    plans = [u["update"]["entries"] for u in d.updates(sid) if u["update"]["kind"] == "plan"]
    assert [[e["status"] for e in p] for p in plans] == [["in_progress", "pending"], ["completed", "in_progress"]]
    assert plans[0][0] == {"content": "read the code", "priority": "high", "status": "in_progress"}


async def test_acp_plan_updates(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    llm.add(*STEPS)
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        sid = await acp_new_session(conn, workspace)
        await conn.prompt(session_id=sid, prompt=[text_block("fix it")])
        plans = [u["entries"] for u in editor.updates("plan")]
        assert [[e["status"] for e in p] for p in plans] == [["in_progress", "pending"], ["completed", "in_progress"]]
        assert plans[1][1] == {"content": "fix the bug", "priority": "medium", "status": "in_progress"}


# ---- a sub-agent's plan is its own, not the session's ----------------------------------------------

WORKER = {"worker": {"prompt": "explorer", "tools": ["update_plan"], "max_steps": 3}}
WORKER_YAML = "agents:\n  worker: {prompt: explorer, tools: [update_plan], max_steps: 3}\n"
MAIN_PLAN = [("delegate the survey", "completed"), ("write the report", "in_progress")]
SUB_AGENT_TURN = [{"tool_calls": [{"name": "worker", "arguments": {"query": "survey the code"}}]},
                  plan_call(("list the modules", "in_progress"), ("read each one", "pending")),  # the worker's
                  {"text": "surveyed"},
                  plan_call(*MAIN_PLAN),  # the main agent's: the session's plan
                  {"text": "done"}]


def statuses(entries: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["content"], e["status"]) for e in entries]


async def test_a_sub_agents_plan_is_not_the_sessions(inproc) -> None:
    p: InProc = inproc({"agents": WORKER})
    p.script.add(*SUB_AGENT_TURN)
    sid = p.new_session()
    await p.prompt(sid, "survey and report")
    plans = [e for e in p.frontend.of(sid) if isinstance(e, PlanUpdated)]
    assert [[(x.content, x.status) for x in e.entries] for e in plans] == [MAIN_PLAN]
    assert plans[0].parent_tool_call_id is None
    # the worker's update_plan still shows, as its tool call (its arguments hold the list)
    shown = [e for e in p.frontend.of(sid, "tool_call") if getattr(e, "name", "") == "update_plan"]
    assert [e.parent_tool_call_id is not None for e in shown] == [True, False]


async def test_lsp_a_sub_agents_plan_is_not_sent(start_daemon, llm: FakeLLM) -> None:
    d = await start_daemon(extra=WORKER_YAML)
    llm.add(*SUB_AGENT_TURN)
    sid = await new_session(d)
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "survey and report"})
    plans = [u for u in d.updates(sid) if u["update"]["kind"] == "plan"]
    assert [statuses(u["update"]["entries"]) for u in plans] == [MAIN_PLAN]
    assert plans[0].get("parentToolCallId") is None


async def test_acp_a_sub_agents_plan_is_not_sent(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    llm.add(*SUB_AGENT_TURN)
    config = write_config(tmp_path / "config.yaml", llm, extra=WORKER_YAML)
    async with acp_face(tmp_path, llm, config=config) as (conn, editor, _):
        sid = await acp_new_session(conn, workspace)
        await conn.prompt(session_id=sid, prompt=[text_block("survey and report")])
        assert [statuses(u["entries"]) for u in editor.updates("plan")] == [MAIN_PLAN]
        titles = [u["title"] for u in editor.updates("tool_call")]
        assert any(t.startswith("worker › update_plan") for t in titles), titles  # still shown as its call


async def test_a_planner_a_sub_agent_calls_seeds_no_session_plan(inproc) -> None:
    p: InProc = inproc({"agents": {"lead": {"prompt": "explorer", "tools": ["planner"], "max_steps": 3}}})
    p.script.add({"tool_calls": [{"name": "lead", "arguments": {"query": "plan the survey"}}]},
                 {"tool_calls": [{"name": "planner", "arguments": {"query": "steps of a survey"}}]},  # lead's
                 {"text": "1. List the modules\n2. Read each one"},  # the planner's answer, to lead
                 {"text": "planned"}, {"text": "done"})
    sid = p.new_session()
    await p.prompt(sid, "survey")
    assert p.frontend.of(sid, "plan") == []
    to_lead = [m["content"] for m in p.script.calls[3]["messages"] if m["role"] == "tool"]
    assert to_lead == ["1. List the modules\n2. Read each one"]  # no note claiming a session plan
