"""Sessions that last, at the process level: restarts, kill -9 mid-turn, one session in two daemons.
Torn lines, repairs and persisted settings: test_sessions.py, in-process."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from helpers import kill_process_groups, new_session, processes_running, processes_with, sleep_command
from rpc import RpcError

from toycoder_daemon.testing.fake_llm import FakeLLM

RUN = "tools: {enabled: [run_command]}\npermissions: {allow: ['run_command(sleep *)']}\n"


def session_files(tmp_path: Path) -> list[Path]:
    return list((tmp_path / "data" / "sessions").glob("*/*.jsonl"))


async def test_sessions_survive_a_restart(start_daemon, llm: FakeLLM, tmp_path: Path) -> None:
    a = await start_daemon()
    llm.add({"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]}, {"text": "A tiny project."})
    sid = await new_session(a)
    await a.call("toycoder/prompt", {"sessionId": sid, "text": "what is this project?"})
    other = await new_session(a, title="second")
    await a.call("toycoder/session/new", {})  # empty: never listed (issue 33), titled or not
    before = await a.call("toycoder/session/load", {"sessionId": sid})
    await a.close()

    b = await start_daemon()
    listed = (await b.call("toycoder/session/list", {}))["sessions"]
    assert [s["sessionId"] for s in listed] == [sid]  # without the empty ones
    assert (await b.call("toycoder/session/load", {"sessionId": other}))["session"]["title"] == "second"
    assert listed[0]["title"] == "what is this project?" and listed[0]["messageCount"] == 4
    after = await b.call("toycoder/session/load", {"sessionId": sid})
    assert after["transcript"] == before["transcript"]
    assert after["transcript"][2]["status"] == "completed"
    llm.add({"text": "Still here."})
    await b.call("toycoder/prompt", {"sessionId": sid, "text": "and now?"})
    sent = llm.requests[-1]["body"]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[-1]["content"] == "and now?" and llm.violations == []
    await b.call("toycoder/session/delete", {"sessionId": other})
    await b.close()
    c = await start_daemon()
    assert [s["sessionId"] for s in (await c.call("toycoder/session/list", {}))["sessions"]] == [sid]


async def test_kill_9_mid_turn_leaves_a_session_that_continues(start_daemon, llm: FakeLLM, tmp_path: Path) -> None:
    a = await start_daemon(extra=RUN)
    sleep = sleep_command(175)
    llm.add({"text": "Waiting.", "tool_calls": [{"name": "run_command", "arguments": {"command": sleep}}]})
    sid = await new_session(a)
    a.request_future("toycoder/prompt", {"sessionId": sid, "text": "wait a bit"})
    await a.wait_for(lambda: processes_running(sleep), what="the command to run")  # mid-turn, mid-tool-call
    a.proc.send_signal(signal.SIGKILL)
    await a.proc.wait()
    kill_process_groups(processes_with(sleep))  # the daemon had no chance to clean up after kill -9

    b = await start_daemon()
    loaded = await b.call("toycoder/session/load", {"sessionId": sid})
    roles = [e["role"] for e in loaded["transcript"]]
    assert roles == ["user", "assistant", "tool_call", "tool"]
    assert "interrupted" in loaded["transcript"][-1]["text"] and loaded["transcript"][-1]["status"] == "cancelled"
    llm.add({"text": "Picking up again."})
    result = await b.call("toycoder/prompt", {"sessionId": sid, "text": "continue"})
    assert result["text"] == "Picking up again."
    assert llm.violations == []


async def test_two_daemons_share_a_session(start_daemon, llm: FakeLLM) -> None:
    """B has the session open all along: it hears A's turn, is refused while A's turn runs (busy
    elsewhere), and after A is killed mid-turn continues with A's turn (repaired) in its context."""
    a = await start_daemon(extra=RUN)
    b = await start_daemon(extra=RUN)
    sid = await new_session(a, title="shared")
    assert (await b.call("toycoder/session/load", {"sessionId": sid}))["session"]["title"] == "shared"
    llm.add({"text": "Hello from A."})
    await a.call("toycoder/prompt", {"sessionId": sid, "text": "hi from a"})

    def heard() -> list[tuple[str, str]]:
        return [(e["role"], e["text"]) for u in b.updates(sid) if u["update"]["kind"] == "session_changed"
                for e in u["update"]["transcript"]]

    def live_text() -> str:
        return "".join(u["update"]["text"] for u in b.updates(sid) if u["update"]["kind"] == "text_delta")

    await b.wait_for(lambda: live_text() == "Hello from A.", what="B to hear A's turn live")
    assert heard() == []  # heard live: not told again from the file

    sleep = sleep_command(176)
    llm.add({"text": "Waiting.", "tool_calls": [{"name": "run_command", "arguments": {"command": sleep}}]})
    a.request_future("toycoder/prompt", {"sessionId": sid, "text": "wait a bit"})
    await a.wait_for(lambda: processes_running(sleep), what="A's command to run")  # mid-turn, mid-tool-call
    with pytest.raises(RpcError) as e:
        await b.call("toycoder/prompt", {"sessionId": sid, "text": "me too"})
    assert e.value.code == -32011 and "another ToyCoder daemon" in e.value.message
    a.proc.send_signal(signal.SIGKILL)
    await a.proc.wait()
    kill_process_groups(processes_with(sleep))  # the daemon had no chance to clean up after kill -9

    llm.add({"text": "B carries on."})
    assert (await b.call("toycoder/prompt", {"sessionId": sid, "text": "me too"}))["text"] == "B carries on."
    sent = llm.requests[-1]["body"]["messages"][1:]
    assert [(m["role"], m.get("content")) for m in sent[:4]] == [
        ("user", "hi from a"), ("assistant", "Hello from A."), ("user", "wait a bit"), ("assistant", "Waiting.")]
    assert sent[4]["role"] == "tool" and "interrupted" in sent[4]["content"]
    assert sent[5] == {"role": "user", "content": "me too"} and llm.violations == []


