"""The ACP face as `python -m toycoder_daemon --acp`, driven by the ACP SDK's client side against the scripted
model server: startup (initialize, session/new and the commands it announces), a real turn with a
mention, and stdin's end ending the turn and the process. Everything else of the face runs in-process:
unit/faces/acp/test_acp.py."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from acp import resource_link_block, text_block
from acp_client import acp_daemon, new_session

from toycoder_daemon import __version__


async def test_initialize_and_new_session_announce_the_agent_and_its_commands(tmp_path, llm, workspace) -> None:
    async with acp_daemon(tmp_path, llm) as (conn, editor, _):
        init = editor.frames[0]["result"]
        assert init["agentInfo"] == {"name": "toycoder-daemon", "title": "ToyCoder", "version": __version__}
        assert init["agentCapabilities"]["loadSession"] is True
        assert init["agentCapabilities"]["sessionCapabilities"]["list"] == {}
        sid = await new_session(conn, workspace)
        assert sid
        await editor.wait_for(lambda f: f.get("params", {}).get("update", {}).get("sessionUpdate")
                              == "available_commands_update")
        update = editor.updates("available_commands_update")[0]
        names = {c["name"] for c in update["availableCommands"]}
        assert {"help", "tools", "tool", "model", "compact"} <= names
        tool = next(c for c in update["availableCommands"] if c["name"] == "tool")
        assert tool["input"] == {"hint": "enable|disable <name>"}


async def test_prompt_streams_text_and_mentions_become_paths(tmp_path, llm, workspace) -> None:
    reply = "Hello from the scripted model, in several chunks."
    llm.add({"text": reply, "chunk_size": 8, "chunk_delay": 0.02, "usage": {"prompt_tokens": 50, "completion_tokens": 7}})
    async with acp_daemon(tmp_path, llm) as (conn, editor, _):
        sid = await new_session(conn, workspace)
        link = resource_link_block("app.py", (workspace / "src" / "app.py").resolve().as_uri())
        resp = await conn.prompt(session_id=sid, prompt=[text_block("Explain"), link, text_block("please")])
        assert resp.stop_reason == "end_turn"
        chunks = editor.updates("agent_message_chunk")
        assert len(chunks) > 1 and editor.text() == reply
        answer = editor.index(lambda f: f.get("result", {}).get("stopReason") == "end_turn")
        assert answer > editor.index(lambda f: f.get("params", {}).get("update") == chunks[-1])
        assert editor.updates("usage_update")[-1]["used"] == 57
        # the link is a mention, and a mention attaches the file (issue 29)
        assert llm.requests[0]["body"]["messages"][-1] == {"role": "user", "content": (
            "Explain @src/app.py please\n\nAttached file src/app.py: lines 1-2 of 2\n"
            "     1\tdef add(a, b):\n     2\t    return a + b")}
        assert resp.usage is not None and resp.usage.input_tokens == 50


async def test_stdin_eof_ends_the_turn_and_the_process(tmp_path, llm, workspace) -> None:
    llm.add({"text": "word " * 200, "chunk_size": 5, "chunk_delay": 0.05})
    async with acp_daemon(tmp_path, llm) as (conn, editor, proc):
        sid = await new_session(conn, workspace)
        turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("talk")]))
        await editor.wait_for(lambda f: f.get("params", {}).get("update", {}).get("sessionUpdate")
                              == "agent_message_chunk")
        proc.stdin.close()
        assert await asyncio.wait_for(proc.wait(), 5) == 0
        turn.cancel()
    sessions = list((Path(os.environ["TOYCODER_DATA_DIR"])).rglob("*.jsonl"))
    stored = [json.loads(line) for p in sessions for line in p.read_text().splitlines()]
    assert any(r.get("t") == "msg" and "[interrupted by the user]" in str(r["m"].get("content")) for r in stored)
