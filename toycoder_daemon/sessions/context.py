"""Context management (seed: compress first, truncate as the fallback).

Before a new user message goes in, a conversation over `max_messages` or over the estimated
token budget has its older part summarised by the summarizer prompt; the last `keep_recent`
messages stay verbatim, and a tool call is never separated from its results. The system prompt
(with AGENTS.md) is never part of what is summarised.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, cast

from toycoder_daemon.core.messages import Message
from toycoder_daemon.llm.base import ChatModel
from toycoder_daemon.tools.plan.tool import plan_source

log = logging.getLogger(__name__)

SUMMARY_PREFIX = "[Summary of the earlier conversation, written when the context was compacted]\n"
CHARS_PER_TOKEN = 4
SUMMARY_INPUT_MAX = 200_000


@dataclass
class Compaction:
    strategy: Literal["summary", "truncate"]
    before: int
    after: int
    messages: list[Message]
    error: str | None = None
    summary: str = ""
    """The model's summary of the earlier turns ("" when they were truncated)."""
    cut: int = 0
    """Characters cut from the largest message when there was nothing old enough to summarise."""


def estimate_tokens(messages: Sequence[Message], mark: tuple[int, int]) -> int:
    """The tokens the model last reported, plus a character estimate of what came after."""
    tokens, index = mark
    if index > len(messages):  # the conversation was rewritten since
        tokens, index = 0, 0
    added = sum(len(json.dumps(m, ensure_ascii=False)) for m in messages[index:])
    return tokens + added // CHARS_PER_TOKEN


def needs_compaction(messages: Sequence[Message], mark: tuple[int, int], max_messages: int, max_tokens: int) -> bool:
    count = sum(1 for m in messages if m["role"] != "system")
    return count > max_messages or estimate_tokens(messages, mark) > max_tokens


def split_point(messages: Sequence[Message], keep_recent: int) -> int:
    """Index where the kept part starts: about `keep_recent` from the end, moved back so that it
    never starts with a tool result (whose call would be summarised away)."""
    first = 1 if messages and messages[0]["role"] == "system" else 0
    i = max(first, len(messages) - keep_recent)
    while i > first and messages[i]["role"] == "tool":
        i -= 1
    return i


def _render(messages: Sequence[Message], limit: int = SUMMARY_INPUT_MAX) -> str:
    lines = []
    for m in messages:
        role = m["role"]
        if m["role"] == "assistant" and m.get("tool_calls"):
            calls = ", ".join(f"{c['function']['name']}({c['function']['arguments']})" for c in m.get("tool_calls", ()))
            lines.append(f"assistant: {m.get('content') or ''} [called {calls}]".strip())
        elif role == "tool":
            lines.append(f"tool result: {m.get('content') or ''}")
        else:
            lines.append(f"{role}: {m.get('content') or ''}")
    text = "\n\n".join(lines)
    if len(text) > limit:  # keep the newest part of what is summarised
        text = "[...]\n" + text[-limit:]
    return text


def _plan_kept(old: Sequence[Message], recent: Sequence[Message], planners: frozenset[str]) -> list[Message]:
    """The call and result that set the session's plan (tools/plan/tool.py), when the summarised part
    holds it and `recent` sets none: kept verbatim after the summary, so a reload still shows the
    plan and the planner's seeding rule still sees one in progress."""
    if plan_source(recent, planners) is not None or (source := plan_source(old, planners)) is None:
        return []
    call, result = source
    return [{"role": "assistant", "content": None, "tool_calls": [call]}, cast(Message, dict(result))]


async def compact(messages: list[Message], model: ChatModel | None, summarizer_prompt: str,
                  keep_recent: int, planners: frozenset[str] = frozenset({"planner"})) -> Compaction | None:
    """The new message list, or None when there is nothing old enough to compact. `planners`: the
    sub-agents whose answer seeds the session's plan (Session.planners)."""
    system = [m for m in messages[:1] if m["role"] == "system"]
    cut = split_point(messages, keep_recent)
    old, recent = messages[len(system):cut], messages[cut:]
    if not old:
        return None
    before = len(messages) - len(system)
    try:
        if model is None:
            raise RuntimeError("no model available to summarise")
        window = getattr(model, "context_tokens", None)  # never more than the summarising model can hold
        limit = SUMMARY_INPUT_MAX if not window else max(1000, min(SUMMARY_INPUT_MAX, window * CHARS_PER_TOKEN // 2
                                                                   - len(summarizer_prompt)))
        reply = await model.stream_chat(
            [{"role": "system", "content": summarizer_prompt},
             {"role": "user", "content": "Summarise this conversation:\n\n" + _render(old, limit)}],
            None,
        )
        summary = reply.content.strip()
        if reply.finish_reason == "length":  # half a summary would silently lose the rest of the history
            raise RuntimeError("the summary was cut by the output length limit")
        if not summary:
            raise RuntimeError("the model returned an empty summary")
    except Exception as e:  # the fallback must not fail the turn
        log.warning("summary failed (%s); truncating instead", e)
        return Compaction("truncate", before, len(recent), system + recent, str(e))
    new: list[Message] = [*system, {"role": "user", "content": SUMMARY_PREFIX + summary}, *_plan_kept(old, recent, planners),
                          *recent]
    return Compaction("summary", before, len(new) - len(system), new, summary=summary)


TRIM_NOTICE = ("[{cut} characters of this message were cut here: it did not fit the model's context window "
               "({why}). Ask for a smaller piece if the rest is needed.]")
TRIM_FLOOR = 400
"""Characters a trimmed message keeps at least (its start and its end)."""
TRIM_FLOOR_BLIND = 4000
"""The same without a known window: an empty reply may have had another cause, so short prompts stay whole."""


def trim_largest(messages: list[Message], budget_tokens: int | None, why: str,
                 overhead_chars: int = 0) -> tuple[list[Message], int] | None:
    """The messages with the largest user, tool or assistant text cut (its head and tail kept, a notice in the
    middle), and how many characters went; None when nothing is worth cutting. Without a known
    budget the message keeps a quarter of its text (a retry that still overflows cuts again).
    `overhead_chars`: what every request carries besides the messages (the tools' schemas)."""
    sizes = [(len(text), i) for i, m in enumerate(messages)
             if m["role"] in ("user", "tool", "assistant") and isinstance(text := m.get("content"), str)]
    if not sizes:
        return None
    size, index = max(sizes)
    if budget_tokens is not None:
        others = overhead_chars + sum(len(json.dumps(m, ensure_ascii=False)) for i, m in enumerate(messages) if i != index)
        keep = max(TRIM_FLOOR, budget_tokens * CHARS_PER_TOKEN - others)
    else:
        keep = max(TRIM_FLOOR_BLIND, size // 4)
    if size <= keep:
        return None
    text = messages[index]["content"]
    assert isinstance(text, str)
    head, tail = text[: keep * 3 // 4], text[len(text) - keep // 4:]
    notice = TRIM_NOTICE.format(cut=size - len(head) - len(tail), why=why)
    out = list(messages)
    out[index] = cast(Message, {**messages[index], "content": f"{head}\n{notice}\n{tail}"})
    return out, size - len(head) - len(tail)
