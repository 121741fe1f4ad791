"""Tool: a named async function whose JSON schema comes from its signature and type hints.

    @tool(level="safe")
    async def read_file(ctx: ToolContext, path: Annotated[str, "File path"], offset: int = 1) -> str:
        '''Read a text file.'''

The first parameter is the ToolContext; the rest become the model-facing schema (pydantic
validates the model's arguments against it, and a bad argument is reported to the model).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model

from ..ports import CheckpointRecorder, Frontend, Level
from .settings import ToolSettings
from .workspace import Workspace


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


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _field(annotation: Any, default: Any) -> tuple[Any, Any]:
    """Turn `Annotated[T, "description"]` into (T, Field(description=...))."""
    description = None
    if get_origin(annotation) is Annotated:
        base, *meta = get_args(annotation)
        description = next((m for m in meta if isinstance(m, str)), None)
        annotation = base
    required = default is inspect.Parameter.empty
    return annotation, Field(... if required else default, description=description)


@dataclass
class Tool:
    name: str
    description: str
    level: Level
    func: Callable[..., Awaitable[Any]]
    args_model: type[BaseModel] | None
    """Validates the model's arguments; None for tools that bring their own JSON schema (MCP)."""
    source: str = "builtin"
    parameters: dict[str, Any] | None = None
    """A JSON schema given as is (MCP tools); otherwise it is derived from args_model."""
    title: Callable[[dict[str, Any]], str] | None = None
    """Short human label for a call, e.g. "read_file src/app.py"."""
    preview: Callable[[ToolContext, dict[str, Any]], Awaitable[dict[str, Any] | None]] | None = None
    """What the person sees before allowing the call (a diff, a command); may raise ToolError."""

    @classmethod
    def from_function(
        cls, func: Callable[..., Awaitable[Any]], *, level: Level = "safe", name: str | None = None,
        title: Callable[[dict[str, Any]], str] | None = None, preview: Any = None,
    ) -> Tool:
        hints = get_type_hints(func, include_extras=True)
        params = list(inspect.signature(func).parameters.values())[1:]  # skip ctx
        fields = {p.name: _field(hints.get(p.name, Any), p.default) for p in params}
        model = create_model(f"{func.__name__}_args", __base__=_Args, **fields)  # type: ignore[call-overload]
        doc = " ".join((func.__doc__ or "").split())  # source line breaks are not meant for the model
        return cls(name=name or func.__name__, description=doc, level=level, func=func, args_model=model, title=title,
                   preview=preview)

    def schema(self) -> dict[str, Any]:
        """The OpenAI `tools` entry (built once: tools do not change)."""
        cached = self.__dict__.get("_schema")
        if cached is None:
            if self.parameters is not None:
                params = self.parameters
            else:
                assert self.args_model is not None
                params = self.args_model.model_json_schema()
                params.pop("title", None)
                for prop in params.get("properties", {}).values():
                    prop.pop("title", None)
            cached = {"type": "function", "function": {"name": self.name, "description": self.description,
                                                       "parameters": params}}
            self.__dict__["_schema"] = cached
        return cached

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """The arguments to call func with; raises pydantic's ValidationError when they are wrong."""
        if self.args_model is None:
            return args
        return self.args_model.model_validate(args).model_dump()

    def describe_call(self, args: dict[str, Any]) -> str:
        if self.title:
            try:
                return self.title(args)
            except Exception:
                pass
        first = next(iter(args.values()), "")
        return f"{self.name} {first}".strip() if isinstance(first, str) else self.name


def tool(*, level: Level = "safe", name: str | None = None, title: Callable[[dict[str, Any]], str] | None = None,
         preview: Any = None) -> Callable[[Callable[..., Awaitable[Any]]], Tool]:
    """Decorator form of Tool.from_function."""

    def wrap(func: Callable[..., Awaitable[Any]]) -> Tool:
        return Tool.from_function(func, level=level, name=name, title=title, preview=preview)

    return wrap
