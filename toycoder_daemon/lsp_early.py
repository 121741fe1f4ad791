"""The LSP face of a new process while pygls loads: the first session is answered without it.

stdio.py answers `initialize` before anything heavy is imported. pygls and lsprotocol then take
~0.3-0.8 s of CPU to import, and sessions need neither: so the App is opened here from the answered
initialize's params, and `initialized`, the session requests, `toycoder/cancel` (lsp_calls.EARLY),
`toycoder/prompt` (on lsp_early_link's EditorLink) and plain open-document news are handled by the
same functions pygls runs later, on the same App. The first frame nothing here handles, and every
frame after it, waits (in order) for pygls, so nothing overtakes; only the client's responses to an
early turn's requests, and $/cancelRequest for an early request, are taken here whenever they come
(pygls never knew those ids). Answers are written as pygls writes them.

Prompts run here, any number of them, back to back or side by side, for as long as the import has
not started; once it has, a prompt is a frame left to pygls (it waits for the import in order, so no
turn runs beside the import and the prompt sees what pygls' path sees).

pygls is imported on a thread (it holds the GIL most of that time, so a turn beside it reaches its
first chunk ~100 ms later) when it is *needed* or when the process is *idle*, whichever is first:
- needed: the first frame left to it (a request not answered here, a ranged didChange, a malformed
  frame...), or a message the App wants shown (held for pygls to write: a config error, notices).
  At once, also during an early turn, so a long turn starves nothing.
- idle: for QUIET seconds no early request has run and none (nor `initialized`) has come; open-
  document news does not count (it costs nothing to take here; an editor sends it at each edit). So
  in an editor the import starts QUIET after the session requests, while the person types the first
  prompt; a script's back-to-back initialize, session, prompts get their turns first, and the import
  starts QUIET after the last turn ends. If the input ends before either, nothing is imported.
The App's start-up work (App.start: the config's MCP servers, the model client's imports; the host's
`background`, _StartUp) does not wait for pygls: it starts at the first of: an early turn ends, the
process is idle, pygls is in; but never while an early turn is running (it would delay that turn's
first chunk). The config's MCP servers are the exception: a turn starts them itself if they have not
started, and waits for them (App's McpHub.settle), so the first early turn offers their tools too;
a config without them waits for nothing. Messages the App wants shown still wait for pygls. When
the input ends while frames wait for pygls, `on_end` (the exit timer) runs at once and early turns
are cancelled, as on rpc_io's path; the waiting frames are still answered if pygls is in within the
exit grace.
"""
from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import json
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, BinaryIO

from . import protocol as wire
from .app import App
from .background import Background
from .coalesce import OUTPUT
from .lsp_calls import EARLY, RpcError, call, on_initialized, prompt, session_changed, session_info_changed
from .lsp_early_link import DOCUMENTS, Documents, EarlyLink, app_params, document, plain_capabilities
from .outbox import Outbox, written
from .rpc_checks import refusal
from .stdio import FrameWriter, Inbox, pygls_frame

log = logging.getLogger(__name__)

REQUESTS = {r.method: r for r in wire.REQUESTS if r.method in EARLY or r.method == wire.PROMPT}
Held = Callable[[Any], None]


class _StartUp:
    """The host's `background`: start-up work (App.start) waits until it is `due` (the first of: an
    early turn ended, the process idled, pygls is in) and no early turn is running."""

    def __init__(self) -> None:
        self.due = asyncio.Event()
        self.no_turn = asyncio.Event()
        """No early turn is running (EarlyLsp keeps it)."""
        self.no_turn.set()
        self.closed = False
        """The process ends before the work started: it never starts."""
        self._tasks = Background()

    def run(self, work: Coroutine[Any, Any, Any]) -> None:
        self._tasks.run(self._later(work))

    def close(self) -> None:
        self.closed = True
        self.due.set()
        self.no_turn.set()

    async def _later(self, work: Coroutine[Any, Any, Any]) -> None:
        try:  # both at once: a turn may start between no_turn's set and this task's wake-up
            while not (self.due.is_set() and self.no_turn.is_set()):
                await (self.no_turn if self.due.is_set() else self.due).wait()
        except BaseException:  # shut down before it was due: the work never starts
            work.close()
            raise
        if self.closed:
            work.close()
            return
        await work


