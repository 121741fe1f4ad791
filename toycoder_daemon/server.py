"""The LSP-framed JSON-RPC face (pygls): one small handler per method, wire <-> app translation.

Handlers are `async def` so `$/cancelRequest` reaches them and nothing blocks a pool thread.
Params are validated with the pydantic wire types: a bad field is -32602 naming the field.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from lsprotocol import types
from pydantic import BaseModel, ValidationError
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method

from . import __version__
from . import protocol as wire
from .app import App
from .background import Background
from .editor_frontend import EditorFrontend
from .errors import ConfigError, ProviderError, SessionBusy, SessionNotFound

log = logging.getLogger(__name__)
P = TypeVar("P", bound=BaseModel)


def rpc_error(code: int, message: str) -> JsonRpcException:
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


def translate_errors(handler: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Map core errors to JSON-RPC errors with our codes."""

    @functools.wraps(handler)
    async def wrapped(ls: ToyCoderServer, params: Any) -> Any:
        try:
            return await handler(ls, params)
        except SessionNotFound as e:
            raise rpc_error(wire.SESSION_NOT_FOUND, str(e)) from None
        except SessionBusy as e:
            raise rpc_error(wire.SESSION_BUSY, str(e)) from None
        except ProviderError as e:
            raise rpc_error(wire.PROVIDER_ERROR, str(e)) from None
        except ConfigError as e:
            raise rpc_error(wire.CONFIG_ERROR, str(e)) from None

    return wrapped


class ToyCoderProtocol(LanguageServerProtocol):
    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams):  # type: ignore[override]
        result = yield from super().lsp_initialize(params)
        result.capabilities.experimental = {"toycoder": {"protocolVersion": wire.PROTOCOL_VERSION}}
        return result

    def _handle_response(self, msg_id, result=None, error=None):  # type: ignore[override]
        # pygls 2.1.1 (#621): a reply that arrives after its waiter was cancelled raised
        # InvalidStateError. Such a reply has nobody to go to; drop it.
        future = self._request_futures.get(msg_id)
        if future is not None and future.done():
            self._request_futures.pop(msg_id, None)
            log.info("dropping late reply to %s (its waiter is gone)", msg_id)
            return
        super()._handle_response(msg_id, result, error)


class ToyCoderServer(LanguageServer):
    def __init__(self, config_path: str | None = None) -> None:
        from .rpc_io import raw_converter

        super().__init__(
            "toycoder-daemon", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full,
            protocol_cls=ToyCoderProtocol, converter_factory=raw_converter,
        )
        self.config_path = config_path
        self.app: App | None = None
        self.client_toycoder: dict[str, Any] = {}
        self.initialized = False
        self.background = Background()

    def get_app(self) -> App:
        if self.app is None:
            raise rpc_error(wire.SERVER_NOT_INITIALIZED, "the daemon is not initialized")
        return self.app

    def client_can(self, feature: str) -> bool:
        return bool(self.client_toycoder.get(feature))

    def supports_progress(self) -> bool:
        window = getattr(self.client_capabilities, "window", None)
        return bool(window and window.work_done_progress)

    def permission_timeout(self) -> float:
        return self.app.config.permissions.timeout_seconds if self.app else 600.0

    def show_message(self, level: str, message: str) -> None:
        kinds = {"error": types.MessageType.Error, "warning": types.MessageType.Warning}
        self.window_show_message(types.ShowMessageParams(type=kinds.get(level, types.MessageType.Info), message=message))

    def report_server_error(self, error: Exception, source: Any) -> None:
        log.error("server error (%s): %s", getattr(source, "__name__", source), error)


server = ToyCoderServer()


def session_info(summary: dict[str, Any]) -> dict[str, Any]:
    return {"sessionId": summary["id"], "title": summary["title"], "createdAt": wire.iso_time(summary["createdAt"]),
            "updatedAt": wire.iso_time(summary["updatedAt"]), "messageCount": summary["messageCount"]}


# ---- lifecycle --------------------------------------------------------------------------------

@server.feature(types.INITIALIZE)
def on_initialize(ls: ToyCoderServer, params: types.InitializeParams) -> None:
    root = ls.workspace.root_path
    if not root and params.workspace_folders:
        from pygls.uris import to_fs_path

        root = to_fs_path(params.workspace_folders[0].uri)
    options = params.initialization_options if isinstance(params.initialization_options, dict) else {}
    experimental = params.capabilities.experimental if isinstance(params.capabilities.experimental, dict) else {}
    ls.client_toycoder = experimental.get("toycoder") or {}
    ls.app = App.open(root or os.getcwd(), options.get("configPath") or ls.config_path)
    ls.app.on_notice = ls.show_message
    log.info("workspace %s, config %s", ls.app.workspace.root, ls.app.config_path or "(built-in defaults)")


