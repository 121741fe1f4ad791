"""Everything the LSP face needs from pygls beyond its documented surface, in one place.

Written against pygls 2.1.1; tests/test_pygls_adapter.py fails loudly if what these rely on changes:

* `raw_converter`: pygls structures the params of methods it has no type for into namedtuples
  (`_params_field_structure_hook`); ours stay plain dicts, which the handlers validate with the
  pydantic wire types (protocol.py). Uses the documented `converter_factory` constructor argument
  and cattrs' public `register_structure_hook`, but relies on pygls building requests from
  `JsonRPCRequestMessage` / `JsonRPCNotification` / `JsonRPCResponseMessage`.
* `initialize_without_reply`: the daemon answers `initialize` before pygls is even imported
  (stdio.py). pygls still has to set itself up for it (workspace, client capabilities, position
  encoding) and run our INITIALIZE feature. `LanguageServerProtocol.lsp_initialize` does exactly
  that; it is a public method written in pygls' handler-generator style (it yields
  `(handler, args, callback)` for the user's feature and returns the InitializeResult). We drive
  that generator here instead of sending pygls a wire message, and drop the result it returns
  (the client already has the same answer).
* `track_request`, `untrack_request`, `answer_like_pygls`, `shutting_down`: lsp_direct.py answers
  our own methods without pygls' dispatch, yet keeps their tasks in pygls' `_request_futures` (so
  `$/cancelRequest` cancels them as it cancels its own), answers their errors and cancellations
  through `_send_handler_result` (below) as before, and leaves requests after `shutdown` to pygls
  (`_shutdown`: it ignores them).
* `QuietClientMistakes`: pygls logs a client's mistakes (bad params, an unknown session, an unknown
  method, a reply nobody waits for) at ERROR or WARNING, with tracebacks, and reports them as server
  errors; editors show those lines to their users. This protocol mixin overrides pygls' private
  `_send_handler_result`, `_handle_request`, `_handle_notification`, `_handle_cancel_notification`,
  `_handle_response` and mutes its logger inside `structure_message`, so a client's mistake is one
  line at info or debug (ours) and still gets its error answer; daemon faults (-32603) keep pygls'
  ERROR with a traceback.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any

from cattrs import Converter
from lsprotocol import converters, types
from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcMethodNotFound
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage, LanguageServerProtocol

log = logging.getLogger(__name__)

PYGLS_VERSION = "2.1.1"


def raw_converter() -> Converter:
    """lsprotocol's converter, but custom-method params/results stay plain dicts."""
    c: Converter = converters.get_converter()
    c.register_structure_hook(
        JsonRPCRequestMessage,
        lambda o, cls: cls(id=o["id"], method=o["method"], jsonrpc=o["jsonrpc"], params=o.get("params")),
    )
    c.register_structure_hook(
        JsonRPCNotification, lambda o, cls: cls(method=o["method"], jsonrpc=o["jsonrpc"], params=o.get("params"))
    )
    c.register_structure_hook(
        JsonRPCResponseMessage, lambda o, cls: cls(id=o["id"], jsonrpc=o["jsonrpc"], result=o.get("result"))
    )
    return c


def initialize_without_reply(protocol: LanguageServerProtocol, converter: Converter,
                             params: dict[str, Any]) -> types.InitializeResult:
    """Run pygls' own `initialize` handling on already-answered params; returns pygls' answer (for
    tests to compare with ours). Raises what structuring or our handler raise."""
    structured = converter.structure(params, types.InitializeParams)
    steps: Generator[Any, Any, types.InitializeResult] = protocol.lsp_initialize(structured)
    try:
        step = next(steps)
        while True:
            handler, args, _callback = step
            step = steps.send(handler(*args))
    except StopIteration as done:
        result: types.InitializeResult = done.value
        return result


@contextmanager
def _pygls_muted() -> Iterator[None]:
    """pygls' own logger says nothing meanwhile (the event loop is single-threaded)."""
    logger = logging.getLogger("pygls.protocol.json_rpc")
    mute = logging.Filter("-nothing-")  # passes only records of a logger named so: none
    logger.addFilter(mute)
    try:
        yield
    finally:
        logger.removeFilter(mute)


class QuietClientMistakes(LanguageServerProtocol):
    """See the module docstring. Every method defers to pygls but for what is the client's doing."""

    def _send_handler_result(self, future: Any, *, msg_id: Any) -> None:
        error = None if future.cancelled() else future.exception()
        if not isinstance(error, JsonRpcException) or isinstance(error, JsonRpcInternalError):
            super()._send_handler_result(future, msg_id=msg_id)  # a result, a cancel or our fault
            return
        self._request_futures.pop(msg_id, None)
        log.info("request %s refused: %s", msg_id, error.message)
        self._send_response(msg_id, error=error.to_response_error())

    def _handle_request(self, msg_id: Any, method_name: str, params: Any) -> None:
        try:
            self._get_handler(method_name)
        except JsonRpcMethodNotFound as e:
            log.info("request %s: unknown method %r", msg_id, method_name)
            self._send_response(msg_id, None, e.to_response_error())
            return
        super()._handle_request(msg_id, method_name, params)

    def _handle_notification(self, method_name: str, params: Any) -> None:
        if method_name != types.CANCEL_REQUEST:
            try:
                self._get_handler(method_name)
            except JsonRpcMethodNotFound:
                log.debug("notification for unknown method %r ignored", method_name)
                return
        super()._handle_notification(method_name, params)

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        if msg_id not in self._request_futures:  # it already finished: routine, not a problem
            log.debug("$/cancelRequest for %r, which is not running", msg_id)
            return
        super()._handle_cancel_notification(msg_id)

    def _handle_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        future = self._request_futures.get(msg_id)
        if future is None or (isinstance(future, asyncio.Future) and future.done()):
            # unknown id, or a late reply to a request we gave up on (pygls 2.1.1 would raise
            # InvalidStateError setting a result on a done future: upstream #621)
            self._request_futures.pop(msg_id, None)
            log.debug("reply to %r ignored: nothing waits for it", msg_id)
            return
        super()._handle_response(msg_id, result, error)

    def structure_message(self, data: dict[str, Any]) -> Any:
        with _pygls_muted():
            return super().structure_message(data)


def track_request(protocol: LanguageServerProtocol, msg_id: Any, task: asyncio.Future[Any]) -> None:
    protocol._request_futures[msg_id] = task  # type: ignore[assignment]  # pygls' own hold asyncio tasks too


def untrack_request(protocol: LanguageServerProtocol, msg_id: Any) -> None:
    protocol._request_futures.pop(msg_id, None)


def answer_like_pygls(protocol: LanguageServerProtocol, outcome: asyncio.Future[Any], msg_id: Any) -> None:
    """The answer pygls writes for a request whose handler ended so (an error or a cancel)."""
    protocol._send_handler_result(outcome, msg_id=msg_id)  # type: ignore[arg-type]  # as for its own tasks


def shutting_down(protocol: LanguageServerProtocol) -> bool:
    return bool(protocol._shutdown)
