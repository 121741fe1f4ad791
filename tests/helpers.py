"""Helpers shared by the test files of every tier: processes a test started, sessions, tool results, a
frontend, the scripted model replies and config several tiers use, and the paths (ROOT, TESTS, the toy
MCP server) that must not depend on how deep a test file sits in tests/.

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
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toycoder_daemon.testing.fake_llm import FakeLLM

MARKER_VAR = "TOYCODER_TEST_MARKER"
TESTS = Path(__file__).resolve().parent
"""tests/: the shared helpers live here, whatever tier folder a test file is in."""
ROOT = TESTS.parent
"""The repository."""
TIERS = ("unit", "e2e", "editors", "golden")
"""The tier folders under tests/, each one a pytest marker of the same name (conftest.py applies it,
pyproject.toml registers it)."""
TOY_MCP_SERVER = str(TESTS / "mcp_servers" / "toy_server.py")
"""The toy MCP server (stdio, or streamable HTTP with `--http PORT`); `--tag` marks its command line."""
SLOW_MCP_START = "3"
"""Seconds a slow toy server takes to start: long enough for a turn to show that it waits."""


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


def open_fds() -> set[int]:
    """This process's open fds (not the one listing them, gone by the time it is read)."""
    found = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            os.readlink(f"/proc/self/fd/{name}")
        except FileNotFoundError:
            continue
        found.add(int(name))
    return found


def signal_set(pid: int, field: str) -> set[int]:
    """The signals of /proc/<pid>/status's SigIgn, SigBlk... (a hex mask, bit n-1 for signal n)."""
    with open(f"/proc/{pid}/status") as f:
        line = next(ln for ln in f if ln.startswith(f"{field}:"))
    mask = int(line.split()[1], 16)
    return {n for n in range(1, 65) if mask >> (n - 1) & 1}


ANCESTOR_ENVIRONS = """python3 - <<'EOF'
import os
pid = os.getpid()
while pid > 0:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            print(pid, f.read().replace(b"\\0", b" "))
    except OSError as e:
        print(pid, "unreadable", e.errno)
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    pid = int(stat[stat.rindex(")") + 2:].split()[1])
try:
    with open("/proc/1/environ", "rb") as f:
        print("init", f.read().replace(b"\\0", b" "))
except OSError as e:
    print("init unreadable", e.errno)
print("walked")
EOF"""
"""A command (for a sandboxed shell) printing the environment of each of its ancestors it can see,
then of pid 1 (a PID namespace's init), then "walked"."""


def status_hex(pid: int | str, field: str) -> int:
    """A hexadecimal field of /proc/<pid>/status (CapBnd, CapEff...)."""
    with open(f"/proc/{pid}/status") as f:
        return int(f.read().split(f"{field}:\t")[1][:16], 16)


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def descends_from(pid: int, ancestor: int) -> bool:
    """`pid` is `ancestor` or runs under it (a tool or rg the daemon started); False once either is gone."""
    try:
        while pid > 1:
            if pid == ancestor:
                return True
            pid = parent_of(pid)
    except (OSError, IndexError, ValueError):
        pass
    return False


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


def run_call(command: str, **args: Any) -> dict[str, Any]:
    """A scripted model reply that calls run_command."""
    return {"tool_calls": [{"name": "run_command", "arguments": {"command": command, **args}}]}


def plan_call(*steps: tuple[str, str]) -> dict[str, Any]:
    """A scripted model reply that calls update_plan with (content, status) steps, the first one high priority."""
    return {"tool_calls": [{"name": "update_plan", "arguments": {"entries": [
        {"content": c, "status": s, "priority": "high" if i == 0 else "medium"} for i, (c, s) in enumerate(steps)]}}]}


IN_PROGRESS = [("read the code", "completed"), ("fix the bug", "in_progress"), ("run the tests", "pending")]
"""A plan in (content, status) steps for plan_call: one done, one under way, one to do."""


def planner_call(query: str = "Add a subtract() function with tests") -> dict[str, Any]:
    """A scripted model reply that calls the planner sub-agent; PLANNER_ANSWER is what it answers."""
    return {"text": "Let me plan.", "tool_calls": [{"name": "planner", "arguments": {"query": query}}]}


PLANNER_ANSWER = "I would do this:\n1. Read src/app.py\n2. Add subtract() (high)\n3. Add tests (low)"
SEEDED = [("Read src/app.py", "medium", "pending"), ("Add subtract()", "high", "pending"),
          ("Add tests", "low", "pending")]
