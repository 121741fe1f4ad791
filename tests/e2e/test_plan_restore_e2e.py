"""A session's plan comes back with it through the LSP face of two daemon processes: the second one's
session/load ends with the plan the first one showed. Everything else in-process:
unit/tools/plan/test_plan_restore.py."""

from __future__ import annotations

from helpers import IN_PROGRESS, new_session, plan_call

from toycoder_daemon.testing.fake_llm import FakeLLM


async def test_lsp_load_ends_with_the_plan(start_daemon, llm: FakeLLM) -> None:
    a = await start_daemon()
    llm.add(plan_call(*IN_PROGRESS), {"text": "working"})
    sid = await new_session(a)
    await a.call("toycoder/prompt", {"sessionId": sid, "text": "fix it"})
    live = [u["update"]["entries"] for u in a.updates(sid) if u["update"]["kind"] == "plan"][-1]
    await a.close()
    b = await start_daemon()
    transcript = (await b.call("toycoder/session/load", {"sessionId": sid}))["transcript"]
    assert transcript[-1] == {"role": "plan", "text": "", "entries": live}
    assert [e["role"] for e in transcript].count("plan") == 1
