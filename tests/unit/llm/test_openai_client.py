"""The OpenAI-compatible client on its own, against the scripted server: retry limits and redaction."""

from __future__ import annotations

import time

import pytest
from waiting import scaled

from toycoder_daemon.core.errors import ProviderError
from toycoder_daemon.core.util import secrets
from toycoder_daemon.llm.openai_client import KeyPool, OpenAIChatModel
from toycoder_daemon.testing.fake_llm import FakeLLM

MSGS = [{"role": "user", "content": "hi"}]


def model(llm: FakeLLM, keys: list[str], **kw) -> OpenAIChatModel:
    opts = {"max_retries": 2, "retry_interval": 0.01, "max_retry_delay": 0.3, "max_retry_seconds": 5.0, **kw}
    return OpenAIChatModel("p", "m", llm.base_url, keys, **opts)


async def test_a_huge_retry_after_is_capped(llm: FakeLLM) -> None:
    llm.add({"status": 429, "retry_after": 3600}, {"text": "ok"}, {"text": "next turn"})
    m = model(llm, ["only-key"])
    notices = []
    t = time.monotonic()
    reply = await m.stream_chat(MSGS, on_retry=notices.append)
    assert reply.content == "ok" and time.monotonic() - t < scaled(3)
    assert notices and notices[0].delay_seconds <= 0.3
    t = time.monotonic()
    assert (await m.stream_chat(MSGS)).content == "next turn"  # the key is not parked for an hour
    assert time.monotonic() - t < scaled(3)


async def test_waiting_for_a_cooling_key_respects_the_budget(llm: FakeLLM) -> None:
    m = model(llm, ["k"], max_retry_delay=60, max_retry_seconds=1)
    m.keys.cool("k", 30)
    with pytest.raises(ProviderError) as e:
        await m.stream_chat(MSGS)
    assert "cooling down" in str(e.value)
    assert llm.requests == []


def test_key_pool_round_robin_cooling_and_dropping() -> None:
    pool = KeyPool(["a", "b", "a"])
    assert [pool.pick()[0] for _ in range(3)] == ["a", "b", "a"]
    pool.cool("a", 10)
    assert pool.pick() == ("b", 0.0) and pool.pick() == ("b", 0.0)
    pool.drop("b")
    key, wait = pool.pick()
    assert key == "a" and 9 < wait <= 10
    pool.drop("a")
    assert pool.pick() == (None, 0.0) and len(pool) == 0
    assert (pool.number("a"), pool.number("b")) == (1, 2)  # how the log names a dropped key


async def test_provider_errors_never_carry_the_key(llm: FakeLLM) -> None:
    secrets.register(["sk-echoed-secret-123"])
    llm.add({"status": 400, "error": "invalid key sk-echoed-secret-123 for this model"})
    with pytest.raises(ProviderError) as e:
        await model(llm, ["sk-echoed-secret-123"]).stream_chat(MSGS)
    assert "sk-echoed-secret-123" not in str(e.value) and "***" in str(e.value)


async def test_a_429_switches_to_a_free_key_at_once(llm: FakeLLM) -> None:
    """Issue 13 item 12: the first key answers 429 with Retry-After 30; the second key is free, so
    the turn goes on with it at once instead of waiting 30 s. (Before the fix, the retry notice
    announced a 30 s wait; the callback fails the test right there instead of sleeping.)"""
    llm.add({"status": 429, "retry_after": 30, "error": "slow down"}, {"text": "from the free key"})
    m = model(llm, ["key-a", "key-b"], max_retry_delay=30, max_retry_seconds=120)
    notices = []

    def on_retry(n) -> None:
        notices.append(n)
        assert n.delay_seconds == 0, f"waited {n.delay_seconds}s with a free key"

    reply = await m.stream_chat(MSGS, on_retry=on_retry)
    assert reply.content == "from the free key"
    assert [r["headers"]["authorization"] for r in llm.requests] == ["Bearer key-a", "Bearer key-b"]
    assert len(notices) == 1 and "429" in notices[0].reason


async def test_every_key_cooling_waits_for_the_soonest(llm: FakeLLM) -> None:
    llm.add({"status": 429, "retry_after": 30}, {"status": 429, "retry_after": 0.05}, {"text": "ok"})
    m = model(llm, ["key-a", "key-b"], max_retries=3, max_retry_delay=5, max_retry_seconds=10)
    notices = []
    assert (await m.stream_chat(MSGS, on_retry=notices.append)).content == "ok"
    assert [r["headers"]["authorization"] for r in llm.requests] == ["Bearer key-a", "Bearer key-b", "Bearer key-b"]
    assert notices[0].delay_seconds == 0 and notices[-1].delay_seconds > 0  # the last notice is a real wait
