"""Hooks once on the ACP face (test_hooks.py has every bullet on the LSP wire): the workspace's
settings are asked about through session/request_permission, a trusted workspace hook denies a
call, and each run is a thought line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from acp import text_block
from acp_client import acp_face
from acp_client import new_session as acp_new_session
from helpers import write_call, write_config

from toycoder_daemon.testing.fake_llm import FakeLLM


async def test_acp_asks_trust_through_request_permission_then_a_workspace_hook_denies(
        tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    script = tmp_path / "deny.py"
    script.write_text("import json, sys\njson.load(sys.stdin)\n"
                      "print(json.dumps({'decision': 'deny', 'reason': 'not in this repo'}))\n")
    cmd = f"{sys.executable} {script}"
    (workspace / ".toycoder").mkdir()
    (workspace / ".toycoder" / "settings.yaml").write_text(
        f"hooks:\n  PreToolUse:\n    - matcher: write_file\n      hooks: [{{type: command, command: {json.dumps(cmd)}}}]\n"
        "agents:\n  repo_planner: {prompt: planner}\n")
    config = write_config(tmp_path / "config.yaml", llm, extra="hooks_workspace_sandbox: false\n")
    async with acp_face(tmp_path, llm, config=config) as (conn, editor, _):
        sid = await acp_new_session(conn, workspace)
        editor.choice = "allow_once"
        llm.add(write_call("new.txt", "x\n"), {"text": "ok"})
        await conn.prompt(session_id=sid, prompt=[text_block("write it")])
        [trust] = [r for r in editor.requests("session/request_permission")
                   if r["toolCall"]["title"] == "Trust this workspace's settings"]
        assert [o["optionId"] for o in trust["options"]] == ["allow_always", "allow_once", "reject"]
        assert cmd in trust["toolCall"]["content"][0]["content"]["text"]
        assert "agent: repo_planner: tools none; model default; prompt planner" in trust["toolCall"]["content"][0]["content"]["text"]
        assert not (workspace / "new.txt").exists()
        thoughts = editor.text("agent_thought_chunk")
        assert f"[hook PreToolUse `{cmd}` blocked" in thoughts and "not in this repo" in thoughts
        [result] = [u for u in editor.updates("tool_call_update") if u.get("status") == "failed"]
        assert "not in this repo" in json.dumps(result)


async def test_acp_a_cancelled_trust_question_is_asked_again_and_a_reject_is_not(
        tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    (workspace / ".toycoder").mkdir()
    (workspace / ".toycoder" / "settings.yaml").write_text("permissions: {allow: [write_file]}\n")
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        sid = await acp_new_session(conn, workspace)

        def asked() -> int:
            return len([r for r in editor.requests("session/request_permission")
                        if r["toolCall"]["title"] == "Trust this workspace's settings"])

        for choice, expected in ((None, 1), (None, 2), ("reject", 3), ("reject", 3)):
            editor.choice = choice  # None: the client answers "cancelled", which is no answer
            llm.add({"text": "ok"})
            await conn.prompt(session_id=sid, prompt=[text_block("hi")])
            assert asked() == expected, (choice, asked())
