"""Tools' argument models and schemas made on first use (tools/arg_schemas.py): the shipped schemas
are what the tools make live, and a tool whose signature changed is never given a shipped one."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field, ValidationError

from toycoder_daemon.app import factories
from toycoder_daemon.tools import arg_schemas
from toycoder_daemon.tools.base import Tool, ToolContext, tool
from toycoder_daemon.tools.files.read import read_file


def test_shipped_schemas_are_what_the_tools_make_now() -> None:
    # after changing a tool's parameters: python -m toycoder_daemon.app.factories
    assert arg_schemas.SCHEMA_FILE.read_text(encoding="utf-8") == factories.tool_schema_file()


def test_every_builtin_tool_is_offered_its_shipped_schema_which_equals_the_live_one() -> None:
    shipped = arg_schemas._shipped()
    for t in factories.BUILTIN_TOOLS:
        assert t.args is not None
        assert t.args.key in shipped, t.name
        assert t.schema()["function"]["parameters"] == arg_schemas.live_schema(t.args), t.name


def _read_file_like(description: str) -> Tool:
    """read_file's signature with the first parameter's description replaced."""
    assert read_file.args is not None
    first, *rest = read_file.args.fields
    args = dataclasses.replace(read_file.args, fields=(dataclasses.replace(first, description=description), *rest))
    return dataclasses.replace(read_file, args=args, args_model=None)


def test_a_changed_signature_gets_a_live_schema_not_the_shipped_one() -> None:
    assert read_file.args is not None
    original = read_file.args.fields[0].description
    assert original is not None
    same = _read_file_like(original)
    assert same.args is not None and same.args.key == read_file.args.key  # the same signature: the shipped entry
    changed = _read_file_like("A different description")
    assert changed.args is not None and changed.args.key != read_file.args.key
    props = changed.schema()["function"]["parameters"]["properties"]
    assert props["path"]["description"] == "A different description"
    assert changed.schema()["function"]["parameters"] == arg_schemas.live_schema(changed.args)


class _Step(BaseModel):
    text: str = Field(max_length=10)


class _StepLonger(BaseModel):
    text: str = Field(max_length=99)


def test_the_key_follows_nested_models() -> None:
    async def plan(ctx: ToolContext, steps: list[_Step]) -> str:
        return ""

    async def plan2(ctx: ToolContext, steps: list[_StepLonger]) -> str:
        return ""

    a, b = Tool.from_function(plan, name="plan"), Tool.from_function(plan2, name="plan")
    assert a.args is not None and b.args is not None
    assert a.args.key != b.args.key
    assert a.schema()["function"]["parameters"] != b.schema()["function"]["parameters"]


def test_a_file_from_another_pydantic_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert read_file.args is not None
    fake = {"pydantic": "0.0.1", "schemas": {read_file.args.key: {"tool": "read_file", "parameters": {"x": 1}}}}
    path = tmp_path / "schemas.json"
    path.write_text(json.dumps(fake))
    monkeypatch.setattr(arg_schemas, "SCHEMA_FILE", path)
    arg_schemas._shipped.cache_clear()
    try:
        assert arg_schemas.schema(read_file.args) == arg_schemas.live_schema(read_file.args)
        fake["pydantic"] = arg_schemas.VERSION  # the same file for this pydantic is used as it is
        path.write_text(json.dumps(fake))
        arg_schemas._shipped.cache_clear()
        assert arg_schemas.schema(read_file.args) == {"x": 1}
    finally:
        arg_schemas._shipped.cache_clear()


def test_arguments_are_validated_by_a_model_made_at_the_first_call() -> None:
    @tool(level="safe")
    async def sample(ctx: ToolContext, name: Annotated[str, "A name"], count: int = 2) -> Any:
        return name * count

    assert sample.args_model is None
    assert sample.validate({"name": "a"}) == {"name": "a", "count": 2}
    assert sample.args_model is not None
    with pytest.raises(ValidationError):
        sample.validate({"name": "a", "extra": 1})
    with pytest.raises(ValidationError):
        sample.validate({"count": 3})


def test_tools_with_the_same_signature_share_one_model() -> None:
    one, two = _read_file_like("Same"), _read_file_like("Same")
    one.validate({"path": "x"})
    two.validate({"path": "y"})
    assert one.args_model is two.args_model
