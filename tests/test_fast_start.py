"""The fast first answer to `initialize` (before pygls is imported) equals pygls' own answer, through
real daemons (the other capability shapes are compared in-process in test_pygls_adapter.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import client_capabilities
from rpc import Daemon


def vscode_caps() -> dict:
    return default_converter().unstructure(client_capabilities("visual-studio-code"), types.ClientCapabilities)


CAPS = {
    "utf8 first": {"general": {"positionEncodings": ["utf-8", "utf-16"]}},  # pygls answers this one itself
}


async def initialize(workspace: Path, caps: dict, *, fast: bool) -> tuple[dict, Daemon]:
    d = await Daemon.start(env={} if fast else {"TOYCODER_NO_FAST_START": "1"})
    result = await d.call("initialize", {"processId": None, "rootUri": workspace.as_uri(), "capabilities": caps})
    d.notify("initialized", {})
    return result, d


@pytest.mark.parametrize("name", [*CAPS, "visual-studio-code"])
async def test_fast_answer_matches_pygls(workspace: Path, name: str) -> None:
    caps = vscode_caps() if name == "visual-studio-code" else CAPS[name]
    fast, d1 = await initialize(workspace, caps, fast=True)
    slow, d2 = await initialize(workspace, caps, fast=False)
    try:
        assert json.dumps(fast, sort_keys=True) == json.dumps(slow, sort_keys=True)
        # pygls was set up for the answered initialize, and nothing else answered it
        assert (await d1.call("toycoder/session/new", {}))["sessionId"]
        assert d1.orphans == [] and all(n["method"] != "initialize" for n in d1.notifications)
    finally:
        await d1.close()
        await d2.close()


async def test_odd_capabilities_do_not_break_the_start(workspace: Path) -> None:
    d = await Daemon.start()
    try:
        result = await d.call("initialize", {"processId": None, "rootUri": workspace.as_uri(),
                                             "capabilities": {"textDocument": {"synchronization": "yes"}}})
        assert result["serverInfo"]["name"] == "toycoder-daemon"
        d.notify("initialized", {})
        assert (await d.call("toycoder/session/new", {}))["sessionId"]
    finally:
        await d.close()
