"""update_plan: the model's task list for the turn (as codex's update_plan or Claude Code's todo
list), shown by the clients as a checklist. Each call sends the whole list."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationError

from .. import safejson
from ..messages import Message
from ..ports import PlanEntry, PlanUpdated
from .base import ToolContext, tool
from .plan_text import seeded

MAX_ENTRIES = 50
_UPDATED = re.compile(r"plan updated: (\d+)/(\d+) completed")


class PlanItem(BaseModel):
    content: str = Field(min_length=1, max_length=500, description="What this step does, in a short sentence")
    priority: Literal["high", "medium", "low"] = "medium"
    status: Literal["pending", "in_progress", "completed"] = "pending"


@tool(level="safe", title=lambda a: f"update_plan ({len(a.get('entries') or [])} steps)")
async def update_plan(
    ctx: ToolContext,
    entries: Annotated[list[PlanItem], "The whole plan, in order (it replaces the previous one)"],
) -> str:
    """Keep a plan for a task of several steps: send the whole list each time, marking steps
    in_progress (one at a time) and completed as you go. Skip it for simple one-step requests."""
    entries = [PlanItem.model_validate(e) for e in entries]  # validated already; arrives as plain dicts
    if not entries:
        return "error: a plan needs at least one entry"
    if len(entries) > MAX_ENTRIES:
        return f"error: at most {MAX_ENTRIES} entries"
    ctx.frontend.emit(PlanUpdated(tuple(PlanEntry(e.content, e.priority, e.status) for e in entries)))
    done = sum(1 for e in entries if e.status == "completed")
    return f"plan updated: {done}/{len(entries)} completed"


def progress_of(result: str) -> tuple[int, int] | None:
    """(completed, steps) from an update_plan result; None for a refused update (nothing was shown)."""
    m = _UPDATED.fullmatch(result)
    return (int(m[1]), int(m[2])) if m else None


@dataclass(frozen=True)
class SessionPlan:
    """The session's plan as its conversation has it."""

    progress: tuple[int, int]
    """(completed, steps), as the accepted update_plan's result (or the planner's note) says."""
    entries: tuple[PlanEntry, ...]
    """The plan as it was shown; () when the stored call cannot be read back (then there is nothing
    to show again, though the session still has a plan)."""


def session_plan(messages: Iterable[Message], planners: Collection[str] = ("planner",)) -> SessionPlan | None:
    """The last update_plan that was shown (a refused one showed nothing), or planner seed (all
    pending); None when the conversation has none (or it was compacted away). Read from the
    conversation, not kept aside: a reloaded session, or one another daemon continued, knows its
    plan from what every daemon reads anyway. `planners`: the tools whose results may hold a seed
    note (a grep or read_file can quote one); by default the built-in planner."""
    calls: dict[str, tuple[str, str]] = {}  # tool call id -> (name, arguments)
    last: tuple[tuple[int, int], str] | SessionPlan | None = None  # an update's arguments are read once, at the end
    for m in messages:
        if m["role"] == "assistant":
            calls.update((c["id"], (c["function"]["name"], c["function"]["arguments"])) for c in m.get("tool_calls") or ())
        elif m["role"] == "tool":
            name, arguments = calls.get(m["tool_call_id"], ("", ""))
            if name == "update_plan" and (progress := progress_of(m["content"])):
                last = (progress, arguments)
            elif name in planners and (seed := seeded(m["content"])):
                last = SessionPlan((0, seed[0]), seed[1])
    return SessionPlan(last[0], _sent(last[1])) if isinstance(last, tuple) else last


def _sent(arguments: str) -> tuple[PlanEntry, ...]:
    """The entries of an accepted update_plan call, read as update_plan read them."""
    try:
        raw: Any = safejson.loads(arguments)
        items = [PlanItem.model_validate(e) for e in raw["entries"]]
    except (ValueError, TypeError, KeyError, ValidationError):  # not what was accepted: stored by hand?
        return ()
    return tuple(PlanEntry(e.content, e.priority, e.status) for e in items)
