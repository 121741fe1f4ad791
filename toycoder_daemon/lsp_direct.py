"""The LSP face's own requests (`toycoder/*`, server.HANDLERS) answered without pygls' dispatch.

pygls takes a request through `structure_message` (cattrs), `handle_message` (a context copy, a
task) and a done callback that unstructures the result and writes it: the answer goes out a loop
pass after the handler ended. Beside 20 streaming turns a pass is 2-10 ms, and those passes were
most of a cheap request's wait (issue 17, bench/README.md). Our methods need none of that: their
params are plain dicts that lsp_calls.call validates with the method table's types. So each one is
a task that writes its answer the moment its handler returns, in the bytes pygls writes
(stdio.pygls_frame), and a handler that waits for nothing (lsp_calls.instant: tools/list, cancel...)
is answered in the pass its request arrives in, unless a request before it still waits for its
task's first step (handlers start in the order their requests came, as they did through pygls).
What is not a result keeps pygls' own handling: errors and cancellations are answered by its
`_send_handler_result` (QuietClientMistakes), a task sits in pygls' request table so
`$/cancelRequest` cancels it as before, and after `shutdown` requests are left to pygls.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

from pygls.exceptions import JsonRpcException

from . import protocol as wire
from .lsp_calls import RpcError, call, call_now
from .pygls_adapter import answer_like_pygls, shutting_down, track_request, untrack_request
from .stdio import pygls_frame

REQUESTS = {r.method: r for r in wire.REQUESTS}


class DirectRequests:
    """Starts our own requests for rpc_io.Dispatcher; `handlers` is read at each request (server.HANDLERS)."""

    def __init__(self, server: Any, write: Callable[[bytes], None], handlers: dict[str, Any]):
        self.server = server
        self.protocol = server.protocol
        self.write = write
        self.handlers = handlers
        self._answered: set[asyncio.Future[None]] = set()
        self._unstarted: set[asyncio.Future[None]] = set()
        """Tasks that have not taken their first step: no instant answer overtakes them."""

    def takes(self, obj: dict[str, Any]) -> bool:
        """A request (it has an id) to one of our methods, while pygls still takes requests."""
        return "id" in obj and obj.get("method") in REQUESTS and not shutting_down(self.protocol)

    def start(self, msg_id: Any, method: str, params: Any) -> None:
        handler = self.handlers[method]
        now = getattr(handler, "now", None)
        if now is not None and not self._unstarted:
            self._answer_now(msg_id, REQUESTS[method], now, params)
            return
        task = asyncio.ensure_future(self._answer(msg_id, REQUESTS[method], handler, params))
        self._unstarted.add(task)
        track_request(self.protocol, msg_id, task)
        task.add_done_callback(functools.partial(self._ended, msg_id))

    def _answer_now(self, msg_id: Any, request: wire.Request, now: Any, params: Any) -> None:
        try:
            result = call_now(request, now, self.server, params)
        except Exception as e:
            self._refuse(msg_id, e)
        else:
            self.write(pygls_frame({"id": msg_id, "jsonrpc": "2.0", "result": result}))

    async def _answer(self, msg_id: Any, request: wire.Request, handler: Any, params: Any) -> None:
        task = asyncio.current_task()
        self._unstarted.discard(task)
        try:
            result = await call(request, handler, self.server, params)
        except asyncio.CancelledError:
            self._answered.add(task)  # type: ignore[arg-type]
            outcome: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            outcome.cancel()
            answer_like_pygls(self.protocol, outcome, msg_id)
            raise
        except Exception as e:
            self._refuse(msg_id, e)
            return
        untrack_request(self.protocol, msg_id)  # a $/cancelRequest from now on finds it finished
        self.write(pygls_frame({"id": msg_id, "jsonrpc": "2.0", "result": result}))

    def _refuse(self, msg_id: Any, error: Exception) -> None:
        """pygls' answer to a handler's error: ours (RpcError) as the JsonRpcException server.bind
        raises for it; a handler's own JsonRpcException, or a fault of ours (-32603), as they are."""
        if isinstance(error, RpcError):
            error = JsonRpcException(message=error.message, code=error.code)
        outcome: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        outcome.set_exception(error)
        answer_like_pygls(self.protocol, outcome, msg_id)

    def _ended(self, msg_id: Any, task: asyncio.Future[None]) -> None:
        self._unstarted.discard(task)
        if task in self._answered:
            self._answered.discard(task)
        elif task.cancelled():  # cancelled before its first step: _answer never ran
            answer_like_pygls(self.protocol, task, msg_id)
