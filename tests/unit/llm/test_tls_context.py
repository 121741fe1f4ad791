"""The streaming client's TLS context: the CA store is loaded once per process (by preload, in the
background after initialize, when a provider is reached over TLS) and every client verifies with it."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator

import pytest

from toycoder_daemon.llm import http_stream


@pytest.fixture
def fresh_tls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """tls_context as in a new process, counting the CA store loads."""
    made: list[int] = []
    real = http_stream._httpx().create_ssl_context

    def counting() -> ssl.SSLContext:
        made.append(1)
        ctx: ssl.SSLContext = real()
        return ctx

    monkeypatch.setattr(http_stream._httpx(), "create_ssl_context", counting)
    http_stream._tls_context.cache_clear()
    yield made
    http_stream._tls_context.cache_clear()


def test_preload_loads_the_ca_store_only_for_a_tls_provider(fresh_tls: list[int]) -> None:
    http_stream.preload(["http://127.0.0.1:9/v1"])
    assert fresh_tls == []
    http_stream.preload([None, "https://llm.example/v1"])  # None: OPENAI_BASE_URL or OpenAI's, both TLS here
    assert fresh_tls == [1]
    ctx = http_stream.tls_context()
    assert isinstance(ctx, ssl.SSLContext) and ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    http_stream.preload(["https://other.example/v1"])
    assert fresh_tls == [1]


def test_every_tls_client_verifies_with_the_one_context_and_plain_http_skips_it(fresh_tls: list[int]) -> None:
    async def clients() -> list[object]:
        made = []
        for url in ("https://a.example/v1", "https://b.example/v1", "http://127.0.0.1:9/v1"):
            t = http_stream.StreamTransport(url, 5.0)
            made.append(await t._http())
            await t.aclose()
        return made

    asyncio.run(clients())
    assert fresh_tls == [1]  # two TLS clients, one CA store load; none for plain http
