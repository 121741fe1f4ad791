"""Issue 15's flows through the real daemon subprocess, one thin run per face and flow; the logic is
tested in-process (test_modes.py, test_titles.py, test_session_close.py, test_shared_sessions.py,
test_plan.py, test_planner_plan.py).

- LSP: modes (each one), the title after the first turn (session_info), close.
- ACP (the SDK's client side): modes (each one), session_info_update after the first turn,
  close and resume; two daemons on one session (replay, -32011, SIGKILL mid-turn then repair).
The LSP face's two daemons and kill -9 run in test_sessions_e2e.py; plans through both daemons in
test_planner_plan.py."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block
from acp_client import acp_daemon
from acp_client import new_session as acp_new_session
from helpers import (
    kill_process_groups,
    new_session,
    processes_running,
    processes_with,
    sleep_command,
    tool_results,
    write_call,
    write_config,
)
from rpc import Daemon
from sandbox_helpers import remove_cgroups_of
from waiting import DEFAULT_TIMEOUT, wait_until_async

from toycoder_daemon.testing.fake_llm import FakeLLM


def titled_config(tmp_path: Path, llm: FakeLLM) -> Path:
    """The tests' config with the fast model's titles on (write_config turns them off)."""
    config = write_config(tmp_path / "titled.yaml", llm)
    config.write_text(config.read_text().replace("auto_title: false", "auto_title: true"))
    return config


# ---- LSP ------------------------------------------------------------------------------------------

async def test_lsp_each_mode_through_the_daemon(start_daemon, llm: FakeLLM, workspace: Path) -> None:
    d: Daemon = await start_daemon(init=False)
    modes = (await d.initialize(workspace))["capabilities"]["experimental"]["toycoder"]["availableModes"]
    assert [m["id"] for m in modes] == ["ask", "accept-edits", "read-only"]
    asked: list[dict[str, Any]] = []
    d.handlers["toycoder/requestPermission"] = lambda p: asked.append(p) or {"decision": "allow_once"}
    sid = await new_session(d)
    written: dict[str, bool] = {}
    for mode in ("read-only", "accept-edits", "ask"):
        info = await d.call("toycoder/session/setMode", {"sessionId": sid, "mode": mode})
        assert info["mode"] == mode
        llm.add(write_call(f"{mode}.txt", "x\n"), {"text": "ok"})
        await d.call("toycoder/prompt", {"sessionId": sid, "text": f"write in {mode}"})
        written[mode] = (workspace / f"{mode}.txt").exists()
        if mode == "read-only":
            assert "read-only mode" in llm.requests[-1]["body"]["messages"][-1]["content"]
    assert written == {"read-only": False, "accept-edits": True, "ask": True}
    assert [a["tool"] for a in asked] == ["write_file"] and asked[0]["preview"]["path"] == "ask.txt"
    assert [r["status"] for r in tool_results(d, sid)] == ["denied", "completed", "completed"]
    pushed = [u["update"]["session"]["mode"] for u in d.updates(sid) if u["update"]["kind"] == "session_info"]
    assert pushed == ["read-only", "accept-edits", "ask"]


async def test_lsp_title_after_the_first_turn_and_close(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    d = await Daemon.start("--config", str(titled_config(tmp_path, llm)))
    try:
        await d.initialize(workspace)
        sid = await new_session(d)
        llm.add({"text": "It returns a - b."}, {"text": "Why add subtracts"})
        await d.call("toycoder/prompt", {"sessionId": sid, "text": "```py\nadd(2, 1)\n```\nwhy is add wrong?"})

        def titles() -> list[str]:
            return [u["update"]["session"]["title"] for u in d.updates(sid) if u["update"]["kind"] == "session_info"]

        await d.wait_for(lambda: titles(), what="the session_info with the model's title")
        assert titles() == ["Why add subtracts"]
        assert llm.requests[1]["body"]["model"] == "fake-fast"

        assert await d.call("toycoder/session/close", {"sessionId": sid}) == {}
        llm.add({"text": "Still here.", "expect": {"last_user_contains": "again"}})
        assert (await d.call("toycoder/prompt", {"sessionId": sid, "text": "again"}))["text"] == "Still here."
        sent = [m.get("content") for m in llm.requests[-1]["body"]["messages"][1:]]
        assert sent[1:] == ["It returns a - b.", "again"] and len(llm.requests) == 3  # no second title
        listed = (await d.call("toycoder/session/list", {}))["sessions"]
        assert [(s["sessionId"], s["title"]) for s in listed] == [(sid, "Why add subtracts")]
    finally:
        await d.close()
        print(f"--- daemon stderr ---\n{await d.stderr_text()}")  # shown when the test failed


# ---- ACP ------------------------------------------------------------------------------------------

def mode_changed(sid: str, mode: str) -> Any:
    return lambda f: (f.get("params", {}).get("sessionId") == sid
                      and f["params"].get("update", {}).get("currentModeId") == mode)


async def test_acp_title_and_each_mode_through_the_daemon(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    async with acp_daemon(tmp_path, llm, config=titled_config(tmp_path, llm)) as (conn, editor, _):
        created = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = created.session_id
        assert created.modes is not None and created.modes.current_mode_id == "ask"
        llm.add({"text": "Hello."}, {"text": "Greeting the agent"})
        await conn.prompt(session_id=sid, prompt=[text_block("hello there")])
        await editor.wait_for(lambda f: f.get("params", {}).get("update", {}).get("sessionUpdate")
                              == "session_info_update")
        assert [u["title"] for u in editor.updates("session_info_update")] == ["Greeting the agent"]

        for mode in ("read-only", "accept-edits", "ask"):
            await conn.set_session_mode(session_id=sid, mode_id=mode)
            await editor.wait_for(mode_changed(sid, mode))
            llm.add(write_call(f"{mode}.txt", "x\n"), {"text": "ok"})
            await conn.prompt(session_id=sid, prompt=[text_block(f"write in {mode}")])
        assert not (workspace / "read-only.txt").exists()
        assert (workspace / "accept-edits.txt").exists() and (workspace / "ask.txt").exists()
        asked = editor.requests("session/request_permission")
        assert [a["toolCall"]["toolCallId"] for a in asked] == [editor.updates("tool_call")[-1]["toolCallId"]]
        assert len(llm.requests) == 8  # the title was asked for once


async def test_acp_close_and_resume_through_the_daemon(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    llm.add({"text": "First answer."})
    async with acp_daemon(tmp_path, llm) as (conn, editor, _):
        sid = await acp_new_session(conn, workspace)
        await conn.prompt(session_id=sid, prompt=[text_block("first")])
        await conn.close_session(session_id=sid)
        with pytest.raises(RequestError) as e:
            await conn.prompt(session_id=sid, prompt=[text_block("after close")])
        assert e.value.code == -32002
        before = len(editor.updates())
        await conn.resume_session(cwd=str(workspace), session_id=sid)  # a replay would come before its answer
        assert not [u for u in editor.updates()[before:] if u["sessionUpdate"].endswith("_message_chunk")]
        llm.add({"text": "Resumed.", "expect": {"last_user_contains": "again"}})
        assert (await conn.prompt(session_id=sid, prompt=[text_block("again")])).stop_reason == "end_turn"
        assert [m["content"] for m in llm.requests[-1]["body"]["messages"][1:]] == ["first", "First answer.", "again"]


RUN_SLEEP = "tools: {enabled: [run_command]}\npermissions: {allow: ['run_command(sleep *)']}\n"


async def test_acp_two_daemons_on_one_session(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    """B has the session open all along: it gets A's turn replayed, is refused (-32011) while A's turn
    runs, and after A is killed mid-turn (mid-tool-call) continues with A's turn, its open tool call
    answered, in its context."""
    config = write_config(tmp_path / "run.yaml", llm, extra=RUN_SLEEP)
    async with acp_daemon(tmp_path, llm, config=config) as (a, _, a_proc), \
            acp_daemon(tmp_path, llm, config=config) as (b, b_editor, _):
        sid = await acp_new_session(a, workspace)
        await b.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
        llm.add({"text": "Made in A."})
        await a.prompt(session_id=sid, prompt=[text_block("hello from a")])
        # heard live (issue 32): in chunks as A streams, after the prompt, and never again from the file
        await b_editor.wait_for(lambda f: b_editor.text("agent_message_chunk") == "Made in A.")
        assert b_editor.text("user_message_chunk") == "hello from a"

        sleep = sleep_command(177)
        llm.add({"tool_calls": [{"name": "run_command", "arguments": {"command": sleep}}]})
        turn = asyncio.ensure_future(a.prompt(session_id=sid, prompt=[text_block("wait a bit")]))
        await wait_until_async(lambda: processes_running(sleep), DEFAULT_TIMEOUT, "A's command to run")
        with pytest.raises(RequestError) as busy:
            await b.prompt(session_id=sid, prompt=[text_block("me too")])
        assert busy.value.code == -32011 and "another ToyCoder daemon" in str(busy.value)

        a_proc.kill()  # SIGKILL mid-turn: no chance to answer its open tool call or release anything
        await a_proc.wait()
        kill_process_groups(processes_with(sleep))  # nor to end its command
        remove_cgroups_of(a_proc.pid)  # that KILL may cut short its launcher's removal of it
        turn.cancel()  # its connection is gone: the request ends (cancelled or failed), never answered
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            await turn
        llm.add({"text": "B carries on."})
        assert (await b.prompt(session_id=sid, prompt=[text_block("me too")])).stop_reason == "end_turn"
        sent = llm.requests[-1]["body"]["messages"][1:]
        assert [(m["role"], m.get("content")) for m in sent[:3]] == [
            ("user", "hello from a"), ("assistant", "Made in A."), ("user", "wait a bit")]
        assert sent[3]["tool_calls"][0]["function"]["name"] == "run_command"
        assert sent[4]["role"] == "tool" and "interrupted" in sent[4]["content"]
        assert sent[5] == {"role": "user", "content": "me too"} and llm.violations == []
