"""The LSP-framed JSON-RPC face (pygls): one small typed handler per method, registered from the
method table in protocol.py by `make_server`.

Handlers are `async def` so `$/cancelRequest` reaches them and nothing blocks a pool thread. The
table's Params type validates what comes in (a bad field is -32602 naming the field); the
handler's result is dumped through the table's Result type (a mismatch is a daemon bug: logged,
answered -32603). Core values become wire types in lsp_mapping.py.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import lsp_method

from . import __version__
from . import lsp_mapping as to_wire
from . import protocol as wire
from .app import App
from .background import Background
from .checkpoints import UnknownCheckpoint
from .commands.builtin import commands
from .commands.served import with_served
from .editor_frontend import EditorFrontend
from .lsp_calls import (
    RpcError,
    call,
    cancel,
    document_changed,
    document_closed,
    document_opened,
    instant,
    on_initialized,
    prompt,
    session_changed,
    session_info_changed,
    session_list,
    session_load,
    session_new,
    workspace_root,
)
from .modes import available_modes
from .pygls_adapter import QuietClientMistakes, raw_converter

log = logging.getLogger(__name__)


def rpc_error(code: int, message: str) -> JsonRpcException:
    return JsonRpcException(message=message, code=code)


Handler = Callable[["ToyCoderServer", Any], Awaitable[wire.Wire]]


def bind(request: wire.Request, handler: Handler) -> Callable[[ToyCoderServer, Any], Awaitable[dict[str, Any]]]:
    """A pygls feature for one row of the table: params in, core errors mapped, result checked."""

    @functools.wraps(handler)
    async def feature(ls: ToyCoderServer, params: Any) -> dict[str, Any]:
        try:
            return await call(request, handler, ls, params)
        except RpcError as e:
            raise rpc_error(e.code, e.message) from None

    return feature


class ToyCoderProtocol(QuietClientMistakes):
    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams):  # type: ignore[no-untyped-def]
        result = yield from super().lsp_initialize(params)
        result.capabilities.experimental = {"toycoder": {"protocolVersion": wire.PROTOCOL_VERSION,
                                                         "availableModes": available_modes()}}
        return result


class ToyCoderServer(LanguageServer):
    """pygls' server plus what the handlers and the EditorFrontend need (its `EditorLink`)."""

    def __init__(self, config_path: str | None = None) -> None:
        self.converter = raw_converter()
        super().__init__(
            "toycoder-daemon", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full,
            protocol_cls=ToyCoderProtocol, converter_factory=lambda: self.converter,
        )
        self.config_path = config_path
        self.app: App | None = None
        self.client_toycoder: dict[str, Any] = {}
        self.early_documents: dict[str, tuple[str, int, str]] = {}
        """Documents lsp_early.py took (didOpen) before pygls was in: uri -> (languageId, version, text)."""
        self.background = Background()

    def get_app(self) -> App:
        if self.app is None:
            raise rpc_error(wire.SERVER_NOT_INITIALIZED, "the daemon is not initialized")
        return self.app

    # ---- EditorLink ---------------------------------------------------------------------------

    def client_can(self, feature: str) -> bool:
        return bool(self.client_toycoder.get(feature))

    def client_can_apply_edit(self) -> bool:
        workspace = getattr(self.client_capabilities, "workspace", None)
        return bool(workspace and workspace.apply_edit)

    def edit_version(self, path: Path, before: str) -> int | None:
        """The buffer version to send with an edit of `path` made against `before`: None (an
        unversioned edit) unless the client declared workspace.workspaceEdit.documentChanges and
        the daemon knows the version of that text."""
        workspace = getattr(self.client_capabilities, "workspace", None)
        edit = workspace and workspace.workspace_edit
        if self.app is None or not (edit and edit.document_changes):
            return None
        return self.app.workspace.document_version(path, before)

    def supports_progress(self) -> bool:
        window = getattr(self.client_capabilities, "window", None)
        return bool(window and window.work_done_progress)

    def permission_timeout(self) -> float:
        return self.app.config.permissions.timeout_seconds if self.app else 600.0

    def notify(self, method: str, params: Any) -> None:
        self.protocol.notify(method, params)

    def send_request(self, method: str, params: Any, msg_id: str) -> asyncio.Future[Any]:
        return self.protocol.send_request_async(method, params, msg_id=msg_id)  # type: ignore[no-any-return]

    async def progress_create(self, token: str) -> None:
        await self.work_done_progress.create_async(token)

    def progress_begin(self, token: str, message: str) -> None:
        self.work_done_progress.begin(token, types.WorkDoneProgressBegin(title="ToyCoder", message=message,
                                                                         cancellable=True))

    def progress_report(self, token: str, message: str) -> None:
        self.work_done_progress.report(token, types.WorkDoneProgressReport(message=message))

    def progress_end(self, token: str, message: str) -> None:
        self.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))

    def send_show_message_request(self, kind: int, message: str, actions: list[str],
                                  msg_id: str) -> asyncio.Future[Any]:
        params = types.ShowMessageRequestParams(
            type=types.MessageType(kind), message=message, actions=[types.MessageActionItem(title=a) for a in actions])
        return self.send_request(types.WINDOW_SHOW_MESSAGE_REQUEST, params, msg_id)

    def drop_request(self, msg_id: str) -> None:
        self.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))

    def show_message(self, level: str, message: str) -> None:
        kinds = {"error": types.MessageType.Error, "warning": types.MessageType.Warning}
        kind = kinds.get(level, types.MessageType.Info)
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def report_server_error(self, error: Exception, source: Any) -> None:
        # pygls reports only daemon faults here: client mistakes are answered quietly (pygls_adapter)
        log.error("server error (%s): %s", getattr(source, "__name__", source), error)


