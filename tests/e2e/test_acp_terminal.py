"""run_command in the ACP client's terminal (issue 15): the client side of `terminal/*` is played
by the test with real subprocesses, as an editor would (its own environment plus the agent's `env`,
output kept up to outputByteLimit from the end, kill = SIGTERM to what it started).

The face runs in-process (tests/inproc.py) except for one flow through the real daemon."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block
from acp.schema import (
    ClientCapabilities,
    CreateTerminalResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
)
from acp_client import Editor, acp_daemon, acp_face, new_session
from helpers import MARKER_VAR, processes_running, processes_with, run_call, sleep_command, write_config
from waiting import scaled, wait_until_async

from toycoder_daemon.core.util import secrets
from toycoder_daemon.testing.fake_llm import FakeLLM
from toycoder_daemon.tools.shell.sandbox import landlock, probe

CAPS = ClientCapabilities(terminal=True)
ENABLED = "tools: {enabled: [run_command]}\n"


class Terminal:
    """One terminal of the client: a real process and what it printed."""

    def __init__(self, proc: asyncio.subprocess.Process, limit: int | None):
        self.proc = proc
        self.limit = limit
        self.raw = bytearray()  # everything, for the test's eyes
        self.kept = bytearray()  # what the client retains (its end, within the limit)
        self.truncated = False
        self.released = False
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while chunk := await self.proc.stdout.read(65536):
            self.raw += chunk
            self.kept += chunk
            if self.limit is not None and len(self.kept) > self.limit:
                del self.kept[: len(self.kept) - self.limit]
                while self.kept and (self.kept[0] & 0xC0) == 0x80:  # a character boundary
                    del self.kept[0]
                self.truncated = True

    def status(self) -> dict[str, Any] | None:
        code = self.proc.returncode
        if code is None:
            return None
        return {"exit_code": code} if code >= 0 else {"signal": signal.Signals(-code).name}


class TerminalEditor(Editor):
    """The test's editor with terminals."""

    def __init__(self) -> None:
        super().__init__()
        self.terminals: dict[str, Terminal] = {}
        self.calls: list[tuple[str, str]] = []  # (method, terminal id) in the order they came
        self.created: list[dict[str, Any]] = []
        self.refuse_create: RequestError | None = None
        self.polled = ""  # the start of each terminal/output answer
        self._ids = count(1)

    async def create_terminal(self, session_id: str, command: str, args: list[str] | None = None,
                              env: Any = None, cwd: str | None = None, output_byte_limit: int | None = None,
                              **_: Any) -> CreateTerminalResponse:
        self.created.append({"command": command, "args": args, "env": {e.name: e.value for e in env or []},
                             "cwd": cwd, "limit": output_byte_limit})
        if self.refuse_create is not None:
            raise self.refuse_create
        proc = await asyncio.create_subprocess_exec(
            command, *(args or []), cwd=cwd, env={**os.environ, **self.created[-1]["env"]},
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True)
        tid = f"term-{next(self._ids)}"
        self.terminals[tid] = Terminal(proc, output_byte_limit)
        self.calls.append(("create", tid))
        return CreateTerminalResponse(terminal_id=tid)

    async def terminal_output(self, session_id: str, terminal_id: str, **_: Any) -> TerminalOutputResponse:
        t = self.terminals[terminal_id]
        status = t.status()
        if status is not None:
            await t.reader
        self.polled += t.kept.decode("utf-8", "replace")[:100]
        return TerminalOutputResponse(output=t.kept.decode("utf-8", "replace"), truncated=t.truncated,
                                      exit_status=TerminalExitStatus(**status) if status else None)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **_: Any) -> Any:
        t = self.terminals[terminal_id]
        self.calls.append(("wait", terminal_id))
        await t.proc.wait()
        await t.reader
        return WaitForTerminalExitResponse(**(t.status() or {}))

    async def kill_terminal(self, session_id: str, terminal_id: str, **_: Any) -> None:
        self.calls.append(("kill", terminal_id))
        t = self.terminals[terminal_id]
        if t.proc.returncode is None:
            t.proc.terminate()

    async def release_terminal(self, session_id: str, terminal_id: str, **_: Any) -> None:
        self.calls.append(("release", terminal_id))
        t = self.terminals[terminal_id]
        if t.proc.returncode is None:
            t.proc.terminate()
        t.released = True

    def methods(self) -> list[str]:
        return [m for m, _ in self.calls if m != "wait"]


def observation(llm: FakeLLM, request: int = 1) -> str:
    return next(m for m in llm.requests[request]["body"]["messages"] if m["role"] == "tool")["content"]


def terminal_shown(f: dict[str, Any]) -> bool:
    content = f.get("params", {}).get("update", {}).get("content")
    return isinstance(content, list) and any(c.get("type") == "terminal" for c in content)


def face(tmp_path: Path, llm: FakeLLM, editor: TerminalEditor, caps: ClientCapabilities | None = CAPS) -> Any:
    config = write_config(tmp_path / "config.yaml", llm, extra=ENABLED)
    return acp_face(tmp_path, llm, config=config, caps=caps, editor=editor)


