"""The `toycoder` command's entry point: Ctrl-C while the client's modules load (Rich, pydantic: about
half a second) is one line and exit status 130, like a Ctrl-C at any later moment (main.main)."""

from __future__ import annotations

import signal
import sys
from typing import Any


def _while_loading(signum: int, frame: Any) -> None:
    sys.stderr.write("toycoder: cancelled\n")
    raise SystemExit(130)  # nothing started yet: nothing to stop


def run() -> int:
    signal.signal(signal.SIGINT, _while_loading)
    from toycoder_daemon.cli.main import main

    return main()
