"""Nothing in the workspace runs before the command is confined (review 469): the launcher is a
Python process started before Landlock and the namespaces apply, so a `json.py` (or any module it
imports) in the workspace must never be imported by it, whether run_command runs it here, an ACP
client runs it in its terminal, or the daemon probes what the kernel allows."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import AllowAll

from toycoder_daemon.cli.rpc import default_daemon_command
from toycoder_daemon.core.ports import CommandOutput, CommandRequest
from toycoder_daemon.core.util import secrets
from toycoder_daemon.tools.base import ToolContext
from toycoder_daemon.tools.permission import PermissionGate
from toycoder_daemon.tools.registry import ToolRegistry
from toycoder_daemon.tools.shell.run_command import run_command
from toycoder_daemon.tools.shell.sandbox import probe
from toycoder_daemon.tools.workspace import Workspace

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the launcher is Linux only")

LAUNCHER_IMPORTS = ["json", "signal", "ctypes", "select"]
"""Modules launch.py (and landlock.py, contain.py, tree.py) import before the command is confined."""


class ClientTerminal:
    """A CommandRunner as an ACP client's terminal is: it runs the argv it is given, in the cwd and
    with the variables it is given (on top of its own environment)."""

    where = "the test's client terminal"

    def __init__(self) -> None:
        self.requests: list[CommandRequest] = []

    async def run(self, request: CommandRequest) -> CommandOutput:
        self.requests.append(request)
        proc = await asyncio.create_subprocess_exec(
            *request.argv, cwd=request.cwd, env={**secrets.child_env(), **request.env},
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await proc.communicate()
        return CommandOutput(out.decode(), False, exit_code=proc.returncode)


class Offering(AllowAll):
    def __init__(self, runner: Any):
        self.runner = runner

    def command_runner(self) -> Any:
        return self.runner


def plant(ws: Path, module: str, marker: Path) -> None:
    """A module any earlier command or edit may have written into the workspace root."""
    (ws / f"{module}.py").write_text(f"open({str(marker)!r}, 'w').write('ran before the sandbox')\n"
                                     "raise ImportError('shadowed')\n")


async def run(ws: Path, frontend: Any, command: str) -> Any:
    reg = ToolRegistry(PermissionGate(["run_command"]))
    reg.register(run_command, enabled=True)
    return await reg.dispatch("run_command", json.dumps({"command": command}),
                              ToolContext(Workspace(ws), frontend, "call-1"))


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


@pytest.mark.parametrize("module", LAUNCHER_IMPORTS)
async def test_a_workspace_module_does_not_run_in_the_local_launcher(ws: Path, tmp_path: Path, module: str) -> None:
    marker = tmp_path / "outside-marker"
    plant(ws, module, marker)
    out = await run(ws, AllowAll(), "pwd")
    assert not marker.exists(), out.output
    # the command itself still runs in the workspace (the launcher changes there before the exec)
    assert out.status == "completed" and "exit code 0" in out.output and out.output.endswith(f"\n{ws.resolve()}")


@pytest.mark.parametrize("module", LAUNCHER_IMPORTS)
async def test_a_workspace_module_does_not_run_in_the_launcher_in_a_clients_terminal(
        ws: Path, tmp_path: Path, module: str) -> None:
    marker = tmp_path / "outside-marker"
    plant(ws, module, marker)
    terminal = ClientTerminal()
    out = await run(ws, Offering(terminal), "pwd")
    [request] = terminal.requests
    assert not marker.exists(), out.output
    assert not Path(request.cwd).resolve().is_relative_to(ws.resolve())  # the client starts it elsewhere
    assert request.argv[1:3] == ("-I", "-S")
    assert "exit code 0" in out.output and out.output.endswith(f"\n{ws.resolve()}")


async def test_a_workspace_that_is_gone_fails_the_command_instead_of_running_it_elsewhere(ws: Path) -> None:
    terminal = ClientTerminal()
    ws.rmdir()
    ws.mkdir()  # a Workspace needs it at the start; it goes away before the launcher changes to it
    reg = ToolRegistry(PermissionGate(["run_command"]))
    reg.register(run_command, enabled=True)
    ctx = ToolContext(Workspace(ws), Offering(terminal), "call-2")
    ws.rmdir()
    out = await reg.dispatch("run_command", json.dumps({"command": "touch here-or-nowhere"}), ctx)
    assert "exit code 127" in out.output and "No such file or directory" in out.output
    assert not Path(probe.LAUNCH_CWD, "here-or-nowhere").exists()


def test_the_probe_does_not_import_from_the_daemons_directory(tmp_path: Path, monkeypatch) -> None:
    marker = tmp_path / "outside-marker"
    for module in LAUNCHER_IMPORTS:
        plant(tmp_path, module, marker)
    monkeypatch.chdir(tmp_path)  # a daemon is often started in the workspace
    found = probe._detect()
    assert not marker.exists()
    assert found.platform == sys.platform and found.landlock >= 0


@pytest.mark.parametrize("python", [(3, 11), (3, 10)])
def test_the_terminal_clients_daemon_does_not_import_from_the_workspace(tmp_path: Path, python) -> None:
    """The daemon itself holds the keys: `python -m` in the workspace would import its json.py."""
    ws = tmp_path / "ws"
    ws.mkdir()
    marker = tmp_path / "outside-marker"
    plant(ws, "json", marker)
    config = tmp_path / "config.yaml"
    config.write_text("agent: {max_steps: 3}\n")
    done = subprocess.run([*default_daemon_command(python), "--check-config", "--config", str(config)], cwd=ws,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert not marker.exists(), done.stderr
    assert done.returncode == 0 and json.loads(done.stdout)["valid"] is True, done.stderr


@pytest.mark.parametrize("module", ["json", "argparse"])
def test_a_plain_python_m_daemon_in_the_workspace_imports_nothing_from_it(tmp_path: Path, module: str) -> None:
    """An editor configured with `[python, "-m", "toycoder_daemon"]` starts it in the workspace: the
    daemon drops the current directory from sys.path before importing anything else."""
    ws = tmp_path / "ws"
    ws.mkdir()
    marker = tmp_path / "outside-marker"
    plant(ws, module, marker)
    config = tmp_path / "config.yaml"
    config.write_text("agent: {max_steps: 3}\n")
    done = subprocess.run([sys.executable, "-m", "toycoder_daemon", "--check-config", "--config", str(config)], cwd=ws,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert not marker.exists(), done.stderr
    assert done.returncode == 0 and json.loads(done.stdout)["valid"] is True, done.stderr
