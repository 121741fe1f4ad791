"""The LSP-framed JSON-RPC face (pygls): one small typed handler per method, registered as pygls
features from the method table in protocol.py by `make_server` (transport.py runs it on stdio).

Handlers are `async def` so `$/cancelRequest` reaches them and nothing blocks a pool thread. Each
is called through calls.call: params validated by the table's type, core errors mapped,
the result checked. Core values become wire types in mapping.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import lsp_method
from pygls.uris import to_fs_path

from toycoder_daemon import __version__
from toycoder_daemon.app.application import App
from toycoder_daemon.checkpoints import UnknownCheckpoint
from toycoder_daemon.commands.custom import CommandRow
from toycoder_daemon.commands.served import with_served
from toycoder_daemon.core.modes import available_modes
from toycoder_daemon.core.ports import Event
from toycoder_daemon.core.util.background import Background
from toycoder_daemon.faces.lsp import mapping as to_wire
from toycoder_daemon.faces.lsp.calls import call, rpc_error
from toycoder_daemon.faces.lsp.converter import PlainMessages, install, raw_converter
from toycoder_daemon.faces.lsp.frontend import EditorFrontend
from toycoder_daemon.rpc.lsp_framing import FrameWriter
from toycoder_daemon.sessions.catalog import BadCursor, page
from toycoder_daemon.sessions.session import TranscriptEntry
from toycoder_daemon.sessions.store import SessionSummary
from toycoder_daemon.wire import protocol as wire

log = logging.getLogger(__name__)


Handler = Callable[["ToyCoderServer", Any], Awaitable[wire.Wire]]


def bind(request: wire.Request, handler: Handler) -> Callable[[ToyCoderServer, Any], Awaitable[dict[str, Any]]]:
    """A pygls feature for one row of the table: params in, core errors mapped, result checked."""

    @functools.wraps(handler)
    async def feature(ls: ToyCoderServer, params: Any) -> dict[str, Any]:
        task = asyncio.current_task()
        assert task is not None
        ls.answering.add(task)
        task.add_done_callback(ls.answering.discard)  # after pygls' own callback, which answers
        return await call(request, handler, ls, params)

    return feature


class ToyCoderProtocol(PlainMessages):
    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams):  # type: ignore[no-untyped-def]
        result = yield from super().lsp_initialize(params)
        result.capabilities.experimental = {"toycoder": {"protocolVersion": wire.PROTOCOL_VERSION,
                                                         "availableModes": available_modes()}}
        return result


class ToyCoderServer(LanguageServer):
    """pygls' server plus what the handlers and the EditorFrontend need (its `EditorLink`)."""

    protocol: ToyCoderProtocol

    def __init__(self, config_path: str | None = None) -> None:
        self.converter = raw_converter()
        super().__init__(
            "toycoder-daemon", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full,
            protocol_cls=ToyCoderProtocol, converter_factory=lambda: self.converter,
        )
        self.config_path = config_path
        self._app: App | None = None
        self._opening: Callable[[], App] | None = None
        """Set by `initialize`: opens the App at its first use (`app`)."""
        self._open_error: Exception | None = None
        self.client_toycoder: dict[str, Any] = {}
        self.background = Background()
        self.answering: set[asyncio.Task[Any]] = set()
        """Requests of the table being answered: the end of input waits for their answers (`answered`)."""
        self.answer_written: Callable[[], asyncio.Future[None]] | None = None
        """The Outbox's `all_written` (transport.serve sets it): done once what is queued is written."""
        self.elsewhere: dict[str, EditorFrontend] = {}
        """Session -> the frontend that shows a turn running in another daemon (heard live)."""

    async def answered(self, timeout: float) -> None:
        """Wait (at most `timeout`) until every request being answered is: pygls writes each answer
        in its task's first done callback, before asyncio.wait sees the task done."""
        if self.answering:
            await asyncio.wait(set(self.answering), timeout=timeout)

    @property
    def app(self) -> App | None:
        """The App, once `initialize` has been answered: it is opened (config, tool catalog, store)
        at its first use (`open_at_first_use`). Nothing in `initialize`'s answer depends on it, so the
        client has the answer while the App opens (~8 ms of CPU at a warm start), as the ACP face
        opens its App at session/new. A failure to open it answers every later request."""
        if self._opening is not None:
            opening, self._opening = self._opening, None
            try:
                self._app = opening()
            except Exception as e:
                log.exception("the daemon could not open its workspace")
                self._open_error = e
        return self._app

    def open_at_first_use(self, opening: Callable[[], App]) -> None:
        """`initialize`: the App `opening` makes is opened once the answer is written to the client
        (`answer_written`), or by whatever uses it first. Opening it right after the answer was
        queued held the GIL (~8 ms of CPU) while the writer thread waited for it to write the answer."""
        self._opening = opening
        with contextlib.suppress(RuntimeError):  # no loop: a test drives pygls by hand; the first use opens it
            asyncio.get_running_loop().call_soon(self._open_once_answered)

    def _open_once_answered(self) -> None:
        """The loop's next step after `initialize`'s handler: pygls has queued the answer by now."""
        if self.answer_written is None:
            self.app  # noqa: B018 (the property opens it)
            return
        self.answer_written().add_done_callback(lambda _: self.app)

    def get_app(self) -> App:
        app = self.app
        if app is None:
            if self._open_error is not None:
                raise rpc_error(wire.INTERNAL_ERROR, f"the daemon could not open its workspace: {self._open_error}")
            raise rpc_error(wire.SERVER_NOT_INITIALIZED, "the daemon is not initialized")
        return app

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
        # never cancelled: EditorFrontend awaits it shielded (pygls 2.1.1 would raise completing a
        # cancelled one with a late reply: #621)
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
        if isinstance(error, JsonRpcException) and error.code != wire.INTERNAL_ERROR:
            return  # a client's mistake, answered and logged quietly (converter.QuietClientMistakes)
        log.error("server error (%s): %s", getattr(source, "__name__", source), error)


