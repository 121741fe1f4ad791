"""One request of the method table (protocol.REQUESTS) on the LSP face: its params validated by the
table's pydantic type (a bad field is -32602 naming the field), the core's errors mapped to their
codes, and the handler's result dumped through the table's Result type (a mismatch is a daemon bug:
logged, answered -32603). server.py registers each handler with pygls through `call`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError
from pygls.exceptions import JsonRpcException

from toycoder_daemon.core.errors import BadInput, ConfigError, InvalidSessionId, ProviderError, SessionBusy, SessionNotFound
from toycoder_daemon.wire import protocol as wire

log = logging.getLogger(__name__)
P = TypeVar("P", bound=BaseModel)
H = TypeVar("H")


def rpc_error(code: int, message: str) -> JsonRpcException:
    """The error answer pygls writes for the exception a handler raises."""
    return JsonRpcException(message=message, code=code)


def parse(model: type[P], params: Any) -> P:
    if params is None or params == []:  # Lua and others encode an empty object as []
        params = {}
    if not isinstance(params, dict):
        raise rpc_error(wire.INVALID_PARAMS, f"Invalid params: expected an object, got {type(params).__name__}")
    try:
        return model.model_validate(params)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(params)"
        raise rpc_error(wire.INVALID_PARAMS, f"Invalid params: {field}: {err['msg']}") from None


CORE_ERRORS: dict[type[Exception], int] = {SessionNotFound: wire.SESSION_NOT_FOUND, SessionBusy: wire.SESSION_BUSY,
                                           ProviderError: wire.PROVIDER_ERROR, ConfigError: wire.CONFIG_ERROR,
                                           InvalidSessionId: wire.INVALID_PARAMS, BadInput: wire.INVALID_PARAMS}


def dump_result(request: wire.Request, result: Any) -> dict[str, Any]:
    """The handler's result through the declared Result type; anything else is our bug."""
    try:
        if not isinstance(result, request.result):
            raise TypeError(f"expected {request.result.__name__}, got {type(result).__name__}")
        dumped: dict[str, Any] = result.model_dump(by_alias=True, exclude_none=True, mode="json", warnings="error")
        return dumped
    except (TypeError, PydanticSerializationError) as e:
        log.error("bad result for %s: %s", request.method, e)
        raise rpc_error(wire.INTERNAL_ERROR, f"Internal error: the daemon built a bad {request.method} result "
                        "(see the daemon log)") from None


async def call(request: wire.Request, handler: Callable[[H, Any], Awaitable[wire.Wire]], host: H,
               params: Any) -> dict[str, Any]:
    """One request of the table: params validated, core errors mapped, result checked."""
    p = parse(request.params, params)
    try:
        result = await handler(host, p)
    except tuple(CORE_ERRORS) as e:
        raise rpc_error(next(c for t, c in CORE_ERRORS.items() if isinstance(e, t)), str(e)) from None
    return dump_result(request, result)
