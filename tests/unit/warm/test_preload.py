"""The fork server's preload list names modules that exist: a renamed or deleted one would silently be
left out, and every launch would import it. The server itself, through real launches: e2e/test_warm.py."""

from __future__ import annotations

import importlib.util
import sys
from types import FrameType

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the warm start is Linux's by default")


def test_every_module_the_server_preloads_exists() -> None:
    # a renamed or deleted module of ours would silently be left out: every launch would import it
    from toycoder_daemon.warm.server import PRELOAD

    ours = [name for name in PRELOAD if name.startswith("toycoder_daemon.")]
    missing = [name for name in ours if importlib.util.find_spec(name) is None]
    assert ours and missing == []


def test_after_the_preparation_an_initialize_answer_generates_no_hook() -> None:
    """What the server prepares stays prepared: no unstructure hook of the classes a child's
    `initialize` answer holds is generated again (each would be compiled anew in every child)."""
    from lsprotocol import types
    from pygls.protocol import JsonRPCNotification, JsonRPCResponseMessage

    from toycoder_daemon.faces.lsp import converter
    from toycoder_daemon.warm import server

    server.prepare()
    generated: list[str] = []

    def watch(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_name.startswith("make_dict_unstructure_fn"):
            generated.append(frame.f_code.co_name)

    c = converter.raw_converter()
    sys.setprofile(watch)
    try:
        for cls in (JsonRPCResponseMessage, JsonRPCNotification, types.InitializeResult, types.ServerCapabilities,
                    types.TextDocumentSyncOptions, types.ServerInfo):
            c.get_unstructure_hook(cls)
    finally:
        sys.setprofile(None)
    assert generated == []