# ---- lifecycle --------------------------------------------------------------------------------

def workspace_root(ls: ToyCoderServer, params: types.InitializeParams) -> str:
    """pygls' workspace root (rootUri, else rootPath), else the first workspace folder, else the
    daemon's cwd."""
    root = ls.workspace.root_path
    if not root and params.workspace_folders:
        root = to_fs_path(params.workspace_folders[0].uri)
    return root or os.getcwd()


def on_initialize(ls: ToyCoderServer, params: types.InitializeParams) -> None:
    options = params.initialization_options if isinstance(params.initialization_options, dict) else {}
    experimental = params.capabilities.experimental if isinstance(params.capabilities.experimental, dict) else {}
    ls.client_toycoder = experimental.get("toycoder") or {}
    ls.open_at_first_use(functools.partial(open_app, ls, workspace_root(ls, params),
                                           options.get("configPath") or ls.config_path,
                                           params.client_info.name if params.client_info else ""))


def open_app(ls: ToyCoderServer, root: str, config_path: str | None, client: str) -> App:
    app = App.open(root, config_path)
    app.on_notice = ls.show_message
    app.sharing.on_changed = functools.partial(session_changed, ls)
    app.sharing.client = client
    app.sharing.on_live_turn = functools.partial(live_turn, ls)
    app.sharing.on_live_event = functools.partial(live_event, ls)
    app.sharing.asker = ls.elsewhere.get  # its questions are asked here too
    app.on_session_info = functools.partial(session_info_changed, ls)
    app.on_session_deleted = functools.partial(session_deleted, ls)
    app.on_commands_changed = functools.partial(commands_changed, ls)
    log.info("workspace %s, config %s", app.workspace.root, app.config_path or "(built-in defaults)")
    return app


def on_initialized(ls: ToyCoderServer, params: Any) -> None:
    app = ls.get_app()
    if app.config_error:
        ls.show_message("error", str(app.config_error))
    ls.background.run(app.start())


def commands_changed(ls: ToyCoderServer, rows: list[CommandRow]) -> None:
    """The command list changed (a custom command's file, an MCP server's prompts): clients refresh
    their completion from it."""
    ls.notify(wire.COMMANDS_CHANGED, wire.CommandList(commands=[to_wire.command_info(c) for c in rows]).dump())


def session_changed(ls: ToyCoderServer, session_id: str, entries: list[TranscriptEntry], reset: bool,
                    untold: list[TranscriptEntry]) -> None:
    """Another daemon added to a session this client has open (a reset replaces the client's
    history whole: `untold` is for clients that cannot)."""
    update = wire.SessionChangedUpdate(transcript=[to_wire.transcript_entry(e) for e in entries], reset=reset)
    ls.notify(wire.UPDATE, wire.UpdateParams(session_id=session_id, turn_id="", update=update).dump())