async def test_output_streams_into_the_clients_terminal_and_reaches_the_model(tmp_path, llm, workspace) -> None:
    llm.add(run_call("echo first; while [ ! -e go ]; do sleep 0.02; done; echo second; exit 3"), {"text": "ran"})
    editor = TerminalEditor()
    async with face(tmp_path, llm, editor) as (conn, _, _):
        sid = await new_session(conn, workspace)
        turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("run it")]))
        await editor.wait_for(terminal_shown)  # the tool call shows the terminal while it runs
        await wait_until_async(lambda: editor.terminals and b"first" in editor.terminals["term-1"].raw, scaled(10),
                               "the first line in the client's terminal")
        assert not turn.done()
        (workspace / "go").write_text("")
        assert (await turn).stop_reason == "end_turn"
    seen = observation(llm)
    assert seen.startswith("$ echo first;") and "\nexit code 3 (" in seen
    assert "first\nsecond" in seen
    assert editor.methods() == ["create", "release"]
    made = editor.created[0]
    assert made["cwd"] == probe.LAUNCH_CWD and made["limit"] >= 1 << 20  # the launcher changes to the workspace
    final = [u for u in editor.updates("tool_call_update") if u.get("status") == "completed"][-1]
    assert final["content"][0] == {"type": "terminal", "terminalId": "term-1"}
    assert "first\nsecond" in final["content"][1]["content"]["text"]


