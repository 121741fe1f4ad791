"""Context compaction in-process: threshold, summary request, fallback, token budget, /compact; and
what the session file holds afterwards. test_compaction_e2e.py keeps one subprocess run."""

from __future__ import annotations

import json

from inproc_app import InProc

from toycoder_daemon.core.ports import Compacted
from toycoder_daemon.sessions.context import SUMMARY_PREFIX, split_point

SMALL = {"session": {"max_messages": 6, "compress_keep_recent": 2}}


async def chat(p: InProc, sid: str, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        p.script.add({"text": f"answer {i}"})
        assert (await p.prompt(sid, f"question {i}")).result.text == f"answer {i}"


def compactions(p: InProc, sid: str) -> list[tuple[str, int, int]]:
    return [(e.strategy, e.before, e.after) for e in p.frontend.of(sid) if isinstance(e, Compacted)]


def stored_messages(p: InProc, sid: str) -> list[dict]:
    s = p.app.live[sid]
    assert s.file is not None
    lines = [json.loads(line) for line in s.file.path.read_text().splitlines()]
    return [r["m"] for r in lines if r["t"] == "msg"]


async def test_compaction_at_the_threshold(inproc) -> None:
    p: InProc = inproc(SMALL)
    sid = p.new_session()
    await chat(p, sid, 3)  # 6 messages: at the threshold, not over it
    await chat(p, sid, 1, start=3)  # 8 messages now; checked before the new one: 6 were there
    assert compactions(p, sid) == []
    p.script.add({"text": "The user asked questions 0-2 and got answers."}, {"text": "answer 4"})
    await p.prompt(sid, "question 4")
    assert compactions(p, sid) == [("summary", 8, 3)]
    summary_req, turn_req = p.script.calls[-2], p.script.calls[-1]
    assert "Summarise the conversation" in summary_req["messages"][0]["content"]
    asked = summary_req["messages"][1]["content"]
    assert "question 0" in asked and "answer 2" in asked and "question 3" not in asked  # recent part kept verbatim
    assert summary_req["tools"] is None and summary_req["model"] == "fake-fast"
    sent = turn_req["messages"]
    assert sent[0]["role"] == "system" and "ToyCoder" in sent[0]["content"]
    assert sent[1]["content"] == SUMMARY_PREFIX + "The user asked questions 0-2 and got answers."
    assert [m["content"] for m in sent[2:]] == ["question 3", "answer 3", "question 4"]
    # the file keeps every message (issue 33): compaction only appended where the model's context starts
    assert [m["content"] for m in stored_messages(p, sid)] == [
        *(f"{kind} {i}" for i in range(4) for kind in ("question", "answer")), "question 4", "answer 4"]
    assert p.app.peek(sid).message_count == 10


async def test_failing_summary_falls_back_to_truncation(inproc) -> None:
    p: InProc = inproc(SMALL)
    sid = p.new_session()
    await chat(p, sid, 4)
    p.script.add({"status": 400, "error": "context too long"}, {"text": "answer 4"})
    assert (await p.prompt(sid, "question 4")).result.text == "answer 4"
    assert compactions(p, sid) == [("truncate", 8, 2)]
    assert [m["content"] for m in p.script.calls[-1]["messages"][1:]] == ["question 3", "answer 3", "question 4"]


async def test_token_budget_triggers_compaction(inproc) -> None:
    p: InProc = inproc({"session": {"max_messages": 50, "compress_keep_recent": 1, "max_context_tokens": 1000}})
    sid = p.new_session()
    p.script.add({"text": "big", "usage": {"prompt_tokens": 1200, "completion_tokens": 5}})
    await p.prompt(sid, "q1")
    p.script.add({"text": "summary"}, {"text": "a2"})
    await p.prompt(sid, "q2")
    assert [c[0] for c in compactions(p, sid)] == ["summary"]


async def test_slash_compact_forces_it_and_keeps_tool_calls_whole(inproc) -> None:
    p: InProc = inproc({"session": {"max_messages": 50, "compress_keep_recent": 1}})
    sid = p.new_session()
    look = {"tool_calls": [{"name": "list_directory", "arguments": {}}]}
    p.script.add(look, look, {"text": "done"})
    await p.prompt(sid, "look")
    p.script.add({"text": "the user asked to look around"})
    out = await p.command(sid, "/compact")
    assert "summarised" in out.result.text
    p.script.add({"text": "next"})
    await p.prompt(sid, "go on")
    roles = [m["role"] for m in p.script.calls[-1]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]  # summary, the kept final answer, the new prompt
    assert p.script.violations == []
    assert "nothing to compact yet" in (await p.command(p.new_session(), "/compact")).result.text


def test_split_point_never_starts_with_a_tool_result() -> None:
    msgs = [{"role": "system"}, {"role": "user"}, {"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "b"}]},
            {"role": "tool"}, {"role": "tool"}]
    assert split_point(msgs, 1) == 2
    assert split_point(msgs, 2) == 2
    assert split_point(msgs, 3) == 2
    assert split_point(msgs, 10) == 1
