"""What the LSP face adapts of pygls (written against 2.1.1), through its public surface only.

* `raw_converter` (the documented `converter_factory` constructor argument, cattrs' public
  `register_structure_hook`): pygls structures the params of methods it has no type for into
  namedtuples; ours stay plain dicts, which the handlers validate with the pydantic wire types
  (protocol.py). It is made once per process (lsprotocol's hooks take ~45 ms to register) and
  `prepare` has cattrs generate the hooks of a session's start (~20 ms at the first `initialize`):
  the fork server calls it before it forks, so a warm launch pays neither.
* `PlainMessages`, the protocol class (`protocol_cls`), overrides the public `structure_message`:
  - params pygls cannot structure (a client's `textDocument/didOpen` with a number for its document,
    say) raise `Refused`, carrying the message's id and method, for transport's error handler
    (`Frames.refused`) to answer (pygls' loop would log an ERROR with a traceback and answer nothing);
  - pygls' loop parses each body with `object_hook=structure_message`, so it sees every object in a
    message, innermost first, and would take an object in the params that merely has a "jsonrpc"
    key for a message of its own. transport's reader (`Frames`) counts those (`inner_messages`)
    before it hands the body over; they stay dicts.
* `QuietClientMistakes`: pygls logs a client's mistakes (an unknown method, a refused request, a
  `$/cancelRequest` for a request already answered, a reply nobody waits for) at WARNING or ERROR,
  with tracebacks; editors show those lines to their users. This `logging.Filter` on pygls' loggers
  turns each into one line of ours at info or debug; daemon faults (-32603) keep pygls' ERROR with
  its traceback. `ToyCoderServer.report_server_error` (a public hook) stays quiet for the same.
  It recognises pygls' records by their format strings (`QUIET`): tests/unit/faces/lsp/test_pygls_adapter.py
  checks each is still in pygls' source.
"""

from __future__ import annotations

import functools
import logging
import typing
from typing import Any

import attrs
from cattrs import Converter
from lsprotocol import converters, types
from pygls.exceptions import JsonRpcException
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage, LanguageServerProtocol

from toycoder_daemon.wire import codes as codes

log = logging.getLogger(__name__)


@functools.cache
def raw_converter() -> Converter:
    """lsprotocol's converter, but custom-method params/results stay plain dicts. One per process:
    the hooks are the same for every server, and nothing registers others later."""
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


START = (types.INITIALIZE, types.INITIALIZED, types.SHUTDOWN, types.EXIT)
"""The lsprotocol-typed methods of every session: the other messages of ours stay plain dicts."""


def prepare() -> None:
    """The converter and cattrs' hooks for a session's start, generated now rather than at their
    first use (the same for every launch): START's messages in; out, pygls' message classes and
    every class an `initialize` result can hold (pygls answers with a message whose `result` is
    `Any`, so cattrs picks each value's hook by its class when it is sent)."""
    c = raw_converter()
    for method in START:
        c.get_structure_hook(types.METHOD_TO_TYPES[method][0])
    for cls in (JsonRPCResponseMessage, JsonRPCNotification, JsonRPCRequestMessage,
                *_reachable(types.InitializeResult, set())):
        c.get_unstructure_hook(cls)


def _reachable(cls: Any, seen: set[type]) -> set[type]:
    """The attrs classes `cls` is or holds (through fields, unions, lists...)."""
    for arg in typing.get_args(cls):
        _reachable(arg, seen)
    if isinstance(cls, type) and attrs.has(cls) and cls not in seen:
        seen.add(cls)
        for field in attrs.fields(cls):
            _reachable(field.type, seen)
    return seen


class Refused(Exception):
    """A message whose params pygls could not structure: the client's mistake, answered (if it is a
    request) with pygls' error code and message."""

    def __init__(self, message: dict[str, Any], error: JsonRpcException):
        super().__init__(error.message)
        self.msg_id, self.method, self.error = message.get("id"), message.get("method"), error
        self.request = "id" in message and "method" in message
        """It asks for an answer (its id may be null)."""
        cause = error.__cause__ or error
        self.reason = (str(cause).splitlines() or [""])[0]


class PlainMessages(LanguageServerProtocol):
    """See the module docstring."""

    inner_messages = 0
    """Objects with a "jsonrpc" key inside the body pygls parses next (set by transport.Frames)."""

    def structure_message(self, data: dict[str, Any]) -> Any:
        if "jsonrpc" not in data:
            return data
        if self.inner_messages > 0:
            self.inner_messages -= 1
            return data
        try:
            return super().structure_message(data)
        except JsonRpcException as e:
            raise Refused(data, e) from e


def _refused(record: logging.LogRecord) -> JsonRpcException | None:
    """The client's JsonRpcException a record carries (a refused request), else None."""
    error = record.exc_info[1] if record.exc_info else None
    if isinstance(error, JsonRpcException) and error.code != codes.INTERNAL_ERROR:
        return error
    return None


def _first_arg(record: logging.LogRecord) -> Any:
    return record.args[0] if isinstance(record.args, tuple) and record.args else None


QUIET: dict[str, tuple[int, str]] = {
    'Cancel notification for unknown message id "%s"': (logging.DEBUG, "$/cancelRequest for %r, which is not running"),
    "Ignoring notification for unknown method %r": (logging.DEBUG, "notification for unknown method %r ignored"),
    'Received response to unknown message id "%s"': (logging.DEBUG, "reply to %r ignored: nothing waits for it"),
    "Failed to handle request %r, unknown method %r": (logging.INFO, "request %r: unknown method %r"),
    "Server shutting down. No more requests!": (logging.INFO, "message after shutdown ignored"),
    "Ignoring work done progress cancel for unknown token %s": (logging.DEBUG, "progress cancel for unknown token %s"),
    "Unsupported client-provided TextDocumentContentChangeEvent. "
    "Please update / submit a Pull Request to your LSP client.": (
        logging.INFO, "a ranged didChange, though text sync is full: its text taken whole"),
}
"""pygls' format string -> (our level, our line) for the client's mistakes it logs loudly."""

REFUSED = ('Exception occurred for message "%s"', "Failed to handle request %s %s %s")
"""pygls' records of a request answered with an error: quiet when that error is the client's."""

UNSTRUCTURED = "Unable to deserialize message\n%s"
"""pygls' record of params it could not structure: `Refused` is answered and logged by
transport.Frames.refused."""
UNHANDLED = "Unable to handle message"
"""pygls' loop's record of a message that raised (`Refused` among them) while it was handled."""


class QuietClientMistakes(logging.Filter):
    """See the module docstring. Add it to each logger named in LOGGERS (`install`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.msg
        if not isinstance(msg, str):
            return True
        if msg in QUIET:
            level, line = QUIET[msg]
            log.log(level, line, *(record.args if isinstance(record.args, tuple) else ()))
            return False
        if msg in REFUSED and (error := _refused(record)) is not None:
            log.info("request %s refused: %s", _first_arg(record), error.message)
            return False
        if msg == UNSTRUCTURED:
            return False
        return not (msg == UNHANDLED and record.exc_info and isinstance(record.exc_info[1], Refused))


LOGGERS = ("pygls.protocol.json_rpc", "pygls.protocol.language_server", "pygls.workspace.text_document")
"""The loggers pygls logs client mistakes on (each module's own `logging.getLogger(__name__)`)."""

_filter = QuietClientMistakes()


def install(*extra: logging.Logger) -> None:
    """Put the filter on pygls' loggers and `extra` (once each)."""
    for logger in (*(logging.getLogger(n) for n in LOGGERS), *extra):
        if _filter not in logger.filters:
            logger.addFilter(_filter)
