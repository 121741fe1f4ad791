"""How an MCP server's tools are named and described to the registry: `mcp__<server>__<tool>`
within ^[a-zA-Z0-9_-]{1,64}$ (a short hash keeps long or clashing names apart), and an input schema
that is always an object schema. Pure functions: no SDK, no server.
"""

from __future__ import annotations

import copy
import hashlib
import re
from typing import Any

MAX_NAME = 64
_BAD_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
_DEFAULT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def short_hash(text: str) -> str:
    """8 hex digits that keep long or clashing names apart."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]


def _fit(name: str, raw: str, *, force_hash: bool = False) -> str:
    """`name` if it fits in MAX_NAME (and no hash is forced), else truncated plus `_<hash of raw>`."""
    if len(name) <= MAX_NAME and not force_hash:
        return name
    suffix = "_" + short_hash(raw)
    return name[: MAX_NAME - len(suffix)] + suffix


def sanitize(text: str) -> str:
    """Characters outside [a-zA-Z0-9_-] become `_`."""
    return _BAD_NAME_CHARS.sub("_", text) or "_"


def tool_name(server_part: str, tool: str, taken: set[str] | None = None) -> str:
    """`mcp__<server>__<tool>` within ^[a-zA-Z0-9_-]{1,64}$, unique among `taken`.

    `server_part` is the already sanitised (and disambiguated) server name."""
    raw = f"mcp__{server_part}__{tool}"
    name = _fit(sanitize(raw), raw)
    if taken is not None and name in taken:  # e.g. "a.b" and "a_b" on one server
        name = _fit(sanitize(raw), raw, force_hash=True)
        n = 1
        while name in taken:  # a hash collision on top: practically never
            n += 1
            name = _fit(sanitize(raw), f"{raw}#{n}", force_hash=True)
    return name


def object_schema(schema: Any) -> dict[str, Any]:
    """The tool's inputSchema as given, made sure to be an object schema."""
    if not isinstance(schema, dict) or not schema:
        return copy.deepcopy(_DEFAULT_SCHEMA)
    out: dict[str, Any] = copy.deepcopy(schema)
    if out.get("type") != "object":
        if "type" in out:  # not an object at all: the model could not call it with named arguments
            return copy.deepcopy(_DEFAULT_SCHEMA)
        out["type"] = "object"
    if not isinstance(out.get("properties"), dict):
        out["properties"] = {}
    return out