async def test_a_turn_streams_live_to_the_other_daemon(start_daemon, llm: FakeLLM) -> None:
    """Issue 32: B's client gets A's text deltas while A's turn runs, after `turn_elsewhere`
    naming A's client, and nothing of the turn again when the file shows it."""
    a = await start_daemon()
    b = await start_daemon()
    sid = await new_session(a, title="live")
    await b.call("toycoder/session/load", {"sessionId": sid})
    words = [f"w{i} " for i in range(30)]
    llm.add({"text": words, "chunk_delay": 0.1})
    _, answer = a.request_future("toycoder/prompt", {"sessionId": sid, "text": "stream it"})

    def of(kind: str) -> list[dict]:
        return [u["update"] for u in b.updates(sid) if u["update"]["kind"] == kind]

    await b.wait_for(lambda: "w3" in "".join(u["text"] for u in of("text_delta")), what="B to hear the first words")
    assert not answer.done()  # live: A's turn still streams
    assert of("turn_elsewhere")[0]["running"] is True and of("turn_elsewhere")[0]["prompt"] == "stream it"
    assert of("turn_elsewhere")[0]["client"]  # the name A's client gave (or "another editor")
    await answer
    await b.wait_for(lambda: len(of("turn_elsewhere")) == 2, what="B to hear the turn end")
    assert of("turn_elsewhere")[1]["running"] is False
    assert "".join(u["text"] for u in of("text_delta")) == "".join(words)
    llm.add({"text": "again"})  # a later turn: B still hears it, and never the first one twice
    await a.call("toycoder/prompt", {"sessionId": sid, "text": "more"})
    await b.wait_for(lambda: len(of("turn_elsewhere")) == 4, what="B to hear the second turn")
    assert of("session_changed") == []


async def test_a_session_deleted_in_one_daemon_is_dropped_by_the_other(start_daemon, llm: FakeLLM,
                                                                       tmp_path: Path) -> None:
    """The process-level counterpart of unit/sessions/test_deleted_elsewhere.py: B hears
    `session_deleted`, its prompt is -32010, and no `<id>.*` file is left anywhere under the data dir."""
    a, b = await start_daemon(), await start_daemon()
    sid = await new_session(a, title="doomed")
    await b.call("toycoder/session/load", {"sessionId": sid})
    assert await a.call("toycoder/session/delete", {"sessionId": sid}) == {}
    await b.wait_for(lambda: any(u["update"]["kind"] == "session_deleted" for u in b.updates(sid)),
                     what="B to hear that A deleted the session")
    with pytest.raises(RpcError) as e:
        await b.call("toycoder/prompt", {"sessionId": sid, "text": "still there?"})
    assert e.value.code == -32010 and "deleted in another editor" in e.value.message
    assert list((tmp_path / "data").rglob(f"{sid}*")) == [] and llm.requests == []
