"""TypeScript types for the VS Code client, generated from the method table in protocol.py.

    python -m toycoder_daemon.wire.typescript > clients/vscode/src/shared/protocol.ts

tests/unit/wire/test_protocol_ts.py fails when the checked-in file differs from this output. Wire fields
that are None by default are never sent (the daemon dumps with exclude_none), so they become
optional properties; fields with any other default are always sent, so they are required.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from toycoder_daemon.config.field_docs import document
from toycoder_daemon.wire import codes as wire_codes
from toycoder_daemon.wire import protocol as wire

ALIASES: dict[str, Any] = {"Level": wire.Level, "ToolStatus": wire.ToolStatus, "StopReason": wire.StopReason,
                           "Decision": wire.Decision, "Update": wire.Update, "Action": wire.Action,
                           "Preview": wire.Preview}
"""Named unions: emitted once as `type X = ...` and referred to by name."""

HEADER = """/**
 * The ToyCoder wire contract (protocol version {version}), as TypeScript types.
 * GENERATED from toycoder_daemon/wire/protocol.py -- do not edit. Regenerate with
 *   python -m toycoder_daemon.wire.typescript > clients/vscode/src/shared/protocol.ts
 * (tests/unit/wire/test_protocol_ts.py fails when this file is stale). docs/protocol.md explains every field.
 * Shared by the extension host and the webview (types only, no runtime code but the names).
 */
"""


def _strip(tp: Any) -> Any:
    """Annotated[X, ...] -> X."""
    return get_args(tp)[0] if get_origin(tp) is typing.Annotated else tp


def _alias_name(tp: Any) -> str | None:
    for name, alias in ALIASES.items():
        if tp == alias or _strip(tp) == _strip(alias):
            return name
    return None


def ts_type(tp: Any, *, top: bool = False) -> str:
    """A Python annotation of a wire field as a TypeScript type."""
    if not top and (name := _alias_name(tp)):
        return name
    tp = _strip(tp)
    origin = get_origin(tp)
    if tp is Any:
        return "unknown"
    if tp is str:
        return "string"
    if tp in (int, float):
        return "number"
    if tp is bool:
        return "boolean"
    if tp is type(None):
        return "null"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp.__name__
    if origin is Literal:
        return " | ".join(_literal(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " | ".join(ts_type(a) for a in get_args(tp))
    if origin is list:
        inner = ts_type(get_args(tp)[0])
        return f"({inner})[]" if " " in inner else f"{inner}[]"
    if origin is dict:
        return f"Record<string, {ts_type(get_args(tp)[1])}>"
    raise TypeError(f"no TypeScript for {tp!r}")


def _literal(value: Any) -> str:
    return f"'{value}'" if isinstance(value, str) else str(value).lower()


def _without_none(tp: Any) -> Any:
    if get_origin(tp) in (Union, types.UnionType):
        rest = [a for a in get_args(tp) if a is not type(None)]
        return rest[0] if len(rest) == 1 else Union[tuple(rest)]  # noqa: UP007 (built at run time)
    return tp


def interface(model: type[BaseModel]) -> str:
    if not model.model_fields:
        return f"export type {model.__name__} = Record<string, never>;\n"
    lines = [f"export interface {model.__name__} {{"]
    for name, field in model.model_fields.items():
        key = field.alias or name
        if field.description:
            lines.append(f"  /** {field.description} */")
        if not field.is_required() and field.default is None:
            lines.append(f"  {key}?: {ts_type(_without_none(field.annotation))};")
        else:
            lines.append(f"  {key}: {ts_type(field.annotation)};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _models() -> list[type[BaseModel]]:
    """Every model reachable from the table, dependencies first (stable order)."""
    document(wire.wire_models())  # their fields' docstrings become the TS comments
    out: dict[type[BaseModel], None] = {}

    def visit(tp: Any) -> None:
        tp = _strip(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp in out:
                return
            for f in tp.model_fields.values():
                visit(f.annotation)
            out[tp] = None
        for a in get_args(tp):
            visit(a)

    for m in wire.wire_models():
        visit(m)
    return list(out)


def _camel(constant: str) -> str:
    head, *rest = constant.lower().split("_")
    return head + "".join(p.title() for p in rest)


def _method_key(method: str) -> str:
    parts = method.removeprefix("toycoder/").split("/")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def generate() -> str:
    out = [HEADER.format(version=wire.PROTOCOL_VERSION), f"export const PROTOCOL_VERSION = {wire.PROTOCOL_VERSION};\n"]
    methods: list[wire.Request | wire.Notification] = [*wire.REQUESTS, *wire.NOTIFICATIONS, *wire.DAEMON_REQUESTS]
    out.append("export const Methods = {\n" + "".join(f"  {_method_key(m.method)}: '{m.method}',\n" for m in methods)
               + "} as const;\n")
    codes = {k: v for k, v in vars(wire_codes).items() if k.isupper() and isinstance(v, int) and v < 0}
    out.append("export const ErrorCodes = {\n" + "".join(f"  {_camel(k)}: {v},\n" for k, v in codes.items())
               + "} as const;\n")
    for name, alias in ALIASES.items():
        out.append(f"export type {name} = {ts_type(alias, top=True)};\n")
    out.extend(interface(m) for m in _models())
    out.append("/** client -> daemon requests: params and result of each method. */\nexport interface Requests {\n"
               + "".join(f"  '{r.method}': {{ params: {r.params.__name__}; result: {r.result.__name__} }};\n"
                         for r in wire.REQUESTS) + "}\n")
    out.append("/** daemon -> client requests: params and result of each method. */\n"
               "export interface DaemonRequests {\n"
               + "".join(f"  '{r.method}': {{ params: {r.params.__name__}; result: {r.result.__name__} }};\n"
                         for r in wire.DAEMON_REQUESTS) + "}\n")
    out.append("/** daemon -> client notifications: params of each method. */\nexport interface Notifications {\n"
               + "".join(f"  '{n.method}': {n.params.__name__};\n" for n in wire.NOTIFICATIONS) + "}\n")
    return "\n".join(out)


if __name__ == "__main__":
    import sys

    sys.stdout.write(generate())
