"""The LSP face's request handling that needs no pygls: params in, core errors mapped, the result
dumped through the method table, and the handlers a new process answers before pygls is imported
(lsp_early.py: `initialized` and the session requests). server.py registers these same functions
with pygls, so both paths answer from one place.

The handlers take any `Host`: pygls' ToyCoderServer, or lsp_early's stand-in while pygls loads.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from . import lsp_mapping as to_wire
from . import protocol as wire
from .app import App
from .errors import ConfigError, ProviderError, SessionBusy, SessionNotFound

log = logging.getLogger(__name__)
P = TypeVar("P", bound=BaseModel)


class RpcError(Exception):
    """A JSON-RPC error answer (server.py turns it into pygls' JsonRpcException)."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = code, message


class Runner(Protocol):
    def run(self, work: Coroutine[Any, Any, Any]) -> None: ...


class Host(Protocol):
    """What these handlers use of the server."""

    @property
    def background(self) -> Runner: ...

    def get_app(self) -> App: ...

    def show_message(self, level: str, message: str) -> None: ...


def parse(model: type[P], params: Any) -> P:
    if params is None or params == []:  # Lua and others encode an empty object as []
        params = {}
    if not isinstance(params, dict):
        raise RpcError(wire.INVALID_PARAMS, f"Invalid params: expected an object, got {type(params).__name__}")
    try:
        return model.model_validate(params)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(params)"
        raise RpcError(wire.INVALID_PARAMS, f"Invalid params: {field}: {err['msg']}") from None


CORE_ERRORS: dict[type[Exception], int] = {SessionNotFound: wire.SESSION_NOT_FOUND, SessionBusy: wire.SESSION_BUSY,
                                           ProviderError: wire.PROVIDER_ERROR, ConfigError: wire.CONFIG_ERROR}


def dump_result(request: wire.Request, result: Any) -> dict[str, Any]:
    """The handler's result through the declared Result type; anything else is our bug."""
    try:
        if not isinstance(result, request.result):
            raise TypeError(f"expected {request.result.__name__}, got {type(result).__name__}")
        dumped: dict[str, Any] = result.model_dump(by_alias=True, exclude_none=True, mode="json", warnings="error")
        return dumped
    except (TypeError, PydanticSerializationError) as e:
        log.error("bad result for %s: %s", request.method, e)
        raise RpcError(wire.INTERNAL_ERROR, f"Internal error: the daemon built a bad {request.method} result "
                       "(see the daemon log)") from None


H = TypeVar("H")


async def call(request: wire.Request, handler: Callable[[H, Any], Awaitable[wire.Wire]], host: H,
               params: Any) -> dict[str, Any]:
    """One request of the table: params validated, core errors mapped (RpcError), result checked."""
    p = parse(request.params, params)
    try:
        result = await handler(host, p)
    except tuple(CORE_ERRORS) as e:
        code = next(c for t, c in CORE_ERRORS.items() if isinstance(e, t))
        raise RpcError(code, str(e)) from None
    return dump_result(request, result)


def workspace_root(root_uri: str | None, root_path: str | None, folder_uris: list[str]) -> str:
    """From `initialize`: pygls' rule for its workspace root, else the first workspace folder, else
    the daemon's cwd."""
    from pygls.uris import from_fs_path, to_fs_path  # a small module: no lsprotocol

    if root_path is not None and root_uri is None:
        root_uri = from_fs_path(root_path)
    root = to_fs_path(root_uri) if root_uri is not None else None
    if not root and folder_uris:
        root = to_fs_path(folder_uris[0])
    return root or os.getcwd()


# ---- what a new process answers before pygls is in (and pygls after) ---------------------------

def on_initialized(ls: Host, params: Any) -> None:
    app = ls.get_app()
    if app.config_error:
        ls.show_message("error", str(app.config_error))
    ls.background.run(app.start())


async def session_new(ls: Host, p: wire.SessionNewParams) -> wire.SessionInfo:
    return to_wire.session_info(ls.get_app().new_session(p.title).summary())


async def session_list(ls: Host, p: wire.EmptyParams) -> wire.SessionList:
    rows = await asyncio.to_thread(ls.get_app().list_sessions)  # file I/O: never on the event loop
    return wire.SessionList(sessions=[to_wire.session_info(s) for s in rows])


async def session_load(ls: Host, p: wire.SessionIdParams) -> wire.SessionLoadResult:
    s = await ls.get_app().load(p.session_id)  # open here from now on: it hears turns made elsewhere
    return wire.SessionLoadResult(session=to_wire.session_info(s.summary()),
                                  transcript=[to_wire.transcript_entry(e) for e in ls.get_app().transcript(s)])


EARLY: dict[str, Callable[[Host, Any], Awaitable[wire.Wire]]] = {
    wire.SESSION_NEW: session_new, wire.SESSION_LIST: session_list, wire.SESSION_LOAD: session_load,
}
"""The requests lsp_early.py answers while pygls loads (server.HANDLERS has them too)."""
