"""Sub-agents: the same engine with a fresh message list, its own prompt and its own tools, exposed
to the main agent as a tool taking `query` (and an optional `context`).

A sub-agent never sees the main conversation. Its tool calls go through the session's registry and
permission gate (restricted to the tools it was given), its events reach the editor tagged with
the calling tool call's id, and the tokens it spends count toward the session.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Literal

from ..ports import Decision, Event, Frontend, PermissionRequest
from ..tools.base import Tool, ToolContext, ToolError
from .react import run_turn


@dataclass
class SubAgent:
    name: str
    prompt: str
    """Role key in the prompt templates (agents.yaml or the user's prompts file)."""
    system: str
    """The rendered system prompt."""
    tools: list[str] = field(default_factory=list)
    """Tool names it may use (the main agent's tools, by name); empty = none."""
    model: Literal["default", "fast"] = "default"
    max_steps: int = 8

    async def run(self, ctx: ToolContext, query: str, context: str | None = None) -> str:
        if ctx.model_for is None or ctx.registry is None:
            raise ToolError(f"the sub-agent {self.name} cannot run here (no model)")
        system = self.system + (f"\n\nContext from the main agent:\n{context}" if context else "")
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": query}]
        registry = ctx.registry.restricted(self.tools)
        frontend = ChildFrontend(ctx.frontend, ctx.tool_call_id)

        def child_context(tool_call_id: str) -> ToolContext:
            return ToolContext(ctx.workspace, frontend, tool_call_id, ctx.settings, registry, ctx.model_for,
                               ctx.on_usage)

        result = await run_turn(ctx.model_for(self.model), messages, registry, frontend, max_steps=self.max_steps,
                                make_context=child_context, on_usage=ctx.on_usage)
        return result.text


def subagent_tool(agent: SubAgent, description: str) -> Tool:
    """Expose a sub-agent as a safe tool with `query` and `context` parameters."""

    async def call(
        ctx: ToolContext,
        query: Annotated[str, "The task or question for this agent, self-contained"],
        context: Annotated[str | None, "Facts it needs: it does not see this conversation"] = None,
    ) -> str:
        return await agent.run(ctx, query, context)

    t = Tool.from_function(call, level="safe", name=agent.name,
                           title=lambda a: f"{agent.name}: {' '.join(str(a.get('query', '')).split())[:80]}")
    t.description, t.source = description, "agent"
    return t


class ChildFrontend:
    """What a sub-agent talks through: the parent's frontend, events tagged with the parent call."""

    def __init__(self, parent: Frontend, parent_tool_call_id: str):
        self.parent = parent
        self.parent_tool_call_id = parent_tool_call_id

    def emit(self, event: Event) -> None:
        if event.parent_tool_call_id is None:
            event = replace(event, parent_tool_call_id=self.parent_tool_call_id)
        self.parent.emit(event)

    async def confirm(self, request: PermissionRequest) -> Decision:
        return await self.parent.confirm(request)

    async def ask(self, question: str, options: list[str] | None) -> str | None:
        return await self.parent.ask(question, options)
