"""The ACP face end to end, driven by the ACP SDK's client side against the scripted model server, in
this process (tests/inproc.py); startup, a real turn and stdin EOF through `python -m toycoder_daemon
--acp` are in e2e/test_acp_e2e.py. Assertions read the raw frames in the order they arrived."""

from __future__ import annotations

import asyncio

import pytest
from acp import RequestError, text_block
from acp.schema import (
    ClientCapabilities,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
)
from acp_client import acp_face, new_session
from helpers import write_call
from waiting import scaled

from toycoder_daemon.llm.tools_ignored import MARK
from toycoder_daemon.testing.dialects import Dialect


async def test_a_tool_call_round_trip(tmp_path, llm, workspace) -> None:
    llm.add({"tool_calls": [{"name": "read_file", "arguments": {"path": "src/app.py"}}]},
            {"text": "It adds two numbers.", "expect": {"last_tool_contains": "return a + b"}})
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        sid = await new_session(conn, workspace)
        resp = await conn.prompt(session_id=sid, prompt=[text_block("What does app.py do?")])
        assert resp.stop_reason == "end_turn"
        [start] = editor.updates("tool_call")
        assert start["kind"] == "read" and start["status"] == "in_progress"
        assert start["rawInput"] == {"path": "src/app.py"}
        assert start["locations"] == [{"path": str(workspace.resolve() / "src" / "app.py")}]
        [done] = editor.updates("tool_call_update")
        assert done["toolCallId"] == start["toolCallId"] and done["status"] == "completed"
        assert "return a + b" in done["content"][0]["content"]["text"]
        assert editor.updates().index(start) < editor.updates().index(done)
        tool_msgs = [m for m in llm.requests[1]["body"]["messages"] if m["role"] == "tool"]
        assert tool_msgs[0]["tool_call_id"] == start["toolCallId"] and "return a + b" in tool_msgs[0]["content"]
        assert editor.text() == "It adds two numbers."
        assert llm.violations == []


async def test_a_server_without_tools_is_told_as_the_session_opens_and_runs_without_them(tmp_path, llm,
                                                                                          workspace) -> None:
    """The session's opening asks the server in the background (/v1/models: llama.cpp; /props: no tools):
    an agent message says so, with the fix, before any prompt; the first request goes without tools.
    Its LSP twin: agent/test_local_models.py."""
    llm.dialect = Dialect(server="llama.cpp", n_ctx=100_000, supports_tools=False)
    llm.add({"text": "I cannot look."})
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        sid = await new_session(conn, workspace)
        await editor.wait_for(lambda f: MARK in str(f.get("params", {}).get("update", {}).get("content")))
        assert editor.text().startswith(MARK) and "--jinja" in editor.text() and "--chat-template-file" in editor.text()
        [told] = [f["params"] for f in editor.frames if f.get("method") == "session/update"
                  and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"]
        assert told["sessionId"] == sid and llm.requests == []  # before any prompt
        assert "/props" in [g["path"] for g in llm.gets]
        resp = await conn.prompt(session_id=sid, prompt=[text_block("read src/app.py")])
        assert resp.stop_reason == "end_turn"
        assert editor.text().endswith("\n\nI cannot look.") and editor.text().count(MARK) == 1  # not told twice
        [request] = llm.requests
        assert "tools" not in request["body"] and llm.violations == []


@pytest.mark.parametrize("choice, written", [("allow_once", True), ("reject_once", False), (None, False)])
async def test_write_file_asks_permission_with_a_diff(tmp_path, llm, workspace, choice, written) -> None:
    before = (workspace / "README.md").read_text()
    llm.add(write_call("README.md", "# Demo\nA bigger project.\n"), {"text": "done"})
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        editor.choice = choice
        sid = await new_session(conn, workspace)
        await conn.prompt(session_id=sid, prompt=[text_block("grow the readme")])
        [start] = editor.updates("tool_call")
        assert start["kind"] == "edit" and start["status"] == "pending"
        [asked] = editor.requests("session/request_permission")
        assert asked["sessionId"] == sid and asked["toolCall"]["toolCallId"] == start["toolCallId"]
        assert [(o["optionId"], o["kind"]) for o in asked["options"]] == [
            ("allow_once", "allow_once"), ("allow_always", "allow_always"), ("reject_once", "reject_once")]
        [diff] = asked["toolCall"]["content"]
        assert diff["type"] == "diff" and diff["path"] == str(workspace.resolve() / "README.md")
        assert "A tiny project." in diff["oldText"] and "A bigger project." in diff["newText"]
        final = editor.updates("tool_call_update")[-1]
        if written:
            assert (workspace / "README.md").read_text() == "# Demo\nA bigger project.\n"
            assert final["status"] == "completed" and final["content"][0]["type"] == "diff"
        else:
            assert (workspace / "README.md").read_text() == before
            assert final["status"] == "failed"
            observation = [m for m in llm.requests[1]["body"]["messages"] if m["role"] == "tool"][0]["content"]
            assert observation in final["content"][0]["content"]["text"]


async def test_cancel_mid_stream_answers_cancelled_and_the_session_goes_on(tmp_path, llm, workspace) -> None:
    llm.add({"text": "word " * 100, "chunk_size": 5, "chunk_delay": 0.05},
            {"text": "Still here.", "expect": {"last_user_contains": "again"}})
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        sid = await new_session(conn, workspace)
        turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("talk")]))
        await editor.wait_for(lambda f: f.get("params", {}).get("update", {}).get("sessionUpdate")
                              == "agent_message_chunk")
        await conn.cancel(session_id=sid)
        resp = await asyncio.wait_for(turn, scaled(3))
        assert resp.stop_reason == "cancelled"
        assert 0 < len(editor.text()) < len("word " * 100)
        resp = await conn.prompt(session_id=sid, prompt=[text_block("again")])
        assert resp.stop_reason == "end_turn" and editor.text().endswith("Still here.")
        assert llm.violations == []


