"""Helpers shared by the test files: processes a test started, sessions, tool results, a frontend.

Process hygiene: every test runs with a unique TOYCODER_TEST_MARKER in its environment (conftest's
autouse fixture), which every process it starts inherits (daemons, their commands, MCP servers,
editors). Finding "our" processes means matching that marker or a per-test unique string in a
command line; killing means killing only the process groups those processes lead, never by name.
Linux only (/proc), as the rest of the suite.
"""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MARKER_VAR = "TOYCODER_TEST_MARKER"


def unique_marker(prefix: str = "toycoder-test") -> str:
    """A string no other test, and no other run of the suite, puts on a command line."""
    return f"{prefix}-{uuid.uuid4().hex}"


def sleep_command(seconds: int) -> str:
    """`sleep N.<12 unique digits>`: a command whose processes only this test can match.

    The fraction is random per call, so processes_with(cmd) finds this sleep and no other one on the
    machine; the duration stays N seconds (give or take a microsecond)."""
    return f"sleep {seconds}.{uuid.uuid4().int % 10**12:012d}"


def _live_pids() -> list[int]:
    return [int(e) for e in os.listdir("/proc") if e.isdigit()]


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True  # gone


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    return not _is_zombie(pid)


def proc_dir(pid: int) -> str:
    """The /proc entry of `pid` (opened as a pidfd by tests that signal through one)."""
    return f"/proc/{pid}"


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def environ_of(pid: int) -> list[bytes]:
    """The NAME=VALUE entries of a process's environment as the kernel shows it."""
    return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")


def has_env(pid: int, entry: bytes) -> bool:
    """The process (still there, and ours to read) has `entry` in its environment."""
    try:
        return entry in environ_of(pid)
    except OSError:
        return False


def live_pids() -> list[int]:
    return _live_pids()


def maps_of(pid: int) -> str:
    """/proc/<pid>/maps: what the process has mapped (a library loaded shows up here)."""
    return Path(f"/proc/{pid}/maps").read_text()


def cmdline_of(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def cwd_of(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/cwd")


def memory_holds(pid: int, needles: list[bytes]) -> list[bytes]:
    """Which of `needles` are anywhere in the process's writable memory (read as root or its tracer)."""
    found: set[bytes] = set()
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in maps_of(pid).splitlines():
            fields = line.split()
            if "w" not in fields[1] or (len(fields) > 5 and fields[5] in ("[vvar]", "[vsyscall]")):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            try:
                mem.seek(start)
                data = mem.read(end - start)
            except OSError:
                continue
            found |= {n for n in needles if n in data}
    return sorted(found)


def child_processes(parent: int, needle: str = "") -> list[int]:
    """Live children of `parent` (a process this test started) whose command line contains `needle`."""
    found = []
    for pid in _live_pids():
        try:
            after_name = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except (OSError, IndexError):
            continue
        if int(after_name[1]) == parent and after_name[0] != "Z" and needle.encode() in cmdline:
            found.append(pid)
    return found


def _command_lines() -> Iterator[tuple[int, bytes]]:
    """(pid, raw NUL-separated argv) of every process we may read."""
    for pid in _live_pids():
        try:
            yield pid, Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue


def processes_with(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line contains `marker` (a unique string)."""
    needle = marker.encode()
    return [pid for pid, raw in _command_lines() if needle in raw.replace(b"\0", b" ") and not _is_zombie(pid)]


def processes_running(command: str) -> list[int]:
    """Live processes whose own argv is `command` (words split on spaces): the program itself
    running, not a process that only carries the words in an argument (a `sh -c` line, the sandbox
    launcher's spec), which exists before the program has started and after it has ended."""
    argv = command.encode().replace(b" ", b"\0") + b"\0"
    return [pid for pid, raw in _command_lines() if raw == argv and not _is_zombie(pid)]


def processes_of_test(marker: str) -> list[int]:
    """Live processes started (directly or not) under this test: their environment holds the marker."""
    entry = f"{MARKER_VAR}={marker}".encode()
    own = os.getpid()
    found = []
    for pid in _live_pids():
        if pid == own:
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:  # another user's process, or gone
            continue
        if entry in environ and not _is_zombie(pid):
            found.append(pid)
    return found


def kill_process_groups(pids: list[int]) -> None:
    """SIGKILL the process group of each pid (pids the caller found by a unique marker).

    A process in our own group (a child started without a new session) is killed alone: killing the
    group would kill pytest."""
    ours = os.getpgrp()
    for pid in pids:
        try:
            group = os.getpgid(pid)
            if group == ours:
                os.kill(pid, signal.SIGKILL)
            else:
                os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass  # already gone


async def new_session(d: Any, **params: Any) -> str:
    """toycoder/session/new on an rpc.Daemon; returns the session id."""
    return str((await d.call("toycoder/session/new", params))["sessionId"])


def tool_results(d: Any, sid: str) -> list[dict[str, Any]]:
    """The tool_result updates a Daemon received for a session, in order."""
    return [u["update"] for u in d.updates(sid) if u["update"]["kind"] == "tool_result"]


def write_call(path: str, content: str) -> dict[str, Any]:
    """A scripted model reply that calls write_file."""
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}}]}