class EarlyHost:
    """lsp_calls.Host before the pygls server exists. What the App or a handler wants to tell the
    client is held and handed to the server once it has set itself up (`release`); holding it says
    pygls is `needed`."""

    def __init__(self, app: App):
        self.app = app
        self.background = _StartUp()
        self.held: list[Held] = []
        self.needed = asyncio.Event()
        """pygls is wanted now: a frame was left to it, or a message waits for it."""
        app.on_notice = lambda level, message: self._hold(lambda ls: ls.app.on_notice(level, message))
        app.on_session_info = lambda *a: self._hold(lambda ls: ls.app.on_session_info(*a))
        app.sharing.on_changed = lambda *a: self._hold(lambda ls: ls.app.sharing.on_changed(*a))

    def _hold(self, send: Held) -> None:
        self.held.append(send)
        self.needed.set()

    def get_app(self) -> App:
        return self.app

    def show_message(self, level: str, message: str) -> None:
        self._hold(lambda ls: ls.show_message(level, message))

    def release(self, server: Any) -> None:
        held, self.held = self.held, []
        for send in held:
            send(server)
        self.background.due.set()


REQUEST_CANCELLED = -32800
"""pygls' answer to a request a $/cancelRequest cancelled (JsonRpcRequestCancelled)."""


