"""OpenAI-compatible chat model: the lean streaming path (`http_stream.py`), our own retry and
key rotation.

We retry 408/409/429/5xx, connection errors and streams cut before
their end, with exponential backoff + jitter, honouring Retry-After, bounded by attempts and by
total time. 400/401/403/404/422 are not retried (401 drops the key for this run and tries the next
one, if any). A 429 cools its key; the turn switches to another key at once and waits only when
every key is cooling. A reply is only returned once its stream finished, so a cut stream never half-runs a
tool call.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from toycoder_daemon.core.errors import ProviderError
from toycoder_daemon.core.messages import Message
from toycoder_daemon.core.util import secrets
from toycoder_daemon.llm import dialect, overflow, tools_ignored
from toycoder_daemon.llm.base import ChatResponse, ContextOverflow, RetryNotice
from toycoder_daemon.llm.chunks import EmptyReply, ReplyAssembler, StreamCut, StreamErrorEvent
from toycoder_daemon.llm.http_stream import ConnectionProblem, HTTPStatusFailure, StreamTransport, request_body

log = logging.getLogger(__name__)

RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504}
PROBE_TOOL = "ping"
PROBE_TOKENS = 32
"""The probe's output limit: enough for a call of a tool without arguments."""


def _ignore(text: str) -> None:
    pass


class KeyPool:
    """Round-robin over API keys; 429 cools a key down, 401 drops it for this run."""

    def __init__(self, keys: list[str]):
        self._keys = list(dict.fromkeys(keys))  # de-duplicated, order kept
        self._next = 0
        self._cool_until: dict[str, float] = {}
        self._dropped: set[str] = set()

    def __len__(self) -> int:
        return len([k for k in self._keys if k not in self._dropped])

    def pick(self) -> tuple[str | None, float]:
        """The next usable key and how long to wait before using it (0 if ready)."""
        live = [k for k in self._keys if k not in self._dropped]
        if not live:
            return None, 0.0
        now = time.monotonic()
        for _ in range(len(self._keys)):
            key = self._keys[self._next % len(self._keys)]
            self._next += 1
            if key not in self._dropped and self._cool_until.get(key, 0.0) <= now:
                return key, 0.0
        soonest = min(live, key=lambda k: self._cool_until.get(k, 0.0))
        return soonest, max(0.0, self._cool_until.get(soonest, 0.0) - now)

    def for_metadata(self) -> str:
        """A usable key for a small request (/v1/models, /props, /api/show), without moving the turn
        of the keys that chat requests take ("" when there is none)."""
        return next((k for k in self._keys if k not in self._dropped), "")

    def cool(self, key: str, seconds: float) -> None:
        self._cool_until[key] = time.monotonic() + seconds

    def drop(self, key: str) -> None:
        self._dropped.add(key)

    def number(self, key: str) -> int:
        """The key's place in the configured list, from 1: how a log names a key without showing it."""
        return self._keys.index(key) + 1

    def any_ready(self) -> bool:
        """Is some usable key not cooling down right now?"""
        now = time.monotonic()
        return any(k not in self._dropped and self._cool_until.get(k, 0.0) <= now for k in self._keys)


def _retry_after(exc: HTTPStatusFailure) -> float | None:
    value = exc.retry_after
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _status_reason(exc: HTTPStatusFailure) -> str:
    """One line: the status and the first line of the server's message (the whole body goes to the
    debug log; llama-cpp-python answers with a 9-line validation dump)."""
    body = exc.body
    log.debug("HTTP %s body: %r", exc.status_code, body)
    err = body.get("error", body) if isinstance(body, dict) else None
    message = err.get("message") if isinstance(err, dict) else err if isinstance(err, str) else None
    if message is None and isinstance(body, str):
        message = body  # a proxy's plain-text error page
    lines = [line.strip() for line in str(message or "").splitlines() if line.strip()]
    first = lines[0][:300] if lines else "no error message"
    more = f" (+{len(lines) - 1} more lines in the debug log)" if len(lines) > 1 else ""
    return f"HTTP {exc.status_code}: {first}{more}"


