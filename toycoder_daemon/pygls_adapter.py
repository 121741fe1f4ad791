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
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from cattrs import Converter
from lsprotocol import converters, types
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage, LanguageServerProtocol

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
