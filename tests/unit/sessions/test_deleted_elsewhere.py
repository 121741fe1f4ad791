"""A session deleted in one daemon while another has it open (issue 32, "No lost writes"): the other
daemon tells its clients (`session_deleted`), stops writing it, a prompt there answers -32010 "deleted
in another editor", and no `<id>.*` file is left behind, whether the other daemon's poll finds out
first or its next prompt or settings change does. Two Apps on one data directory, in-process; the
LSP test runs two in-process LSP faces (the daemon process: e2e/test_sessions_e2e.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from inproc_app import InProc, eventually
from rpc import RpcError

from toycoder_daemon.core.errors import SessionDeleted, SessionNotFound
from toycoder_daemon.testing.fake_llm import FakeLLM
from toycoder_daemon.wire import protocol as wire


def left_behind(p: InProc, sid: str) -> list[str]:
    return sorted(f.name for f in p.app.store.dir.iterdir() if f.name.startswith(sid))


async def opened_in_both(inproc: Any, interval: float) -> tuple[InProc, InProc, str, list[str]]:
    """a's session with one turn, open in b too; `told`: the ids b's clients were told deleted."""
    a: InProc = inproc()
    b: InProc = inproc()
    b.app.sharing.interval = interval
    told: list[str] = []
    b.app.on_session_deleted = told.append
    sid = a.new_session()
    a.script.add({"text": "kept"})
    await a.prompt(sid, "first")
    await b.app.load(sid)
    return a, b, sid, told


async def test_the_poll_finds_it_deleted_tells_once_and_a_prompt_is_refused(inproc: Any) -> None:
    a, b, sid, told = await opened_in_both(inproc, 0.01)
    a.app.delete_session(sid)
    await eventually(lambda: told == [sid], "b's clients to be told")
    assert sid not in b.app.runtimes
    with pytest.raises(SessionDeleted, match="deleted in another editor") as e:
        await b.prompt(sid, "still there?")
    assert isinstance(e.value, SessionNotFound)  # -32010 on the LSP face
    with pytest.raises(SessionDeleted):
        b.app.set_mode(sid, "read-only")
    with pytest.raises(SessionDeleted):
        await b.app.load(sid)
    assert b.script.calls == [] and told == [sid]
    assert left_behind(a, sid) == []


@pytest.mark.parametrize("how", ["prompt", "set_mode", "set_tool_enabled"])
async def test_before_the_poll_the_next_write_is_refused_and_leaves_no_file(inproc: Any, how: str) -> None:
    a, b, sid, told = await opened_in_both(inproc, 3600)  # the poll never runs in this test
    a.app.delete_session(sid)
    assert left_behind(a, sid) == []
    with pytest.raises(SessionDeleted, match="deleted in another editor"):
        if how == "prompt":
            await b.prompt(sid, "write me")
        elif how == "set_mode":
            b.app.set_mode(sid, "read-only")
        else:
            b.app.set_tool_enabled(sid, "run_command", True)
    assert left_behind(a, sid) == []  # neither the file nor a lock file was made again
    assert b.script.calls == []
    assert told == [sid] and sid not in b.app.runtimes  # the write's lock found it: told at once
    with pytest.raises(SessionDeleted):
        await b.prompt(sid, "again")


async def test_the_lsp_face_sends_session_deleted_and_answers_32010(start_daemon: Any, llm: FakeLLM,
                                                                    tmp_path: Path) -> None:
    one, two = await start_daemon(), await start_daemon()
    sid = (await one.call(wire.SESSION_NEW, {}))["sessionId"]
    llm.add({"text": "kept"})
    await one.call(wire.PROMPT, {"sessionId": sid, "text": "first"})
    await two.call(wire.SESSION_LOAD, {"sessionId": sid})
    assert await one.call(wire.SESSION_DELETE, {"sessionId": sid}) == {}
    await two.wait_for(lambda: [u for u in two.updates(sid) if u["update"]["kind"] == "session_deleted"])
    [params] = [u for u in two.updates(sid) if u["update"]["kind"] == "session_deleted"]
    assert params == {"sessionId": sid, "turnId": "",
                      "update": {"kind": "session_deleted", "message": "This session was deleted in another editor."}}
    with pytest.raises(RpcError) as e:
        await two.call(wire.PROMPT, {"sessionId": sid, "text": "still there?"})
    assert e.value.code == -32010 and "deleted in another editor" in e.value.message
    assert [f.name for f in tmp_path.rglob(f"{sid}*")] == []
    assert len(llm.requests) == 1


async def test_an_acp_prompt_in_a_session_deleted_elsewhere_says_so(tmp_path: Path, llm: FakeLLM,
                                                                    workspace: Path) -> None:
    """ACP has no update for it: the prompt's answer (ACP's not-found, -32002) says what happened."""
    from acp import RequestError, text_block
    from acp_client import acp_face, new_session

    async with acp_face(tmp_path, llm) as (one, _, _), acp_face(tmp_path, llm) as (two, _, _):
        sid = await new_session(one, workspace)
        await two.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
        await one._conn.send_request("session/delete", {"sessionId": sid})
        with pytest.raises(RequestError) as e:
            await two.prompt(session_id=sid, prompt=[text_block("still there?")])
        assert e.value.code == -32002 and "deleted in another editor" in str(e.value)
        assert [f.name for f in tmp_path.rglob(f"{sid}*")] == [] and llm.requests == []


async def test_a_file_removed_by_hand_during_a_turn_ends_it_without_a_lost_write(inproc: Any) -> None:
    """Not our delete (which waits for the turn's lock): the turn's next write finds the file gone,
    and the prompt answers SessionDeleted rather than writing to the unlinked inode; the turn's lock
    file goes too, and the clients are told."""
    p: InProc = inproc()
    told: list[str] = []
    p.app.on_session_deleted = told.append
    sid = p.new_session()
    p.script.add({"text": ["Once upon", " a time"], "chunk_delay": 0.2})
    turn = p.start_prompt(sid, "tell a story")
    await eventually(lambda: bool(p.frontend.of(sid, "text_delta")), "the turn to stream")
    (p.app.store.dir / f"{sid}.jsonl").unlink()
    with pytest.raises(SessionDeleted):
        await turn
    assert left_behind(p, sid) == [] and told == [sid] and sid not in p.app.runtimes
