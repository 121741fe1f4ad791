"""Fixtures every tier shares: an isolated environment, a workspace, the scripted model server, the
in-process App, the daemon (whose `start_daemon` each tier's conftest.py gives: in-process in unit/, a
process in e2e/), and the tier markers.

The tests live in tier folders (tests/README.md): unit/, e2e/, editors/, golden/. Every test gets the
marker of its folder here, so `pytest -m unit` runs the in-process tier alone.

Shared helpers live in helpers.py (processes, sessions, AllowAll, scripted replies, config) and
waiting.py (wait_until), at tests/ (put on sys.path below) whatever the folder of the test that
imports them; import them from there, never from a conftest (every conftest.py is the module
'conftest'). Two runs of the suite at once on one machine must not see each other: everything a test
writes is under its tmp_path, ports are chosen by the OS, and processes are found and killed by
per-test markers.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the shared helpers, for every tier

from helpers import (  # noqa: E402
    MARKER_VAR,
    TESTS,
    TIERS,
    TOY_MCP_SERVER,
    kill_process_groups,
    processes_of_test,
    unique_marker,
)
from rpc import Daemon  # noqa: E402
from warm_helpers import RUNTIME_VAR, new_runtime_dir, stop_servers  # noqa: E402

from toycoder_daemon.testing.fake_llm import FakeLLM  # noqa: E402


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test gets its tier folder's marker (test_hygiene.py checks that every test file is in one)."""
    for item in items:
        path = item.path.resolve()
        if path.is_relative_to(TESTS) and (tier := path.relative_to(TESTS).parts[0]) in TIERS:
            item.add_marker(getattr(pytest.mark, tier))


@pytest.fixture(scope="session", autouse=True)
def warm_runtime_dir() -> Iterator[Path]:
    """A fork-server runtime dir for this run alone: the daemons the tests start are served warm by
    this run's server (a launch costs milliseconds), and at the end this run's servers are stopped,
    no other run's. A test's daemons still end with the test: conftest kills the launchers it
    started, and a launcher's death ends its warm child (which carries the test's marker too)."""
    directory = new_runtime_dir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(RUNTIME_VAR, str(directory))
        yield directory
    stop_servers(directory)
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test reads the developer's config, keys or data."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    for var, sub in (("XDG_DATA_HOME", ".local/share"), ("XDG_STATE_HOME", ".local/state"),
                     ("XDG_CACHE_HOME", ".cache")):  # e.g. Neovim's log: not shared with another run
        monkeypatch.setenv(var, str(home / sub))
    monkeypatch.setenv("TOYCODER_DATA_DIR", str(tmp_path / "data"))
    # the developer's keyring (setup stores keys there through secret-tool) is never reached
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", f"unix:path={tmp_path / 'no-session-bus'}")
    for var in ("TOYCODER_CONFIG", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture(autouse=True)
def process_marker(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A marker unique to this test in the environment every process it starts inherits; at teardown
    the process groups of whatever still carries it are killed (and nothing else on the machine).

    Module-scoped fixtures are set up before this one, so their processes (test_mcp's shared server)
    do not carry a test's marker and outlive it as they should."""
    marker = unique_marker()
    monkeypatch.setenv(MARKER_VAR, marker)
    yield marker
    if leftovers := processes_of_test(marker):
        print(f"killing the process groups of leftover processes {leftovers}")  # shown if the test failed
        kill_process_groups(leftovers)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "README.md").write_text("# Demo\nA tiny project.\n")
    (ws / "src" / "app.py").write_text("def add(a, b):\n    return a + b\n")
    return ws


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture
def http_server() -> Iterator[Callable[..., str]]:
    """http_server(*args) -> (the /mcp URL of a toy server on 127.0.0.1, its process; with "--sse" the
    /sse URL of the HTTP+SSE transport), killed at teardown."""
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> tuple[str, subprocess.Popen[str]]:
        proc = subprocess.Popen([sys.executable, TOY_MCP_SERVER, "--http", "0", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        procs.append(proc)
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        return f"http://127.0.0.1:{port}/{'sse' if '--sse' in args else 'mcp'}", proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture
async def daemon(start_daemon: Callable[..., Awaitable[Daemon]]) -> Daemon:
    """An initialized daemon with the default config: `start_daemon()` of the test's tier (unit/conftest.py:
    the LSP face in this process; e2e/conftest.py: a daemon process)."""
    return await start_daemon()


@pytest.fixture
async def inproc(tmp_path: Path, workspace: Path) -> AsyncIterator[Callable[..., Any]]:
    """inproc(extra={config sections}) -> an InProc App (scripted model, recording frontend)."""
    from inproc_app import InProc

    made: list[InProc] = []

    def make(extra: dict[str, Any] | None = None, script: Any = None) -> InProc:
        made.append(InProc(workspace, tmp_path / "data", extra, script))
        return made[-1]

    yield make
    for p in made:
        await p.close()
