"""Issue 33, one history, two views, at the faces: after a compaction, a reload in a fresh daemon
(toycoder/session/load, ACP session/load) shows the earlier turns the model no longer gets, with a
`compaction` entry where the model's context now starts (ACP: a thought chunk as the divider)."""

from __future__ import annotations

from pathlib import Path

from acp import text_block
from acp_client import acp_face, new_session
from helpers import write_config

from toycoder_daemon.testing.fake_llm import FakeLLM

KEEP_ONE = "session:\n  compress_keep_recent: 1\n"


async def test_lsp_reload_after_compaction_shows_the_earlier_turns(start_daemon, llm: FakeLLM) -> None:
    llm.add({"text": "first answer"}, {"text": "second answer"}, {"text": "SUMMARY of the first turn"})
    d = await start_daemon(extra=KEEP_ONE)
    sid = (await d.call("toycoder/session/new", {}))["sessionId"]
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "first question"})
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "second question"})
    out = await d.call("toycoder/prompt", {"sessionId": sid, "text": "/compact"})
    assert "summarised" in str(out)
    fresh = await start_daemon(extra=KEEP_ONE)
    loaded = await fresh.call("toycoder/session/load", {"sessionId": sid})
    shown = [(e["role"], e["text"]) for e in loaded["transcript"]]
    assert ("user", "first question") in shown and ("assistant", "first answer") in shown
    [compaction] = [i for i, (role, _) in enumerate(shown) if role == "compaction"]
    assert "SUMMARY of the first turn" in shown[compaction][1]
    assert shown.index(("user", "first question")) < compaction  # the divider after what it summarises
    assert loaded["session"]["messageCount"] == 4  # every message the person saw


async def test_acp_reload_after_compaction_shows_the_earlier_turns(tmp_path: Path, llm: FakeLLM,
                                                                   workspace: Path) -> None:
    config = write_config(tmp_path / "c.yaml", llm, extra=KEEP_ONE)
    llm.add({"text": "first answer"}, {"text": "second answer"}, {"text": "SUMMARY of the first turn"})
    async with acp_face(tmp_path, llm, config=config) as (conn, _, _):
        sid = await new_session(conn, workspace)
        for text in ("first question", "second question", "/compact"):
            await conn.prompt(session_id=sid, prompt=[text_block(text)])
    async with acp_face(tmp_path, llm, config=config) as (conn, editor, _):
        await conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
        kinds = [(u["sessionUpdate"], u.get("content", {}).get("text", "")) for u in editor.updates()]
        assert kinds[:5] == [("user_message_chunk", "first question"), ("agent_message_chunk", "first answer"),
                             ("user_message_chunk", "second question"), ("agent_message_chunk", "second answer"),
                             ("agent_thought_chunk", "[earlier turns summarised for the model]\n")]
