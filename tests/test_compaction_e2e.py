"""Context compaction with the scripted model: threshold, summary request, fallback, /compact."""

from __future__ import annotations

from helpers import new_session
from rpc import Daemon

from toycoder_daemon.sessions.context import SUMMARY_PREFIX, split_point
from toycoder_daemon.testing.fake_llm import FakeLLM

SMALL = "session: {max_messages: 6, compress_keep_recent: 2}\n"


async def chat(d: Daemon, llm: FakeLLM, sid: str, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        llm.add({"text": f"answer {i}"})
        await d.call("toycoder/prompt", {"sessionId": sid, "text": f"question {i}"})


def compactions(d: Daemon, sid: str) -> list[dict]:
    return [u["update"] for u in d.updates(sid) if u["update"]["kind"] == "compaction"]


async def test_compaction_at_the_threshold(start_daemon, llm: FakeLLM) -> None:
    d = await start_daemon(extra=SMALL)
    sid = await new_session(d)
    await chat(d, llm, sid, 3)  # 6 messages: at the threshold, not over it
    assert compactions(d, sid) == []
    await chat(d, llm, sid, 1, start=3)  # 8 messages now
    assert compactions(d, sid) == []  # checked before a new message: 6 were there, not > 6
    llm.add({"text": "The user asked questions 0-2 and got answers."}, {"text": "answer 4"})
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "question 4"})
    assert compactions(d, sid) == [{"kind": "compaction", "strategy": "summary", "before": 8, "after": 3}]
    summary_req, turn_req = llm.requests[-2]["body"], llm.requests[-1]["body"]
    assert "Summarise the conversation" in summary_req["messages"][0]["content"]
    assert "question 0" in summary_req["messages"][1]["content"] and "answer 2" in summary_req["messages"][1]["content"]
    assert "question 3" not in summary_req["messages"][1]["content"]  # the recent part is kept verbatim
    assert "tools" not in summary_req and summary_req["model"] == "fake-fast"
    sent = turn_req["messages"]
    assert sent[0]["role"] == "system" and "ToyCoder" in sent[0]["content"]
    assert sent[1]["content"] == SUMMARY_PREFIX + "The user asked questions 0-2 and got answers."
    assert [m["content"] for m in sent[2:]] == ["question 3", "answer 3", "question 4"]
    loaded = await d.call("toycoder/session/load", {"sessionId": sid})
    assert loaded["session"]["messageCount"] == 5


async def test_failing_summary_falls_back_to_truncation(start_daemon, llm: FakeLLM) -> None:
    d = await start_daemon(extra=SMALL)
    sid = await new_session(d)
    await chat(d, llm, sid, 4)
    llm.add({"status": 400, "error": "context too long"}, {"text": "answer 4"})
    result = await d.call("toycoder/prompt", {"sessionId": sid, "text": "question 4"})
    assert result["text"] == "answer 4"
    assert compactions(d, sid) == [{"kind": "compaction", "strategy": "truncate", "before": 8, "after": 2}]
    assert [m["content"] for m in llm.requests[-1]["body"]["messages"][1:]] == ["question 3", "answer 3", "question 4"]


async def test_token_budget_triggers_compaction(start_daemon, llm: FakeLLM) -> None:
    d = await start_daemon(extra="session: {max_messages: 50, compress_keep_recent: 1, max_context_tokens: 1000}\n")
    sid = await new_session(d)
    llm.add({"text": "big", "usage": {"prompt_tokens": 1200, "completion_tokens": 5}})
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "q1"})
    llm.add({"text": "summary"}, {"text": "a2"})
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "q2"})
    assert [c["strategy"] for c in compactions(d, sid)] == ["summary"]


async def test_slash_compact_forces_it_and_keeps_tool_calls_whole(start_daemon, llm: FakeLLM) -> None:
    d = await start_daemon(extra="session: {max_messages: 50, compress_keep_recent: 1}\n")
    sid = await new_session(d)
    llm.add({"tool_calls": [{"name": "list_directory", "arguments": {}}]}, {"tool_calls": [{"name": "list_directory", "arguments": {}}]})
    llm.add({"text": "done"})
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "look"})
    llm.add({"text": "the user asked to look around"})
    result = await d.call("toycoder/prompt", {"sessionId": sid, "text": "/compact"})
    assert result["stopReason"] == "command" and "summarised" in result["text"]
    llm.add({"text": "next"})
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "go on"})
    assert llm.violations == []
    roles = [m["role"] for m in llm.requests[-1]["body"]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]  # summary, the kept final answer, the new prompt


def test_split_point_never_starts_with_a_tool_result() -> None:
    msgs = [{"role": "system"}, {"role": "user"}, {"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "b"}]},
            {"role": "tool"}, {"role": "tool"}]
    assert split_point(msgs, 1) == 2
    assert split_point(msgs, 2) == 2
    assert split_point(msgs, 3) == 2
    assert split_point(msgs, 10) == 1