async def test_session_load_replays_the_history_in_a_new_daemon(tmp_path, llm, workspace) -> None:
    llm.add({"tool_calls": [{"name": "read_file", "arguments": {"path": "src/app.py"}}]}, {"text": "It adds."})
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        sid = await new_session(conn, workspace)
        await conn.prompt(session_id=sid, prompt=[text_block("read app.py")])
        call_id = editor.updates("tool_call")[0]["toolCallId"]
    llm.add({"text": "Yes, I remember.", "expect": {"last_user_contains": "remember"}})
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        listed = await conn.list_sessions(cwd=str(workspace))
        assert [s.session_id for s in listed.sessions] == [sid] and listed.sessions[0].title == "read app.py"
        await conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
        answered = max(i for i, f in enumerate(editor.frames) if "result" in f)  # the answer to session/load
        replayed = [f["params"]["update"] for f in editor.frames[:answered] if f.get("method") == "session/update"]
        assert [u["sessionUpdate"] for u in replayed] == [
            "user_message_chunk", "tool_call", "tool_call_update", "agent_message_chunk", "session_info_update"]
        assert replayed[0]["content"]["text"] == "read app.py"
        assert replayed[4]["title"] == "read app.py"  # the client may have loaded by id, without the list
        assert replayed[1]["toolCallId"] == call_id and replayed[1]["kind"] == "read"
        assert replayed[1]["rawInput"] == {"path": "src/app.py"}
        assert replayed[2]["status"] == "completed" and "return a + b" in replayed[2]["content"][0]["content"]["text"]
        assert replayed[3]["content"]["text"] == "It adds."
        resp = await conn.prompt(session_id=sid, prompt=[text_block("do you remember?")])
        assert resp.stop_reason == "end_turn"
        sent = llm.requests[-1]["body"]["messages"]
        assert [m["content"] for m in sent if m["role"] == "user"] == ["read app.py", "do you remember?"]


async def test_a_slash_command_is_answered_as_text_without_the_model(tmp_path, llm, workspace) -> None:
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        sid = await new_session(conn, workspace)
        resp = await conn.prompt(session_id=sid, prompt=[text_block("/tools")])
        assert resp.stop_reason == "end_turn"
        listing = editor.text()
        assert "read_file" in listing and "write_file" in listing and "run_command" in listing
        assert llm.requests == []


async def test_ask_user_uses_form_elicitation_when_the_client_offers_it(tmp_path, llm, workspace) -> None:
    llm.add({"tool_calls": [{"name": "ask_user", "arguments": {"question": "Which one?", "options": ["tabs", "spaces"]}}]},
            {"text": "ok", "expect": {"last_tool_contains": "The user answered: spaces"}})
    caps = ClientCapabilities(elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities()))
    async with acp_face(tmp_path, llm, caps=caps) as (conn, editor, _):
        editor.answer = "spaces"
        sid = await new_session(conn, workspace)
        await conn.prompt(session_id=sid, prompt=[text_block("indent?")])
        [asked] = editor.asked
        assert asked["message"] == "Which one?"
        assert asked["schema"]["properties"]["answer"]["enum"] == ["tabs", "spaces"]
        assert llm.violations == []


async def test_errors_name_the_problem(tmp_path, llm, workspace) -> None:
    config = tmp_path / "nokey.yaml"
    config.write_text(f"providers:\n  openai:\n    api_keys: []\n    base_url: {llm.base_url}\n"
                      "    models: {default: fake-model, fast: fake-fast}\ndefault_provider: openai\n")
    async with acp_face(tmp_path, llm, config=config) as (conn, editor, proc):
        with pytest.raises(RequestError) as unknown:
            await conn.prompt(session_id="no-such-session", prompt=[text_block("hi")])
        assert unknown.value.code == -32002 and "no-such-session" in str(unknown.value)
        with pytest.raises(RequestError) as no_key:  # the auth method's case: test_acp_auth.py
            await new_session(conn, workspace)
        assert no_key.value.code == -32000 and "no API key" in str(no_key.value)
        with pytest.raises(RequestError) as bad_cwd:
            await conn.new_session(cwd="relative/dir", mcp_servers=[])
        assert bad_cwd.value.code == -32602
