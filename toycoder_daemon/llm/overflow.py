"""Recognising a prompt that does not fit the model's context window, whatever the server.

Each server says it its own way; what they were seen (or are documented) to send:
- OpenAI: 400, `code: context_length_exceeded`, "This model's maximum context length is 8192 tokens..."
- llama.cpp's llama-server: 400, `type: exceed_context_size_error`, `n_ctx: 512`, "request (833 tokens)
  exceeds the available context size (512 tokens), try increasing it"
- vLLM: 400, "This model's maximum context length is 2048 tokens. However, you requested ..." (newer:
  "... is longer than the maximum model length of 2048")
- Ollama: 400/500, "... exceeds maximum context length" / "prompt too long"
- llama-cpp-python's server: 200 with no stream events at all (see EmptyReply in chunks.py)
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

_SAYS_OVERFLOW = re.compile(
    r"context[ _]length|context size|context window|maximum context|n_ctx|maximum model length"
    r"|prompt (?:is )?too long|input (?:is )?too long|too many (?:input |prompt )?tokens",
    re.IGNORECASE,
)
_OVERFLOW_CODES = {"context_length_exceeded", "exceed_context_size_error", "string_above_max_length"}
_CONTEXT_SIZE = (
    re.compile(r"maximum context length is (\d+)", re.IGNORECASE),
    re.compile(r"available context size \((\d+) tokens?\)", re.IGNORECASE),
    re.compile(r"maximum model length (?:of |is )?(\d+)", re.IGNORECASE),
    re.compile(r"context (?:length|window|size) (?:of|is) (\d+)", re.IGNORECASE),
)


def _error_of(body: Any) -> dict[str, Any]:
    if isinstance(body, dict):
        err = body.get("error", body)
        return err if isinstance(err, dict) else {"message": str(err)}
    return {"message": body if isinstance(body, str) else ""}


def is_overflow(status: int, body: Any) -> bool:
    """Does this HTTP error say the prompt is over the context window?"""
    if status < 400:
        return False
    err = _error_of(body)
    if err.get("code") in _OVERFLOW_CODES or err.get("type") in _OVERFLOW_CODES:
        return True
    message = err.get("message")
    return isinstance(message, str) and bool(_SAYS_OVERFLOW.search(message))


def context_size(body: Any) -> int | None:
    """The context window the error names (llama.cpp's `n_ctx`, or a number in the text), if any."""
    err = _error_of(body)
    n = err.get("n_ctx")
    if isinstance(n, int) and n > 0:
        return n
    message = err.get("message")
    if isinstance(message, str):
        for pattern in _CONTEXT_SIZE:
            if m := pattern.search(message):
                return int(m.group(1))
    return None


CHARS_PER_TOKEN = 4
"""The estimate's ratio; JSON's quoting makes it err on the large side for prose."""


def request_tokens(messages: Sequence[Any], tools: Sequence[Any] | None) -> int:
    """A request's estimated prompt tokens: its messages and the tools' schemas, as sent."""
    chars = sum(len(json.dumps(m, ensure_ascii=False)) for m in messages)
    return (chars + len(json.dumps(list(tools or ()), ensure_ascii=False))) // CHARS_PER_TOKEN
