"""The e2e tier's fixtures: `start_daemon` starts the real daemon process (`python -m toycoder_daemon`,
served warm by this run's fork server), so conftest's `daemon` is one too."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import write_config
from rpc import Daemon

from toycoder_daemon.testing.fake_llm import FakeLLM


@pytest.fixture
async def start_daemon(tmp_path: Path, workspace: Path, llm: FakeLLM) -> AsyncIterator[Callable[..., Any]]:
    """start_daemon(keys=..., extra=yaml, caps=..., progress=...) -> an initialized Daemon."""
    daemons: list[Daemon] = []

    async def start(*, keys: list[str] | None = None, extra: str = "", caps: dict[str, Any] | None = None,
                    progress: bool = False, args: tuple[str, ...] = (), init: bool = True) -> Daemon:
        cfg = write_config(tmp_path / f"config{len(daemons)}.yaml", llm, keys=keys, extra=extra)
        d = await Daemon.start("--config", str(cfg), "--log-level", "INFO", *args)
        daemons.append(d)
        if init:
            await d.initialize(workspace, toycoder_caps=caps, progress=progress)
        return d

    yield start
    for d in daemons:
        await d.close()
        # shown by pytest only when the test failed: the daemon's own account of what happened
        print(f"--- daemon {d.proc.pid} stderr ---\n{await d.stderr_text()}")
