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


def test_the_config_preparation_reads_no_variable_and_no_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server prepares the config's parser on a built-in text: nothing of a launch (the server
    has none, and must read none) is looked up, and the text is a valid config."""
    import builtins
    import os

    from toycoder_daemon.config import model

    looked_up: list[str] = []

    class Watched(dict[str, str]):
        def get(self, key: str, default: object = None) -> object:
            looked_up.append(key)
            return super().get(key, default)

        def __getitem__(self, key: str) -> str:
            looked_up.append(key)
            return super().__getitem__(key)

        def __contains__(self, key: object) -> bool:
            looked_up.append(str(key))
            return super().__contains__(key)

    def no_open(*a: object, **k: object) -> None:
        raise AssertionError(f"opened {a[0]!r}")

    monkeypatch.setattr(os, "environ", Watched(os.environ))
    monkeypatch.setattr(builtins, "open", no_open)
    monkeypatch.setattr(os, "open", no_open)
    model.prepare()
    assert looked_up == []
    config = model.parse_config(model.SAMPLE, model.Path("sample.yaml"))
    assert config.providers["openai"].models.default == "sample" and config.agent.max_steps == 4


def test_the_lsp_preparation_answers_an_initialize_and_opens_no_app(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's throwaway `initialize` starts no thread (the server must fork single-threaded)
    and opens no App (which would read a config, HOME and the data dir of no launch)."""
    import threading

    from toycoder_daemon.faces.lsp import server as lsp_server

    def no_app(*a: object) -> None:
        raise AssertionError("the preparation opened an App")

    monkeypatch.setattr(lsp_server.App, "open", no_app)
    answers: list[bytes] = []
    monkeypatch.setattr(lsp_server.FrameWriter, "write", lambda self, body: answers.append(body))
    threads = threading.active_count()
    lsp_server.prepare()
    assert threading.active_count() == threads
    assert len(answers) == 1 and b'"capabilities"' in answers[0] and b'"toycoder"' in answers[0]
    prepared = lsp_server.server_for("/some/config.yaml")  # the prepared server, taken once
    assert prepared.config_path == "/some/config.yaml" and prepared.app is None
    assert lsp_server.server_for(None) is not prepared


def test_the_acp_preparation_reads_nothing_of_a_launch_and_leaves_an_agent_for_one_serve(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The server prepares the ACP face's agent and handler before any fork: no variable is looked
    up (the data dir's catalog waits for its first use), no file is opened, no thread is started;
    the first serve_acp of the process takes them with its own config path, the next makes its own."""
    import builtins
    import os
    import threading

    from toycoder_daemon.faces.acp import agent

    looked_up: list[str] = []

    class Watched(dict[str, str]):
        def get(self, key: str, default: object = None) -> object:
            looked_up.append(key)
            return super().get(key, default)

        def __getitem__(self, key: str) -> str:
            looked_up.append(key)
            return super().__getitem__(key)

        def __contains__(self, key: object) -> bool:
            looked_up.append(str(key))
            return super().__contains__(key)

    def no_open(*a: object, **k: object) -> None:
        raise AssertionError(f"opened {a[0]!r}")

    threads = threading.active_count()
    with monkeypatch.context() as m:
        m.setattr(os, "environ", Watched(os.environ))
        m.setattr(builtins, "open", no_open)
        m.setattr(os, "open", no_open)
        agent.prepare()
    assert looked_up == [] and threading.active_count() == threads
    prepared, handle = agent._agent("/some/config.yaml")
    assert prepared.config_path == "/some/config.yaml" and prepared.answered_initialize is False
    assert agent._agent(None)[0] is not prepared  # taken once
