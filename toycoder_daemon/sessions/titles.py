"""Session titles: until the fast model has written one, the first line of the first prompt (code
fences skipped); after the first turn, a short plain-text title from the fast model. A reply that is
too long, is code or fails leaves the prompt's line in place."""

from __future__ import annotations

import logging
import re

from toycoder_daemon.core.errors import ToyCoderError
from toycoder_daemon.core.messages import Message
from toycoder_daemon.llm.base import ChatModel

log = logging.getLogger(__name__)

TITLE_MAX = 60
_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE = re.compile(r"[`{};<>=]|\w\(")  # code-like: backticks, braces, calls, assignments
INSTRUCTION = ("Write a title for this conversation between a person and a coding assistant: at most "
               "8 words, plain text, no quotes, no code, no trailing period. Answer with the title only.")
EXCERPT = 2000
"""Characters of the prompt and of the reply the title is written from."""


def prompt_title(text: str) -> str:
    """The first line of `text` outside code fences, whitespace collapsed, cut to TITLE_MAX."""
    fenced = False
    for raw in text.splitlines():
        if _FENCE.match(raw):
            fenced = not fenced
            continue
        line = " ".join(raw.split())
        if line and not fenced:
            return line if len(line) <= TITLE_MAX else line[: TITLE_MAX - 1] + "…"
    return ""


def clean_title(reply: str) -> str | None:
    """The model's title, or None when it is not a usable one (empty, cut, too long, code)."""
    lines = [ln.strip() for ln in reply.strip().splitlines() if ln.strip()]
    if len(lines) != 1:
        return None
    title = lines[0].strip("\"'*# ").removeprefix("Title:").strip().rstrip(".")
    if not title or len(title) > TITLE_MAX or _CODE.search(title):
        return None
    return title


async def write_title(model: ChatModel, prompt: str, reply: str) -> str | None:
    """Ask the (fast) model for a title of a first turn; None when it fails or answers badly."""
    messages: list[Message] = [
        {"role": "system", "content": INSTRUCTION},
        {"role": "user", "content": f"The person asked:\n{prompt[:EXCERPT]}\n\nThe assistant answered:\n{reply[:EXCERPT]}"},
    ]
    try:
        answer = await model.stream_chat(messages)
    except ToyCoderError as e:
        log.info("no title from the model: %s", e)
        return None
    title = clean_title(answer.content or "")
    if title is None:
        log.info("the model's title was not usable: %r", (answer.content or "")[:100])
    return title
