"""The EditorLink of a turn that starts before pygls is in (lsp_early.py): the same frames the pygls
server writes for a turn (updates, permission and edit requests, $/progress), written through the
early path's writer (pygls' own once it is in), and the client's responses to its requests routed
back here by id, before and after the hand-over (pygls never knew those ids). Also what the early
path reads of the answered `initialize`'s params and of open-document news, where they are plain
enough to read as pygls does."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .app import App
from .lsp_calls import Host, RpcError, Runner, document_changed, document_closed, document_opened, workspace_root

# LSP's own methods: pygls writes their lsprotocol message types, whose keys come in this order
_TYPED_REQUESTS = frozenset({"window/showMessageRequest", "window/workDoneProgress/create", "workspace/applyEdit"})


@dataclass
class ActionItem:
    """A showMessageRequest answer as pygls hands it over (EditorFrontend reads `.title`)."""

    title: str


def _dicts(value: Any, *keys: str) -> bool:
    for key in keys:
        if value is not None and not isinstance(value, dict):
            return False
        value = (value or {}).get(key)
    return value is None or isinstance(value, dict)


def app_params(params: Any) -> tuple[str, str | None] | None:
    """(workspace root, config path) from `initialize` params, as server.on_initialize reads them;
    None when they are not plain enough to be sure pygls reads them the same (pygls then opens the
    App itself)."""
    if not isinstance(params, dict):
        return None
    root_uri, root_path, folders = params.get("rootUri"), params.get("rootPath"), params.get("workspaceFolders")
    options = params.get("initializationOptions")
    config = options.get("configPath") if isinstance(options, dict) else None
    if not all(v is None or isinstance(v, str) for v in (root_uri, root_path, config)):
        return None
    if folders is not None and not (isinstance(folders, list) and all(
            isinstance(f, dict) and isinstance(f.get("uri"), str) and isinstance(f.get("name"), str) for f in folders)):
        return None
    return workspace_root(root_uri, root_path, [f["uri"] for f in folders or []]), config or None


def plain_capabilities(params: dict[str, Any]) -> dict[str, Any] | None:
    """The client's capabilities when they are plain enough to read as pygls structures them; None
    leaves turns to pygls."""
    caps = params.get("capabilities")
    if not isinstance(caps, dict) or not all(_dicts(caps, *path) for path in (
            ("workspace",), ("workspace", "workspaceEdit"), ("window",), ("experimental",),
            ("experimental", "toycoder"))):
        return None
    return caps


DOCUMENTS = ("textDocument/didOpen", "textDocument/didChange", "textDocument/didClose")
Documents = dict[str, tuple[str, int, str]]
"""Documents opened on the early path: uri -> (languageId, version, text). pygls keeps its own copy
and refuses a didChange of one it was not told about, so these are handed to it when it takes over."""


def document(app: App, documents: Documents, method: str, params: Any) -> bool:
    """An open document's news, handled (and kept in `documents`) when its params are what pygls
    structures without a complaint; anything else is left to pygls (which answers odd ones its own way)."""
    doc = params.get("textDocument") if isinstance(params, dict) else None
    uri, version = (doc.get("uri"), doc.get("version")) if isinstance(doc, dict) else (None, None)
    if not isinstance(uri, str):
        return False
    if method == "textDocument/didClose":
        document_closed(app, uri)
        documents.pop(uri, None)
        return True
    if not isinstance(version, int) or isinstance(version, bool) or not -2**31 <= version < 2**31:
        return False  # pygls' structures take an int32 only
    if method == "textDocument/didOpen":
        text, language = doc.get("text"), doc.get("languageId")  # type: ignore[union-attr]
        if not (isinstance(text, str) and isinstance(language, str)):
            return False
        document_opened(app, uri, text, version)
        documents[uri] = (language, version, text)
        return True
    changes = params.get("contentChanges")
    if not (isinstance(changes, list) and changes and all(
            isinstance(c, dict) and set(c) == {"text"} and isinstance(c["text"], str) for c in changes)):
        return False  # ranged changes or none: pygls' structures decide
    document_changed(app, uri, [c["text"] for c in changes], version)
    if uri in documents:
        documents[uri] = (documents[uri][0], version, changes[-1]["text"])
    return True


def _serialisable(params: Any) -> Any:
    if hasattr(params, "__attrs_attrs__"):  # workspace/applyEdit's lsprotocol params: the import waits
        from lsprotocol import converters

        return converters.get_converter().unstructure(params)
    return params


class EarlyLink:
    """lsp_calls.TurnHost for a turn started on the early path."""

    def __init__(self, host: Host, capabilities: dict[str, Any], write: Callable[[dict[str, Any]], None]):
        self.host = host
        self._caps = capabilities
        self._write = write
        self.pending: dict[Any, asyncio.Future[Any]] = {}
        """Requests to the client waiting for their response, by id."""

    # ---- Host ------------------------------------------------------------------------------------

    @property
    def background(self) -> Runner:
        return self.host.background

    def get_app(self) -> App:
        return self.host.get_app()

    def show_message(self, level: str, message: str) -> None:
        self.host.show_message(level, message)

    # ---- what the client said it can do (server.py reads the same from pygls' structures) -------

    def _cap(self, *path: str) -> Any:
        value: Any = self._caps
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return value

    def client_can(self, feature: str) -> bool:
        return bool(self._cap("experimental", "toycoder", feature))

    def client_can_apply_edit(self) -> bool:
        return bool(self._cap("workspace", "applyEdit"))

    def edit_version(self, path: Path, before: str) -> int | None:
        if not self._cap("workspace", "workspaceEdit", "documentChanges"):
            return None
        return self.get_app().workspace.document_version(path, before)

    def supports_progress(self) -> bool:
        return bool(self._cap("window", "workDoneProgress"))

    def permission_timeout(self) -> float:
        return self.get_app().config.permissions.timeout_seconds

    # ---- frames ----------------------------------------------------------------------------------

    def notify(self, method: str, params: Any) -> None:
        if method.startswith("$/"):
            self._write({"params": _serialisable(params), "method": method, "jsonrpc": "2.0"})
        else:
            self._write({"method": method, "jsonrpc": "2.0", "params": _serialisable(params)})

    def send_request(self, method: str, params: Any, msg_id: str) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[msg_id] = fut
        if method in _TYPED_REQUESTS:
            self._write({"id": msg_id, "params": _serialisable(params), "method": method, "jsonrpc": "2.0"})
        else:
            self._write({"id": msg_id, "method": method, "jsonrpc": "2.0", "params": _serialisable(params)})
        return fut

    def send_show_message_request(self, kind: int, message: str, actions: list[str],
                                  msg_id: str) -> asyncio.Future[Any]:
        params = {"type": kind, "message": message, "actions": [{"title": a} for a in actions]}
        reply = self.send_request("window/showMessageRequest", params, msg_id)
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def structured(done: asyncio.Future[Any]) -> None:
            if answer.done():
                return
            if done.cancelled():
                answer.cancel()
            elif (e := done.exception()) is not None:
                answer.set_exception(e)
            else:
                r = done.result()
                title = r.get("title") if isinstance(r, dict) else None
                answer.set_result(ActionItem(title) if isinstance(title, str) else None)

        reply.add_done_callback(structured)
        return answer

    def drop_request(self, msg_id: str) -> None:
        # still pending: a late reply is then taken here, not left to hold frames back for pygls
        self.notify("$/cancelRequest", {"id": msg_id})

    def response(self, msg: dict[str, Any]) -> bool:
        """A response from the client: True if it answers one of this link's requests."""
        fut = self.pending.pop(msg.get("id"), None)
        if fut is None:
            return False
        if fut.done():
            return True
        error = msg.get("error")
        if error is not None:
            code = error.get("code") if isinstance(error, dict) else None
            message = error.get("message") if isinstance(error, dict) else None
            fut.set_exception(RpcError(code if isinstance(code, int) else -32603, str(message)))
        else:
            fut.set_result(msg.get("result"))
        return True

    async def progress_create(self, token: str) -> None:
        await self.send_request("window/workDoneProgress/create", {"token": token}, str(uuid.uuid4()))

    def progress_begin(self, token: str, message: str) -> None:
        self.notify("$/progress", {"token": token, "value": {"title": "ToyCoder", "kind": "begin",
                                                             "cancellable": True, "message": message}})

    def progress_report(self, token: str, message: str) -> None:
        self.notify("$/progress", {"token": token, "value": {"kind": "report", "message": message}})

    def progress_end(self, token: str, message: str) -> None:
        self.notify("$/progress", {"token": token, "value": {"kind": "end", "message": message}})

