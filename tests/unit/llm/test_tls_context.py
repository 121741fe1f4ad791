"""The streaming client's TLS context: the CA store is loaded once per process (by preload, in the
background after initialize, when a provider is reached over TLS) and every client verifies with it."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from toycoder_daemon.llm import http_stream


@pytest.fixture
def fresh_tls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """tls_context as in a new process, counting the CA store loads."""
    made: list[int] = []
    real = http_stream._httpx().create_ssl_context

    def counting(verify: bool = True) -> ssl.SSLContext:
        made.append(1) if verify else None
        ctx: ssl.SSLContext = real(verify=verify)
        return ctx

    monkeypatch.setattr(http_stream._httpx(), "create_ssl_context", counting)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    http_stream._tls.clear()
    yield made
    http_stream._tls.clear()


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


def test_a_launch_with_its_own_ca_file_gets_its_own_context(fresh_tls: list[int], monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    """The fork server makes the context of no SSL_CERT_FILE / SSL_CERT_DIR before its forks: a child
    whose launch sets one must not verify with the system's store."""
    system = http_stream.tls_context()
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))  # an empty directory: a store without certificates
    own = http_stream.tls_context()
    assert own is not system and fresh_tls == [1, 1]
    assert http_stream.tls_context() is own  # made once for that value too
    monkeypatch.delenv("SSL_CERT_DIR")
    assert http_stream.tls_context() is system


def test_plain_http_clients_share_one_unverifying_context(fresh_tls: list[int]) -> None:
    async def clients() -> None:
        for url in ("http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"):
            t = http_stream.StreamTransport(url, 5.0)
            await t._http()
            await t.aclose()

    asyncio.run(clients())
    assert fresh_tls == []  # no CA store for plain http
    plain = http_stream._plain_context()
    assert plain is http_stream._plain_context() and plain.verify_mode == ssl.CERT_NONE and not plain.check_hostname