class OpenAIChatModel:
    """One provider + model; one connection pool shared by its API keys."""

    def __init__(
        self,
        provider: str,
        model: str,
        base_url: str | None,
        api_keys: list[str],
        *,
        max_retries: int = 2,
        retry_interval: float = 1.0,
        max_retry_delay: float = 30.0,
        max_retry_seconds: float = 120.0,
        request_timeout: float = 300.0,
        max_tokens: int | None = None,
        token_field: str = "max_tokens",
        quirks: Sequence[str] | None = None,
    ):
        self.provider = provider
        self.model = model
        self.base_url = base_url
        self.keys = KeyPool(api_keys)
        self.max_retries = max_retries
        self.retry_interval = retry_interval
        self.max_retry_delay = max_retry_delay
        self.max_retry_seconds = max_retry_seconds
        self.request_timeout = request_timeout
        self.max_tokens = max_tokens
        self.token_field = token_field  # OpenAI's newer models take only max_completion_tokens
        self.configured_quirks = quirks
        """None: the known quirks of the server's kind (found from its Server header or /v1/models)."""
        self.kind: str | None = None
        self._info: dialect.ServerInfo | None = None
        self._asked_kind = False
        self.context_tokens: int | None = None
        """The model's context window, once the server said it (an overflow error, /props, /v1/models)."""
        self.supports_tools: bool | None = None
        """False once the server said it takes no tools (llama.cpp's /props, Ollama's /api/show): they are not sent."""
        self._props: asyncio.Task[None] | None = None
        """Reading /props, once; concurrent readers (a session's tools check, the model list) share it."""
        self._asking_tools: asyncio.Task[None] | None = None
        self._transport = StreamTransport(base_url, request_timeout)

    async def aclose(self) -> None:
        await self._transport.aclose()

    async def stream_chat(
        self,
        messages: Sequence[Message],
        tools: list[dict[str, Any]] | None = None,
        on_delta: Callable[[str], None] | None = None,
        on_retry: Callable[[RetryNotice], None] | None = None,
        *,
        model: str | None = None,
    ) -> ChatResponse:
        started = time.monotonic()
        extra = {self.token_field: self.max_tokens} if self.max_tokens else None
        if tools:  # what the server says of tools is known before the first request that offers them
            await self.tools_supported()
        await self._read_props()
        offered = tools
        quirks, body = None, b""
        attempt = 0
        while True:
            if quirks != self.quirks():  # once, unless the first answer told the server's kind (e.g. its 500)
                quirks = self.quirks()
                tools = offered if self.supports_tools is not False else None  # a template without tools drops them
                body = await request_body(model or self.model, messages, tools, extra, quirks)
            key, wait = self.keys.pick()
            if key is None:
                raise ProviderError(self.provider, "no usable API key (none configured, or all were rejected with 401)")
            if wait:  # every key is cooling down after a 429
                if time.monotonic() - started + wait > self.max_retry_seconds:
                    raise ProviderError(self.provider, f"rate-limited: every API key is cooling down for {wait:.0f}s more")
                if on_retry:
                    on_retry(RetryNotice(attempt=attempt, delay_seconds=round(wait, 3),
                                         reason="rate-limited (429): waiting for an API key to cool down"))
                await asyncio.sleep(wait)

            try:
                reply = await self._stream_once(key, body, on_delta or _ignore)
            except HTTPStatusFailure as e:
                status = e.status_code
                reason = _status_reason(e)
                if status == 401:
                    self.keys.drop(key)
                    log.warning("provider %s: key #%d rejected (401); dropped for this run", self.provider, self.keys.number(key))
                    if len(self.keys):
                        continue  # another key may work; not a retry of the same failure
                    raise ProviderError(self.provider, f"authentication failed ({reason}); check the API key", status) from None
                if overflow.is_overflow(status, e.body):  # retrying the same prompt cannot help
                    size = overflow.context_size(e.body) or await self.learn_window()
                    if size:
                        self.context_tokens = size
                    raise ContextOverflow(self.provider, f"the prompt is over the model's context window ({reason})",
                                          status, size) from None
                if status not in RETRYABLE_STATUS:
                    raise ProviderError(self.provider, reason, status) from None
                hint = _retry_after(e)
                if status == 429:  # a huge Retry-After must not park the key (and the next turns) for hours
                    self.keys.cool(key, min(hint if hint is not None else max(self.retry_interval, 1.0),
                                            self.max_retry_delay))
                    if self.keys.any_ready():
                        hint = 0.0  # another key is free: no reason to wait for this one
            except EmptyReply:
                raise ContextOverflow(self.provider, "the server answered with an empty reply, which llama-cpp-python "
                                      "sends when the prompt is over the model's context window",
                                      context_tokens=await self.learn_window()) from None
            except (ConnectionProblem, StreamCut) as e:
                status, hint = None, None
                reason = (f"connection problem at {self._transport.url}: {e}" if isinstance(e, ConnectionProblem)
                          else f"stream cut: {e}")
            except asyncio.CancelledError:
                raise
            except StreamErrorEvent as e:  # an error event in the middle of the stream: the provider's hiccup
                status, hint = None, None
                reason = f"provider error mid-stream: {e.message}"
            except Exception as e:  # e.g. a malformed chunk
                status, hint = None, None
                reason = f"stream broken: {type(e).__name__}: {e}"
            else:
                await self._read_props()  # the first answer may have told llama.cpp
                if offered and self.supports_tools is False:
                    reply.tools_ignored = self.no_tools_notice()
                    return reply
                return await self._check_tools_used(reply, tools)

            attempt += 1
            if attempt > self.max_retries:
                raise ProviderError(self.provider, f"{reason} (gave up after {attempt} attempts)", status)
            delay = self._backoff(attempt, hint)
            if time.monotonic() - started + delay > self.max_retry_seconds:
                raise ProviderError(self.provider, f"{reason} (retry time budget of {self.max_retry_seconds:g}s spent)", status)
            reason = secrets.redact(reason)  # some proxies echo the key in their error text
            log.info("provider %s: retry %d in %.2fs: %s", self.provider, attempt, delay, reason)
            if on_retry:
                on_retry(RetryNotice(attempt=attempt, delay_seconds=round(delay, 3), reason=reason))
            if delay:
                await asyncio.sleep(delay)

    async def _check_tools_used(self, reply: ChatResponse, tools: list[dict[str, Any]] | None) -> ChatResponse:
        """A reply without tool calls to a request that offered tools: did the server ignore them?"""
        if not tools or reply.tool_calls:
            return reply
        quirks = self.quirks()
        names = [str((t.get("function") or {}).get("name")) for t in tools]
        evidence = tools_ignored.unparsed_call(reply.content, names)
        if evidence is None and "no_tool_choice" in quirks and self.kind in (None, "uvicorn") and not self._asked_kind:
            self._asked_kind = True  # once: /v1/models tells llama-cpp-python (which drops the tools) from vLLM
            await self.server_info()
        if evidence is not None or tools_ignored.dropped_by_quirks(self.kind, quirks):
            reply.tools_ignored = tools_ignored.notice(self.provider, self._transport.url, evidence)
        return reply

    def no_tools_notice(self) -> str | None:
        """The notice for a server known to take no tools (None: it takes them, or it is not known yet)."""
        if self.supports_tools is not False:
            return None
        return tools_ignored.unsupported_notice(self.provider, self._transport.shown, self.kind, self.model)

    async def tools_supported(self) -> bool | None:
        """Does the server take tools, as it says itself: /v1/models names its kind, then llama.cpp's
        /props or Ollama's /api/show answers. Asked once per client (one per provider and model, so per
        base URL), concurrent callers sharing the one ask; None when the server does not say."""
        if self._asking_tools is None:
            self._asking_tools = asyncio.ensure_future(self._ask_tools())
        await asyncio.shield(self._asking_tools)
        return self.supports_tools

    async def _ask_tools(self) -> None:
        try:
            self.quirks()
            if self.kind in (None, "uvicorn"):
                await self.server_info()  # its kind; llama.cpp's /props is read there
            await self._read_props()
            if self.kind == "ollama" and self.supports_tools is None:
                self.supports_tools = await self._ollama_tools()
        except Exception as e:  # never fatal: the turn goes on as if the server said nothing
            log.info("provider %s: cannot ask whether the server takes tools: %s", self.provider, e)
        if self.supports_tools is False:
            log.warning("provider %s: %s says %s takes no tools; running without them",
                        self.provider, self._transport.shown, self.model)

    async def _ollama_tools(self) -> bool | None:
        """Ollama's /api/show for this model: "tools" among its `capabilities`."""
        url = self._transport.base.removesuffix("/v1") + "/api/show"
        try:
            status, body, _ = await self._transport.post_json(self.keys.for_metadata(), url, {"model": self.model})
        except Exception as e:  # a proxy without Ollama's native API: not known
            log.info("provider %s: cannot ask %s: %s", self.provider, secrets.shown_url(url), e)
            return None
        return dialect.ollama_tools(body) if status < 400 else None

    async def probe_tools(self) -> tuple[bool | None, str]:
        """For a server that says nothing of tools (`toycoder doctor`): one tiny request offering one
        trivial tool. (True, ...) when it was accepted, (False, why) when the server refused the tools or
        sent the model's call back as text, (None, why) when the answer cannot tell."""
        tool = {"type": "function", "function": {"name": PROBE_TOOL, "description": "Answers pong.",
                                                  "parameters": {"type": "object", "properties": {}}}}
        messages: list[Message] = [{"role": "user", "content": f"Call the {PROBE_TOOL} tool."}]
        body = await request_body(self.model, messages, [tool], {self.token_field: PROBE_TOKENS}, self.quirks())
        key, _ = self.keys.pick()
        try:
            reply = await self._stream_once(key or "", body, _ignore)
        except HTTPStatusFailure as e:
            reason = secrets.redact(_status_reason(e))
            if e.status_code < 500 and e.status_code not in (401, 403, 404, 429) and "tool" in reason.lower():
                return False, f"it refused a request with tools ({reason})"
            return None, f"the test request failed ({reason})"
        except Exception as e:  # connection, stream or chunk problems: nothing said of tools
            return None, f"the test request failed ({secrets.redact(str(e)) or type(e).__name__})"
        if reply.tool_calls:
            return True, "the model called the test tool"
        if (seen := tools_ignored.unparsed_call(reply.content, [PROBE_TOOL])) is not None:
            return False, f"the model's call came back as text ({seen}): the server does not parse tool calls"
        return True, ("it accepted a request with tools (the model did not call the test tool, so whether the "
                      "server parses calls is not shown)")

    def forget_window(self) -> None:
        """The window learned may be stale (the server restarted with another -c): learn it again."""
        self.context_tokens, self._props = None, None

    async def _read_props(self) -> None:
        """Once, when the server is llama.cpp: its /props says the context it runs with and whether its
        chat template takes tools (started without a tool-capable template, it silently drops them)."""
        self.quirks()  # learns the kind from the last answer's Server header
        if self.kind != "llama.cpp":
            return
        if self._props is None:
            self._props = asyncio.ensure_future(self._get_props())
        await asyncio.shield(self._props)

    async def _get_props(self) -> None:
        try:
            url = self._transport.base.removesuffix("/v1") + "/props"
            status, props, _ = await self._transport.get_json(self.keys.for_metadata(), url)
        except Exception as e:  # an old llama.cpp, or a proxy in front of it: the request still goes
            log.info("provider %s: cannot read /props: %s", self.provider, e)
            return
        if status >= 400:
            return
        self.context_tokens = self.context_tokens or dialect.props_window(props)
        self.supports_tools = dialect.props_tools(props)

    def quirks(self) -> frozenset[str]:
        self.kind = self.kind or dialect.kind_from_header(self._transport.server)
        return dialect.quirks_for(self.configured_quirks, self.kind)

    @property
    def known_server_info(self) -> dialect.ServerInfo | None:
        """What /v1/models said when last asked, without asking (None: not asked yet, or it failed)."""
        return self._info

    async def server_info(self, refresh: bool = False) -> dialect.ServerInfo | None:
        """What the server's /v1/models says (cached; `refresh` asks again); None when it cannot be asked."""
        if self._info is not None and not refresh:
            return self._info
        try:
            status, body, server = await self._transport.get_json(self.keys.for_metadata(), self._transport.base + "/models")
            if status >= 400:
                raise ValueError(f"HTTP {status}")
            info = dialect.read_models(body, server)
        except Exception as e:  # a server without /v1/models is still usable
            log.info("provider %s: cannot list models at %s/models: %s", self.provider, self._transport.base, e)
            return self._info
        self._info = info
        if info.kind and self.kind in (None, "uvicorn"):
            self.kind = info.kind
        if info.kind == "llama.cpp":  # /props: the window (when /v1/models has none) and the tools
            await self._read_props()
            if self.context_tokens and not info.windows:
                info.windows[self.model] = self.context_tokens
        return info

    async def learn_window(self) -> int | None:
        """The model's context window from the server's metadata, when it has any (llama.cpp and vLLM do)."""
        info = await self.server_info()
        if info is not None and not self.context_tokens:
            # llama.cpp serves one model under any name: its one window is this model's
            window = info.windows.get(self.model) or (next(iter(info.windows.values())) if len(info.windows) == 1 else None)
            self.context_tokens = window
        return self.context_tokens

    def _backoff(self, attempt: int, hint: float | None) -> float:
        if hint is not None:
            return min(hint, self.max_retry_delay)
        base = self.retry_interval * (2.0 ** (attempt - 1))
        return min(base * (0.5 + random.random() / 2), self.max_retry_delay)  # "equal jitter"

    async def _stream_once(self, key: str, body: bytes, on_delta: Callable[[str], None]) -> ChatResponse:
        reply = ReplyAssembler(on_delta)
        await self._transport.post(key, body, reply.add)
        return reply.reply()