@server.feature(types.INITIALIZED)
def on_initialized(ls: ToyCoderServer, params: Any) -> None:
    app = ls.get_app()
    if app.config_error:
        ls.show_message("error", str(app.config_error))
    ls.background.run(app.start())


# ---- open documents: read_file shows the editor's text, unsaved changes included -------------

def _doc_path(uri: str):
    from pathlib import Path

    from pygls.uris import to_fs_path

    fs = to_fs_path(uri)
    return Path(fs).resolve() if fs else None


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: ToyCoderServer, params: types.DidOpenTextDocumentParams) -> None:
    if ls.app and (p := _doc_path(params.text_document.uri)):
        ls.app.workspace.open_documents[p] = params.text_document.text


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: ToyCoderServer, params: types.DidChangeTextDocumentParams) -> None:
    if ls.app and (p := _doc_path(params.text_document.uri)) and params.content_changes:
        ls.app.workspace.open_documents[p] = params.content_changes[-1].text  # full sync


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: ToyCoderServer, params: types.DidCloseTextDocumentParams) -> None:
    if ls.app and (p := _doc_path(params.text_document.uri)):
        ls.app.workspace.open_documents.pop(p, None)


# ---- sessions ---------------------------------------------------------------------------------

@server.feature(wire.SESSION_NEW)
@translate_errors
async def session_new(ls: ToyCoderServer, params: Any) -> dict[str, Any]:
    p = parse(wire.SessionNewParams, params)
    return session_info(ls.get_app().new_session(p.title).summary())


@server.feature(wire.SESSION_LIST)
@translate_errors
async def session_list(ls: ToyCoderServer, params: Any) -> dict[str, Any]:
    parse(wire.EmptyParams, params)
    return {"sessions": [session_info(s) for s in ls.get_app().list_sessions()]}


@server.feature(wire.SESSION_LOAD)
@translate_errors
async def session_load(ls: ToyCoderServer, params: Any) -> dict[str, Any]:
    p = parse(wire.SessionIdParams, params)
    s = ls.get_app().peek(p.session_id)
    return {"session": session_info(s.summary()), "transcript": s.transcript()}


@server.feature(wire.SESSION_DELETE)
@translate_errors
async def session_delete(ls: ToyCoderServer, params: Any) -> dict[str, Any]:
    p = parse(wire.SessionIdParams, params)
    ls.get_app().delete_session(p.session_id)
    return {}


# ---- turns ------------------------------------------------------------------------------------

@server.feature(wire.PROMPT)
@translate_errors
async def prompt(ls: ToyCoderServer, params: Any) -> dict[str, Any]:
    p = parse(wire.PromptParams, params)
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
    r = outcome.result
    u = r.usage
    result = {"turnId": outcome.turn_id, "stopReason": r.stop_reason, "text": r.text,
              "usage": {"promptTokens": u.prompt_tokens, "completionTokens": u.completion_tokens,
                        "totalTokens": u.total_tokens}}
    if outcome.action:
        result["action"] = outcome.action
    return result


@server.feature(wire.CANCEL)
@translate_errors
async def cancel(ls: ToyCoderServer, params: Any) -> dict[str, Any]:
    p = parse(wire.SessionIdParams, params)
    return {"cancelled": ls.get_app().cancel(p.session_id)}


# ---- tools, models ----------------------------------------------------------------------------

@server.feature(wire.TOOLS_LIST)
@translate_errors
async def tools_list(ls: ToyCoderServer, params: Any) -> dict[str, Any]:
    p = parse(wire.SessionIdParams, params)
    return {"tools": ls.get_app().tool_infos(p.session_id)}


@server.feature(wire.TOOLS_SET_ENABLED)
@translate_errors
async def tools_set_enabled(ls: ToyCoderServer, params: Any) -> dict[str, Any]:
    p = parse(wire.SetEnabledParams, params)
    try:
        ls.get_app().set_tool_enabled(p.session_id, p.name, p.enabled)
    except KeyError:
        raise rpc_error(wire.INVALID_PARAMS, f"Invalid params: name: unknown tool {p.name!r}") from None
    return {}


@server.feature(wire.COMMANDS_LIST)
@translate_errors
async def commands_list(ls: ToyCoderServer, params: Any) -> dict[str, Any]:
    parse(wire.EmptyParams, params)
    from .commands.builtin import commands

    return {"commands": [{"name": c.name, "usage": c.usage, "help": c.help, "aliases": c.aliases}
                         for c in commands.all()]}


@server.feature(wire.MODELS_LIST)
@translate_errors
async def models_list(ls: ToyCoderServer, params: Any) -> dict[str, Any]:
    p = parse(wire.ModelsListParams, params)
    return ls.get_app().models_info(p.session_id)


@server.feature(wire.MODELS_SET)
@translate_errors
async def models_set(ls: ToyCoderServer, params: Any) -> dict[str, Any]:
    p = parse(wire.ModelsSetParams, params)
    return ls.get_app().set_model(p.session_id, p.provider, p.model)
