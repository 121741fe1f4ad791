"""update_plan: the model's task list for the turn (as codex's update_plan or Claude Code's todo
list), shown by the clients as a checklist. Each call sends the whole list."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from ..ports import PlanEntry, PlanUpdated
from .base import ToolContext, tool

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
