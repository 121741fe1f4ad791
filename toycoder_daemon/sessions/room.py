"""Room in a session's context: compaction before a prompt goes in when the history is over the
thresholds (and on /compact), and after a request was over the model's context window: compact the
history, and cut the largest message when that is not enough (or there was nothing to compact), so
that a session never keeps a prompt it can only fail on. The largest message may be a reply cut at the
full window (issue 31): /compact cuts it when there is nothing old enough to summarise."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from toycoder_daemon.core.errors import ConfigError, ProviderError
from toycoder_daemon.core.ports import Compacted, Frontend, TextDelta
from toycoder_daemon.llm.base import ChatModel, ContextOverflow
from toycoder_daemon.sessions.context import CHARS_PER_TOKEN, estimate_tokens, needs_compaction, trim_largest
from toycoder_daemon.sessions.context import Compaction as Compaction
from toycoder_daemon.sessions.context import compact as compact
from toycoder_daemon.sessions.session import Session

log = logging.getLogger(__name__)


class SessionConfig(Protocol):
    """What of config.SessionConfig this needs (sessions/ does not import the config layer)."""

    max_messages: int
    max_context_tokens: int
    compress_keep_recent: int


def context_budget(configured: int, model: ChatModel | None) -> int:
    """Tokens the history may use: the configured budget, or 3/4 of a smaller window the server
    reported (the rest is for the reply)."""
    window = getattr(model, "context_tokens", None)
    return min(configured, window * 3 // 4) if window else configured


def over_budget(s: Session, cfg: SessionConfig, model: ChatModel | None) -> bool:
    """Is the session over the compaction thresholds (a smaller window the server reported wins)?"""
    return needs_compaction(s.messages, s.context_mark, cfg.max_messages, context_budget(cfg.max_context_tokens, model))


class Compactor:
    """Compacts one session's conversation: the thresholds, the summarizer's prompt (rendered when a
    summary is written) and the model that writes it, made when first needed (a failure to make it
    truncates instead)."""

    def __init__(self, s: Session, cfg: SessionConfig, summarizer: Callable[[], str]):
        self.s, self.cfg, self.summarizer = s, cfg, summarizer
        self.before: Callable[[Frontend, bool], Awaitable[str]] | None = None
        """Run before a compaction (PreCompact hooks, given whether it was forced): instructions added
        to the summarizer's prompt."""

    async def __call__(self, frontend: Frontend, summary_model: Callable[[], ChatModel], *,
                       window: ChatModel | None = None, force: bool = False) -> Compaction | None:
        """Compact when over the thresholds (`window`: the session's model, whose reported context
        window may be smaller than the configured budget), or always when forced; None when nothing
        was compacted."""
        s = self.s
        if not force and not over_budget(s, self.cfg, window):
            return None
        try:
            model: ChatModel | None = summary_model()
        except (ProviderError, ConfigError) as e:
            log.warning("no model for the summary: %s", e)
            model = None
        extra = await self.before(frontend, force) if self.before is not None else ""
        prompt = self.summarizer() + (f"\n\nAlso: {extra}" if extra else "")
        done = await compact(s.messages.snapshot(), model, prompt, self.cfg.compress_keep_recent, s.planners)
        if done is None:
            # nothing old enough to summarise (e.g. one prompt and the reply that filled the window):
            # /compact still makes room, by cutting the largest message to the known window
            if force and window is not None and (cut := await cut_to_fit(s, frontend, window, self.cfg.max_context_tokens, None,
                                                                         hard=False)):
                n = len(s.messages.snapshot())
                return Compaction("truncate", n, n, s.messages.snapshot(), cut=cut)
            return None
        s.context_mark = (0, 0)
        # the history stays whole: one record says where the model's context now starts
        await s.messages.replace_all(done.messages, strategy=done.strategy, before=done.before, after=done.after,
                                     **({"summary": done.summary} if done.summary else {}))
        frontend.emit(Compacted(done.strategy, done.before, done.after))
        return done


class RoomMaker:
    """run_turn's `make_room` for one turn. The first overflow compacts (forced) and then cuts the
    largest message if the known window says it is still too big, or always when nothing was
    compacted; a later one (the retry failed too) cuts hard, so the next prompt does not fail the same way."""

    def __init__(self, s: Session, frontend: Frontend, model: ChatModel, cfg: SessionConfig,
                 compact: Callable[[], Awaitable[Compaction | None]]):
        """`compact`: a forced compaction of the session (Compactor, bound to the turn's frontend)."""
        self.s, self.frontend, self.model, self.compact = s, frontend, model, compact
        self.configured = cfg.max_context_tokens
        self.calls = 0

    async def __call__(self, e: ContextOverflow) -> bool:
        self.calls += 1
        log.warning("session %s: %s; making room (%d)", self.s.id, e.reason, self.calls)
        if self.calls > 1:
            return await self.trim(e, hard=True)
        compacted = await self.compact()
        trimmed = await self.trim(e, hard=compacted is None)
        return trimmed or compacted is not None

    async def trim(self, e: ContextOverflow, *, hard: bool) -> bool:
        return bool(await cut_to_fit(self.s, self.frontend, self.model, self.configured, e.context_tokens, hard=hard))


async def cut_to_fit(s: Session, frontend: Frontend, model: ChatModel, configured: int, known: int | None, *,
                     hard: bool) -> int:
    """Cut the largest message (a user's, a tool's, or a reply: one cut at the full window is the
    largest) to fit the window (without `hard`, only when the known window says the history is still
    over it); a notice in the message and in the stream says so. The characters cut (0: none)."""
    window = known or getattr(model, "context_tokens", None)
    budget = context_budget(configured, model) if window else None
    messages = s.messages.snapshot()
    tools = len(json.dumps(s.tools.schemas()))  # sent with every request, in the window too
    if not hard and (budget is None or estimate_tokens(messages, (0, 0)) + tools // CHARS_PER_TOKEN <= budget):
        return 0
    why = f"{window} tokens" if window else "the server refused the request as too long"
    trimmed = trim_largest(messages, budget, why, tools)
    if trimmed is None:
        return 0
    new, cut = trimmed
    await s.messages.replace_all(new, strategy="trim")  # the person still sees it whole
    s.context_mark = (0, 0)
    frontend.emit(TextDelta(f"[a message was too long for the model's context window ({why}): "
                            f"{cut} characters of it were cut]\n\n"))
    return cut
