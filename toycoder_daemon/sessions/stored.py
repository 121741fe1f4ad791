"""A session file's records read as untrusted: a person may hand-edit the file, another version may
have written it. Every message, meta and context record goes through here on its way in
(store._parse), so the rest of the daemon can trust the shapes of core/messages.py: what cannot be
repaired is skipped, what can is repaired, and each case is logged at warning, naming the line.
"""

from __future__ import annotations

import logging
from typing import Any, cast

from toycoder_daemon.core.messages import Message
from toycoder_daemon.core.util import safejson

log = logging.getLogger(__name__)

ROLES = frozenset({"system", "user", "assistant", "tool"})


def _text(value: Any) -> str:
    """Content that is not a string (a hand-edited dict or list) kept visible as its JSON text."""
    return "" if value is None else value if isinstance(value, str) else safejson.dumps(value)


def _call_ok(c: Any) -> bool:
    """A tool call already in our shape (what this daemon writes): kept as it is."""
    f = c.get("function") if isinstance(c, dict) else None
    return (isinstance(f, dict) and isinstance(c.get("id"), str) and bool(c["id"]) and c.get("type") == "function"
            and isinstance(f.get("name"), str) and bool(f["name"]) and isinstance(f.get("arguments"), str))


def _call(value: Any) -> dict[str, Any] | None:
    """One tool call in our shape, or None when it names no id or no function."""
    if not isinstance(value, dict):
        return None
    f = value.get("function")
    if not (isinstance(value.get("id"), str) and value["id"] and isinstance(f, dict)
            and isinstance(f.get("name"), str) and f["name"]):
        return None
    args = f.get("arguments")
    arguments = args if isinstance(args, str) else "{}" if args is None else safejson.dumps(args)
    return {**value, "type": "function", "function": {**f, "arguments": arguments}}


def _sound(m: dict[str, Any]) -> bool:
    """Nothing to repair (every message this daemon wrote): the common case costs no copy."""
    role, content = m.get("role"), m.get("content")
    if not (isinstance(content, str) or (role == "assistant" and content is None)):
        return False
    if role == "tool":
        return isinstance(m.get("tool_call_id"), str)
    if role == "user":
        return isinstance(m.get("turn", ""), str) and isinstance(m.get("note", False), bool)
    if role == "assistant":
        made = m.get("tool_calls", [])
        return (isinstance(made, list) and all(map(_call_ok, made))
                and isinstance(m.get("interrupted", False), bool))
    return role == "system"


def message(value: Any, name: str, line: int) -> Message | None:
    """`value` as a message of ours (repaired where it can be), or None to skip it. `name` and
    `line` (the file's name, the line's number) say where in the log."""
    if not isinstance(value, dict) or value.get("role") not in ROLES:
        log.warning("%s: line %d: not a message (no known role); skipped", name, line)
        return None
    if _sound(value):
        return cast(Message, value)
    m = dict(value)
    role = m["role"]
    repaired: list[str] = []
    content = m.get("content")
    if not (isinstance(content, str) or (role == "assistant" and content is None)):
        m["content"] = _text(content)
        repaired.append("content")
    if role == "tool" and not isinstance(m.get("tool_call_id"), str):
        log.warning("%s: line %d: a tool result that names no call; skipped", name, line)
        return None
    if role == "user" and "turn" in m and not isinstance(m["turn"], str):
        del m["turn"]
        repaired.append("turn")
    if role == "assistant" and "tool_calls" in m:
        made = m["tool_calls"]
        calls = [c for c in map(_call, made if isinstance(made, list) else ()) if c is not None]
        if not isinstance(made, list) or len(calls) != len(made) or calls != made:
            repaired.append("tool_calls")
        if calls:
            m["tool_calls"] = calls
        else:
            del m["tool_calls"]
    for flag in ("interrupted", "note"):
        if flag in m and not isinstance(m[flag], bool):
            del m[flag]
            repaired.append(flag)
    if repaired:
        log.warning("%s: line %d: a %s message's unreadable %s repaired", name, line, role, ", ".join(repaired))
    return cast(Message, m)


LAST_TIME = 253402300799
"""9999-12-31T23:59:59Z: a later time has no ISO 8601 form (wire.iso_time would fail on it)."""


def timestamp(v: Any) -> bool:
    """A time the daemon can show: seconds since the epoch, up to year 9999."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= LAST_TIME


def _str_or_none(v: Any) -> bool:
    return v is None or isinstance(v, str)


META_FIELDS: dict[str, Any] = {
    "id": lambda v: isinstance(v, str),
    "title": lambda v: isinstance(v, str),
    "titleBy": lambda v: isinstance(v, str),
    "createdAt": timestamp,
    "provider": _str_or_none,
    "model": _str_or_none,
    "mode": lambda v: isinstance(v, str),
    "always": lambda v: isinstance(v, list) and all(isinstance(n, str) for n in v),
    "toolOverrides": lambda v: isinstance(v, dict),
    "turnEnds": lambda v: isinstance(v, dict) and all(isinstance(e, dict) for e in v.values()),
}
"""Settings fields and what a readable value is; an unreadable one is dropped (the session keeps
what it had: a default, or an earlier record's). Booleans only for toolOverrides: "yes" must not
enable a tool. Others (usage: read leniently by the session) pass as they are."""


def meta(record: dict[str, Any], name: str, line: int) -> dict[str, Any]:
    """A meta record's settings, without the fields whose values are unreadable."""
    out: dict[str, Any] = {}
    for k, v in record.items():
        if k == "t":
            continue
        if k in META_FIELDS and not META_FIELDS[k](v):
            log.warning("%s: line %d: setting %s's unreadable value %.80r dropped", name, line, k, v)
            continue
        if k == "toolOverrides" and not all(isinstance(b, bool) for b in v.values()):
            log.warning("%s: line %d: tool overrides that are not true or false dropped: %.80r", name, line,
                        {n: b for n, b in v.items() if not isinstance(b, bool)})
            v = {n: b for n, b in v.items() if isinstance(b, bool)}
        out[k] = v
    return out
