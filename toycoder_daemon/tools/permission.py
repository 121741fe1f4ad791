"""The permission gate: safe runs, sensitive and dangerous ask the person (through the Frontend).

"allow_always" covers exactly this tool for the rest of this session. No answer, an error or a
dismissed prompt is a rejection. The gate returns None to go ahead or the observation for the model.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import Tool, ToolContext
    from ..agent.events import PermissionRequest

log = logging.getLogger(__name__)


class PermissionGate:
    def __init__(self, allow: set[str] | None = None, deny: set[str] | None = None):
        self.allow = set(allow or ())
        """Tools the config lets run without asking."""
        self.deny = set(deny or ())
        """Tools the config always refuses."""
        self.always: set[str] = set()
        """Tools the person answered "allow_always" for, in this session."""

    def fork(self) -> "PermissionGate":
        return PermissionGate(self.allow, self.deny)

    def must_ask(self, tool: "Tool") -> bool:
        return tool.name not in self.deny and not (
            tool.level == "safe" or tool.name in self.allow or tool.name in self.always
        )

    async def check(self, tool: "Tool", request: "PermissionRequest", ctx: "ToolContext") -> str | None:
        if tool.name in self.deny:
            return f"denied: the configuration forbids {tool.name}"
        if not self.must_ask(tool):
            return None
        try:
            decision = await ctx.frontend.confirm(request)
        except Exception as e:  # an editor that fails to answer has not said yes
            log.warning("permission request for %s failed: %s", tool.name, e)
            decision = "reject"
        if decision == "allow_always":
            self.always.add(tool.name)
            return None
        if decision == "allow_once":
            return None
        return f"denied: the user did not allow {request.title}. Do not retry the same action; ask or try another way."