"""The plan PLANNER_ANSWER seeds: (content, priority, status) per entry."""


def slow_and_mute_mcp_servers(tag: str) -> str:
    """Config YAML: `toy`, a safe toy server SLOW_MCP_START seconds slow to start, and `mute`, one that
    never answers its handshake (start_timeout 1)."""
    return ("mcp_servers:\n"
            f"  toy: {{command: {sys.executable}, args: [{TOY_MCP_SERVER}, --tag, {tag}, --start-delay, '{SLOW_MCP_START}'],"
            " permission: safe}\n"
            f"  mute: {{command: {sys.executable}, args: [{TOY_MCP_SERVER}, --tag, {tag}, --start-delay, '60'],"
            " start_timeout: 1}\n")


def write_config(path: Path, llm: FakeLLM, *, keys: list[str] | None = None, extra: str = "") -> Path:
    """A config for the scripted model server `llm` (keys: its API keys; extra: more YAML). auto_title is
    off: every test scripts each model request (test_titles.py turns it on)."""
    keys = keys or ["test-key-1"]
    path.write_text(
        "providers:\n  openai:\n    api_keys: [" + ", ".join(f'"{k}"' for k in keys) + "]\n"
        f"    base_url: {llm.base_url}\n    models: {{default: fake-model, fast: fake-fast}}\n"
        "default_provider: openai\n"
        "agent: {max_steps: 16, max_retries: 2, retry_interval: 0.05, auto_title: false}\n" + extra
    )
    return path


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

    async def diagnostics(self, uris: Any, wait_ms: int) -> None:
        return None  # an editor that reports no diagnostics


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
    env = {"HELD_IMPORT_ENTERED": str(entered), "HELD_IMPORT_RELEASE": str(release),
           "TOYCODER_WARM": "0",  # what a fresh process does before the import: a cold start's
           "PYTHONPATH": os.pathsep.join([str(shim), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return env, entered, release


FAKE_SECRET_TOOL = '''#!{python}
"""A stand-in for libsecret's secret-tool (the OS, not our code): store/lookup by attributes, kept in
keyring.json beside it; each call's arguments and environment go to calls.jsonl."""
import json, os, sys
from pathlib import Path

here = Path(__file__).resolve().parent
with open(here / "calls.jsonl", "a") as log:
    log.write(json.dumps({{"argv": sys.argv[1:], "env": dict(os.environ)}}) + "\\n")
if {fail}:
    sys.stderr.write("secret-tool: Cannot autolaunch D-Bus without X11 $DISPLAY\\n")
    sys.exit(1)
store = here / "keyring.json"
items = json.loads(store.read_text()) if store.exists() else []
command, args = sys.argv[1], sys.argv[2:]
label = args.pop(0).removeprefix("--label=") if args and args[0].startswith("--label=") else None
attrs = dict(zip(args[::2], args[1::2]))
if command == "store":
    secret = sys.stdin.read()
    items = [i for i in items if i["attrs"] != attrs] + [{{"label": label, "attrs": attrs, "secret": secret}}]
    store.write_text(json.dumps(items))
    sys.exit(0)
if command == "lookup":
    for i in items:
        if all(i["attrs"].get(k) == v for k, v in attrs.items()):
            sys.stdout.write(i["secret"])
            sys.exit(0)
    sys.exit(1)
sys.exit(2)
'''


def fake_secret_tool(folder: Path, *, fail: bool = False) -> Path:
    """Write a fake `secret-tool` into `folder` (put it first on PATH); its store is folder/keyring.json,
    its calls folder/calls.jsonl. `fail`: every call fails as with no Secret Service to answer."""
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / "secret-tool"
    tool.write_text(FAKE_SECRET_TOOL.format(python=sys.executable, fail=fail))
    tool.chmod(0o755)
    return tool


class GatedRg:
    """In-process: the workspace listing's rg runs (FileIndex looks `run_rg` up at each listing) wait
    for `open`, which the test sets: what a completion answers before then is not this daemon's rg's."""

    def __init__(self, monkeypatch: Any) -> None:
        import asyncio

        from toycoder_daemon.tools.search import rg

        self.open = asyncio.Event()
        real = rg.run_rg

        async def gated(*args: Any, **kwargs: Any) -> tuple[int, str]:
            await self.open.wait()
            return await real(*args, **kwargs)

        monkeypatch.setattr(rg, "run_rg", gated)
