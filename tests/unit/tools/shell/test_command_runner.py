"""The seam run_command uses to run elsewhere (ports.CommandRunner, offered by a Frontend), in
process: what the tool hands a runner and makes of its answer, the fallback when it cannot start,
sub-agents, and the ACP terminal runner against a scripted client (cancel races, error answers)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from helpers import AllowAll
from inproc_app import InProc, eventually

from toycoder_daemon.agent.subagent import ChildFrontend
from toycoder_daemon.core.ports import CommandNotStarted, CommandOutput, CommandRequest
from toycoder_daemon.core.util import secrets
from toycoder_daemon.faces.acp.client import ClientError
from toycoder_daemon.faces.acp.terminal import TerminalFailed, TerminalRunner, Terminals, terminal_runner
from toycoder_daemon.tools.base import ToolContext
from toycoder_daemon.tools.permission import PermissionGate
from toycoder_daemon.tools.registry import ToolRegistry
from toycoder_daemon.tools.shell.run_command import run_command
from toycoder_daemon.tools.shell.sandbox import boot, probe
from toycoder_daemon.tools.workspace import Workspace


class FakeRunner:
    """Answers every command with `answer` (or raises it), recording the requests."""

    where = "the test's runner"

    def __init__(self, answer: CommandOutput | Exception):
        self.answer = answer
        self.requests: list[CommandRequest] = []

    async def run(self, request: CommandRequest) -> CommandOutput:
        self.requests.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class Offering(AllowAll):
    def __init__(self, runner: Any):
        self.runner = runner

    def command_runner(self) -> Any:
        return self.runner


async def run(ws: Path, runner: Any, command: str, **args: Any) -> Any:
    reg = ToolRegistry(PermissionGate(["run_command"]))
    reg.register(run_command, enabled=True)
    return await reg.dispatch("run_command", json.dumps({"command": command, **args}),
                              ToolContext(Workspace(ws), Offering(runner), "call-7"))


async def test_run_command_hands_the_runner_our_launcher_and_scrubbed_environment(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SOME_API_KEY", "abcdefgh-secret")
    runner = FakeRunner(CommandOutput("hello\n", False, exit_code=4))
    out = await run(tmp_path, runner, "echo hello")
    [req] = runner.requests
    assert out.status == "completed" and out.output.startswith("$ echo hello\nexit code 4 (")
    assert out.output.endswith("\nhello")
    assert req.tool_call_id == "call-7" and req.cwd == probe.LAUNCH_CWD and req.timeout == 120.0
    assert "SOME_API_KEY" not in req.env and req.env.get("PATH") == os.environ["PATH"]
    spec = json.loads(req.argv[-1])
    assert req.argv[1:3] == ("-I", "-S") and spec["command"] == "echo hello"
    assert req.argv[-2] == boot.keep_env_arg(req.env) and spec["daemon"] is None  # the client's process is its parent
    assert spec["cwd"] == str(tmp_path)  # where the launcher changes to once the command is confined


async def test_a_runner_that_cannot_start_it_leaves_it_to_local_execution(tmp_path) -> None:
    runner = FakeRunner(CommandNotStarted("terminal/create failed: method not found"))
    out = await run(tmp_path, runner, "echo local-run")
    assert len(runner.requests) == 1 and out.status == "completed"
    assert "exit code 0" in out.output and out.output.endswith("local-run")


async def test_timeout_and_signal_read_as_locally(tmp_path) -> None:
    out = await run(tmp_path, FakeRunner(CommandOutput("partial", False, timed_out=True, signal="SIGTERM")),
                    "sleep 9", timeout=3)
    assert "timed out after 3s; the command and everything it started were killed\npartial" in out.output
    out = await run(tmp_path, FakeRunner(CommandOutput("", False, signal="SIGKILL")), "true")
    assert "killed by signal SIGKILL (" in out.output and out.output.endswith("(no output)")


async def test_an_end_only_output_shows_the_start_seen_a_gap_and_the_end(tmp_path, monkeypatch) -> None:
    key = "sk-gap0123456789abcdefghijk"
    monkeypatch.setattr(secrets, "_values", {key})
    head = "START\n" + "a" * 20_000
    window = key[12:] + "z" * 100  # the client's window starts inside a key: that piece is redacted too
    out = await run(tmp_path, FakeRunner(CommandOutput(window, True, head=head, exit_code=0)), "gen")
    text = out.output
    assert text.index("START") < text.index("[... output cut from the middle (the test's runner kept only "
                                            "the end of the output) ...]") < text.index("***zzz")
    assert key[12:20] not in text and len(text) < 31_000


async def test_the_lsp_like_frontend_and_sub_agents(tmp_path) -> None:
    runner = FakeRunner(CommandOutput("", False, exit_code=0))
    assert ChildFrontend(Offering(runner), "parent").command_runner() is runner  # a sub-agent uses its parent's
    assert ChildFrontend(AllowAll(), "parent").command_runner() is None


async def test_an_app_turn_runs_commands_through_the_frontends_runner(inproc) -> None:
    p: InProc = inproc({"tools": {"enabled": ["run_command"]}, "permissions": {"allow": ["run_command(echo *)"]}})
    p.frontend.runner = FakeRunner(CommandOutput("from-the-runner\n", False, exit_code=0))
    p.script.add({"tool_calls": [{"name": "run_command", "arguments": {"command": "echo x"}}]}, {"text": "ok"})
    sid = p.new_session()
    await p.prompt(sid, "go")
    [done] = p.frontend.of(sid, "tool_result")
    assert "from-the-runner" in done.output and done.status == "completed"  # type: ignore[attr-defined]


# ---- the ACP runner against a scripted client ------------------------------------------------------

class Client:
    """terminal/* answered from the test: `create_gate` holds create, `fail` makes a method raise."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.create_gate: asyncio.Event | None = None
        self.exit_gate = asyncio.Event()
        self.fail: dict[str, Exception] = {}
        self.create_answer: dict[str, Any] | None = None
        self.ended: list[tuple[str, str]] = []  # (kill or release, terminal id)

    async def _call(self, name: str) -> None:
        self.calls.append(name)
        if name in self.fail:
            raise self.fail[name]

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """acp_client.RawClient: terminal/<x> goes to the method below."""
        named = {"create": self.create_terminal, "output": self.terminal_output,
                 "wait_for_exit": self.wait_for_terminal_exit, "kill": self.kill_terminal,
                 "release": self.release_terminal}[method.removeprefix("terminal/")]
        return await (named(params) if method == "terminal/create" else named(params["sessionId"], params["terminalId"]))

    async def create_terminal(self, params: dict[str, Any]) -> Any:
        await self._call("create")
        if self.create_gate is not None:
            await self.create_gate.wait()
        return self.create_answer if self.create_answer is not None else {"terminalId": "t1"}

    async def terminal_output(self, session_id: str, terminal_id: str) -> Any:
        await self._call("output")
        return {"output": "out", "truncated": False}

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str) -> Any:
        await self._call("wait")
        await self.exit_gate.wait()
        return {"exitCode": 0}

    async def kill_terminal(self, session_id: str, terminal_id: str) -> None:
        self.ended.append(("kill", terminal_id))
        await self._call("kill")
        self.exit_gate.set()

    async def release_terminal(self, session_id: str, terminal_id: str) -> None:
        self.ended.append(("release", terminal_id))
        await self._call("release")


REQUEST = CommandRequest("c1", ("/bin/sh", "-c", "x"), {"PATH": "/bin"}, "/", 60.0, 100)


def runner_for(client: Client) -> tuple[TerminalRunner, list[tuple[str, str]], Terminals]:
    shown: list[tuple[str, str]] = []
    terminals = Terminals(usable=True)
    runner = terminal_runner(client, "s1", terminals, lambda call, tid: shown.append((call, tid)))
    assert runner is not None
    return runner, shown, terminals


async def test_a_cancel_while_create_is_pending_frees_the_terminal_it_makes() -> None:
    client = Client()
    client.create_gate = asyncio.Event()
    runner, shown, _ = runner_for(client)
    task = asyncio.ensure_future(runner.run(REQUEST))
    await eventually(lambda: client.calls == ["create"], "terminal/create asked")
    task.cancel()  # delivered before the answer below: the task's step was scheduled first
    client.create_gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.calls == ["create", "kill", "release"] and shown == []


async def test_cancelled_twice_it_still_kills_and_releases() -> None:
    client = Client()
    runner, shown, _ = runner_for(client)
    release_gate = asyncio.Event()
    real_kill = client.kill_terminal

    async def slow_kill(session_id: str, terminal_id: str) -> None:
        await release_gate.wait()
        await real_kill(session_id, terminal_id)

    client.kill_terminal = slow_kill  # type: ignore[method-assign]
    task = asyncio.ensure_future(runner.run(REQUEST))
    await eventually(lambda: "wait" in client.calls, "waiting for the exit")
    task.cancel()
    await asyncio.sleep(0)
    task.cancel()  # as a cancelled prompt request cancels its turn again
    await asyncio.sleep(0)
    release_gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.calls[-2:] == ["kill", "release"] and shown == [("c1", "t1")]


async def test_create_answered_with_an_error_is_not_started_and_terminals_stop() -> None:
    client = Client()
    client.fail["create"] = ClientError(-32601, "Method not found", {"method": "terminal/create"})
    runner, _, terminals = runner_for(client)
    with pytest.raises(CommandNotStarted):
        await runner.run(REQUEST)
    assert terminals.usable is False and terminal_runner(client, "s1", terminals, lambda c, t: None) is None


async def test_an_error_after_the_start_fails_the_call_and_releases() -> None:
    client = Client()
    client.fail["wait"] = ClientError(-32603, "Internal error", {"why": "terminal crashed"})
    runner, _, terminals = runner_for(client)
    with pytest.raises(TerminalFailed, match="failed while the command ran"):
        await runner.run(REQUEST)
    assert client.calls[-1] == "release" and "kill" not in client.calls and terminals.usable


async def test_timeout_kills_then_reads_the_exit_and_the_output() -> None:
    client = Client()
    runner, _, _ = runner_for(client)
    done = await runner.run(CommandRequest("c1", ("/bin/sh",), {}, "/", 0.05, 100))
    assert done.timed_out and done.output == "out" and done.exit_code == 0
    assert client.calls[-4:] == ["kill", "wait", "output", "release"]


@pytest.mark.parametrize(("answer", "ended"), [
    ({"terminalId": 7}, [("kill", "7"), ("release", "7")]),  # an id we can still name: freed
    ({"terminalId": ""}, []),
    ({}, []),
])
async def test_a_malformed_create_success_fails_the_call_and_never_runs_it_locally(
        tmp_path, answer: dict[str, Any], ended: list[tuple[str, str]]) -> None:
    """The client answered terminal/create with a success we cannot read: it may have started the
    command, so running it here too could run it twice (review 469)."""
    client = Client()
    client.create_answer = answer
    runner, shown, terminals = runner_for(client)
    out = await run(tmp_path, runner, "echo ran >> marker")
    assert not (tmp_path / "marker").exists(), out.output
    assert out.status == "failed" and "answered terminal/create with a malformed result" in out.output
    assert "not run again here" in out.output
    assert client.calls[0] == "create" and client.calls.count("create") == 1 and shown == []
    assert client.ended == ended
    assert terminals.usable is False  # later commands run locally: this client's answers cannot be read
