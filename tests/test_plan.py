"""The update_plan tool: the model keeps a plan; clients get it whole each time (LSP update kind
`plan`, ACP `plan`), statuses changing as the work goes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp import text_block
from helpers import new_session
from inproc import start_daemon_inproc  # noqa: F401  (in-process LSP face)
from inproc_app import InProc
from test_acp import acp_face
from test_acp import new_session as acp_new_session

from toycoder_daemon.ports import PlanUpdated
from toycoder_daemon.testing.fake_llm import FakeLLM


def plan_call(*steps: tuple[str, str]) -> dict[str, Any]:
    return {"tool_calls": [{"name": "update_plan", "arguments": {"entries": [
        {"content": c, "status": s, "priority": "high" if i == 0 else "medium"} for i, (c, s) in enumerate(steps)]}}]}


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
