"""What makes a decoded frame a JSON-RPC 2.0 message we act on, shared by both faces (faces/lsp/transport.py
for the LSP face, ndjson.py for the ACP face), so both refuse the same things the same way."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from toycoder_daemon.wire import codes as wire


@dataclass(frozen=True)
class Refusal:
    """Why a frame is not acted on. `code` None: nothing is answered (a response cannot be)."""

    msg_id: Any
    code: int | None
    message: str


def refusal(obj: Any, notifications: Collection[str] = (), requests: Collection[str] = ()) -> Refusal | None:
    """None when `obj` is a well-formed request, notification or response; else how to refuse it.
    A request (it has an id) to a method in `notifications` is refused: a request always gets an
    answer, and these methods have none. A notification (no id) to a method in `requests` is
    dropped unanswered: it would run (a whole turn, for a prompt) with nobody told its outcome."""
    if not isinstance(obj, dict):
        return Refusal(None, wire.INVALID_REQUEST,
                       "Invalid Request: expected a JSON object (batches are not supported)")
    msg_id = obj.get("id")
    if isinstance(msg_id, bool) or (msg_id is not None and not isinstance(msg_id, (str, int))):
        return Refusal(None, wire.INVALID_REQUEST, "Invalid Request: id must be a string or a number")
    if obj.get("jsonrpc") != "2.0":
        return Refusal(msg_id, wire.INVALID_REQUEST, 'Invalid Request: jsonrpc must be "2.0"')
    method = obj.get("method")
    if "method" in obj and not isinstance(method, str):
        return Refusal(msg_id, wire.INVALID_REQUEST, "Invalid Request: method must be a string")
    if method is None:
        if not ("id" in obj and ("result" in obj or "error" in obj)):
            return Refusal(msg_id, wire.INVALID_REQUEST,
                           "Invalid Request: neither a request, a notification nor a response")
        error = obj.get("error")
        if "error" in obj and not (isinstance(error, dict) and isinstance(error.get("code", 0), int)):
            return Refusal(msg_id, None, "a response whose error is not an object with an integer code")
        return None
    if "id" in obj and method in notifications:
        return Refusal(msg_id, wire.INVALID_REQUEST,
                       f"Invalid Request: {method} is a notification: send it without an id")
    if "id" not in obj and method in requests:
        return Refusal(None, None, f"{method} sent as a notification (no id): ignored; it is a request")
    return None
