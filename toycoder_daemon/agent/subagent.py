"""Sub-agents: the same engine with a fresh message list, its own prompt and its own tools, exposed
to the main agent as a tool taking `query` (and an optional `context`).

A sub-agent never sees the main conversation. Its tool calls go through the session's registry and
permission gate (restricted to the tools it was given), its events reach the editor tagged with
the calling tool call's id, and the tokens it spends count toward the session. What it runs with
(registry, models, usage sink) is captured when its tool is built for a session, so the
ToolContext carries no sub-agent plumbing.

The planner's plan seeds the session's plan (`seed_plan`) when it has none in progress (and the
main agent called it). A sub-agent's own plan is not the session's: no face shows it as the plan.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Literal

from toycoder_daemon.agent.hooks.engine import Hooks
from toycoder_daemon.agent.react import run_turn
from toycoder_daemon.core.messages import Message
from toycoder_daemon.core.ports import (
    CommandRunner,
    Decision,
    EditApplied,
    Event,
    FileDiagnostics,
    Frontend,
    PermissionRequest,
    PlanUpdated,
)
from toycoder_daemon.llm.base import ChatModel, Usage
from toycoder_daemon.tools.base import Tool, ToolContext, ToolError
from toycoder_daemon.tools.plan.text import listing, plan_from_text
from toycoder_daemon.tools.plan.tool import session_plan
from toycoder_daemon.tools.registry import ToolRegistry

Role = Literal["default", "fast"]


@dataclass
class SubAgent:
    name: str
    prompt: str
    """Role key in the prompt templates (agents.yaml or the user's prompts file)."""
    system: str
    """The rendered system prompt."""
    tools: list[str] = field(default_factory=list)
    """Tool names it may use (the main agent's tools, by name); empty = none."""
    model: Role = "default"
    max_steps: int = 8

    @property
    def seeds_plan(self) -> bool:
        """The planner's role (the built-in planner, or a configured agent with `prompt: planner`)."""
        return self.prompt == "planner"


@dataclass(frozen=True)
class AgentRuntime:
    """What a session lends its sub-agents."""

    registry: ToolRegistry
    """The session's registry (the sub-agent sees the restricted view of its tools)."""
    model_for: Callable[[Role], ChatModel]
    """The session's model for a role."""
    on_usage: Callable[[Usage], None] | None = None
    """Where the tokens the sub-agent spends are counted."""
    history: Callable[[], Iterable[Message]] = tuple
    """The session's conversation (the planner reads its current plan there: plan_progress)."""
    planners: frozenset[str] = frozenset()
    """The session's plan-seeding sub-agents by tool name: only their results can hold a seeded plan."""
    hooks: Hooks | None = None
    """The session's hooks (its tool calls run them; its end is SubagentStop)."""


async def run_subagent(agent: SubAgent, runtime: AgentRuntime, ctx: ToolContext, query: str,
                       context: str | None = None) -> str:
    system = agent.system + (f"\n\nContext from the main agent:\n{context}" if context else "")
    messages: list[Message] = [{"role": "system", "content": system}, {"role": "user", "content": query}]
    registry = runtime.registry.restricted(agent.tools)
    frontend = ChildFrontend(ctx.frontend, ctx.tool_call_id)

    child = replace(ctx, frontend=frontend)  # its writes are the turn's too
    result = await run_turn(runtime.model_for(agent.model), messages, registry, frontend,
                            max_steps=agent.max_steps, make_context=child.for_call, on_usage=runtime.on_usage,
                            hooks=runtime.hooks.for_subagent() if runtime.hooks else None)
    return result.text


def subagent_tool(agent: SubAgent, description: str, runtime: AgentRuntime | None) -> Tool:
    """Expose a sub-agent as a safe tool with `query` and `context` parameters. Without a runtime
    it is only a description (the app's catalog of tools); each session binds its own."""

    async def call(
        ctx: ToolContext,
        query: Annotated[str, "The task or question for this agent, self-contained"],
        context: Annotated[str | None, "Facts it needs: it does not see this conversation"] = None,
    ) -> str:
        if runtime is None:
            raise ToolError(f"the sub-agent {agent.name} cannot run here (no session)")
        answer = await run_subagent(agent, runtime, ctx, query, context)
        if not agent.seeds_plan or isinstance(ctx.frontend, ChildFrontend):
            return answer  # a planner a sub-agent calls plans for that agent, not the session
        return seed_plan(ctx, answer, plan_progress(runtime.history(), runtime.planners | {agent.name}))

    t = Tool.from_function(call, level="safe", name=agent.name,
                           title=lambda a: f"{agent.name}: {' '.join(str(a.get('query', '')).split())[:80]}")
    t.description, t.source = description, "agent"
    return t


def plan_progress(messages: Iterable[Message], planners: Collection[str] = ("planner",)) -> tuple[int, int] | None:
    """(completed, steps) of the session's plan as its conversation has it (tools/plan/tool.py
    session_plan); None when it has none."""
    plan = session_plan(messages, planners)
    return plan.progress if plan else None


def seed_plan(ctx: ToolContext, answer: str, current: tuple[int, int] | None = None) -> str:
    """Show the planner's steps as the session's plan (all pending) and tell the main agent so;
    the tool result the main agent reads: the answer, plus that note when there was a plan.
    `current`: the session's plan (plan_progress); when it has steps not yet completed, the steps
    are not shown (that would wipe the progress the person sees): the note gives them to the main
    agent to merge into its plan with update_plan.

    Why from the planner's text, not from an update_plan call of its own: the planner is one model
    request without tools, which every model answers, tool calling or not, and a numbered list is
    what it is asked for and what models write reliably; a plan it would have to send through a
    tool is lost whenever a model answers in prose instead. So its answer is read as a list
    (tools/plan/text.py: numbered or bulleted lines; no plan when there are fewer than two) and
    the PlanUpdated goes out on the planner tool call's own frontend, the main agent's, untagged:
    it is the session's plan, the one the main agent then keeps with update_plan, not a sub-agent's
    detail. The note lists the steps as sent, so the main agent's next update_plan can carry them
    over word for word."""
    steps = plan_from_text(answer)
    if not steps:
        return answer
    listed = listing(steps)
    if current is not None and current[0] < current[1]:
        return (f"{answer}\n\n[The session already has a plan in progress ({current[0]}/{current[1]} completed), "
                f"so these {len(steps)} steps were not shown to the user:\n{listed}\nIf they change the plan, merge "
                "them into it with update_plan (the whole list, keeping the status of the steps already done).]")
    ctx.frontend.emit(PlanUpdated(steps))
    return (f"{answer}\n\n[These {len(steps)} steps are now the session's plan, shown to the user as a checklist, "
            f"all pending:\n{listed}\nKeep it current with update_plan (the whole list each time): mark a step "
            "in_progress when you start it and completed when it is done; change the list if the plan changes.]")


class ChildFrontend:
    """What a sub-agent talks through: the parent's frontend, events tagged with the parent call
    (all but its plan, which stops here: see emit)."""

    def __init__(self, parent: Frontend, parent_tool_call_id: str):
        self.parent = parent
        self.parent_tool_call_id = parent_tool_call_id

    def emit(self, event: Event) -> None:
        if isinstance(event, PlanUpdated):
            # A sub-agent's own update_plan is its working list, not the session's plan: a client
            # shows one plan per session and replaces it with each update (ACP's `plan` has no
            # parent), and a reload reads the plan from the main conversation alone. Its tool call
            # still shows the list. (The planner's seed goes out on the main agent's frontend.)
            return
        if event.parent_tool_call_id is None:
            event = replace(event, parent_tool_call_id=self.parent_tool_call_id)
        self.parent.emit(event)

    async def confirm(self, request: PermissionRequest) -> Decision:
        return await self.parent.confirm(request)

    async def ask(self, question: str, options: list[str] | None) -> str | None:
        return await self.parent.ask(question, options)

    def can_apply_edit(self) -> bool:
        return self.parent.can_apply_edit()

    async def apply_edit(self, path: Path, before: str, after: str) -> EditApplied:
        return await self.parent.apply_edit(path, before, after)

    async def editor_text(self, path: Path) -> str | None:
        return await self.parent.editor_text(path)

    def writes_all_files(self) -> bool:
        return self.parent.writes_all_files()

    def command_runner(self) -> CommandRunner | None:
        return self.parent.command_runner()  # a sub-agent of an ACP turn runs commands where its parent does

    async def diagnostics(self, uris: list[str], wait_ms: int) -> list[FileDiagnostics] | None:
        return await self.parent.diagnostics(uris, wait_ms)