# ---- lifecycle --------------------------------------------------------------------------------

def on_initialize(ls: ToyCoderServer, params: types.InitializeParams) -> None:
    options = params.initialization_options if isinstance(params.initialization_options, dict) else {}
    experimental = params.capabilities.experimental if isinstance(params.capabilities.experimental, dict) else {}
    ls.client_toycoder = experimental.get("toycoder") or {}
    if ls.app is None:  # else lsp_early.py opened it from these params while pygls loaded
        root = workspace_root(params.root_uri, params.root_path, [f.uri for f in params.workspace_folders or []])
        ls.app = App.open(root, options.get("configPath") or ls.config_path)
    for uri, (language, version, text) in ls.early_documents.items():  # pygls refuses news of documents it never saw
        ls.workspace.put_text_document(types.TextDocumentItem(uri=uri, language_id=language, version=version, text=text))
    ls.app.on_notice = ls.show_message
    ls.app.sharing.on_changed = functools.partial(session_changed, ls)
    ls.app.on_session_info = functools.partial(session_info_changed, ls)
    log.info("workspace %s, config %s", ls.app.workspace.root, ls.app.config_path or "(built-in defaults)")


# ---- open documents: read_file shows the editor's text, unsaved changes included -------------

def did_open(ls: ToyCoderServer, params: types.DidOpenTextDocumentParams) -> None:
    d = params.text_document
    document_opened(ls.app, d.uri, d.text, d.version)


def did_change(ls: ToyCoderServer, params: types.DidChangeTextDocumentParams) -> None:
    document_changed(ls.app, params.text_document.uri, [c.text for c in params.content_changes],
                     params.text_document.version)


def did_close(ls: ToyCoderServer, params: types.DidCloseTextDocumentParams) -> None:
    document_closed(ls.app, params.text_document.uri)


# ---- toycoder/* handlers (typed params in, typed results out) ---------------------------------

@instant
def session_delete(ls: ToyCoderServer, p: wire.SessionIdParams) -> wire.EmptyResult:
    ls.get_app().delete_session(p.session_id)
    return wire.EmptyResult()


async def session_close(ls: ToyCoderServer, p: wire.SessionIdParams) -> wire.EmptyResult:
    await ls.get_app().close_session(p.session_id)
    return wire.EmptyResult()


@instant
def session_set_mode(ls: ToyCoderServer, p: wire.SetModeParams) -> wire.SessionInfo:
    try:
        return to_wire.session_info(ls.get_app().set_mode(p.session_id, p.mode))
    except ValueError as e:
        raise rpc_error(wire.INVALID_PARAMS, f"Invalid params: mode: {e}") from None


