"""The planner sub-agent's answer seeds the session's plan, through the real daemon on each face: the
seed (untagged, all pending), then the main agent's update. The logic in-process:
unit/tools/plan/test_planner_plan.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp import text_block
from acp_client import acp_daemon
from acp_client import new_session as acp_new_session
from helpers import PLANNER_ANSWER, SEEDED, new_session, plan_call, planner_call
from rpc import Daemon

from toycoder_daemon.testing.fake_llm import FakeLLM


def planner_script() -> list[dict[str, Any]]:
    return [planner_call(), {"text": PLANNER_ANSWER},
            plan_call(("Read src/app.py", "completed"), ("Add subtract()", "in_progress"), ("Add tests", "pending")),
            {"text": "Working on it."}]


async def test_lsp_the_planner_seeds_the_plan(daemon: Daemon, llm: FakeLLM) -> None:
    llm.add(*planner_script())
    sid = await new_session(daemon)
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "plan a subtract feature"})
    plans = [u for u in daemon.updates(sid) if u["update"]["kind"] == "plan"]
    assert [(e["content"], e["priority"], e["status"]) for e in plans[0]["update"]["entries"]] == SEEDED
    assert plans[0].get("parentToolCallId") is None
    assert [e["status"] for e in plans[1]["update"]["entries"]] == ["completed", "in_progress", "pending"]
    assert len(plans) == 2


async def test_acp_the_planner_seeds_the_plan(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    llm.add(*planner_script())
    async with acp_daemon(tmp_path, llm) as (conn, editor, _):
        sid = await acp_new_session(conn, workspace)
        await conn.prompt(session_id=sid, prompt=[text_block("plan a subtract feature")])
        plans = [u["entries"] for u in editor.updates("plan")]
        assert [(e["content"], e["priority"], e["status"]) for e in plans[0]] == SEEDED
        assert [[e["status"] for e in p] for p in plans[1:]] == [["completed", "in_progress", "pending"]]
