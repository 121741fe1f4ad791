"""Context compaction through the daemon (one run: the threshold, the summary request on the fast
model, the compaction update). Fallback, token budget and /compact: test_compaction.py, in-process."""

from __future__ import annotations

from helpers import new_session
from rpc import Daemon

from toycoder_daemon.sessions.context import SUMMARY_PREFIX
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
    assert loaded["session"]["messageCount"] == 10  # the whole history is kept; the model is sent the summary
    assert [e["role"] for e in loaded["transcript"]].count("compaction") == 1