async def test_the_command_sees_only_our_scrubbed_environment(tmp_path, llm, workspace, monkeypatch) -> None:
    """Through the real daemon: the client's own environment holds the daemon's key (as an editor
    that started the daemon with it would); the command sees none of it."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-1")
    monkeypatch.setenv("HOLDS_THE_VALUE", "test-key-1")
    monkeypatch.setenv("CURL_HDR", "Authorization: Bearer test-key-1")  # contains the key (issue 28)
    llm.add(run_call("env"), {"text": "ran"})
    config = write_config(tmp_path / "config.yaml", llm, extra=ENABLED)
    editor = TerminalEditor()
    async with acp_daemon(tmp_path, llm, config=config, caps=CAPS, editor=editor) as (conn, _, _):
        monkeypatch.setenv("ONLY_IN_THE_CLIENT", "client-side")  # set after the daemon started
        sid = await new_session(conn, workspace)
        assert (await conn.prompt(session_id=sid, prompt=[text_block("env")])).stop_reason == "end_turn"
    raw = editor.terminals["term-1"].raw.decode()
    assert "test-key-1" not in raw and "OPENAI_API_KEY" not in raw and "HOLDS_THE_VALUE" not in raw
    assert "CURL_HDR" not in raw
    assert "ONLY_IN_THE_CLIENT" not in raw  # the client's variables do not reach it either
    assert f"{MARKER_VAR}={os.environ[MARKER_VAR]}" in raw  # the daemon's scrubbed environment does
    made = editor.created[0]
    assert made["args"][:3] == ["-I", "-S", "-c"] and '"command": "env"' in made["args"][-1]
    assert "test-key-1" not in str(made) and "OPENAI_API_KEY" not in made["env"] and "CURL_HDR" not in made["env"]
    assert f"{MARKER_VAR}={os.environ[MARKER_VAR]}" in observation(llm) and "exit code 0" in observation(llm)
    assert editor.methods() == ["create", "release"]


@pytest.mark.skipif(not sys.platform.startswith("linux") or landlock.abi_version() < 1,
                    reason="the sandbox needs Linux with Landlock")
async def test_the_clients_terminal_runs_the_command_sandboxed(tmp_path, llm, workspace) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / ".git").mkdir()
    llm.add(run_call(f"touch {outside}/f 2>&1 || echo refused-outside; touch .git/x 2>&1 || echo refused-git; "
                     "touch inside && echo wrote-inside"), {"text": "ran"})
    editor = TerminalEditor()
    async with face(tmp_path, llm, editor) as (conn, _, _):
        sid = await new_session(conn, workspace)
        await conn.prompt(session_id=sid, prompt=[text_block("run")])
    raw = editor.terminals["term-1"].raw.decode()
    assert "refused-outside" in raw and "refused-git" in raw and "wrote-inside" in raw
    assert not (outside / "f").exists() and not (workspace / ".git" / "x").exists() and (workspace / "inside").exists()
    assert '"landlock": ' in editor.created[0]["args"][-1] and "refused-outside" in observation(llm)


async def test_timeout_kills_the_command_and_releases_the_terminal(tmp_path, llm, workspace) -> None:
    sleep = sleep_command(60)
    llm.add(run_call(f"echo started; {sleep}", timeout=1), {"text": "it hung"})
    editor = TerminalEditor()
    async with face(tmp_path, llm, editor) as (conn, _, _):
        sid = await new_session(conn, workspace)
        assert (await conn.prompt(session_id=sid, prompt=[text_block("run")])).stop_reason == "end_turn"
    seen = observation(llm)
    assert "timed out after 1s" in seen and "started" in seen
    assert editor.methods() == ["create", "kill", "release"]
    assert editor.terminals["term-1"].released
    await wait_until_async(lambda: not processes_with(sleep), scaled(10), "the command's processes gone")


async def test_cancel_mid_command_kills_and_releases(tmp_path, llm, workspace) -> None:
    sleep = sleep_command(60)
    llm.add(run_call(sleep))
    editor = TerminalEditor()
    async with face(tmp_path, llm, editor) as (conn, _, _):
        sid = await new_session(conn, workspace)
        turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("run")]))
        await editor.wait_for(terminal_shown)
        await wait_until_async(lambda: processes_running(sleep), scaled(10), "the command running")
        await conn.cancel(session_id=sid)
        assert (await asyncio.wait_for(turn, scaled(10))).stop_reason == "cancelled"
        assert editor.methods() == ["create", "kill", "release"]
        await wait_until_async(lambda: not processes_with(sleep), scaled(10), "the command's processes gone")


async def test_a_client_without_the_capability_gets_local_execution(tmp_path, llm, workspace) -> None:
    llm.add(run_call("echo local-$$"), {"text": "ran"})
    editor = TerminalEditor()
    async with face(tmp_path, llm, editor, caps=ClientCapabilities()) as (conn, _, _):
        sid = await new_session(conn, workspace)
        await conn.prompt(session_id=sid, prompt=[text_block("run")])
    assert editor.created == [] and "local-" in observation(llm) and "exit code 0" in observation(llm)
    assert not [f for f in editor.frames if terminal_shown(f)]


async def test_a_failing_terminal_create_runs_it_locally_and_stops_asking(tmp_path, llm, workspace) -> None:
    llm.add(run_call("echo one"), run_call("echo two"), {"text": "ran"})
    editor = TerminalEditor()
    editor.refuse_create = RequestError.method_not_found("terminal/create")
    async with face(tmp_path, llm, editor) as (conn, _, _):
        sid = await new_session(conn, workspace)
        await conn.prompt(session_id=sid, prompt=[text_block("run")])
    assert "one\n" in observation(llm, 1) and "exit code 0" in observation(llm, 1)
    assert "two" in [m for m in llm.requests[2]["body"]["messages"] if m["role"] == "tool"][-1]["content"]
    assert len(editor.created) == 1 and editor.terminals == {}


async def test_long_output_keeps_head_and_tail_for_the_model(tmp_path, llm, workspace) -> None:
    """The client keeps only the end of 3 MB; the start was read while the command ran."""
    (workspace / "big.py").write_text(
        "import os, sys, time\nprint('HEAD-LINE', flush=True)\n"
        "while not os.path.exists('go'):\n    time.sleep(0.02)\n"
        "sys.stdout.write('x' * 3_000_000)\nprint()\nprint('TAIL-LINE')\n")
    llm.add(run_call(f"{sys.executable} big.py"), {"text": "ran"})
    editor = TerminalEditor()
    async with face(tmp_path, llm, editor) as (conn, _, _):
        sid = await new_session(conn, workspace)
        turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("run")]))
        await wait_until_async(lambda: "HEAD-LINE" in editor.polled, scaled(10), "the start read while it runs")
        (workspace / "go").write_text("")
        await turn
    seen = observation(llm)
    assert editor.terminals["term-1"].truncated
    assert seen.index("HEAD-LINE") < seen.index("[... output cut from the middle (the client's terminal kept "
                                                 "only the end of the output) ...]") < seen.index("TAIL-LINE")
    assert "exit code 0" in seen and len(seen) < 40_000


async def test_a_redacted_output_is_shown_as_our_text_not_as_the_raw_terminal(tmp_path, llm, workspace,
                                                                             monkeypatch) -> None:
    """The client's terminal holds the raw output, and the launcher does not redact it (docs/security.md,
    "What is not caught"): once the command is done, a tool call whose output had a key redacted
    shows our redacted text, not the terminal (review 469)."""
    key = "sk-review-0123456789abcdef"
    monkeypatch.setattr(secrets, "_values", {key})
    (workspace / ".env").write_text(f"OPENAI_API_KEY={key}\n")
    llm.add(run_call("cat .env"), {"text": "ran"})
    editor = TerminalEditor()
    async with face(tmp_path, llm, editor) as (conn, _, _):
        sid = await new_session(conn, workspace)
        await conn.prompt(session_id=sid, prompt=[text_block("run")])
    assert key.encode() in editor.terminals["term-1"].raw  # what the live terminal showed: the limit
    final = [u for u in editor.updates("tool_call_update") if u.get("status") == "completed"][-1]
    assert [c["type"] for c in final["content"]] == ["content"]
    assert "OPENAI_API_KEY=***" in final["content"][0]["content"]["text"] and key not in str(final)
    assert key not in observation(llm) and editor.methods() == ["create", "release"]