def live_turn(ls: ToyCoderServer, session_id: str, turn_id: str, client: str, running: bool, prompt: str) -> None:
    """A turn started or ended in another daemon: its updates come between, as if it ran here."""
    ended = ls.elsewhere.pop(session_id, None)
    if ended is not None:
        ended.flush()
    update = wire.TurnElsewhereUpdate(client=client or "another editor", running=running,
                                      prompt=prompt if running else None)
    ls.notify(wire.UPDATE, wire.UpdateParams(session_id=session_id, turn_id=turn_id, update=update).dump())
    if running:
        ls.elsewhere[session_id] = EditorFrontend(ls, session_id, turn_id)


def live_event(ls: ToyCoderServer, session_id: str, turn_id: str, event: Event) -> None:
    frontend = ls.elsewhere.get(session_id)
    if frontend is not None and frontend.turn_id == turn_id:
        frontend.emit(event)


def session_deleted(ls: ToyCoderServer, session_id: str) -> None:
    """Another daemon deleted a session this client has open."""
    update = wire.SessionDeletedUpdate(message="This session was deleted in another editor.")
    ls.notify(wire.UPDATE, wire.UpdateParams(session_id=session_id, turn_id="", update=update).dump())


def session_info_changed(ls: ToyCoderServer, summary: SessionSummary, turn_id: str) -> None:
    update = wire.SessionInfoUpdate(session=to_wire.session_info(summary))
    ls.notify(wire.UPDATE, wire.UpdateParams(session_id=summary.id, turn_id=turn_id, update=update).dump())


# ---- open documents: read_file shows the editor's text, unsaved changes included -------------

def _doc_path(uri: str) -> Path | None:
    fs = to_fs_path(uri)
    return Path(fs).resolve() if fs else None


def did_open(ls: ToyCoderServer, params: types.DidOpenTextDocumentParams) -> None:
    d = params.text_document
    if ls.app and (p := _doc_path(d.uri)):
        ls.app.workspace.set_document(p, d.text, d.version)


def did_change(ls: ToyCoderServer, params: types.DidChangeTextDocumentParams) -> None:
    texts = [c.text for c in params.content_changes]
    if ls.app and (p := _doc_path(params.text_document.uri)) and texts:
        # full sync; the version is what a versioned workspace/applyEdit is checked against
        ls.app.workspace.set_document(p, texts[-1], params.text_document.version)


def did_close(ls: ToyCoderServer, params: types.DidCloseTextDocumentParams) -> None:
    if ls.app and (p := _doc_path(params.text_document.uri)):
        ls.app.workspace.close_document(p)


# ---- toycoder/* handlers (typed params in, typed results out) ---------------------------------

def tell_opening(ls: ToyCoderServer, session_id: str) -> None:
    """In the background: what the person should know as a session opens (its model server takes no
    tools, with the fix), as window/showMessage, the daemon's notice outside a turn."""
    async def tell() -> None:
        notice = await ls.get_app().opening_notice(session_id)
        if notice:
            ls.show_message("warning", notice)

    ls.background.run(tell())


async def session_new(ls: ToyCoderServer, p: wire.SessionNewParams) -> wire.SessionInfo:
    try:
        s = ls.get_app().new_session(p.title, p.additional_directories)
    except ValueError as e:
        raise rpc_error(wire.INVALID_PARAMS, f"Invalid params: {e}") from None
    tell_opening(ls, s.id)
    return to_wire.session_info(s.summary())


async def session_list(ls: ToyCoderServer, p: wire.SessionListParams) -> wire.SessionList:
    """The daemon's workspace's sessions; with `cwd` another's, with `all` every workspace's (as ACP's
    session/list without cwd), a page at a time."""
    app = ls.get_app()
    if p.cwd is not None and not Path(p.cwd).is_absolute():
        raise rpc_error(wire.INVALID_PARAMS, f"Invalid params: cwd: not an absolute path: {p.cwd!r}")
    where = None if p.all else Path(p.cwd).resolve() if p.cwd else app.workspace.root
    rows = await asyncio.to_thread(app.catalog.list, where)  # file I/O: never on the event loop
    try:
        chunk, next_cursor = page(rows, p.cursor)
    except BadCursor as e:
        raise rpc_error(wire.INVALID_PARAMS, f"Invalid params: cursor: {e}") from None
    return wire.SessionList(next_cursor=next_cursor, sessions=[
        to_wire.session_info(r.summary, None if where == app.workspace.root else r.cwd) for r in chunk])