@instant
def tools_list(ls: ToyCoderServer, p: wire.SessionIdParams) -> wire.ToolList:
    return wire.ToolList(tools=[to_wire.tool_info(t) for t in ls.get_app().tool_infos(p.session_id)])


@instant
def tools_set_enabled(ls: ToyCoderServer, p: wire.SetEnabledParams) -> wire.EmptyResult:
    try:
        ls.get_app().set_tool_enabled(p.session_id, p.name, p.enabled)
    except KeyError:
        raise rpc_error(wire.INVALID_PARAMS, f"Invalid params: name: unknown tool {p.name!r}") from None
    return wire.EmptyResult()


@instant
def commands_list(ls: ToyCoderServer, p: wire.EmptyParams) -> wire.CommandList:
    return wire.CommandList(commands=[to_wire.command_info(c) for c in commands.all()])


async def models_list(ls: ToyCoderServer, p: wire.ModelsListParams) -> wire.ModelsResult:
    app = ls.get_app()  # with what the server itself lists (issue 18)
    session = app.peek(p.session_id) if p.session_id else None
    return to_wire.models_result(await with_served(app, app.models_info(p.session_id), session))


@instant
def models_set(ls: ToyCoderServer, p: wire.ModelsSetParams) -> wire.ModelsResult:
    return to_wire.models_result(ls.get_app().set_model(p.session_id, p.provider, p.model))


@instant
def checkpoint_list(ls: ToyCoderServer, p: wire.SessionIdParams) -> wire.CheckpointList:
    return to_wire.checkpoint_list(ls.get_app().checkpoint_list(p.session_id))


async def checkpoint_restore(ls: ToyCoderServer, p: wire.RestoreParams) -> wire.RestoreResult:
    """The restored files' `changes` update (clients reload them) goes out before the answer."""
    try:
        result = await ls.get_app().restore(p.session_id, p.turn_id, p.paths, bool(p.force),
                                            lambda sid, turn_id: EditorFrontend(ls, sid, turn_id))
    except UnknownCheckpoint as e:
        raise rpc_error(wire.INVALID_PARAMS, f"Invalid params: turnId: {e}") from None
    return to_wire.restore_result(result)


HANDLERS: dict[str, Handler] = {
    wire.SESSION_NEW: session_new, wire.SESSION_LIST: session_list, wire.SESSION_LOAD: session_load,
    wire.SESSION_DELETE: session_delete, wire.PROMPT: prompt, wire.CANCEL: cancel, wire.TOOLS_LIST: tools_list,
    wire.TOOLS_SET_ENABLED: tools_set_enabled, wire.COMMANDS_LIST: commands_list, wire.MODELS_LIST: models_list,
    wire.MODELS_SET: models_set, wire.CHECKPOINT_LIST: checkpoint_list, wire.CHECKPOINT_RESTORE: checkpoint_restore,
    wire.SESSION_CLOSE: session_close, wire.SESSION_SET_MODE: session_set_mode,
}
"""One handler per row of protocol.REQUESTS (make_server refuses a table row without one)."""


def make_server(config_path: str | None = None) -> ToyCoderServer:
    """A fresh server: LSP lifecycle and document features, then every toycoder/* request of the table."""
    ls = ToyCoderServer(config_path)
    ls.feature(types.INITIALIZE)(on_initialize)
    ls.feature(types.INITIALIZED)(on_initialized)
    ls.feature(types.TEXT_DOCUMENT_DID_OPEN)(did_open)
    ls.feature(types.TEXT_DOCUMENT_DID_CHANGE)(did_change)
    ls.feature(types.TEXT_DOCUMENT_DID_CLOSE)(did_close)
    missing = {r.method for r in wire.REQUESTS} - set(HANDLERS)
    if missing:
        raise RuntimeError(f"no handler for {sorted(missing)}")
    for request in wire.REQUESTS:
        ls.feature(request.method)(bind(request, HANDLERS[request.method]))
    return ls
