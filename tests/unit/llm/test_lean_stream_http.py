"""The lean streaming path over real HTTP, against canned raw responses the scripted server cannot
produce: an error event mid-stream, a plain-text error page, a body cut in the middle of a line,
an SSE stream with CRLF line ends and comments."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import pytest

from toycoder_daemon.core.errors import ProviderError
from toycoder_daemon.llm.openai_client import OpenAIChatModel

MSGS = [{"role": "user", "content": "hi"}]


def sse(*events: dict | str, eol: str = "\n") -> bytes:
    out = []
    for e in events:
        out.append(e if isinstance(e, str) else "data: " + json.dumps(e) + eol + eol)
    return "".join(out).encode()


def text_chunk(text: str, finish: str | None = None) -> dict:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}


def http(status: int, body: bytes, content_type: str = "text/event-stream", length: bool = True) -> bytes:
    head = f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nConnection: close\r\n"
    if length:
        head += f"Content-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


@contextlib.asynccontextmanager
async def canned(*responses: bytes) -> AsyncIterator[tuple[str, list[bytes]]]:
    """Each connection gets the next response, written raw, then the socket closes."""
    queue = list(responses)
    seen: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(v) for k, _, v in (line.partition(b":") for line in head.split(b"\r\n"))
                      if k.strip().lower() == b"content-length")
        seen.append(await reader.readexactly(length))
        writer.write(queue.pop(0))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1", seen
    finally:
        server.close()


def model(url: str, **kw) -> OpenAIChatModel:
    return OpenAIChatModel("p", "m", url, ["k"], **{"max_retries": 2, "retry_interval": 0.01, **kw})


async def test_crlf_comments_and_done_stream_through() -> None:
    body = sse(": ping", "\r\n", text_chunk("Hel"), text_chunk("lo", "stop"), "data: [DONE]\r\n\r\n", eol="\r\n")
    async with canned(http(200, body)) as (url, seen):
        deltas: list[str] = []
        m = model(url)
        reply = await m.stream_chat(MSGS, on_delta=deltas.append)
        await m.aclose()
    assert reply.content == "Hello" and deltas == ["Hel", "lo"] and reply.finish_reason == "stop"
    sent = json.loads(seen[0])
    assert sent["messages"] == MSGS and sent["stream"] is True and sent["model"] == "m"


async def test_a_cut_mid_line_and_an_error_event_are_retried() -> None:
    cut = sse(text_chunk("par")) + b'data: {"object": "chat.comp'  # the server closes mid-line
    error_event = sse(text_chunk("x"), {"error": {"message": "overloaded", "type": "server_error"}})
    async with canned(http(200, cut), http(200, error_event), http(200, sse(text_chunk("whole", "stop")))) as (url, _):
        notices = []
        m = model(url)
        reply = await m.stream_chat(MSGS, on_retry=notices.append)
        await m.aclose()
    assert reply.content == "whole"
    assert "stream cut" in notices[0].reason and "provider error mid-stream: overloaded" in notices[1].reason


async def test_a_number_for_text_is_never_streamed_and_is_named_in_the_retry() -> None:
    numbers = sse(text_chunk("a"), {"object": "chat.completion.chunk",
                                   "choices": [{"index": 0, "delta": {"content": 42}, "finish_reason": None}]})
    async with canned(http(200, numbers), http(200, sse(text_chunk("whole", "stop")))) as (url, _):
        notices, deltas = [], []
        m = model(url)
        reply = await m.stream_chat(MSGS, on_delta=deltas.append, on_retry=notices.append)
        await m.aclose()
    assert reply.content == "whole" and deltas == ["a", "whole"]  # the cut attempt's text, then the retry's
    assert "a chunk's delta content is int '42', neither text nor a list of text parts" in notices[0].reason


async def test_a_plain_text_error_page_keeps_its_text_and_status() -> None:
    async with canned(http(404, b"no such route on this proxy", "text/plain")) as (url, _):
        m = model(url)
        with pytest.raises(ProviderError) as e:
            await m.stream_chat(MSGS)
        await m.aclose()
    assert e.value.status == 404 and "no such route on this proxy" in str(e.value)


async def test_a_stream_without_finish_reason_is_cut_and_reported_after_the_last_attempt() -> None:
    no_finish = sse(text_chunk("a"), "data: [DONE]\n\n")
    async with canned(http(200, no_finish), http(200, no_finish)) as (url, _):
        m = model(url, max_retries=1)
        with pytest.raises(ProviderError, match="stream cut"):
            await m.stream_chat(MSGS)
        await m.aclose()


async def test_a_compressed_stream_is_decoded_although_identity_was_asked_for() -> None:
    import gzip

    body = gzip.compress(sse(text_chunk("zip"), text_chunk("ped", "stop")))
    raw = http(200, body).replace(b"Connection: close\r\n", b"Connection: close\r\nContent-Encoding: gzip\r\n")
    async with canned(raw) as (url, _):
        m = model(url)
        reply = await m.stream_chat(MSGS)
        await m.aclose()
    assert reply.content == "zipped"
