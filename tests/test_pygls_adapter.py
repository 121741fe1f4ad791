"""What pygls_adapter relies on in pygls, checked in-process: these fail loudly on a pygls upgrade
that changes it. Also: our fast initialize answer (stdio.py, written before pygls is imported)
equals the answer pygls computes for the same params."""

from __future__ import annotations

import inspect
import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.protocol import LanguageServerProtocol, default_converter
from pytest_lsp import client_capabilities

from toycoder_daemon import __version__, stdio
from toycoder_daemon.pygls_adapter import PYGLS_VERSION, initialize_without_reply
from toycoder_daemon.server import make_server


def vscode_caps() -> dict[str, Any]:
    caps: dict[str, Any] = default_converter().unstructure(client_capabilities("visual-studio-code"),
                                                           types.ClientCapabilities)
    return caps


CAPS: dict[str, Any] = {
    "minimal": {},
    "toycoder": {"experimental": {"toycoder": {"permissionRequest": True, "askUser": True}},
                 "window": {"workDoneProgress": True}},
    "will save flags": {"textDocument": {"synchronization": {"willSave": True, "willSaveWaitUntil": False}}},
}


def test_the_pygls_this_adapter_was_written_for() -> None:
    assert version("pygls") == PYGLS_VERSION, (
        "pygls changed: re-check pygls_adapter.py (lsp_initialize's generator protocol, the message "
        "classes raw_converter hooks) and then update PYGLS_VERSION")
    # lsp_initialize yields (handler, args, callback) for the user's feature and returns the result
    assert inspect.isgeneratorfunction(LanguageServerProtocol.lsp_initialize)
    # QuietClientMistakes overrides these private methods and uses these attributes
    for name, params in [("_send_handler_result", ["self", "future", "msg_id"]),
                         ("_handle_request", ["self", "msg_id", "method_name", "params"]),
                         ("_handle_notification", ["self", "method_name", "params"]),
                         ("_handle_cancel_notification", ["self", "msg_id"]),
                         ("_handle_response", ["self", "msg_id", "result", "error"]),
                         ("_get_handler", ["self", "feature_name"]), ("_send_response", None)]:
        method = getattr(LanguageServerProtocol, name)
        if params is not None:
            assert list(inspect.signature(method).parameters) == params, name
    assert isinstance(make_server().protocol._request_futures, dict)


def test_custom_method_params_stay_plain_dicts() -> None:
    ls = make_server()
    msg = ls.protocol.structure_message({"jsonrpc": "2.0", "id": 1, "method": "toycoder/prompt",
                                         "params": {"sessionId": "s", "text": "hi", "nested": {"a": [1]}}})
    assert msg.params == {"sessionId": "s", "text": "hi", "nested": {"a": [1]}}
    note = ls.protocol.structure_message({"jsonrpc": "2.0", "method": "toycoder/whatever", "params": {"x": 1}})
    assert note.params == {"x": 1}


@pytest.mark.parametrize("name", [*CAPS, "visual-studio-code"])
def test_initialize_without_reply_sets_pygls_up_and_matches_the_fast_answer(name: str, workspace: Path) -> None:
    caps = vscode_caps() if name == "visual-studio-code" else CAPS[name]
    params = {"processId": None, "rootUri": workspace.as_uri(), "capabilities": caps}
    fast = stdio.capabilities(caps)
    ls = make_server()
    result = initialize_without_reply(ls.protocol, ls.converter, params)
    answered = json.loads(json.dumps(ls.converter.unstructure(result, types.InitializeResult)))
    assert answered == {"capabilities": fast, "serverInfo": {"name": "toycoder-daemon", "version": __version__}}
    # pygls' own state and our INITIALIZE feature ran
    assert ls.workspace.root_path == str(workspace)
    assert ls.app is not None and ls.app.workspace.root == workspace.resolve()
    assert ls.client_capabilities is not None
