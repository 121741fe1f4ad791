"""Issue 32, two daemon processes (LSP): a permission request of A's turn is asked in B's client too
and B's answer decides; A's client hears who decided and its own prompt is withdrawn. The flows in
detail (questions, the origin's own answer, a cancel from the observer, the ACP face):
unit/sessions/test_permission_anywhere.py, in-process."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from helpers import new_session

from toycoder_daemon.testing.fake_llm import FakeLLM


async def test_a_permission_of_as_turn_is_answered_in_bs_client(start_daemon, llm: FakeLLM, workspace: Path) -> None:
    a = await start_daemon(init=False)
    b = await start_daemon(init=False)
    await a.initialize(workspace, client="Neovim")
    await b.initialize(workspace, client="Visual Studio Code")
    sid = await new_session(a, title="shared")
    await b.call("toycoder/session/load", {"sessionId": sid})
    nobody = asyncio.Event()  # the person at A does not answer

    async def hold(params: dict[str, Any]) -> Any:
        await nobody.wait()
        return {"decision": "reject"}

    a.handlers["toycoder/requestPermission"] = hold
    b.handlers["toycoder/requestPermission"] = lambda params: {"decision": "allow_once"}
    llm.add({"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "hi\n"}}]},
            {"text": "Written."})
    try:
        result = await a.call("toycoder/prompt", {"sessionId": sid, "text": "write notes"})
    finally:
        nobody.set()
    assert result["text"] == "Written." and (workspace / "notes.txt").read_text() == "hi\n"
    [asked_a] = [r for r in a.requests_seen if r["method"] == "toycoder/requestPermission"]
    [asked_b] = [r for r in b.requests_seen if r["method"] == "toycoder/requestPermission"]
    assert asked_b["params"]["toolCallId"] == asked_a["params"]["toolCallId"]
    assert asked_b["params"]["turnId"] == asked_a["params"]["turnId"]
    resolved = [u["update"] for u in a.updates(sid) if u["update"]["kind"] == "permission_resolved"]
    assert resolved == [{"kind": "permission_resolved", "toolCallId": asked_a["params"]["toolCallId"],
                         "decision": "allow_once", "by": "Visual Studio Code"}]
    await a.wait_for(lambda: any(n["method"] == "$/cancelRequest" and n["params"]["id"] == asked_a["id"]
                                 for n in a.notifications), what="A's prompt to be withdrawn")
    await b.wait_for(lambda: any(u["update"]["kind"] == "permission_resolved" for u in b.updates(sid)),
                     what="B to hear the resolution")
