"""A stored session with values this version does not know (hand-edited, or written by an older or
newer one): a tool result's status "ok", a turn's stopReason "finished", token counts that are not
a list of numbers. Loading tolerates them on both faces: the status reads as "completed", the stop
reason as unrecorded, the counts as none (each logged at debug), and the rest of the history is
intact."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from acp_client import acp_face
from inproc_app import InProc

from toycoder_daemon.sessions.store import SessionStore
from toycoder_daemon.testing.fake_llm import FakeLLM


def write_session(data_dir: Path, workspace: Path) -> str:
    """A session file as the store lays it out, written here (not by the daemon)."""
    store = SessionStore(data_dir, workspace.resolve())
    sid = store.new_id()
    store.dir.mkdir(parents=True, exist_ok=True)
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "README.md"}'}}
    records: list[dict[str, Any]] = [
        {"t": "meta", "id": sid, "title": "Odd values", "createdAt": 1.0, "mode": "ask", "usage": "many",
         "turnEnds": {"t1": {"stopReason": "finished", "usage": [1, 2, 3]},
                      "t2": {"stopReason": "end_turn", "usage": {"total": 9}}}},
        {"t": "msg", "m": {"role": "user", "content": "read it", "turn": "t1"}},
        {"t": "msg", "m": {"role": "assistant", "content": None, "tool_calls": [call]}},
        {"t": "msg", "m": {"role": "tool", "tool_call_id": "c1", "content": "# readme", "status": "ok"}},
        {"t": "msg", "m": {"role": "assistant", "content": "read."}},
        {"t": "msg", "m": {"role": "user", "content": "again", "turn": "t2"}},
        {"t": "msg", "m": {"role": "assistant", "content": "done."}},
    ]
    (store.dir / f"{sid}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return sid


async def test_the_core_transcript_maps_unknown_values(tmp_path: Path, workspace: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    p = InProc(workspace.resolve(), tmp_path / "data")
    try:
        sid = write_session(tmp_path / "data", workspace)
        with caplog.at_level(logging.DEBUG, logger="toycoder_daemon.sessions.session"):
            entries = (await p.app.load(sid)).transcript()
        [tool] = [e for e in entries if e.role == "tool"]
        first, second = [e for e in entries if e.role == "user"]
        assert (tool.status, tool.text, first.stop_reason) == ("completed", "# readme", None)
        assert second.stop_reason == "end_turn" and second.usage is not None and second.usage.total_tokens == 0
        assert p.app.session(sid).usage.total_tokens == 0
        assert "'ok'" in caplog.text and "'finished'" in caplog.text and "'many'" in caplog.text
    finally:
        await p.close()


async def test_lsp_session_load_tolerates_them(start_daemon, tmp_path: Path, workspace: Path) -> None:
    sid = write_session(tmp_path / "data", workspace)
    d = await start_daemon()
    loaded = await d.call("toycoder/session/load", {"sessionId": sid})
    entries = loaded["transcript"]
    assert [e["role"] for e in entries] == ["user", "tool_call", "tool", "assistant", "user", "assistant"]
    assert entries[2]["status"] == "completed" and "stopReason" not in entries[0]
    assert entries[0]["usage"] == {"promptTokens": 1, "completionTokens": 2, "totalTokens": 3}
    assert (await d.call("toycoder/session/list", {}))["sessions"][0]["sessionId"] == sid  # the daemon goes on


async def test_acp_session_load_tolerates_them(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    sid = write_session(tmp_path / "data", workspace)
    llm.add({"text": "still here"})
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        await conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
        [result] = [u for u in editor.updates("tool_call_update") if u["toolCallId"] == "c1"]
        assert result["status"] == "completed" and result["content"][0]["content"]["text"] == "# readme"
        assert (await conn.prompt(session_id=sid, prompt=[text_block("go on")])).stop_reason == "end_turn"


def test_a_newer_versions_longer_usage_keeps_the_counts_this_version_knows() -> None:
    """One more count stored by a later version must not read (and be saved back) as none."""
    from toycoder_daemon.llm.base import Usage
    from toycoder_daemon.sessions.session import _stored_usage

    assert _stored_usage([1200, 300, 1500, 0, 7]) == Usage(1200, 300, 1500, 0)
    assert _stored_usage([1200, "x"]) == Usage()  # not numbers: none, as before
