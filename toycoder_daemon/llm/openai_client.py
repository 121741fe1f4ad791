"""OpenAI-compatible chat model over `openai.AsyncOpenAI`, with our own retry and key rotation.

The SDK's retries are off: we retry 408/409/429/5xx, connection errors and streams cut before
their end, with exponential backoff + jitter, honouring Retry-After, bounded by attempts and by
total time. 400/401/403/404/422 are not retried (401 drops the key for this run and tries the next
one, if any). A reply is only returned once its stream finished, so a cut stream never half-runs a
tool call.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from .. import secrets
from ..errors import ProviderError
from ..messages import Message
from .base import ChatResponse, RetryNotice, ToolCall, Usage, for_api

log = logging.getLogger(__name__)

RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504}


def _ignore(text: str) -> None:
    pass


class _StreamCut(Exception):
    """The stream ended before the model finished its reply."""


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

    def cool(self, key: str, seconds: float) -> None:
        self._cool_until[key] = time.monotonic() + seconds

    def drop(self, key: str) -> None:
        self._dropped.add(key)


def _retry_after(exc: Any) -> float | None:
    response = getattr(exc, "response", None)
    if response is None:
        return None
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _status_reason(exc: Any) -> str:
    body = getattr(exc, "body", None)
    err = body.get("error", body) if isinstance(body, dict) else None
    message = err.get("message") if isinstance(err, dict) else None
    return f"HTTP {getattr(exc, 'status_code', '?')}: {message or 'no error message'}"


class OpenAIChatModel:
    """One provider + model. Holds one SDK client per API key."""

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
        self._clients: dict[str, Any] = {}

    def _client(self, key: str) -> Any:
        client = self._clients.get(key)
        if client is None:
            import openai  # lazy: importing the SDK costs ~0.4 s, not needed to answer initialize

            client = openai.AsyncOpenAI(
                api_key=key, base_url=self.base_url, max_retries=0, timeout=self.request_timeout
            )
            self._clients[key] = client
        return client

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()

    async def stream_chat(
        self,
        messages: Sequence[Message],
        tools: list[dict[str, Any]] | None = None,
        on_delta: Callable[[str], None] | None = None,
        on_retry: Callable[[RetryNotice], None] | None = None,
        *,
        model: str | None = None,
    ) -> ChatResponse:
        import openai

        started = time.monotonic()
        attempt = 0
        while True:
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
                return await self._stream_once(key, messages, tools, on_delta or _ignore, model or self.model)
            except openai.APIStatusError as e:
                status = e.status_code
                reason = _status_reason(e)
                if status == 401:
                    self.keys.drop(key)
                    log.warning("provider %s: key #%d rejected (401); dropped for this run", self.provider, self._key_index(key))
                    if len(self.keys):
                        continue  # another key may work; not a retry of the same failure
                    raise ProviderError(self.provider, f"authentication failed ({reason}); check the API key", status) from None
                if status not in RETRYABLE_STATUS:
                    raise ProviderError(self.provider, reason, status) from None
                hint = _retry_after(e)
                if status == 429:  # a huge Retry-After must not park the key (and the next turns) for hours
                    self.keys.cool(key, min(hint if hint is not None else max(self.retry_interval, 1.0),
                                            self.max_retry_delay))
            except (openai.APIConnectionError, _StreamCut) as e:
                status, hint = None, None
                reason = f"connection problem at {self.base_url}: {e}" if not isinstance(e, _StreamCut) else f"stream cut: {e}"
            except asyncio.CancelledError:
                raise
            except openai.APIError as e:  # an error event in the middle of the stream: the provider's hiccup
                status, hint = None, None
                reason = f"provider error mid-stream: {e.message}"
            except openai.OpenAIError as e:
                raise ProviderError(self.provider, str(e)) from None
            except Exception as e:  # transport errors surfacing mid-stream (e.g. peer closed the body)
                status, hint = None, None
                reason = f"stream broken: {type(e).__name__}: {e}"

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
            await asyncio.sleep(delay)

    def _key_index(self, key: str) -> int:
        return self.keys._keys.index(key) + 1

    def _backoff(self, attempt: int, hint: float | None) -> float:
        if hint is not None:
            return min(hint, self.max_retry_delay)
        base = self.retry_interval * (2.0 ** (attempt - 1))
        return min(base * (0.5 + random.random() / 2), self.max_retry_delay)  # "equal jitter"

    async def _stream_once(
        self,
        key: str,
        messages: Sequence[Message],
        tools: list[dict[str, Any]] | None,
        on_delta: Callable[[str], None],
        model: str,
    ) -> ChatResponse:
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": for_api(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            kwargs["tools"] = tools
        stream = await self._client(key).chat.completions.create(**kwargs)
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        usage: Usage | None = None
        finish: str | None = None
        try:
            async for chunk in stream:
                if chunk.usage is not None:
                    u = chunk.usage
                    usage = Usage(u.prompt_tokens or 0, u.completion_tokens or 0, u.total_tokens or 0)
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                d = choice.delta
                if d is not None:
                    if d.content:
                        text.append(d.content)
                        on_delta(d.content)
                    for tc in d.tool_calls or ():
                        slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": []})
                        if tc.id:
                            slot["id"] = tc.id
                        if tc.function is not None:
                            if tc.function.name:
                                slot["name"] += tc.function.name
                            if tc.function.arguments:
                                slot["arguments"].append(tc.function.arguments)
                if choice.finish_reason:
                    finish = choice.finish_reason
        finally:
            await stream.close()
        if finish is None:
            raise _StreamCut("the reply ended without a finish_reason")
        tool_calls = [
            ToolCall(id=c["id"] or f"call_{i}", name=c["name"], arguments="".join(c["arguments"]))
            for i, c in sorted(calls.items())
        ]
        return ChatResponse(content="".join(text), tool_calls=tool_calls, usage=usage, finish_reason=finish)
