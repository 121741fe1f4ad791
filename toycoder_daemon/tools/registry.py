"""ToolRegistry: register, list, enable/disable, and dispatch through the permission gate.

Every call, from the main agent, a sub-agent or an MCP server, goes through `dispatch`, so the
gate is in one place. A denial or a tool error is an observation for the model, never an exception.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from toycoder_daemon.core.ports import PermissionRequest, ToolStatus
from toycoder_daemon.core.util import safejson, secrets
from toycoder_daemon.core.util.visible import visible_tree
from toycoder_daemon.tools.base import Tool, ToolContext, ToolError
from toycoder_daemon.tools.escape import escape_surrogates
from toycoder_daemon.tools.permission import Judgement, PermissionGate


@dataclass
class ToolOutcome:
    status: ToolStatus
    output: str
    changed: list[str] = field(default_factory=list)
    """Files the call wrote."""

    def __post_init__(self) -> None:
        # a name that is not UTF-8 (or a model's lone surrogate) echoed in the output must not make
        # the session file, the wire or the next provider request fail to encode
        self.output = escape_surrogates(self.output)


@dataclass
class ToolCall:
    """One call looked up, decoded, validated and judged by the gate, once (ToolRegistry.prepare):
    announcing it (will_ask) and running it (run) share this."""

    name: str
    ctx: ToolContext
    ended: ToolOutcome | None = None
    """How the call ends without running (an unknown tool, bad arguments, a disabled tool)."""
    tool: Tool | None = None
    args: dict[str, Any] = field(default_factory=dict)
    """The model's arguments, decoded."""
    call_args: dict[str, Any] = field(default_factory=dict)
    """The validated arguments the tool is called with."""
    judgement: Judgement | None = None


def _format_validation(e: ValidationError) -> str:
    parts = []
    for err in e.errors():
        field = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        parts.append(f"{field}: {err['msg']}")
    return "; ".join(parts)


def _stringify(result: Any) -> str:
    # The daemon's own API keys never reach the model, the session file or the editor, even when a
    # tool read a .env file or printed the environment.
    # A lone surrogate (a file name's byte, a model's path) is shown escaped (\\xNN), never dropped.
    return secrets.redact(escape_surrogates(result) if isinstance(result, str) else safejson.dumps(result, default=str))


class ToolSlot:
    """A tool source whose provider is replaced over time (one session's client MCP servers: none,
    then a manager, then another one the client gives); a registry holds the slot, not the provider."""

    def __init__(self) -> None:
        self.source: Callable[[], list[Tool]] | None = None

    def __call__(self) -> list[Tool]:
        return self.source() if self.source is not None else []


