"""Tool: a named async function whose JSON schema comes from its signature and type hints.

    @tool(level="safe")
    async def read_file(ctx: ToolContext, path: Annotated[str, "File path"], offset: int = 1) -> str:
        '''Read a text file.'''

The first parameter is the ToolContext; the rest become the model-facing schema (pydantic
validates the model's arguments against it, and a bad argument is reported to the model). The
model and the schema are made when first needed (arg_schemas.py), not when the tool is defined.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin, get_type_hints

from pydantic import BaseModel

from toycoder_daemon.core.ports import CheckpointRecorder, Frontend, Level
from toycoder_daemon.core.util.visible import visible
from toycoder_daemon.tools import arg_schemas
from toycoder_daemon.tools.arg_schemas import ArgField, ArgSpec
from toycoder_daemon.tools.settings import ToolSettings
from toycoder_daemon.tools.workspace import Workspace


class ToolError(Exception):
    """A failure the model should read as the observation (status: failed)."""


@dataclass
class ToolContext:
    workspace: Workspace
    frontend: Frontend
    tool_call_id: str = ""
    settings: ToolSettings = field(default_factory=ToolSettings)
    """Limits and timeouts (filled from the config's `tools:` section by the app)."""
    changed: list[str] | None = None
    """Tools that write files append the absolute paths here (editors reload those buffers)."""
    checkpoints: CheckpointRecorder | None = None
    """The session's checkpoint store: writing tools record each path's state before they write."""
    checkpoint_turn: str = ""
    """The turn's checkpoint id (CheckpointStore.begin_turn's answer) the writes are recorded under."""
    approved: dict[Path, tuple[bool, str]] = field(default_factory=dict)
    """(existed, text) each preview showed the change against: the write checks it is still so."""

    def for_call(self, tool_call_id: str) -> ToolContext:
        """This context for one tool call (run_turn's `make_context`): the call's id, and nothing of
        another call's (written paths, approved previews)."""
        return replace(self, tool_call_id=tool_call_id, changed=None, approved={})


def _field(name: str, annotation: Any, default: Any) -> ArgField:
    """Turn `Annotated[T, "description"]` into T with that description."""
    description = None
    if get_origin(annotation) is Annotated:
        base, *meta = get_args(annotation)
        description = next((m for m in meta if isinstance(m, str)), None)
        annotation = base
    return ArgField(name, annotation, ... if default is inspect.Parameter.empty else default, description)


@dataclass
class Tool:
    name: str
    description: str
    level: Level
    func: Callable[..., Awaitable[Any]]
    args_model: type[BaseModel] | None
    """Validates the model's arguments; None for tools that bring their own JSON schema (MCP), and
    for a function's tool until its first call (made from `args`)."""
    source: str = "builtin"
    parameters: dict[str, Any] | None = None
    """A JSON schema given as is (MCP tools); otherwise it is derived from args_model."""
    title: Callable[[dict[str, Any]], str] | None = None
    """Short human label for a call, e.g. "read_file src/app.py"."""
    preview: Callable[[ToolContext, dict[str, Any]], Awaitable[dict[str, Any] | None]] | None = None
    """What the person sees before allowing the call (a diff, a command); may raise ToolError."""
    args: ArgSpec | None = None
    """A function's parameters, from which its argument model and schema are made."""

    @classmethod
    def from_function(
        cls, func: Callable[..., Awaitable[Any]], *, level: Level = "safe", name: str | None = None,
        title: Callable[[dict[str, Any]], str] | None = None, preview: Any = None,
    ) -> Tool:
        hints = get_type_hints(func, include_extras=True)
        params = list(inspect.signature(func).parameters.values())[1:]  # skip ctx
        spec = ArgSpec(f"{func.__name__}_args", tuple(_field(p.name, hints.get(p.name, Any), p.default) for p in params))
        doc = " ".join((func.__doc__ or "").split())  # source line breaks are not meant for the model
        return cls(name=name or func.__name__, description=doc, level=level, func=func, args_model=None, title=title,
                   preview=preview, args=spec)

    def schema(self) -> dict[str, Any]:
        """The OpenAI `tools` entry (built once: tools do not change)."""
        cached = self.__dict__.get("_schema")
        if cached is None:
            if self.parameters is not None:
                params = self.parameters
            elif self.args is not None:
                params = arg_schemas.schema(self.args)
            else:
                assert self.args_model is not None
                params = arg_schemas.titled_off(self.args_model.model_json_schema())
            cached = {"type": "function", "function": {"name": self.name, "description": self.description,
                                                       "parameters": params}}
            self.__dict__["_schema"] = cached
        return cached

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """The arguments to call func with; raises pydantic's ValidationError when they are wrong."""
        if self.args_model is None:
            if self.args is None:
                return args
            self.args_model = arg_schemas.model(self.args)
        return self.args_model.model_validate(args).model_dump()

    def describe_call(self, args: dict[str, Any]) -> str:
        """The call's one-line title, control characters and bidi overrides shown as escapes."""
        if self.title:
            try:
                return visible(str(self.title(args)))
            except Exception:
                pass
        first = next(iter(args.values()), "")
        return visible(f"{self.name} {first}".strip() if isinstance(first, str) else self.name)


def tool(*, level: Level = "safe", name: str | None = None, title: Callable[[dict[str, Any]], str] | None = None,
         preview: Any = None) -> Callable[[Callable[..., Awaitable[Any]]], Tool]:
    """Decorator form of Tool.from_function."""

    def wrap(func: Callable[..., Awaitable[Any]]) -> Tool:
        return Tool.from_function(func, level=level, name=name, title=title, preview=preview)

    return wrap
