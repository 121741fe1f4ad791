"""update_plan: the model's task list for the turn (as codex's update_plan or Claude Code's todo
list), shown by the clients as a checklist. Each call sends the whole list."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationError

from toycoder_daemon.core.messages import Message, answered_id, calls_before, calls_made
from toycoder_daemon.core.ports import PlanEntry, PlanUpdated
from toycoder_daemon.core.util import safejson
from toycoder_daemon.tools.base import ToolContext, ToolError, tool
from toycoder_daemon.tools.plan.text import seeded

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
        raise ToolError("a plan needs at least one entry")  # failed, not completed: clients show it so
    if len(entries) > MAX_ENTRIES:
        raise ToolError(f"at most {MAX_ENTRIES} entries")
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
    source = plan_source(messages, planners)
    if source is None:
        return None
    call, result = source
    if (progress := progress_of(result["content"])) and call["function"]["name"] == "update_plan":
        return SessionPlan(progress, _sent(call["function"].get("arguments")))
    seed = seeded(result["content"])
    return SessionPlan((0, seed[0]), seed[1]) if seed else None


def plan_source(messages: Iterable[Message], planners: Collection[str] = ("planner",)) -> tuple[Any, Any] | None:
    """(the tool call, its result) that set the session's plan (see session_plan), or None. Read
    leniently: a stored message we cannot read (hand-edited, another version) is skipped, as a
    load must not fail on it."""
    calls: dict[str, Any] = {}  # tool call id -> the call; a model may reuse ids
    last: tuple[Any, Any] | None = None
    for m in messages:
        if m.get("role") == "assistant":
            calls.update(calls_made(m))
        elif m.get("role") == "tool" and isinstance(content := m.get("content"), str):
            call = calls.get(answered_id(m))
            name = call["function"]["name"] if call else ""
            if (name == "update_plan" and progress_of(content)) or (name in planners and seeded(content)):
                last = (call, m)
    return last


def answers_plan(conversation: Sequence[Message], new: Iterable[Message],
                 planners: Collection[str] = ("planner",)) -> bool:
    """Does a tool result in `new` (the end of `conversation`) answer an update_plan or planner
    call? Its call may be in an earlier batch: a poll can read a call and, later, its result."""
    new = list(new)
    calls = calls_before(conversation, new)
    for m in new:
        calls.update(calls_made(m))  # in order: a call made in `new` is the one its later results answer
        call = calls.get(answered_id(m)) if m.get("role") == "tool" else None
        if call and (call["function"]["name"] == "update_plan" or call["function"]["name"] in planners):
            return True
    return False


def _sent(arguments: Any) -> tuple[PlanEntry, ...]:
    """The entries of an accepted update_plan call, read as update_plan read them."""
    try:
        if not isinstance(arguments, str):
            raise TypeError("arguments are not JSON text")
        raw: Any = safejson.loads(arguments)
        items = [PlanItem.model_validate(e) for e in raw["entries"]]
    except (ValueError, TypeError, KeyError, ValidationError):  # not what was accepted: stored by hand?
        return ()
    return tuple(PlanEntry(e.content, e.priority, e.status) for e in items)
