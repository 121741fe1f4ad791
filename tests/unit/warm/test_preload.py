"""The fork server's preload list names modules that exist: a renamed or deleted one would silently be
left out, and every launch would import it. The server itself, through real launches: e2e/test_warm.py."""

from __future__ import annotations

import importlib.util
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the warm start is Linux's by default")


def test_every_module_the_server_preloads_exists() -> None:
    # a renamed or deleted module of ours would silently be left out: every launch would import it
    from toycoder_daemon.warm.server import PRELOAD

    ours = [name for name in PRELOAD if name.startswith("toycoder_daemon.")]
    missing = [name for name in ours if importlib.util.find_spec(name) is None]
    assert ours and missing == []
