"""No MCP server outlives the real daemon (issue 28), even one that ignores stdin EOF and TERM and
started a child in its group: when the editor closes the daemon's stdin (each editor restart) the
daemon ends the groups before it exits (stdin closed, TERM, KILL); when the daemon is SIGKILLed,
the server's launcher gets its death signal and ends the group (TERM, then KILL 2 s later). The
in-process side (the launcher, the output cap): unit/tools/mcp/test_mcp_limits.py."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from helpers import kill_process_groups, processes_with, unique_marker
from waiting import scaled, wait_until_async

STUBBORN = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.fork() == 0:  # a child in the server's group, as deaf as the server
    os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", sys.argv[1] + "-child"])
while True:  # never reads stdin: its EOF means nothing here
    time.sleep(1)
"""


@pytest.fixture
def stubborn(tmp_path: Path) -> tuple[str, str]:
    """(the config's mcp_servers YAML, the tag on the server's and its child's command lines)."""
    script = tmp_path / "stubborn_mcp.py"
    script.write_text(STUBBORN)
    tag = unique_marker("toycoder-e2e-stubborn-mcp")
    return (f"mcp_servers:\n  deaf: {{command: {sys.executable}, args: [{script}, {tag}], start_timeout: 300}}\n",
            tag)


async def _running(tag: str) -> dict[int, int]:
    """pid -> pgid of the server and its child, once both run."""
    found = await wait_until_async(lambda: len(processes_with(tag)) == 2 and processes_with(tag), scaled(30),
                                   "the stubborn server and its child")
    groups = {pid: os.getpgid(pid) for pid in found}
    assert len(set(groups.values())) == 1  # one group: the server's launcher leads it
    return groups


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_each_editor_restart_leaves_no_mcp_process(start_daemon, stubborn: tuple[str, str]) -> None:
    config, tag = stubborn
    seen: list[int] = []
    try:
        for _ in range(2):  # the editor restarts the daemon: close stdin, start another
            d = await start_daemon(extra=config)
            groups = await _running(tag)
            seen += list(groups)
            assert await d.close() == 0
            await wait_until_async(lambda: processes_with(tag) == [], scaled(5), "the server and its child gone")
            for pgid in set(groups.values()):
                await wait_until_async(lambda g=pgid: not _group_alive(g), scaled(5), "the server's group gone")
    finally:
        kill_process_groups(processes_with(tag))
    assert len(seen) == 4


async def test_a_sigkilled_daemon_leaves_no_mcp_process(start_daemon, stubborn: tuple[str, str]) -> None:
    config, tag = stubborn
    try:
        d = await start_daemon(extra=config)
        groups = await _running(tag)
        os.kill(d.daemon_pid(), signal.SIGKILL)
        # the launcher's death signal: TERM (ignored here), then KILL 2 s later
        await wait_until_async(lambda: processes_with(tag) == [], scaled(10), "the server and its child gone")
        for pgid in set(groups.values()):
            await wait_until_async(lambda g=pgid: not _group_alive(g), scaled(5), "the server's group gone")
    finally:
        kill_process_groups(processes_with(tag))
