"""One script dialect for both scripted models: the fake OpenAI server (fake_llm.py, over HTTP)
and the in-process ScriptedModel (scripted_model.py). A script is a list of replies; each reply
is checked and read here, so the two cannot drift apart. The fields are documented in fake_llm.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

REPLY_FIELDS = frozenset({
    "text", "chunk_size", "tool_calls", "arg_chunks", "interleave", "finish_reason", "usage",
    "status", "error", "retry_after", "drop_after", "delay", "chunk_delay", "expect", "note",
})


def check_reply(reply: Any) -> dict[str, Any]:
    """The reply, or ValueError naming what is wrong with it (when the script is loaded)."""
    if not isinstance(reply, dict):
        raise ValueError(f"fake_llm: a reply must be a dict, not {reply!r}")
    unknown = set(reply) - REPLY_FIELDS
    if unknown:
        raise ValueError(f"fake_llm: unknown reply field(s) {sorted(unknown)} in {reply!r}")
    # Fail here, in the test, rather than later inside a server thread or a turn.
    if not all(isinstance(c, dict) and "name" in c for c in reply.get("tool_calls") or []):
        raise ValueError(f"fake_llm: each tool call needs a 'name': {reply!r}")
    return reply


def text_pieces(reply: dict[str, Any]) -> list[str]:
    """The text deltas: `text` split every `chunk_size` characters (default 4), or its list as is."""
    text = reply.get("text") or ""
    if isinstance(text, str):
        size = max(1, int(reply.get("chunk_size", 4)))
        return [text[i:i + size] for i in range(0, len(text), size)]
    return [str(piece) for piece in text]


def tool_calls(reply: dict[str, Any], new_call_id: Callable[[], str]) -> list[tuple[str, str, str]]:
    """The reply's calls as (id, name, arguments as JSON text; a string is sent as is)."""
    calls = []
    for call in reply.get("tool_calls") or []:
        args = call.get("arguments", {})
        calls.append((call.get("id") or new_call_id(), call["name"],
                      args if isinstance(args, str) else json.dumps(args)))
    return calls


def finish_reason(reply: dict[str, Any], has_calls: bool) -> str:
    return str(reply.get("finish_reason") or ("tool_calls" if has_calls else "stop"))


def usage(reply: dict[str, Any], prompt_chars: int, deltas: int) -> tuple[int, int]:
    """(prompt tokens, completion tokens): the scripted ones, else characters // 4 and one token per delta."""
    given = reply.get("usage") or {}
    return int(given.get("prompt_tokens", prompt_chars // 4)), int(given.get("completion_tokens", deltas))


@dataclass(frozen=True)
class Fault:
    """An HTTP error answer scripted with `status` (and `error`, `retry_after`)."""

    status: int
    message: str
    extra: dict[str, Any] | None
    retry_after: float | None


def fault(reply: dict[str, Any]) -> Fault | None:
    if reply.get("status") is None:
        return None
    status = int(reply["status"])
    error = reply.get("error")
    message = error if isinstance(error, str) else f"fake_llm: scripted HTTP {status}"
    ra = reply.get("retry_after")
    return Fault(status, message, error if isinstance(error, dict) else None, None if ra is None else float(ra))


def text_of(content: Any) -> str:
    """The text of a message content: a string or a list of `{"type": "text", "text"}` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def expect_problems(expect: dict[str, Any], messages: list[Any], tools: Any, model: Any) -> list[str]:
    """What the request consuming a reply got wrong against the reply's `expect` checks."""
    msgs = [m for m in messages if isinstance(m, dict)]

    def last(role: str) -> str | None:
        return next((text_of(m.get("content")) for m in reversed(msgs) if m.get("role") == role), None)

    problems = []
    for key, want in expect.items():
        got: Any
        if key in ("last_user_contains", "last_tool_contains"):
            got = last("user" if key == "last_user_contains" else "tool")
            ok = got is not None and str(want) in got
        elif key == "has_tools":
            got = bool(tools)
            ok = got == bool(want)
        elif key == "model":
            got = model
            ok = got == want
        else:
            problems.append(f"unknown expect key {key!r}")
            continue
        if not ok:
            problems.append(f"expect {key}={want!r} failed, got {repr(got)[:200]}")
    return problems
