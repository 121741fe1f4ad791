"""The LSP face's request handling that needs no pygls: params in, core errors mapped, the result
dumped through the method table, and the handlers a new process answers before pygls is imported
(lsp_early.py: `initialized` and the session requests). server.py registers these same functions
with pygls, so both paths answer from one place.

The handlers take any `Host`: pygls' ToyCoderServer, or lsp_early's stand-in while pygls loads.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from . import lsp_mapping as to_wire
from . import protocol as wire
from .app import App
from .editor_frontend import EditorFrontend, EditorLink
from .errors import ConfigError, ProviderError, SessionBusy, SessionNotFound
from .sessions.session import TranscriptEntry
from .sessions.store import SessionSummary

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


class Notifier(Protocol):
    def notify(self, method: str, params: Any) -> None: ...


class TurnHost(Host, EditorLink, Protocol):
    """A host a turn runs on: its EditorFrontends talk to the client through it."""


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
W = TypeVar("W", bound=wire.Wire)


def _core_error(e: Exception) -> RpcError:
    return RpcError(next(c for t, c in CORE_ERRORS.items() if isinstance(e, t)), str(e))


async def call(request: wire.Request, handler: Callable[[H, Any], Awaitable[wire.Wire]], host: H,
               params: Any) -> dict[str, Any]:
    """One request of the table: params validated, core errors mapped (RpcError), result checked."""
    p = parse(request.params, params)
    try:
        result = await handler(host, p)
    except tuple(CORE_ERRORS) as e:
        raise _core_error(e) from None
    return dump_result(request, result)


def call_now(request: wire.Request, handler: Callable[[H, Any], wire.Wire], host: H, params: Any) -> dict[str, Any]:
    """`call` for an `instant` handler's `now`, in the caller's step."""
    p = parse(request.params, params)
    try:
        result = handler(host, p)
    except tuple(CORE_ERRORS) as e:
        raise _core_error(e) from None
    return dump_result(request, result)


def instant(now: Callable[[H, Any], W]) -> Callable[[H, Any], Awaitable[W]]:
    """A handler that waits for nothing (no I/O, no await), as the async handler every path takes;
    its `now` lets lsp_direct answer it in the loop pass its request arrives in."""

    @functools.wraps(now)
    async def handler(host: H, p: Any) -> W:
        return now(host, p)

    handler.now = now  # type: ignore[attr-defined]
    return handler


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


@instant
def session_new(ls: Host, p: wire.SessionNewParams) -> wire.SessionInfo:
    return to_wire.session_info(ls.get_app().new_session(p.title).summary())


async def session_list(ls: Host, p: wire.EmptyParams) -> wire.SessionList:
    rows = await asyncio.to_thread(ls.get_app().list_sessions)  # file I/O: never on the event loop
    return wire.SessionList(sessions=[to_wire.session_info(s) for s in rows])


async def session_load(ls: Host, p: wire.SessionIdParams) -> wire.SessionLoadResult:
    s = await ls.get_app().load(p.session_id)  # open here from now on: it hears turns made elsewhere
    return wire.SessionLoadResult(session=to_wire.session_info(s.summary()),
                                  transcript=[to_wire.transcript_entry(e) for e in ls.get_app().transcript(s)])


def session_changed(ls: Notifier, session_id: str, entries: list[TranscriptEntry], reset: bool) -> None:
    """Another daemon added to a session this client has open."""
    update = wire.SessionChangedUpdate(transcript=[to_wire.transcript_entry(e) for e in entries], reset=reset)
    ls.notify(wire.UPDATE, wire.UpdateParams(session_id=session_id, turn_id="", update=update).dump())


def session_info_changed(ls: Notifier, summary: SessionSummary, turn_id: str) -> None:
    update = wire.SessionInfoUpdate(session=to_wire.session_info(summary))
    ls.notify(wire.UPDATE, wire.UpdateParams(session_id=summary.id, turn_id=turn_id, update=update).dump())


async def prompt(ls: TurnHost, p: wire.PromptParams) -> wire.PromptResult:
    if not p.text.strip():
        raise RpcError(wire.INVALID_PARAMS, "Invalid params: text: the prompt is empty")
    frontends: list[EditorFrontend] = []

    def frontend_for(session_id: str, turn_id: str) -> EditorFrontend:
        f = EditorFrontend(ls, session_id, turn_id)
        f.begin_progress()
        frontends.append(f)
        return f

    try:
        outcome = await ls.get_app().prompt(p.session_id, p.text, frontend_for)
    finally:
        for f in frontends:  # every update reaches the client before the answer does
            f.end_progress("done")
    return to_wire.prompt_result(outcome)


@instant
def cancel(ls: Host, p: wire.SessionIdParams) -> wire.CancelResult:
    return wire.CancelResult(cancelled=ls.get_app().cancel(p.session_id))


# ---- open documents: read_file shows the editor's text, unsaved changes included -------------
# pygls hands these its lsprotocol structures, the early path plain dicts: both pass the fields.

def _doc_path(uri: str) -> Path | None:
    from pygls.uris import to_fs_path  # a small module: no lsprotocol

    fs = to_fs_path(uri)
    return Path(fs).resolve() if fs else None


def document_opened(app: App | None, uri: str, text: str, version: int | None) -> None:
    if app and (p := _doc_path(uri)):
        app.workspace.set_document(p, text, version)


def document_changed(app: App | None, uri: str, texts: list[str], version: int | None) -> None:
    if app and (p := _doc_path(uri)) and texts:
        # full sync; the version is what a versioned workspace/applyEdit is checked against
        app.workspace.set_document(p, texts[-1], version)


def document_closed(app: App | None, uri: str) -> None:
    if app and (p := _doc_path(uri)):
        app.workspace.close_document(p)


EARLY: dict[str, Callable[[Any, Any], Awaitable[wire.Wire]]] = {
    wire.SESSION_NEW: session_new, wire.SESSION_LIST: session_list, wire.SESSION_LOAD: session_load,
    wire.CANCEL: cancel,
}
"""The requests lsp_early.py answers while pygls loads (server.HANDLERS has them too); `prompt` as
well, on an EditorLink of its own (lsp_early_link.py)."""
