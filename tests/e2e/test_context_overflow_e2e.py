"""A prompt over the model's context window (issue 18): recognised as its own error whatever the
server's dialect, room made (compaction, or cutting the largest message with a notice) and the
request sent once more; a session is never left holding a prompt it can only fail on. Through the
real daemon against the scripted server playing llama.cpp's 400 and llama-cpp-python's empty 200.
Recognising each dialect's error: unit/llm/test_context_overflow.py."""

from __future__ import annotations

import json

import pytest
from helpers import new_session
from rpc import Daemon, RpcError

from toycoder_daemon.testing.dialects import Dialect
from toycoder_daemon.testing.fake_llm import FakeLLM


def chars_sent(request: dict) -> int:
    return sum(len(m.get("content") or "") for m in request["body"]["messages"])


async def system_chars(daemon: Daemon, llm: FakeLLM) -> int:
    """The characters of the system prompt (what every request carries besides the conversation)."""
    llm.add({"text": "ok"})
    sid = await new_session(daemon)
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "x"})
    return chars_sent(llm.requests[-1]) - 1


def window_for(llm: FakeLLM, base: int, room: int) -> int:
    """A llama.cpp window in tokens that holds the system prompt, the tools' schemas and `room` characters
    (the daemon never sends a request the server's known window cannot hold, so the window must be real)."""
    return (base + len(json.dumps(llm.requests[-1]["body"]["tools"])) + room) // 4


async def test_llama_cpp_overflow_cuts_the_oversized_prompt_and_retries(daemon: Daemon, llm: FakeLLM) -> None:
    base = await system_chars(daemon, llm)
    n_ctx = window_for(llm, base, 3000)
    llm.dialect = Dialect(context_chars=base + 3000, n_ctx=n_ctx, server="llama.cpp")
    llm.add({"text": "Summarised your log."})
    sid = await new_session(daemon)
    huge = "log line\n" * 2000  # 18,000 characters, nothing older to compact
    result = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": huge})
    assert result["stopReason"] == "end_turn" and result["text"] == "Summarised your log."
    refused, retried = [r for r in llm.requests if r["body"]][-2:]  # /props was read between them (a GET)
    assert chars_sent(refused) > base + 3000 >= chars_sent(retried)
    sent = retried["body"]["messages"][-1]["content"]
    assert f"did not fit the model's context window ({n_ctx} tokens)" in sent  # learned from the error's n_ctx
    assert sent.startswith("log line\n") and sent.endswith("log line\n")  # head and tail kept
    assert "was too long for the model's context window" in daemon.streamed_text(sid)
    loaded = await daemon.call("toycoder/session/load", {"sessionId": sid})
    assert loaded["transcript"][0]["text"] == huge  # the person's history keeps what they sent; the model got the cut


async def test_empty_200_overflow_compacts_the_history_and_retries(daemon: Daemon, llm: FakeLLM) -> None:
    sid = await new_session(daemon)
    for i in range(6):
        llm.add({"text": f"answer {i} " + "z" * 300})
        await daemon.call("toycoder/prompt", {"sessionId": sid, "text": f"question {i}"})
    before = chars_sent(llm.requests[-1]) + 300  # the history as the next request carries it, roughly
    llm.dialect = Dialect(context_chars=before + 600, overflow="empty")  # llama-cpp-python: an empty 200
    llm.add({"text": "They asked six questions."}, {"text": "Done."})  # the summary, then the retried reply
    n = len(llm.requests)
    result = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "q" * 1000})
    assert result["stopReason"] == "end_turn" and result["text"] == "Done."
    models = [r["body"]["model"] for r in llm.requests[n:] if r["body"]]
    assert models == ["fake-model", "fake-fast", "fake-model"]  # no retry of the empty reply, one summary, one retry
    assert any(u["update"]["kind"] == "compaction" for u in daemon.updates(sid))
    assert "They asked six questions." in str(llm.requests[-1]["body"]["messages"])


async def test_still_over_after_making_room_fails_clearly_and_the_session_recovers(daemon: Daemon, llm: FakeLLM) -> None:
    base = await system_chars(daemon, llm)
    n_ctx = window_for(llm, base, 100)
    llm.dialect = Dialect(context_chars=base + 100, n_ctx=n_ctx, server="llama.cpp")
    sid = await new_session(daemon)
    with pytest.raises(RpcError) as failed:
        await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "data " * 4000})
    assert "context window" in failed.value.message
    assert f"{n_ctx} tokens" in failed.value.message
    refusals = [r for r in llm.requests if r["path"].endswith("/chat/completions")][1:]
    # the request, and no retry: after making room the known window still cannot hold it, so it is not sent
    assert len(refusals) == 1
    llm.dialect = Dialect(n_ctx=100_000)  # the server restarted with a bigger context: learned again
    llm.add({"text": "Fine now."})
    result = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "hello again"})
    assert result["text"] == "Fine now."
    assert chars_sent(llm.requests[-1]) < base + 2000  # the 20,000-character prompt is not sent again
