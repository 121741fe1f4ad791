"""A stdio MCP server's output is bounded while it is read, and its process never outlives the
daemon's (issue 28). A 60 MB answer is dropped as it streams (memory stays near MAX_MESSAGE_BYTES)
and the call it answered fails at once; the server runs under launch.py, which ends the group when
the daemon dies. The real daemon exiting or SIGKILLed with a server that ignores stdin EOF and
TERM: e2e/test_mcp_exit_e2e.py."""

from __future__ import annotations

import sys
import tracemalloc
from pathlib import Path

import anyio
import mcp_types as mt
from waiting import scaled

from toycoder_daemon.tools.mcp import stdio as mcp_stdio
from toycoder_daemon.tools.mcp.stdio import MAX_MESSAGE_BYTES, StdioChild, parse_line

BIG = 60 << 20

SERVER = f"""
import sys
for line in sys.stdin:
    if '"id":7' in line:
        sys.stdout.write('{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"text","text":"')
        chunk = "x" * (1 << 20)
        for _ in range({BIG >> 20}):
            sys.stdout.write(chunk)
        sys.stdout.write('"}}]}}}}\\n')
    else:
        sys.stdout.write('{{"jsonrpc":"2.0","id":8,"result":{{"content":[{{"type":"text","text":"small"}}]}}}}\\n')
    sys.stdout.flush()
"""


def request(n: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"t","arguments":{}}}' % n


async def test_a_60_mb_answer_is_dropped_while_it_is_read_and_its_call_fails(tmp_path: Path) -> None:
    script = tmp_path / "big_server.py"
    script.write_text(SERVER)
    child = StdioChild("big", sys.executable, [str(script)], env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    tracemalloc.start()
    try:
        async with child.connect() as (read, write):
            tracemalloc.reset_peak()
            await write.send(parse_line(request(7)))  # type: ignore[arg-type]
            with anyio.fail_after(scaled(60)):
                first = await read.receive()
            peak = tracemalloc.get_traced_memory()[1]
            await write.send(parse_line(request(8)))  # type: ignore[arg-type]
            with anyio.fail_after(scaled(20)):
                second = await read.receive()
    finally:
        tracemalloc.stop()
    assert not isinstance(first, Exception) and isinstance(first.message, mt.JSONRPCError)
    assert first.message.id == 7 and f"{BIG + 70}" not in first.message.error.message
    assert "over the" in first.message.error.message and "limit" in first.message.error.message
    assert not isinstance(second, Exception) and isinstance(second.message, mt.JSONRPCResponse)
    assert second.message.id == 8  # the stream goes on after the dropped line
    assert peak < 3 * MAX_MESSAGE_BYTES, f"peak {peak / 2**20:.0f} MiB while a {BIG >> 20} MiB line streamed"


async def test_the_server_runs_under_the_launcher_in_its_group_and_exits_as_it_does(tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    script = tmp_path / "exit3.py"
    script.write_text(f"import os, sys\nopen({str(seen)!r}, 'w').write(f'{{os.getpgrp()}} {{os.getppid()}}')\n"
                      "sys.stdin.read()\nsys.exit(3)\n")
    child = StdioChild("x", sys.executable, [str(script)], env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    async with child.connect():
        launcher = child.pid
        assert launcher in mcp_stdio._live
        with anyio.fail_after(scaled(20)):
            while not seen.exists() or not seen.read_text():
                await anyio.sleep(0.02)
    assert seen.read_text() == f"{launcher} {launcher}"  # the launcher leads the group and is the parent
    assert child.returncode == 3 and launcher not in mcp_stdio._live  # stdin closed: it exited, with its code


def test_the_launcher_outlives_the_daemon_thread_that_started_it(tmp_path: Path) -> None:
    """The death signal comes when the parent *thread* ends: the launcher ends the group only when
    the daemon process is gone. Here the thread that started it ends and the signal comes again
    while this process (its daemon) lives: the server keeps running and its exit code comes back."""
    import json
    import os
    import signal
    import subprocess
    import threading

    from helpers import kill_process_groups, processes_with, unique_marker
    from waiting import wait_until

    tag = unique_marker("toycoder-launcher-thread")
    trigger = tmp_path / "exit-now"
    code = f"import os, sys, time\nwhile not os.path.exists({str(trigger)!r}): time.sleep(0.05)\nsys.exit(5)"
    started: list[subprocess.Popen[bytes]] = []

    def spawn() -> None:
        started.append(subprocess.Popen(
            [sys.executable, "-I", "-S", mcp_stdio.LAUNCH, str(os.getpid())], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, start_new_session=True,
            env={**os.environ, mcp_stdio.ARGV_VAR: json.dumps([sys.executable, "-c", code, tag])}))

    t = threading.Thread(target=spawn)
    t.start()
    t.join()  # the forking thread is gone; this process is not
    launcher = started[0]
    try:
        wait_until(lambda: processes_with(tag), scaled(20), "the server")
        os.kill(launcher.pid, signal.SIGUSR2)  # the death signal once more, its daemon still alive
        trigger.write_text("")
        assert launcher.wait(scaled(20)) == 5  # the server's own exit, not the group ended (-9)
    finally:
        kill_process_groups([launcher.pid])
        launcher.wait(scaled(10))
