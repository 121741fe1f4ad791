"""How long the fork server waits with no daemon running: `daemon.warm_idle_minutes`, from a daemon.

The server reads no config (nothing a launch brings may shape it before a fork), so a warm child
tells it once the daemon's config is loaded: the child's set-up (warm/child.py) sets `report`, and
the App calls `configured`. In a cold daemon `report` is None and nothing is sent; the server keeps
its default until a warm daemon's config says otherwise.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

report: Callable[[float], None] | None = None


def configured(minutes: float) -> None:
    """The loaded config's limit, passed on to this daemon's fork server if it has one."""
    if report is not None:
        with contextlib.suppress(OSError):  # the server is gone: it has nothing to wait for any more
            report(minutes)
