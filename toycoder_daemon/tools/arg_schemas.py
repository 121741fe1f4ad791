"""A tool's argument model and JSON schema, made when first needed and shared by equal signatures.

Building a pydantic model per tool at import and its JSON schema in the first turn cost a new
process ~20 ms before its first chunk. So a tool keeps its signature (`ArgSpec`); the model is
built at its first call, once per signature (every session's sub-agent tools share one), and the
schema the model is offered comes from `schemas.json`, generated from the built-in tools
(`python -m toycoder_daemon.app.factories`). An entry is used only when its key, a hash of everything
that shapes the schema (fields, nested models, the pydantic version), matches: a changed tool
gets its schema built live, so a stale file costs time, never a wrong schema.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from pydantic import VERSION, BaseModel, ConfigDict, Field, create_model

SCHEMA_FILE = Path(__file__).with_name("schemas.json")


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class ArgField:
    name: str
    annotation: Any
    default: Any
    """`...` when required."""
    description: str | None


@dataclass(frozen=True)
class ArgSpec:
    model_name: str
    fields: tuple[ArgField, ...]

    @functools.cached_property
    def key(self) -> str:
        """Changes whenever the schema could: the fields as written, the nested models and enums
        they use (their fields, config and docstring), the pydantic version."""
        parts = [VERSION, self.model_name, repr([(f.name, f.annotation, f.default, f.description) for f in self.fields])]
        seen: set[type] = set()

        def visit(tp: Any) -> None:
            if isinstance(tp, type) and tp not in seen:
                seen.add(tp)
                if issubclass(tp, BaseModel):
                    parts.append(repr((tp.__qualname__, tp.__doc__, tp.model_config, tp.model_fields)))
                    for f in tp.model_fields.values():
                        visit(f.annotation)
                elif issubclass(tp, enum.Enum):
                    parts.append(repr((tp.__qualname__, tp.__doc__, [(m.name, m.value) for m in tp])))
            for arg in get_args(tp):
                visit(arg)

        for f in self.fields:
            visit(f.annotation)
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


_models: dict[str, type[BaseModel]] = {}


def model(spec: ArgSpec) -> type[BaseModel]:
    """The pydantic model validating these arguments (one per signature)."""
    m = _models.get(spec.key)
    if m is None:
        fields = {f.name: (f.annotation, Field(f.default, description=f.description)) for f in spec.fields}
        m = _models[spec.key] = create_model(spec.model_name, __base__=_Args, **fields)  # type: ignore[call-overload]
    return m


def live_schema(spec: ArgSpec) -> dict[str, Any]:
    """The `parameters` JSON schema, from the model (titles dropped: the model reads names)."""
    return titled_off(model(spec).model_json_schema())


def titled_off(params: dict[str, Any]) -> dict[str, Any]:
    params.pop("title", None)
    for prop in params.get("properties", {}).values():
        prop.pop("title", None)
    return params


@functools.cache
def _shipped() -> dict[str, Any]:
    try:
        data = json.loads(SCHEMA_FILE.read_bytes())
    except (OSError, ValueError):
        return {}
    return data.get("schemas", {}) if isinstance(data, dict) and data.get("pydantic") == VERSION else {}


def schema(spec: ArgSpec) -> dict[str, Any]:
    """The `parameters` JSON schema: the shipped one when its key matches, else built live."""
    entry = _shipped().get(spec.key)
    params = entry.get("parameters") if isinstance(entry, dict) else None
    return params if isinstance(params, dict) else live_schema(spec)


def generate(specs: dict[str, ArgSpec]) -> str:
    """schemas.json's text for these tools (name -> signature), every schema built live."""
    entries = {spec.key: {"tool": name, "parameters": live_schema(spec)} for name, spec in sorted(specs.items())}
    return json.dumps({"pydantic": VERSION, "schemas": entries}, indent=1) + "\n"