class ToolRegistry:
    """Built-in tools plus dynamic sources (MCP servers come and go); per-session forks share the
    tool objects and sources but keep their own tool table, enabled state and "always allow" memory."""

    def __init__(self, gate: PermissionGate | None = None):
        self._tools: dict[str, Tool] = {}
        self._sources: list[Callable[[], list[Tool]]] = []
        self._own_sources: list[Callable[[], list[Tool]]] = []
        """Sources of this registry alone, not passed on by fork (one session's client MCP servers)."""
        self._overrides: dict[str, bool] = {}
        self.gate = gate or PermissionGate()

    def fork(self) -> ToolRegistry:
        child = ToolRegistry(self.gate.fork())
        child._tools = dict(self._tools)  # a session registers its own sub-agent tools
        child._sources = self._sources
        child._overrides = dict(self._overrides)
        return child

    def restricted(self, names: list[str]) -> ToolRegistry:
        """A view with only the named tools, sharing this registry's gate and enabled state
        (a sub-agent's tools: same grants, same rules, same prompts)."""
        child = ToolRegistry(self.gate)
        child._tools = {n: t for n, t in self._all().items() if n in names}
        child._overrides = self._overrides
        return child

    def register(self, t: Tool, *, enabled: bool | None = None) -> None:
        self._tools[t.name] = t
        if enabled is not None:
            self._overrides[t.name] = enabled

    def add_source(self, source: Callable[[], list[Tool]]) -> None:
        """A callable giving tools that may change over time (e.g. an MCP server's); forks share it."""
        self._sources.append(source)

    def add_own_source(self, source: Callable[[], list[Tool]]) -> None:
        """Like add_source, but only this registry offers its tools (forks made later do not)."""
        self._own_sources.append(source)

    def _all(self) -> dict[str, Tool]:
        if not self._sources and not self._own_sources:
            return self._tools
        tools = dict(self._tools)
        for source in [*self._sources, *self._own_sources]:
            for t in source():
                tools.setdefault(t.name, t)
        return tools

    def get(self, name: str) -> Tool | None:
        return self._all().get(name)

    def names(self) -> list[str]:
        return list(self._all())

    def is_enabled(self, name: str) -> bool:
        t = self.get(name)
        return t is not None and self._enabled(t)

    def _enabled(self, t: Tool) -> bool:
        return self._overrides.get(t.name, t.level != "dangerous")  # dangerous starts disabled

    def set_enabled(self, name: str, enabled: bool) -> None:
        if self.get(name) is None:
            raise KeyError(name)
        self._overrides[name] = enabled

    def list(self) -> list[Tool]:
        return list(self._all().values())

    def schemas(self) -> builtins.list[dict[str, Any]]:  # `list` here is the method above
        """What the model is offered: enabled tools only."""
        return [t.schema() for t in self.list() if self._enabled(t)]  # one table: the sources are asked once

    def parse(self, name: str, raw_arguments: str) -> tuple[Tool | None, dict[str, Any] | None, str | None]:
        """Look the tool up and decode its arguments; the str is an error for the model."""
        t = self.get(name)
        if t is None:
            return None, None, f"unknown tool {name!r}; available: {', '.join(self.names())}"
        try:
            args = safejson.loads(raw_arguments) if raw_arguments and raw_arguments.strip() else {}
        except safejson.TooDeep as e:
            return t, None, f"the arguments of {name} are refused: {e}; send flatter arguments"
        except json.JSONDecodeError as e:
            where = f"{e.msg} at position {e.pos}"
            return t, None, f"the arguments of {name} are not valid JSON ({where}); send a JSON object"
        if not isinstance(args, dict):
            return t, None, f"the arguments of {name} must be a JSON object, got {type(args).__name__}"
        return t, args, None

    def prepare(self, name: str, raw_arguments: str, ctx: ToolContext) -> ToolCall:
        """The call looked up, its arguments decoded and validated, and judged by the gate."""
        t, args, problem = self.parse(name, raw_arguments)
        if problem or t is None or args is None:
            return ToolCall(name, ctx, ToolOutcome("failed", f"error: {problem}"))
        if not self._enabled(t):
            hint = f" (enable it with /tool enable {name})" if t.level == "dangerous" else ""
            return ToolCall(name, ctx, ToolOutcome("denied", f"denied: the tool {name} is disabled{hint}"))
        try:
            call_args = t.validate(args)
        except ValidationError as e:
            return ToolCall(name, ctx, ToolOutcome("failed", f"error: invalid arguments for {name}: {_format_validation(e)}"))
        return ToolCall(name, ctx, None, t, args, call_args, self.gate.judge(t, args, ctx))

    def will_ask(self, call: ToolCall) -> bool:
        """Whether running this call will ask the person (the faces announce it so: ACP's
        `pending`); False when it runs, or fails or is refused, without asking."""
        return call.judgement is not None and self.gate.will_ask(call.judgement)

    async def dispatch(self, name: str, raw_arguments: str, ctx: ToolContext) -> ToolOutcome:
        return await self.run(self.prepare(name, raw_arguments, ctx))

    async def run(self, call: ToolCall) -> ToolOutcome:
        t, j, ctx, name = call.tool, call.judgement, call.ctx, call.name
        if call.ended is not None:
            return call.ended
        assert t is not None and j is not None  # prepare judged every call that did not end
        refused = self.gate.refusal(j)
        if refused is not None:  # before the preview: nothing is read for a call that cannot run
            return ToolOutcome("denied", refused)
        preview = None
        if t.preview and self.gate.must_ask(j):
            try:  # an edit that cannot apply fails now, without bothering the person
                preview = await t.preview(ctx, call.call_args)
            except ToolError as e:
                return ToolOutcome("failed", f"error: {e}")
            except Exception as e:  # e.g. an OSError reading the file: the model sees it, the turn goes on
                return ToolOutcome("failed", f"error: {name} cannot prepare this change: {type(e).__name__}: {e}")
        # what the person reads: control characters and bidi overrides shown as escapes (the call
        # itself runs with the arguments as they are)
        request = PermissionRequest(
            tool_call_id=ctx.tool_call_id, tool=name, level=t.level, title=t.describe_call(call.args),
            arguments=visible_tree(call.args), preview=visible_tree(preview) if preview is not None else None,
        )
        verdict = await self.gate.check(j, request, ctx)
        if verdict is not None:
            return ToolOutcome("denied", verdict)
        ctx.changed = []
        try:
            result = await t.func(ctx, **call.call_args)
        except ToolError as e:
            return ToolOutcome("failed", _stringify(f"error: {e}"), ctx.changed)
        except Exception as e:  # a bug in a tool must not end the turn; the model sees it
            return ToolOutcome("failed", _stringify(f"error: {name} raised {type(e).__name__}: {e}"), ctx.changed)
        return ToolOutcome("completed", _stringify(result), ctx.changed)
