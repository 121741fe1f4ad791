"""The unit tier's fixtures: `start_daemon` runs the LSP face in this process (tests/inproc.py), so
conftest's `daemon` does too. Nothing in this tier starts the daemon process (e2e/ does)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import write_config
from inproc import start_lsp
from rpc import Daemon

from toycoder_daemon.testing.fake_llm import FakeLLM


@pytest.fixture
async def start_daemon(tmp_path: Path, workspace: Path, llm: FakeLLM) -> AsyncIterator[Callable[..., Any]]:
    """start_daemon(keys=..., extra=yaml, caps=..., progress=...) -> an initialized Daemon whose "process" is
    the LSP face on a task of this event loop (inproc.start_lsp)."""
    daemons: list[Daemon] = []

    async def start(*, keys: list[str] | None = None, extra: str = "", caps: dict[str, Any] | None = None,
                    progress: bool = False, init: bool = True) -> Daemon:
        cfg = write_config(tmp_path / f"config{len(daemons)}.yaml", llm, keys=keys, extra=extra)
        d = await start_lsp(cfg)
        daemons.append(d)
        if init:
            await d.initialize(workspace, toycoder_caps=caps, progress=progress)
        return d

    yield start
    for d in daemons:
        assert await d.close() == 0
