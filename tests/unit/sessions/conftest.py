"""Fixtures of the session tests: `scans` records the session index's file scans."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, bool]]:
    """Every file scan the index makes: (start offset, end offset, ran on an event loop)."""
    from toycoder_daemon.sessions import listing

    seen: list[tuple[int, int, bool]] = []
    real = listing._scan

    def recording(path: Path, entry: Any, st: Any) -> Any:
        try:
            asyncio.get_running_loop()
            on_loop = True
        except RuntimeError:
            on_loop = False
        out = real(path, entry, st)
        seen.append((entry.offset, out.offset, on_loop))
        return out

    monkeypatch.setattr(listing, "_scan", recording)
    return seen
