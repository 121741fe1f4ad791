"""What every wire type shares: the `Wire` base (camelCase aliases, field docstrings as schema
descriptions) and the small literal types. protocol.py re-exports all of it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

Level = Literal["safe", "sensitive", "dangerous"]
ToolStatus = Literal["completed", "failed", "denied", "cancelled"]
StopReason = Literal["end_turn", "max_steps", "max_tokens", "cancelled", "error", "command"]
Decision = Literal["allow_once", "allow_always", "reject"]


class Wire(BaseModel):
    # field docstrings become descriptions in the generated schema only (field_docs.document): reading
    # them at class creation (use_attribute_docstrings) costs every new process ~15 ms
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True)

    def dump(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


def build_all() -> None:
    """Build every wire type defined so far now, not at its first use (defer_build): the fork
    server does it once before it forks, so no launch pays for it (the
    eight a first LSP turn uses took ~3 ms of CPU)."""
    pending = Wire.__subclasses__()
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        cls.model_rebuild()
