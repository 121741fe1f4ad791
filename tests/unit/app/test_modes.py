"""Session modes: ask (asks for edits and commands), accept-edits (edits inside the workspace run
without asking, commands still ask), read-only (no writes, no commands, nothing asked); /mode,
persisted; LSP toycoder/session/setMode and ACP session/set_mode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block
from acp_client import acp_face
from acp_client import new_session as acp_new_session
from helpers import new_session, write_call, write_config
from inproc_app import InProc
from rpc import RpcError

from toycoder_daemon.core.ports import ToolCallFinished, ToolCallStarted
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
    assert announced(p, sid) == [("write_file", False), ("run_command", False), ("read_file", False)]
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
    assert announced(p, sid) == [("write_file", False), ("run_command", True)]


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
    """The title's session_info_update comes alone (the mode the session was opened with is not news);
    a load tells the title once (a client may load by a stored id, without the list), and a mode
    change after it does not repeat it."""
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
        assert [u["title"] for u in editor.updates("session_info_update")] == ["Greeting the agent"] * 2
        assert [u["currentModeId"] for u in editor.updates("current_mode_update")] == ["read-only", "accept-edits"]


def announced(p: InProc, sid: str) -> list[tuple[str, bool]]:
    """Each tool call as announced: its tool and whether the gate will ask about it."""
    return [(e.name, e.will_ask) for e in p.frontend.of(sid) if isinstance(e, ToolCallStarted)]


@pytest.mark.parametrize("mode, extra, reason", [
    ("read-only", None, "read-only mode"),
    ("ask", {"permissions": {"deny": ["edit_file(calc.py)"]}}, "the configuration forbids this"),
])
async def test_a_refusal_comes_before_the_preview(inproc, workspace: Path, mode: str, extra: dict[str, Any] | None,
                                                  reason: str) -> None:
    """The mode or a deny rule refuses first: the editor is not asked for the file (no preview is
    made for a call that cannot run) and the call is not announced as one that will ask."""
    p: InProc = inproc(extra)
    p.frontend.served = {}  # an editor that serves files (an ACP client with fs.readTextFile)
    (workspace / "calc.py").write_text("x = 1\n")
    sid = p.new_session()
    p.app.set_mode(sid, mode)
    p.script.add({"tool_calls": [{"name": "edit_file", "arguments": {
        "path": "calc.py", "old_string": "1", "new_string": "2"}}]}, {"text": "refused"})
    await p.prompt(sid, "edit it")
    assert p.frontend.text_asks == [] and p.frontend.requests == []
    assert announced(p, sid) == [("edit_file", False)]
    [result] = results(p, sid)
    assert result.status == "denied" and reason in result.output


async def test_calls_are_announced_as_asking_only_when_the_gate_will_ask(inproc, workspace: Path) -> None:
    p: InProc = inproc(RUN)
    p.frontend.decisions = ["allow_always"]
    sid = p.new_session()
    p.script.add(write_call("a.txt", "1\n"), write_call("b.txt", "2\n"), RUN_CALL,
                 {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
                 {"tool_calls": [{"name": "write_file", "arguments": {"path": "c.txt"}}]},  # invalid: no content
                 {"text": "done"})
    await p.prompt(sid, "go")
    p.app.set_mode(sid, "accept-edits")
    p.script.add(RUN_CALL, {"text": "done"})
    await p.prompt(sid, "go on")
    # asked and allowed always; then always allowed; the command asks (rejected); a safe read; a
    # call that fails validation; in accept-edits the command still asks
    assert announced(p, sid) == [("write_file", True), ("write_file", False), ("run_command", True),
                                 ("read_file", False), ("write_file", False), ("run_command", True)]
    assert [r.tool for r in p.frontend.requests] == ["write_file", "run_command", "run_command"]
