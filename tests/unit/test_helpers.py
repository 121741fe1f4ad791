"""The shared test helpers themselves: waiting (deadlines, scaling, failure messages) and the process
helpers (unique markers, finding and killing only a test's own process groups)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest
from helpers import (
    MARKER_VAR,
    alive,
    child_processes,
    kill_process_groups,
    processes_of_test,
    processes_running,
    processes_with,
    sleep_command,
    unique_marker,
)
from waiting import SCALE_VAR, scaled, timeout_scale, wait_until, wait_until_async


def test_wait_until_returns_the_first_truthy_value() -> None:
    values = iter([0, None, "", "ready", "later"])
    assert wait_until(lambda: next(values), 5, "a value", interval=0) == "ready"


def test_wait_until_fails_with_what_it_waited_for_and_the_description(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SCALE_VAR, "1")
    with pytest.raises(AssertionError, match=r"timed out after 0\.1s waiting for the moon \(last value: \[\]\)\n"
                                             r"sky: cloudy"):
        wait_until(lambda: [], 0.05 * 2, "the moon", describe=lambda: "sky: cloudy")


def test_the_scale_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SCALE_VAR, raising=False)
    assert timeout_scale() == 1 and scaled(10) == 10
    monkeypatch.setenv(SCALE_VAR, "2.5")
    assert scaled(10) == 25
    with pytest.raises(AssertionError, match=r"timed out after 0\.2s"):  # 0.08 s asked, 2.5 times as long given
        wait_until(lambda: False, 0.08, "nothing")
    for bad in ("fast", "0", "-1"):
        monkeypatch.setenv(SCALE_VAR, bad)
        with pytest.raises(ValueError, match=SCALE_VAR):
            timeout_scale()


async def test_wait_until_async_accepts_coroutines_and_wakes_on_the_event() -> None:
    calls = []

    async def ready() -> str | None:
        calls.append(1)
        return "done" if len(calls) >= 3 else None

    assert await wait_until_async(ready, 5, "ready", interval=0) == "done"

    wake, box = asyncio.Event(), list[str]()
    # a two-minute poll interval: without the wake-up this wait would outlast the guard below
    waiter = asyncio.ensure_future(wait_until_async(lambda: box, 120, "the box", interval=120, wake=wake))
    await asyncio.sleep(0)
    box.append("item")
    wake.set()
    assert await asyncio.wait_for(waiter, scaled(30)) == ["item"]
    with pytest.raises(AssertionError, match="waiting for the empty box"):
        await wait_until_async(lambda: [], 0.05, "the empty box")


def test_a_unique_sleep_is_found_and_its_group_killed() -> None:
    command = sleep_command(60)
    assert command != sleep_command(60) and command.startswith("sleep 60.")
    proc = subprocess.Popen(command.split(), start_new_session=True)
    try:
        assert wait_until(lambda: processes_with(command), what="the sleep") == [proc.pid]
        assert processes_with(unique_marker()) == []
        kill_process_groups([proc.pid])
        assert proc.wait(timeout=scaled(10)) < 0
        assert processes_with(command) == [] and not alive(proc.pid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_running_command_is_told_from_a_process_that_only_names_it() -> None:
    command = sleep_command(60)
    proc = subprocess.Popen(["sh", "-c", f"{command}; :"], start_new_session=True)  # `; :` keeps sh forking
    try:
        sleep = wait_until(lambda: processes_running(command), what="the sleep")
        assert len(sleep) == 1 and sleep[0] != proc.pid
        assert sorted(processes_with(command)) == sorted([proc.pid, sleep[0]])  # the shell names it too
        program, longer = command.split()[0], command + " x"  # only the whole argv matches
        assert processes_running(program) == [] and processes_running(longer) == []
    finally:
        kill_process_groups([proc.pid])
        proc.wait()


def test_processes_of_test_finds_what_this_test_started_and_only_that(process_marker: str) -> None:
    assert os.environ[MARKER_VAR] == process_marker
    mine = subprocess.Popen(["sleep", "60"], start_new_session=True)
    other = subprocess.Popen(["sleep", "60"], start_new_session=True, env={**os.environ, MARKER_VAR: "someone-else"})
    try:
        assert wait_until(lambda: mine.pid in processes_of_test(process_marker), what="the marked sleep")
        assert other.pid not in processes_of_test(process_marker)
        assert mine.pid in child_processes(os.getpid(), "sleep") and other.pid in child_processes(os.getpid())
        kill_process_groups(processes_of_test(process_marker))
        assert mine.wait(timeout=scaled(10)) < 0
        assert other.poll() is None, "a process without this test's marker was killed"
    finally:
        for p in (mine, other):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_process_in_our_own_group_is_killed_alone() -> None:
    child = subprocess.Popen(["sleep", "60"])  # same process group as pytest
    try:
        assert os.getpgid(child.pid) == os.getpgrp()
        kill_process_groups([child.pid])  # must not take pytest with it
        assert child.wait(timeout=scaled(10)) < 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.mark.parametrize("stray", [b"", b"hello from a print\n", b"Content-Length: 99\r\n\r\n{}"])
async def test_read_to_end_fails_on_stdout_that_is_not_frames(stray: bytes) -> None:
    from rpc import Daemon, frame

    out = frame({"jsonrpc": "2.0", "method": "x", "params": {}}) + stray
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", f"import sys; sys.stdout.buffer.write({out!r})", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
    d = Daemon(proc)
    assert await proc.wait() == 0
    if stray:
        with pytest.raises((AssertionError, KeyError, asyncio.IncompleteReadError)):
            await d.read_to_end()
    else:
        await d.read_to_end()
    assert [n["method"] for n in d.notifications] == ["x"]
