"""Session modes: ask (asks for edits and commands), accept-edits (edits inside the workspace run
without asking, commands still ask), read-only (no writes, no commands, nothing asked); /mode,
persisted; LSP toycoder/session/setMode and ACP session/set_mode."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import RequestError, text_block
from conftest import write_config
from helpers import new_session, write_call
from inproc import start_daemon_inproc  # noqa: F401  (in-process LSP face)
from inproc_app import InProc
from rpc import RpcError
from test_acp import acp_face
from test_acp import new_session as acp_new_session

from toycoder_daemon.ports import ToolCallFinished
from toycoder_daemon.testing.fake_llm import FakeLLM

RUN = {"tools": {"enabled": ["run_command"]}}
RUN_CALL = {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo hi"}}]}


def results(p: InProc, sid: str) -> list[ToolCallFinished]:
    return [e for e in p.frontend.of(sid) if isinstance(e, ToolCallFinished)]


async def test_read_only_refuses_writes_and_commands_without_asking(inproc, workspace: Path) -> None:
    p: InProc = inproc(RUN)
    sid = p.new_session()
    out = await p.command(sid, "/mode read-only")
    assert "read-only" in out.result.text
    p.script.add(write_call("new.txt", "x\n"), RUN_CALL, {"tool_calls": [
        {"name": "read_file", "arguments": {"path": "README.md"}}]}, {"text": "done"})
    await p.prompt(sid, "try")
    assert p.frontend.requests == [] and not (workspace / "new.txt").exists()
    assert [r.status for r in results(p, sid)] == ["denied", "denied", "completed"]
    assert "read-only mode" in p.script.calls[1]["messages"][-1]["content"]


async def test_accept_edits_writes_without_asking_but_commands_still_ask(inproc, workspace: Path) -> None:
    p: InProc = inproc(RUN)
    sid = p.new_session()
    p.app.set_mode(sid, "accept-edits")
    p.script.add(write_call("new.txt", "x\n"), RUN_CALL, {"text": "done"})
    await p.prompt(sid, "try")
    assert (workspace / "new.txt").read_text() == "x\n"
    assert [r.tool for r in p.frontend.requests] == ["run_command"]  # rejected by default
    assert [r.status for r in results(p, sid)] == ["completed", "denied"]


async def test_mode_is_stored_and_unknown_modes_are_refused(inproc, tmp_path: Path, workspace: Path) -> None:
    p: InProc = inproc()
    sid = p.new_session()
    assert p.app.session(sid).mode == "ask"
    assert "unknown mode" in (await p.command(sid, "/mode sideways")).result.text
    with pytest.raises(ValueError):
        p.app.set_mode(sid, "sideways")
    await p.command(sid, "/mode read-only")
    listing = (await p.command(sid, "/mode")).result.text
    assert "* read-only" in listing and "  ask" in listing
    again = InProc(workspace, tmp_path / "data")
    try:
        assert (await again.app.load(sid)).mode == "read-only"
    finally:
        await again.close()


async def test_lsp_modes(start_daemon, llm: FakeLLM, workspace: Path) -> None:
    d = await start_daemon(init=False)
    init = await d.initialize(workspace)
    modes = init["capabilities"]["experimental"]["toycoder"]["availableModes"]
    assert [m["id"] for m in modes] == ["ask", "accept-edits", "read-only"] and all(m["description"] for m in modes)
    sid = await new_session(d)
    info = await d.call("toycoder/session/setMode", {"sessionId": sid, "mode": "read-only"})
    assert info["sessionId"] == sid and info["mode"] == "read-only"
    with pytest.raises(RpcError) as e:
        await d.call("toycoder/session/setMode", {"sessionId": sid, "mode": "sideways"})
    assert e.value.code == -32602 and "unknown mode" in e.value.message
    pushed = [u["update"]["session"]["mode"] for u in d.updates(sid) if u["update"]["kind"] == "session_info"]
    assert pushed == ["read-only"]
    loaded = await d.call("toycoder/session/load", {"sessionId": sid})
    assert loaded["session"]["mode"] == "read-only"


async def test_acp_modes(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        created = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        assert created.modes is not None and created.modes.current_mode_id == "ask"
        assert [m.id for m in created.modes.available_modes] == ["ask", "accept-edits", "read-only"]
        sid = created.session_id
        with pytest.raises(RequestError) as e:
            await conn.set_session_mode(session_id=sid, mode_id="sideways")
        assert e.value.code == -32602
        await conn.set_session_mode(session_id=sid, mode_id="read-only")
        await editor.wait_for(lambda f: f.get("params", {}).get("update", {}).get("currentModeId") == "read-only")
        llm.add(write_call("new.txt", "x\n"), {"text": "could not"})
        await conn.prompt(session_id=sid, prompt=[text_block("write it")])
        assert editor.requests("session/request_permission") == [] and not (workspace / "new.txt").exists()
        await conn.set_session_mode(session_id=sid, mode_id="accept-edits")
        llm.add(write_call("new.txt", "x\n"), {"text": "written"})
        await conn.prompt(session_id=sid, prompt=[text_block("write it")])
        assert editor.requests("session/request_permission") == [] and (workspace / "new.txt").read_text() == "x\n"
        other = await acp_new_session(conn, workspace)
        await conn.prompt(session_id=other, prompt=[text_block("/mode read-only")])
        await editor.wait_for(lambda f: f.get("params", {}).get("sessionId") == other
                              and f["params"].get("update", {}).get("currentModeId") == "read-only")
        loaded = await conn.load_session(cwd=str(workspace), session_id=other, mcp_servers=[])
        assert loaded.modes is not None and loaded.modes.current_mode_id == "read-only"


async def test_acp_pushes_a_mode_only_when_it_changed(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    """The title's session_info_update comes alone (the mode the session was opened with is not news),
    and a mode change after a load does not repeat the title the client already has."""
    config = write_config(tmp_path / "config.yaml", llm)
    config.write_text(config.read_text().replace("auto_title: false", "auto_title: true"))
    llm.add({"text": "Hello."}, {"text": "Greeting the agent"})
    async with acp_face(tmp_path, llm, config=config) as (conn, editor, _):
        sid = await acp_new_session(conn, workspace)
        await conn.prompt(session_id=sid, prompt=[text_block("hello there")])
        await editor.wait_for(lambda f: f.get("params", {}).get("update", {}).get("title") == "Greeting the agent")
        await conn.set_session_mode(session_id=sid, mode_id="read-only")
        await editor.wait_for(lambda f: f.get("params", {}).get("update", {}).get("currentModeId") == "read-only")
        # updates go out in order: an "ask" pushed with the title would be before this one
        assert [u["currentModeId"] for u in editor.updates("current_mode_update")] == ["read-only"]
        await conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
        await conn.set_session_mode(session_id=sid, mode_id="accept-edits")
        await editor.wait_for(lambda f: f.get("params", {}).get("update", {}).get("currentModeId") == "accept-edits")
        assert [u["title"] for u in editor.updates("session_info_update")] == ["Greeting the agent"]
        assert [u["currentModeId"] for u in editor.updates("current_mode_update")] == ["read-only", "accept-edits"]
