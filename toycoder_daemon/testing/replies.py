"""What the scripted model server sends, apart from the HTTP: loading a script, planning a reply's
deltas, OpenAI-style error bodies, and the tool-call invariant it checks (fake_llm.py serves them)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

from toycoder_daemon.testing import script as steps


def load_script(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a script: a JSON (or .yaml/.yml) list of replies, or ``{"replies": [...]}``.

    ``"-"`` reads JSON from stdin.
    """
    path = str(path)
    if path == "-":
        data = json.load(sys.stdin)
    else:
        with open(path, encoding="utf-8") as f:
            if path.endswith((".yaml", ".yml")):
                import yaml  # lazy: only YAML scripts need PyYAML

                data = yaml.safe_load(f)
            else:
                data = json.load(f)
    if isinstance(data, dict) and "replies" in data:
        data = data["replies"]
    if not isinstance(data, list):
        raise ValueError(f"{path}: a script is a list of replies")
    return data


def tool_call_problems(messages: Any) -> list[str]:
    """Where ``messages`` breaks the tool-call pairing rule ([] if it does not)."""
    problems: list[str] = []
    pending: list[Any] = []  # ids of the last assistant message not yet answered
    owner = -1
    for i, msg in enumerate(messages if isinstance(messages, list) else []):
        if not isinstance(msg, dict):
            continue
        role = msg.get("role")
        if role == "tool":
            tool_id = msg.get("tool_call_id")
            if tool_id in pending:
                pending.remove(tool_id)
            else:
                problems.append(f"messages[{i}]: tool message answers unknown tool_call_id {tool_id!r}")
            continue
        if pending:
            problems.append(f"messages[{owner}]: tool_call_id {', '.join(map(str, pending))} "
                            f"not answered before messages[{i}] ({role})")
        calls = msg.get("tool_calls") if role == "assistant" else None
        pending = [c.get("id") for c in calls or [] if isinstance(c, dict)]
        owner = i
    if pending:
        problems.append(f"messages[{owner}]: tool_call_id {', '.join(map(str, pending))} "
                        f"not answered before the end of messages")
    return problems


def split_text(s: str, n: int) -> list[str]:
    """``s`` in at most ``n`` non-empty pieces of (nearly) equal size."""
    size = max(1, -(-len(s) // max(1, n)))  # ceiling division
    return [s[i:i + size] for i in range(0, len(s), size)]


Deltas = list[dict[str, Any]]


def plan_deltas(reply: dict[str, Any], new_call_id: Callable[[], str]) -> tuple[Deltas, list[tuple[str, str, str]]]:
    """The stream deltas of a reply (role not included) and its calls as (id, name, arguments)."""
    deltas: list[dict[str, Any]] = [{"content": piece} for piece in steps.text_pieces(reply)]
    calls = steps.tool_calls(reply, new_call_id)
    arg_chunks = int(reply.get("arg_chunks", 3))
    per_call = []  # the deltas of each call, in order
    for index, (call_id, name, args) in enumerate(calls):
        head = {"index": index, "id": call_id, "type": "function",
                "function": {"name": name, "arguments": "" if arg_chunks > 0 else args}}
        per_call.append([{"tool_calls": [head]}] + [
            {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
            for piece in (split_text(args, arg_chunks) if arg_chunks > 0 else [])])
    if reply.get("interleave"):
        # Round-robin, the way a provider generating calls in parallel emits them.
        for k in range(max(map(len, per_call), default=0)):
            deltas += [seq[k] for seq in per_call if k < len(seq)]
    else:
        for seq in per_call:
            deltas += seq
    return deltas, calls


def error_body(status: int, message: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    if status == 429:
        kind, code = "requests", "rate_limit_exceeded"
    elif status >= 500:
        kind, code = "server_error", None
    else:
        kind, code = "invalid_request_error", None
    return {"error": {"message": message, "type": kind, "param": None, "code": code, **(extra or {})}}
