"""What pygls_adapter relies on in pygls, checked in-process: these fail loudly on a pygls upgrade
that changes it. Also that the LSP face reaches no private name of pygls or lsprotocol."""

from __future__ import annotations

import ast
import inspect
import logging
import re
from pathlib import Path

import pygls.io_
import pygls.lsp.server
import pygls.protocol.json_rpc
import pygls.protocol.language_server
import pygls.server
import pygls.workspace.text_document
import pytest
from pygls.exceptions import JsonRpcInvalidParams

from toycoder_daemon.faces.lsp import converter as pygls_adapter
from toycoder_daemon.faces.lsp.converter import QUIET, REFUSED, UNHANDLED, UNSTRUCTURED, Refused
from toycoder_daemon.faces.lsp.server import ToyCoderProtocol, make_server

PACKAGE = Path(pygls_adapter.__file__).parent

def _strings(*modules: object) -> set[str]:
    """Every string literal in these modules' source (adjacent literals joined, as Python joins them)."""
    return {n.value for m in modules for n in ast.walk(ast.parse(inspect.getsource(m)))  # type: ignore[arg-type]
            if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def test_the_records_the_filter_knows_are_still_pygls_records() -> None:
    logging_modules = (pygls.protocol.json_rpc, pygls.protocol.language_server, pygls.workspace.text_document)
    strings = _strings(*logging_modules, pygls.io_)
    assert [fmt for fmt in [*QUIET, *REFUSED, UNSTRUCTURED, UNHANDLED] if fmt not in strings] == []
    # each module logs on its own name (`logging.getLogger(__name__)`)
    assert set(pygls_adapter.LOGGERS) == {m.__name__ for m in logging_modules}


def test_custom_method_params_stay_plain_dicts() -> None:
    ls = make_server()
    msg = ls.protocol.structure_message({"jsonrpc": "2.0", "id": 1, "method": "toycoder/prompt",
                                         "params": {"sessionId": "s", "text": "hi", "nested": {"a": [1]}}})
    assert msg.params == {"sessionId": "s", "text": "hi", "nested": {"a": [1]}}
    note = ls.protocol.structure_message({"jsonrpc": "2.0", "method": "toycoder/whatever", "params": {"x": 1}})
    assert note.params == {"x": 1}


def test_objects_inside_a_message_with_a_jsonrpc_key_stay_dicts() -> None:
    ls = make_server()
    assert isinstance(ls.protocol, ToyCoderProtocol)
    ls.protocol.inner_messages = 1  # what rpc_io's reader counted in the body
    inner = {"jsonrpc": "2.0", "id": 7}  # not a message at all: pygls would fail structuring it
    assert ls.protocol.structure_message(inner) is inner
    msg = ls.protocol.structure_message({"jsonrpc": "2.0", "id": 1, "method": "toycoder/x", "params": {"i": inner}})
    assert msg.params == {"i": inner} and ls.protocol.inner_messages == 0


def test_params_pygls_cannot_structure_are_refused_with_the_id(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    ls = make_server()
    with pytest.raises(Refused) as e:
        ls.protocol.structure_message({"jsonrpc": "2.0", "id": 4, "method": "textDocument/hover", "params": {"x": 1}})
    assert (e.value.msg_id, e.value.method) == (4, "textDocument/hover")
    assert isinstance(e.value.error, JsonRpcInvalidParams) and e.value.error.code == -32602
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []  # pygls' traceback is filtered


def test_our_subclasses_of_pygls_classes_touch_none_of_its_private_attributes() -> None:
    # through `self`, which tests/unit/test_public_api.py allows (other reaches into pygls are checked there)
    theirs = {n for m in (pygls.protocol.json_rpc, pygls.protocol.language_server, pygls.server, pygls.lsp.server)
              for n in re.findall(r"self\.(_\w+)", inspect.getsource(m))}
    ours = set(re.findall(r"self\.(_\w+)", "".join((PACKAGE / f).read_text() for f in ("server.py", "converter.py"))))
    assert "_request_futures" in theirs and ours & theirs == set()
