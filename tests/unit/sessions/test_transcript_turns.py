"""What a client gets back when it reloads a session (the transcript): a cancelled reply flagged, not
carrying our marker text; failed tool calls still failed; each turn's stop reason and usage. Checked on
the live session and on a new App reading the same store, and in the wire shape."""

from __future__ import annotations

import asyncio
from pathlib import Path

from inproc_app import InProc, SharedScript, eventually

from toycoder_daemon.core.messages import INTERRUPTED_MARK
from toycoder_daemon.faces.lsp.mapping import transcript_entry


def wire(p: InProc, sid: str) -> list[dict]:
    return [transcript_entry(e).dump() for e in p.app.transcript(p.app.peek(sid))]


async def play(p: InProc) -> str:
    """Three turns: a failed tool call then an answer, a reply cancelled mid-stream, a provider error."""
    p.script.add({"tool_calls": [{"name": "read_file", "arguments": {"path": "missing.txt"}}],
                  "usage": {"prompt_tokens": 11, "completion_tokens": 3}},
                 {"text": "No such file.", "usage": {"prompt_tokens": 20, "completion_tokens": 4}},
                 {"text": ["Once upon", " a time"], "chunk_delay": 3600, "usage": {"prompt_tokens": 5}},
                 {"status": 400, "error": "bad request"})
    sid = p.new_session()
    await p.prompt(sid, "read missing.txt")
    seen = len(p.frontend.of(sid, "text_delta"))
    turn = p.start_prompt(sid, "tell a story")
    await eventually(lambda: len(p.frontend.of(sid, "text_delta")) > seen, "the story's first delta")
    assert p.app.cancel(sid)
    assert (await asyncio.wait_for(turn, 10)).result.stop_reason == "cancelled"
    try:
        await p.prompt(sid, "fail please")
    except Exception as e:  # the provider's error reaches the caller; the transcript still records how it ended
        assert "bad request" in str(e)
    else:
        raise AssertionError("the scripted 400 did not fail the turn")
    return sid


def check(entries: list[dict]) -> None:
    by_role = [(e["role"], e.get("text")) for e in entries]
    assert by_role == [("user", "read missing.txt"), ("tool_call", '{"path": "missing.txt"}'), by_role[2],
                       ("assistant", "No such file."), ("user", "tell a story"), ("assistant", "Once upon"),
                       ("user", "fail please")], by_role
    tool = entries[2]
    assert tool["role"] == "tool" and tool["status"] == "failed" and tool["name"] == "read_file", tool
    assert entries[0]["stopReason"] == "end_turn"
    assert entries[0]["usage"] == {"promptTokens": 31, "completionTokens": 7, "totalTokens": 38}
    assert "interrupted" not in entries[3]
    assert entries[4]["stopReason"] == "cancelled" and entries[4]["usage"]["promptTokens"] == 0  # cut before usage
    story = entries[5]
    assert story["interrupted"] is True and "[interrupted" not in story["text"]
    assert entries[6]["stopReason"] == "error"


async def test_transcript_flags_interruptions_keeps_failures_and_ends_each_turn(tmp_path: Path,
                                                                                 workspace: Path) -> None:
    script = SharedScript()
    first = InProc(workspace, tmp_path / "data", None, script)
    sid = await play(first)
    check(wire(first, sid))
    # The model still sees that it was stopped: only the person's view drops the marker.
    stored = [m for m in first.app.session(sid).messages if m.get("interrupted")]
    assert len(stored) == 1 and stored[0]["content"] == "Once upon" + INTERRUPTED_MARK
    await first.close()

    second = InProc(workspace, tmp_path / "data", None, script)
    try:
        check(wire(second, sid))  # read from disk by another App: the same
        await second.app.load(sid)
        check(wire(second, sid))
    finally:
        await second.close()


async def test_an_old_session_with_the_marker_in_its_text_shows_it_as_a_flag(inproc) -> None:
    p: InProc = inproc()
    sid = p.new_session()
    s = p.app.session(sid)
    s.messages.extend([{"role": "user", "content": "hi"},
                       {"role": "assistant", "content": "Partial" + INTERRUPTED_MARK}])
    entries = wire(p, sid)
    assert entries[1] == {"role": "assistant", "text": "Partial", "interrupted": True}
    assert entries[0] == {"role": "user", "text": "hi"}  # no end was recorded for that turn
