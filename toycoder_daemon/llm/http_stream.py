"""The streaming chat request, sent with httpx2 (the HTTP library of the openai SDK >= 3), without the
SDK's request transformation and per-chunk models.

The SDK's `create()` walks and transforms every message on the event loop (72% of the first-chunk
time in a 5,000-message session) and builds a pydantic object per streamed event (~70% of a
turn's CPU); its raw-response mode still transforms the request. Here the body is encoded once
with orjson (in a worker thread when the history is long) and the SSE bytes are parsed into
small structs (`chunks.py`). Importing httpx2 costs ~0.1 s against ~0.5 s for the SDK, which a
new process otherwise pays before its first chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from toycoder_daemon.core.messages import Message
from toycoder_daemon.core.ports import OUTPUT
from toycoder_daemon.core.util import secrets
from toycoder_daemon.llm import dialect, json_codec
from toycoder_daemon.llm.base import for_api
from toycoder_daemon.llm.chunks import ChunkDelta, StreamCut, read_chunk
from toycoder_daemon.llm.sse import SSEDecoder

BIG_HISTORY = 64
"""Messages above which the request body is built and encoded off the event loop."""

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class HTTPStatusFailure(Exception):
    """The provider answered an HTTP error status; carries what the retry policy needs."""

    def __init__(self, status_code: int, body: Any, retry_after: str | None):
        super().__init__(f"Error code: {status_code}")
        self.status_code = status_code
        self.body = body
        self.retry_after = retry_after


class ConnectionProblem(Exception):
    """No response: connect/TLS/timeout before the status line."""


def resolve_base_url(base_url: str | None) -> str:
    """The SDK's rule: the configured URL, else OPENAI_BASE_URL, else OpenAI's."""
    return (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")


def encode_request(model: str, messages: Sequence[Message], tools: list[dict[str, Any]] | None,
                   extra: dict[str, Any] | None = None, quirks: frozenset[str] = frozenset()) -> bytes:
    """The request body; `extra` adds fields such as max_tokens, `quirks` bend it to the server's dialect."""
    body: dict[str, Any] = {
        "model": model,
        "messages": dialect.fix_messages(for_api(messages), quirks),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if tools:
        body["tools"] = tools
        body.update(dialect.request_extras(quirks, True))
    if extra:
        body.update(extra)
    return json_codec.dumps(body)


async def request_body(model: str, messages: Sequence[Message], tools: list[dict[str, Any]] | None,
                       extra: dict[str, Any] | None = None, quirks: frozenset[str] = frozenset()) -> bytes:
    if len(messages) > BIG_HISTORY:  # every other session keeps streaming while a big history encodes
        return await asyncio.to_thread(encode_request, model, messages, tools, extra, quirks)
    return encode_request(model, messages, tools, extra, quirks)


def preload(base_urls: Sequence[str | None] = ()) -> None:
    """Import what the first streamed turn needs (~0.1 s), for a background thread after initialize,
    and load the CA store when one of these providers is reached over TLS (~50 ms, else paid by the
    first turn). The openai SDK (~0.5 s) is not on the streaming path any more: preloading it is wasted CPU."""
    _httpx()
    # the client's transport imports the connection layer only when the first client is made (~45 ms),
    # and that layer its async backend only when the first connection opens (~30 ms, in the first turn)
    importlib.import_module("httpcore2")
    for name in ("anyio._backends._asyncio", "anyio.streams.stapled", "anyio.streams.memory", "anyio.lowlevel"):
        with contextlib.suppress(ImportError):  # another anyio: the first connection imports its own
            importlib.import_module(name)
    if any(_verifies(resolve_base_url(url)) for url in base_urls):
        tls_context()


def _verifies(url: str) -> bool:
    # a plain-http URL (a local proxy, a fake) has no TLS to verify: no CA store to load
    return not url.startswith("http://")


_tls_once = threading.Lock()  # preload's thread and a first turn's may ask at once: one CA store load
_tls: dict[tuple[str | None, str | None], Any] = {}
"""The verifying contexts made, by the SSL_CERT_FILE / SSL_CERT_DIR they were made under."""


def _cert_env() -> tuple[str | None, str | None]:
    return os.environ.get("SSL_CERT_FILE") or None, os.environ.get("SSL_CERT_DIR") or None


def tls_context() -> Any:
    """The verifying TLS context the HTTP library makes for a client by default (its CA store, from
    the environment's SSL_CERT_FILE / SSL_CERT_DIR or the system's), made once per process (per
    value of those two) and shared by every model's client; True (the library makes its own) where
    it cannot be made so."""
    key = _cert_env()
    with _tls_once:
        if key not in _tls:
            make = getattr(_httpx(), "create_ssl_context", None)
            _tls[key] = make() if make is not None else True  # the library reads the same two variables
        return _tls[key]


@functools.cache
def _plain_context() -> Any:
    """What a client of a plain-http URL is given: the unverifying context the library would make for
    each client (~1 ms; it reads nothing of the environment), made once."""
    make = getattr(_httpx(), "create_ssl_context", None)
    return make(verify=False) if make is not None else False


def prepare() -> None:
    """For the fork server, before any fork: the imports, and the TLS contexts every child would make
    alike. The system's CA store (~50 ms) is loaded here only under no SSL_CERT_FILE / SSL_CERT_DIR
    (the server's environment keeps neither); a child whose launch sets one makes its own."""
    preload()
    _plain_context()
    if _cert_env() == (None, None):
        tls_context()


_loaded = False
"""httpx2 is imported (by preload, a client's making, or the fork server before a warm child's fork)."""


def _httpx() -> Any:
    global _loaded
    import httpx2  # here, not at the top: a process pays its import (~0.1 s) only when it talks to a model

    _loaded = True  # only now: while another thread imports it, sys.modules has it half-made
    return httpx2


class StreamTransport:
    """One connection pool per model; posts chat requests and feeds their chunks to a callback."""

    def __init__(self, base_url: str | None, timeout: float):
        self.base = resolve_base_url(base_url)
        self.url = self.base + "/chat/completions"
        self.shown = secrets.shown_url(self.url)
        """The URL in messages (which reach the person and the log): without its userinfo."""
        self._timeout = timeout
        self._httpx: Any = None
        self._client: Any = None
        self._making = asyncio.Lock()  # two first turns at once must not build two pools
        self.server: str | None = None
        """The `Server` header of the last answer (tells llama.cpp from others)."""
        # identity: SSE gains little from compression, and raw reads skip a decoding layer per event
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream",
                         "Accept-Encoding": "identity"}
        # what the SDK would send from the environment (its other headers are only telemetry)
        for env, header in (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project")):
            if os.environ.get(env):
                self._headers[header] = os.environ[env]

    async def _http(self) -> Any:
        if self._client is not None:
            return self._client
        async with self._making:
            if self._client is not None:
                return self._client
            slow = not _loaded or (_verifies(self.url) and _cert_env() not in _tls)
            if slow:  # the import (~70 ms) or the CA store (~50 ms) in a worker thread, not on the loop every session shares
                self._client = await asyncio.to_thread(self._make_client)
            else:  # ~1 ms: a thread hop would only add its start and its wait for the GIL
                self._client = self._make_client()
            return self._client

    def _make_client(self) -> Any:
        self._httpx = _httpx()
        verify = tls_context() if _verifies(self.url) else _plain_context()
        return self._httpx.AsyncClient(timeout=self._timeout, verify=verify)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def get_json(self, key: str, url: str, timeout: float = 5.0) -> tuple[int, Any, str | None]:
        """GET a small JSON document (/v1/models, /props): (status, parsed body or None, Server header)."""
        return await self._small_json("GET", key, url, None, timeout)

    async def post_json(self, key: str, url: str, payload: Any, timeout: float = 5.0) -> tuple[int, Any, str | None]:
        """POST a small JSON request (Ollama's /api/show): as get_json."""
        return await self._small_json("POST", key, url, payload, timeout)

    async def _small_json(self, method: str, key: str, url: str, payload: Any,
                          timeout: float) -> tuple[int, Any, str | None]:
        http = await self._http()
        response = await http.request(method, url, headers={"Authorization": f"Bearer {key}"}, json=payload,
                                      timeout=timeout)
        try:
            body: Any = response.json()
        except ValueError:
            body = None
        return response.status_code, body, response.headers.get("server")

    async def post(self, key: str, body: bytes, on_chunk: Callable[[ChunkDelta], None]) -> None:
        """Stream one reply to on_chunk. Raises HTTPStatusFailure, ConnectionProblem, StreamCut
        (the body broke or ended mid-event) or StreamErrorEvent (an error event in the stream)."""
        http = await self._http()
        hx = self._httpx
        headers = {**self._headers, "Authorization": f"Bearer {key}"}
        request = http.build_request("POST", self.url, content=body, headers=headers)
        try:
            response = await http.send(request, stream=True)
        except hx.ConnectError as e:  # nothing listens there (or DNS/TLS failed): say where
            raise ConnectionProblem(f"cannot connect to {self.shown} ({_refused(e)})") from None
        except hx.TransportError as e:
            raise ConnectionProblem(f"no answer from {self.shown} ({type(e).__name__}: {e})") from None
        self.server = response.headers.get("server")
        try:
            if response.status_code >= 400:
                raise await _status_failure(response)
            decoder = SSEDecoder()
            loads = json_codec.loads
            output = OUTPUT.get()
            budget = STEP_EVENTS
            try:
                encoded = response.headers.get("content-encoding", "identity").lower() not in ("", "identity")
                async for raw in response.aiter_bytes() if encoded else response.aiter_raw():
                    for data in decoder.feed(raw):
                        if data == b"[DONE]":
                            return
                        on_chunk(read_chunk(loads(data)))
                        budget -= 1
                        if budget <= 0:  # one network read can hold hundreds of events: let others run
                            budget = STEP_EVENTS
                            await asyncio.sleep(0)
                    if output is not None and output.full():  # the client is not reading: stop reading too
                        await output.room()
            except hx.TransportError as e:
                raise StreamCut(f"the connection to {self.shown} was dropped mid-reply ({type(e).__name__}: {e})") from None
            if decoder.pending():
                raise StreamCut("the stream ended in the middle of an event")
        finally:
            await response.aclose()


STEP_EVENTS = 16
"""Events a stream handles before it lets the event loop run others (~0.3 ms): with many sessions
streaming, a request waits for one such step per stream, not for each stream's whole backlog."""


def _refused(e: BaseException) -> str:
    """The cause under httpx's "All connection attempts failed": refused (nothing listens) or what else."""
    cause: BaseException | None = e
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused: is the server running?"
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror
        cause = cause.__cause__ or cause.__context__
    return str(e) or type(e).__name__


async def _status_failure(response: Any) -> HTTPStatusFailure:
    try:
        raw = await response.aread()
    except Exception:  # the error body itself broke off: the status still decides
        raw = b""
    body: Any = raw.decode("utf-8", "replace").strip() or None
    if body:
        with contextlib.suppress(ValueError):  # not JSON: keep the text
            body = json_codec.loads(raw)
    return HTTPStatusFailure(response.status_code, body, response.headers.get("retry-after"))