class EarlyLsp:
    """Frames on the event loop, in order, until pygls is in: the ones lsp_calls handles are handled;
    the rest, from the first one not handled here on, go to `later` for pygls. For the daemon's life
    (pygls never knew them) the client's responses to an early turn's requests go to its `link`, and
    a $/cancelRequest for an early request cancels it, as pygls cancels its own."""

    NOTIFICATIONS = frozenset({"initialized", *DOCUMENTS})

    def __init__(self, host: EarlyHost, write: Callable[[bytes], None], later: Inbox,
                 link_for: Callable[[EarlyLsp], EarlyLink] | None = None):
        self.host = host
        self.link = link_for(self) if link_for else None
        """A prompt's EditorLink here; None (the client's capabilities were odd): prompts wait for pygls."""
        if self.link:  # an early turn's session news goes out in its place among the turn's updates
            host.app.on_session_info = functools.partial(session_info_changed, self.link)
            host.app.sharing.on_changed = functools.partial(session_changed, self.link)
        self.write = write
        """Where answers go (the server's writer once pygls is in)."""
        self.later = later
        self.deferring = False
        self.ended = asyncio.Event()
        """The input ended with nothing left for pygls."""
        self._first = True
        self.documents: Documents = {}
        self.prompts_here = self.link is not None
        """Prompts run here until the import starts (`wanted` clears it as it returns)."""
        self._answering: dict[asyncio.Task[None], Any] = {}
        """The early requests being answered, with their ids."""
        self._cancelled: set[asyncio.Task[None]] = set()
        self._turns: set[asyncio.Task[None]] = set()
        self._last = time.monotonic()
        """When the last early request or `initialized` came or an early request ended (`wanted`'s
        quiet period); open-document news does not count."""

    def send(self, message: dict[str, Any]) -> None:
        self.write(pygls_frame(message))

    def frame(self, body: bytes | None, problem: str | None) -> None:
        if self._first:  # the answered initialize: pygls still sets itself up from it
            self._first = False
            self.later.put(body, problem)
            return
        if body is not None and (self._answering or (self.link and self.link.pending)) and self._ours(body):
            return
        if not self.deferring:
            if body is None and problem is None:
                self.ended.set()
                return
            if body is not None and self._handled(body):
                return
        if body is None and problem is None:  # closing stdin ends every turn, also while pygls loads
            for task in list(self._turns):
                self._cancel(task)
        self.deferring = True
        self.host.needed.set()
        self.later.put(body, problem)

    def _ours(self, body: bytes) -> bool:
        """A response to the link's request, or a $/cancelRequest for an early request: taken here,
        whatever waits for pygls (neither is anything pygls could act on)."""
        try:
            obj = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return False
        if refusal(obj) is not None:
            return False
        if "method" not in obj:
            return self.link is not None and self.link.response(obj)
        params = obj.get("params")
        if obj.get("method") != "$/cancelRequest" or "id" in obj or not isinstance(params, dict):
            return False
        task = next((t for t, i in self._answering.items() if i == params.get("id") and not t.done()), None)
        if task is None:
            return False
        self._cancel(task)
        return True

    def _cancel(self, task: asyncio.Task[None]) -> None:
        self._cancelled.add(task)
        task.cancel()

    def _handled(self, body: bytes) -> bool:
        try:
            obj = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return False  # rpc_io answers it
        if refusal(obj, self.NOTIFICATIONS) is not None:
            return False
        method, params = obj.get("method"), obj.get("params")
        if method == "initialized" and "id" not in obj:
            self._last = time.monotonic()
            on_initialized(self.host, params)
            return True
        if method in DOCUMENTS and "id" not in obj:  # free to take: they keep no quiet period going
            return document(self.host.app, self.documents, method, params)
        if method not in REQUESTS or "id" not in obj or (method == wire.PROMPT and not self.prompts_here):
            return False
        self._last = time.monotonic()
        task = asyncio.ensure_future(self._answer(REQUESTS[method], obj["id"], params))
        self._answering[task] = obj["id"]
        if method == wire.PROMPT:
            self._turns.add(task)
            self.host.background.no_turn.clear()
        task.add_done_callback(self._done)
        return True

    def _done(self, task: asyncio.Task[None]) -> None:
        msg_id = self._answering.pop(task, None)
        if task.cancelled() and task in self._cancelled:  # cancelled before its first step: _answer never ran
            self.send({"error": {"code": REQUEST_CANCELLED, "message": f'Request with id "{msg_id}" is canceled'},
                       "jsonrpc": "2.0", "id": msg_id})
        self._cancelled.discard(task)
        if task in self._turns:
            self._turns.discard(task)
            self.host.background.due.set()  # an early turn ended: start-up work may begin
            if not self._turns:
                self.host.background.no_turn.set()
        self._last = time.monotonic()

    async def wanted(self, quiet: float) -> None:
        """Returns when pygls is needed, or once no early request has run or come for `quiet`
        seconds (the rule in the module's docstring; idle, start-up work is due too). From then on a
        prompt is pygls' (set here, so none starts between this and the import)."""
        needed = asyncio.ensure_future(self.host.needed.wait())
        try:
            while not needed.done():
                left = self._last + quiet - time.monotonic()
                if not self._answering and left <= 0:
                    self.host.background.due.set()
                    return
                await asyncio.wait({needed, *self._answering}, timeout=None if self._answering else left,
                                   return_when=asyncio.FIRST_COMPLETED)
        finally:
            needed.cancel()
            self.prompts_here = False

    async def drain(self) -> None:
        """The answers still being made are written (the input ended; the client may still read);
        closing stdin ends every turn, as on the pygls path, so a turn's answer is its cancelled end."""
        for task in list(self._turns):
            self._cancel(task)
        if self._answering:
            await asyncio.wait(set(self._answering))

    async def _answer(self, request: wire.Request, msg_id: Any, params: Any) -> None:
        try:
            if request.method == wire.PROMPT:
                assert self.link is not None  # _handled leaves prompts to pygls without one
                result = await call(request, prompt, self.link, params)
            else:
                result = await call(request, EARLY[request.method], self.host, params)
            reply: dict[str, Any] = {"id": msg_id, "jsonrpc": "2.0", "result": result}
        except RpcError as e:  # pygls' key order for errors
            reply = {"error": {"code": e.code, "message": e.message}, "jsonrpc": "2.0", "id": msg_id}
        except asyncio.CancelledError:
            if asyncio.current_task() not in self._cancelled:
                raise  # shutting down
            reply = {"error": {"code": REQUEST_CANCELLED, "message": f'Request with id "{msg_id}" is canceled'},
                     "jsonrpc": "2.0", "id": msg_id}
        except Exception:
            log.exception("unhandled error in %s", request.method)
            reply = {"error": {"code": wire.INTERNAL_ERROR, "message": "Internal error (see the daemon log)"},
                     "jsonrpc": "2.0", "id": msg_id}
        self.send(reply)