async def session_load(ls: ToyCoderServer, p: wire.SessionIdParams) -> wire.SessionLoadResult:
    s = await ls.get_app().load(p.session_id)  # open here from now on: it hears turns made elsewhere
    tell_opening(ls, s.id)
    return wire.SessionLoadResult(session=to_wire.session_info(s.summary()),
                                  transcript=[to_wire.transcript_entry(e) for e in ls.get_app().transcript(s)])


async def session_fork(ls: ToyCoderServer, p: wire.SessionForkParams) -> wire.SessionLoadResult:
    """A new session with the history before turn `atTurn` (all of it without); answered as a load."""
    app = ls.get_app()
    try:
        s = app.fork_session(p.session_id, p.at_turn)
    except ValueError as e:
        raise rpc_error(wire.INVALID_PARAMS, f"Invalid params: {e}") from None
    tell_opening(ls, s.id)
    return wire.SessionLoadResult(session=to_wire.session_info(s.summary()),
                                  transcript=[to_wire.transcript_entry(e) for e in app.transcript(s)])


async def prompt(ls: ToyCoderServer, p: wire.PromptParams) -> wire.PromptResult:
    if not p.text.strip():
        raise rpc_error(wire.INVALID_PARAMS, "Invalid params: text: the prompt is empty")
    frontends: list[EditorFrontend] = []

    def frontend_for(session_id: str, turn_id: str) -> EditorFrontend:
        f = EditorFrontend(ls, session_id, turn_id)
        f.begin_progress()
        frontends.append(f)
        return f

    try:
        context = [c.dump() for c in p.context or ()]
        outcome = await ls.get_app().prompt(p.session_id, p.text, frontend_for, context=context)
    finally:
        for f in frontends:  # every update reaches the client before the answer does
            f.end_progress("done")
    return to_wire.prompt_result(outcome)


async def cancel(ls: ToyCoderServer, p: wire.SessionIdParams) -> wire.CancelResult:
    return wire.CancelResult(cancelled=ls.get_app().cancel(p.session_id))


async def session_delete(ls: ToyCoderServer, p: wire.SessionIdParams) -> wire.EmptyResult:
    ls.get_app().delete_session(p.session_id)
    return wire.EmptyResult()


async def session_close(ls: ToyCoderServer, p: wire.SessionIdParams) -> wire.EmptyResult:
    await ls.get_app().close_session(p.session_id)
    return wire.EmptyResult()


async def session_set_mode(ls: ToyCoderServer, p: wire.SetModeParams) -> wire.SessionInfo:
    try:
        return to_wire.session_info(ls.get_app().set_mode(p.session_id, p.mode))
    except ValueError as e:
        raise rpc_error(wire.INVALID_PARAMS, f"Invalid params: mode: {e}") from None


async def tools_list(ls: ToyCoderServer, p: wire.SessionIdParams) -> wire.ToolList:
    return wire.ToolList(tools=[to_wire.tool_info(t) for t in ls.get_app().tool_infos(p.session_id)])


async def tools_set_enabled(ls: ToyCoderServer, p: wire.SetEnabledParams) -> wire.EmptyResult:
    try:
        ls.get_app().set_tool_enabled(p.session_id, p.name, p.enabled)
    except KeyError:
        raise rpc_error(wire.INVALID_PARAMS, f"Invalid params: name: unknown tool {p.name!r}") from None
    return wire.EmptyResult()


async def commands_list(ls: ToyCoderServer, p: wire.CommandsListParams) -> wire.CommandList:
    """Built-in, custom (scanned again when their files changed) and MCP prompt commands."""
    rows, _ = ls.get_app().command_rows(p.session_id)
    return wire.CommandList(commands=[to_wire.command_info(c) for c in rows])


async def models_list(ls: ToyCoderServer, p: wire.ModelsListParams) -> wire.ModelsResult:
    app = ls.get_app()  # with what the server itself lists (issue 18)
    session = app.peek(p.session_id) if p.session_id else None
    return to_wire.models_result(await with_served(app, app.models_info(p.session_id), session))


async def models_set(ls: ToyCoderServer, p: wire.ModelsSetParams) -> wire.ModelsResult:
    return to_wire.models_result(ls.get_app().set_model(p.session_id, p.provider, p.model))


async def checkpoint_list(ls: ToyCoderServer, p: wire.SessionIdParams) -> wire.CheckpointList:
    return to_wire.checkpoint_list(ls.get_app().checkpoint_list(p.session_id))


