"""The wire's error codes and timestamps, without pydantic or any wire model: all the ACP face and
the JSON-RPC framing need of the contract, so a new ACP process never builds protocol.py's ~50
model classes (~12 ms). protocol.py re-exports all of it."""

from __future__ import annotations

# error codes (JSON-RPC, LSP, then ours)
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_NOT_INITIALIZED = -32002
REQUEST_CANCELLED = -32800
SESSION_NOT_FOUND = -32010
SESSION_BUSY = -32011
PROVIDER_ERROR = -32012
CONFIG_ERROR = -32013


def iso_time(ts: float) -> str:
    """Timestamps on the wire: ISO 8601, UTC, seconds."""
    import datetime

    return datetime.datetime.fromtimestamp(ts, tz=datetime.timezone.utc).isoformat(timespec="seconds")