class _Later(Inbox):
    """The frames for pygls; once it attaches (its queued frames scheduled first, the answered
    initialize among them), `then` runs."""

    def __init__(self, then: Callable[[], None]):
        super().__init__()
        self._then = then

    def attach(self, target: Callable[[Any, Any], None]) -> None:
        super().attach(target)
        asyncio.get_running_loop().call_soon(self._then)


QUIET = 0.15
"""Seconds without a frame (and no early work) after which the process counts as idle. Longer than a
client's pause between its start-up requests (an answer's round trip, a few ms even in Neovim's Lua),
shorter than anyone types a prompt in: the ~0.3 s import is over before the first prompt comes."""


def _import_pygls() -> tuple[Any, Any]:
    from . import rpc_io, server

    return rpc_io, server


async def serve_lsp(inbox: Inbox, out: BinaryIO | Outbox, config_path: str | None, *, answered: bytes | None,
                    on_end: Callable[[], None], importer: Callable[[], tuple[Any, Any]] = _import_pygls,
                    quiet: float = QUIET) -> int:
    """Serve the LSP face. `answered`: the body of the `initialize` stdio.fast_initialize answered.
    With an Outbox, the thread that feeds `inbox` is gated by it from now on, whichever path the
    frames then take (the backpressure rule, docs/protocol.md). `importer` (run on a thread when
    pygls is wanted) returns the modules rpc_io and server; `quiet`: see QUIET."""
    if isinstance(out, Outbox):
        inbox.gate = out.wait_input
    opened = app_params(json.loads(answered).get("params")) if answered is not None else None
    if opened is None:
        rpc_io, server = importer()
        return int(await rpc_io.serve(server.make_server(config_path), inbox, out,
                                      answered_initialize=answered is not None, on_end=on_end))
    root, config = opened
    host = EarlyHost(App.open(root, config or config_path))
    writer = FrameWriter(out)  # type: ignore[arg-type]  # an Outbox is the file-like FrameWriter needs
    later = _Later(lambda: host.release(full))
    caps = plain_capabilities(json.loads(answered)["params"]) if answered is not None else None
    early = EarlyLsp(host, writer.write, later,
                     None if caps is None else lambda e: EarlyLink(host, caps, e.send))
    loop = asyncio.get_running_loop()
    if isinstance(out, Outbox):
        OUTPUT.set(out)  # an early turn waits for room in the queue as any turn does (the backpressure rule)
    context = contextvars.copy_context()  # the reader thread's callbacks (and the turns they start) see it

    def deliver(body: bytes | None, problem: str | None) -> None:
        # the end of input starts the exit timer at once, as on rpc_io's path, even while frames wait
        # for pygls (they are still answered if it is in within the grace)
        if body is None and problem is None:
            on_end()
        with contextlib.suppress(RuntimeError):  # the loop is already closed
            loop.call_soon_threadsafe(early.frame, body, problem, context=context.copy())

    inbox.attach(deliver)
    ended = asyncio.ensure_future(early.ended.wait())
    wanted = asyncio.ensure_future(early.wanted(quiet))
    await asyncio.wait({wanted, ended}, return_when=asyncio.FIRST_COMPLETED)
    importing = None if ended.done() else asyncio.ensure_future(asyncio.to_thread(importer))
    if importing:
        await asyncio.wait({importing, ended}, return_when=asyncio.FIRST_COMPLETED)
    if importing is None or not importing.done():  # the input ended before pygls was in
        wanted.cancel()
        host.background.close()
        on_end()
        await early.drain()
        await written(out)
        await host.app.shutdown()
        return 0
    ended.cancel()
    rpc_io, server = importing.result()
    full = server.make_server(config_path)
    full.app = host.app  # server.on_initialize adopts it
    full.early_documents = early.documents  # and gives pygls what was opened meanwhile
    early.deferring = True
    early.write = lambda data: full.protocol.writer.write(data)  # one writer from now on
    if early.ended.is_set():
        later.put(None, None)
    return int(await rpc_io.serve(full, later, out, answered_initialize=True, on_end=on_end))