class AllowAll:
    """A Frontend for in-process tool calls: ignores events, allows everything, answers no question."""

    def emit(self, event: Any) -> None:
        pass

    async def confirm(self, request: Any) -> str:
        return "allow_once"

    async def ask(self, question: str, options: Any) -> None:
        return None

    def can_apply_edit(self) -> bool:
        return False  # an editor without workspace.applyEdit

    async def apply_edit(self, path: Any, before: str, after: str) -> Any:
        raise AssertionError("no editor edits without the capability")

    async def editor_text(self, path: Any) -> None:
        return None  # an editor that serves no files (the disk is the truth)

    def writes_all_files(self) -> bool:
        return False

    def command_runner(self) -> None:
        return None  # commands run locally


def rss_bytes(pid: int) -> int:
    """A process's resident memory (VmRSS), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def pipe_writers(pid: int) -> list[int]:
    """The process's threads (ids; the main thread's is the pid) that sleep in write(2) on a full
    pipe (anon_pipe_write on 6.x)."""
    found = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):  # the thread ended meanwhile
            if Path(f"/proc/{pid}/task/{tid}/wchan").read_text().strip().endswith("pipe_write"):
                found.append(int(tid))
    return found


_HELD_IMPORT = '''"""Test stand-in: importing {package} waits for a release file, then imports the real one."""
import os, sys, time
open(os.environ["HELD_IMPORT_ENTERED"], "w").close()
while not os.path.exists(os.environ["HELD_IMPORT_RELEASE"]):
    time.sleep(0.01)
here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
del sys.modules["{package}"]
import {package} as real
sys.modules["{package}"] = real
'''


def held_import(tmp: Path, package: str) -> tuple[dict[str, str], Path, Path]:
    """A stand-in `package` first on a daemon's path whose import waits until the test releases it:
    (the environment to start the daemon with, the file that says the import began, the file to
    create to release it). The honest way to show what a process does before a heavy import is in."""
    shim = tmp / "held-import"
    (shim / package).mkdir(parents=True)
    (shim / package / "__init__.py").write_text(_HELD_IMPORT.format(package=package))
    entered, release = tmp / f"{package}-entered", tmp / f"{package}-release"
    root = Path(__file__).resolve().parent.parent
    env = {"HELD_IMPORT_ENTERED": str(entered), "HELD_IMPORT_RELEASE": str(release),
           "TOYCODER_WARM": "0",  # what a fresh process does before the import: a cold start's
           "PYTHONPATH": os.pathsep.join([str(shim), str(root), os.environ.get("PYTHONPATH", "")])}
    return env, entered, release
