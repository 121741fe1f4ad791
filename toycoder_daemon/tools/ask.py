"""ask_user: a question for the person, answered in their editor."""

from __future__ import annotations

from typing import Annotated

from toycoder_daemon.core.util.visible import visible
from toycoder_daemon.tools.base import ToolContext, tool

NO_ANSWER = (
    "The user did not answer (the question was dismissed, or this editor cannot ask questions). "
    "Continue with your best judgement and say what you assumed."
)


@tool(level="safe", title=lambda a: f"ask_user {str(a.get('question', ''))[:80]}")
async def ask_user(
    ctx: ToolContext,
    question: Annotated[str, "The question, short and specific"],
    options: Annotated[list[str] | None, "Choices to offer, if the answer is one of a few"] = None,
) -> str:
    """Ask the user a question and wait for the answer. Use it when the request is ambiguous or a
    decision is theirs to make; offer options when the answer is one of a few."""
    # shown as the person will read it: control characters and bidi overrides as escapes
    answer = await ctx.frontend.ask(visible(question, lines=True), [visible(o) for o in options] if options else None)
    if answer is None:
        return NO_ANSWER
    return f"The user answered: {answer}"
