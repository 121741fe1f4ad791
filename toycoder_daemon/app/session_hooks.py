"""One open session's hooks outside the ReAct loop (docs/hooks.md): before each turn the workspace's
trust is settled (app/trust.py) and what it allows applied (MCP servers, agents), then SessionStart
(once) and UserPromptSubmit run; PreCompact before a compaction; SessionEnd when it is closed or
deleted. The loop itself runs PreToolUse, PostToolUse and Stop (agent/react.py)."""

from __future__ import annotations

import functools
import logging

from toycoder_daemon.agent.hooks.engine import HookBook, Hooks, HookSpec
from toycoder_daemon.agent.subagent import AgentRuntime, SubAgent, subagent_tool
from toycoder_daemon.app.session_mcp import McpHub
from toycoder_daemon.app.settings import Models
from toycoder_daemon.app.trust import WorkspaceTrust
from toycoder_daemon.config.model import AgentDecl
from toycoder_daemon.core.ports import Event, Frontend, HookRan
from toycoder_daemon.prompts.manager import PromptManager
from toycoder_daemon.sessions.session import Session

log = logging.getLogger(__name__)

BLOCKED_PROMPT = "[the prompt was blocked by a UserPromptSubmit hook; nothing was sent to the model]"


def hooks_of(book: HookBook | None, s: Session) -> Hooks | None:
    """The session's view of the hooks (what its hooks' input says about it)."""
    if book is None:
        return None
    return Hooks(book, s.id, lambda: str(s.file.path) if s.file else "", lambda: s.mode)


class SessionHooks:
    def __init__(self, s: Session, book: HookBook | None, trust: WorkspaceTrust | None, mcp: McpHub,
                 models: Models, prompts: PromptManager):
        self.session, self.book, self.trust, self.mcp, self.models, self.prompts = s, book, trust, mcp, models, prompts
        self.hooks = hooks_of(book, s)
        self._started = False  # SessionStart ran (at the session's first turn in this daemon)
        self._source = "resume" if any(m["role"] == "user" for m in s.messages) else "startup"

    async def before_turn(self, text: str, frontend: Frontend) -> str | None:
        """The context SessionStart and UserPromptSubmit add to the turn, or None when the prompt is
        blocked."""
        if self.trust is not None:
            await self.trust.settle(frontend)
            applied = self.trust.settings
            await self.mcp.set_workspace_servers(applied.mcp_servers if applied else {})
            if applied is not None:
                self._workspace_agents(applied.agents)
        if self.hooks is None:
            return ""
        added = []
        if not self._started:
            self._started = True
            start = await self.hooks.run("SessionStart", frontend.emit, {"source": self._source}, self._source)
            added.append(start.additional_context)
        submit = await self.hooks.run("UserPromptSubmit", frontend.emit, {"prompt": text})
        if submit.blocked:
            return None
        added.append(submit.additional_context)
        return "\n".join(a for a in added if a)

    def _workspace_agents(self, declared: dict[str, AgentDecl]) -> None:
        """A trusted workspace's sub-agents join the session's tools (never over a tool of the same
        name; withdrawn only when the session is opened again)."""
        s, prompts = self.session, self.prompts
        lent = AgentRuntime(s.tools, functools.partial(self.models.of, s), s.add_usage, s.messages.snapshot,
                            s.planners, self.hooks)
        for name, decl in declared.items():
            role = decl.prompt or name
            if s.tools.get(name) is not None:
                continue
            if role not in prompts.roles:
                log.warning("workspace agent %s: no prompt template named %r", name, role)
                continue
            agent = SubAgent(name, role, prompts.system(role), decl.tools, decl.model, decl.max_steps)
            s.tools.register(subagent_tool(agent, decl.description or prompts.description(role), lent))

    async def pre_compact(self, frontend: Frontend, forced: bool) -> str:
        """PreCompact: what its hooks add to the summarizer's instructions."""
        if self.hooks is None:
            return ""
        trigger = "manual" if forced else "auto"
        verdict = await self.hooks.run("PreCompact", frontend.emit, {"trigger": trigger, "custom_instructions": ""},
                                       trigger)
        return "\n".join(r for r in [verdict.additional_context, *(verdict.reasons if verdict.blocked else [])] if r)

    async def end(self, reason: str) -> None:
        """SessionEnd (closed or deleted): no turn to report to, so a run that failed is shown as a
        message (the face's window/showMessage) and the others only logged."""

        def shown(event: Event) -> None:
            if isinstance(event, HookRan) and event.outcome in ("failed", "timeout"):
                self.mcp.on_notice("warning", f"ToyCoder: SessionEnd hook {event.command} {event.outcome}: "
                                              f"{event.reason or ''}".rstrip(": "))

        if self.hooks is not None:
            await self.hooks.run("SessionEnd", shown, {"reason": reason})

    def in_effect(self) -> tuple[list[HookSpec], str | None]:
        """/hooks: the hooks that run, and a line on the workspace's settings file."""
        return (self.book.specs() if self.book else []), (self.trust.describe() if self.trust else None)