async def checkpoint_restore(ls: ToyCoderServer, p: wire.RestoreParams) -> wire.RestoreResult:
    """The restored files' `changes` update (clients reload them) goes out before the answer."""
    try:
        result = await ls.get_app().restore(p.session_id, p.turn_id, p.paths, bool(p.force),
                                            lambda sid, turn_id: EditorFrontend(ls, sid, turn_id))
    except UnknownCheckpoint as e:
        raise rpc_error(wire.INVALID_PARAMS, f"Invalid params: turnId: {e}") from None
    return to_wire.restore_result(result)


async def checkpoint_diff(ls: ToyCoderServer, p: wire.CheckpointDiffParams) -> wire.CheckpointDiff:
    try:
        d = ls.get_app().checkpoint_diff(p.session_id, p.turn_id, p.path)
    except UnknownCheckpoint as e:
        raise rpc_error(wire.INVALID_PARAMS, f"Invalid params: turnId: {e}") from None
    return wire.CheckpointDiff(path=d["path"], status=d["status"], diff=d["diff"], in_editor=d["inEditor"] or None)


async def mentions_complete(ls: ToyCoderServer, p: wire.MentionsCompleteParams) -> wire.MentionsResult:
    rows = await ls.get_app().complete_mentions(p.session_id, p.prefix, p.limit)
    return wire.MentionsResult(items=[wire.MentionItem(label=label, kind=kind, uri=uri)  # type: ignore[arg-type]
                                      for label, kind, uri in rows])


async def resources_list(ls: ToyCoderServer, p: wire.SessionIdParams) -> wire.ResourcesResult:
    app = ls.get_app()
    app.peek(p.session_id)  # SessionNotFound for an unknown id
    await app.settle_mcp(p.session_id)
    return wire.ResourcesResult(resources=[wire.ResourceInfo(server=s, uri=u, name=n, mime_type=m)
                                           for s, u, n, m in app.resources(p.session_id)])


HANDLERS: dict[str, Handler] = {
    wire.SESSION_NEW: session_new, wire.SESSION_LIST: session_list, wire.SESSION_LOAD: session_load,
    wire.SESSION_DELETE: session_delete, wire.PROMPT: prompt, wire.CANCEL: cancel, wire.TOOLS_LIST: tools_list,
    wire.TOOLS_SET_ENABLED: tools_set_enabled, wire.COMMANDS_LIST: commands_list, wire.MODELS_LIST: models_list,
    wire.MODELS_SET: models_set, wire.CHECKPOINT_LIST: checkpoint_list, wire.CHECKPOINT_RESTORE: checkpoint_restore,
    wire.CHECKPOINT_DIFF: checkpoint_diff, wire.SESSION_CLOSE: session_close, wire.SESSION_SET_MODE: session_set_mode,
    wire.SESSION_FORK: session_fork,
    wire.MENTIONS_COMPLETE: mentions_complete, wire.RESOURCES_LIST: resources_list,
}
"""One handler per row of protocol.REQUESTS (make_server refuses a table row without one)."""


PREPARE_INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": types.INITIALIZE,
                      "params": {"processId": None, "rootUri": "file:///", "capabilities": {}}}


def prepare() -> None:
    """For the fork server (warm/server.py's PREPARE): one `initialize` through a throwaway server,
    answered into memory, so pygls' and our code of that exchange (params structured, capabilities
    built, the answer unstructured and encoded) is specialised by the interpreter before the fork
    rather than in each warm child at its first frame. It opens no App (that waits for a first use
    that never comes: no loop runs here), reads nothing of a launch and starts no thread. Then it
    makes the server a child serves with (`server_for`), its config path set there."""
    global _prepared
    ls = make_server()
    FrameWriter(io.BytesIO()).attach(ls.protocol)
    ls.protocol.handle_message(ls.protocol.structure_message(PREPARE_INITIALIZE))
    _prepared = make_server()  # the one a child serves with (`server_for`): ~1.5 ms of its start otherwise


_prepared: ToyCoderServer | None = None
"""A server made before the fork (`prepare`): taken by the process's first `server_for`."""


def server_for(config_path: str | None) -> ToyCoderServer:
    """The server faces.main serves with: the prepared one if this process has it unused (pygls'
    server makes no thread, loop or stream until it serves), else a new one."""
    global _prepared
    ls, _prepared = _prepared, None
    if ls is None:
        return make_server(config_path)
    ls.config_path = config_path
    return ls


def make_server(config_path: str | None = None) -> ToyCoderServer:
    """A fresh server: LSP lifecycle and document features, then every toycoder/* request of the table."""
    install()
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
