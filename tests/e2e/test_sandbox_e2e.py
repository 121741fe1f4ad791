"""The sandbox end to end through the real daemon (as the user running the tests; CI runs as root):
the preview, the escalation question, blocked writes in the observation, `required` without
Landlock, and commands that do not outlive the daemon."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from helpers import new_session, processes_running, processes_with
from rpc import Daemon
from sandbox_helpers import cgroups_of, kill_markers, remove_cgroups_of, unique_sleep

from toycoder_daemon.testing.fake_llm import FakeLLM
from toycoder_daemon.tools.shell.sandbox import landlock

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or landlock.abi_version() < 1,
                                reason="the sandbox needs Linux with Landlock")


def command(cmd: str, **extra: object) -> dict:
    return {"tool_calls": [{"name": "run_command", "arguments": {"command": cmd, **extra}}]}


def results(d: Daemon, sid: str) -> list[dict]:
    return [u["update"] for u in d.updates(sid) if u["update"]["kind"] == "tool_result"]


async def gone(d: Daemon, markers: list[str]) -> bool:
    return bool(await d.wait_for(lambda: not any(processes_with(m) for m in markers), timeout=15))


async def test_escalation_always_asks_and_shows_why(start_daemon, llm: FakeLLM, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "f.txt"
    d = await start_daemon(extra="tools: {enabled: [run_command]}\n"
                                 "permissions: {allow: ['run_command(touch *)', 'run_command(echo *)']}\n")
    asked: list[dict] = []
    answers = iter(["allow_always", "allow_once"])
    d.handlers["toycoder/requestPermission"] = lambda p: asked.append(p) or {"decision": next(answers)}
    llm.add(command(f"touch {target}"), command(f"touch {target}", sandbox=False),
            command("echo net", network=True), command("echo plain"), {"text": "ok"})
    sid = await new_session(d)
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "go"})
    first, second, third, fourth = results(d, sid)
    # the allow rule let the sandboxed call run without a question; the sandbox refused the write
    assert f"blocked by the sandbox: {target} is outside the writable roots" in first["output"]
    assert "sandbox: false" in first["output"]
    # leaving the sandbox asks despite the rule, and says why
    assert len(asked) == 2, asked
    shown = asked[0]["preview"]["command"]
    assert shown.startswith(f"touch {target}\n# sandbox: OFF because it asks to run outside the sandbox")
    assert f"blocked by the sandbox: {target}" in shown
    assert second["status"] == "completed" and target.exists()
    # "allow always" for run_command does not cover the next escalation (network) either
    assert "network on" in asked[1]["preview"]["command"] and third["status"] == "completed"
    assert fourth["status"] == "completed" and len(asked) == 2  # a plain sandboxed call: covered by always


async def test_pytest_junitxml_outside_leaves_the_file_untouched(start_daemon, llm: FakeLLM, workspace: Path,
                                                                 tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    report = tmp_path / "outside" / "report.xml"
    report.parent.mkdir()
    report.write_text("previous report\n")
    (workspace / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    d = await start_daemon(extra="tools: {enabled: [run_command]}\npermissions: {allow: ['run_command(pytest *)']}\n")
    llm.add(command(f"pytest -q -p no:cacheprovider --junitxml={report} test_ok.py"), {"text": "ok"})
    sid = await new_session(d)
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "test"})
    out = results(d, sid)[0]["output"]
    assert d.requests_seen == []  # the allow rule answered; the kernel still held the line
    assert report.read_text() == "previous report\n"
    assert f"blocked by the sandbox: {report} is outside the writable roots" in out


async def test_required_without_landlock_refuses(start_daemon, llm: FakeLLM, workspace: Path, monkeypatch) -> None:
    monkeypatch.setenv(landlock.SIMULATE_ENV, "1")
    d = await start_daemon(extra="tools: {enabled: [run_command], run_command: {sandbox: required}}\n"
                                 "permissions: {allow: ['run_command(touch *)']}\n")
    llm.add(command("touch made.txt"), {"text": "ok"})
    sid = await new_session(d)
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "go"})
    out = results(d, sid)[0]
    assert out["status"] == "failed"
    assert "refused: tools.run_command.sandbox is `required` but this kernel has no Landlock" in out["output"]
    assert not (workspace / "made.txt").exists()
    listed = (await d.call("toycoder/prompt", {"sessionId": sid, "text": "/tools"}))["text"]
    assert "sandbox: unavailable (this kernel has no Landlock)" in listed and "[mode: required]" in listed


async def test_auto_without_landlock_runs_and_says_so_once(start_daemon, llm: FakeLLM, workspace: Path,
                                                           monkeypatch) -> None:
    monkeypatch.setenv(landlock.SIMULATE_ENV, "1")
    d = await start_daemon(extra="tools: {enabled: [run_command]}\npermissions: {allow: ['run_command(touch *)']}\n")
    asked: list[dict] = []
    llm.add(command("touch a.txt"), command("touch b.txt"), {"text": "ok"})
    d.handlers["toycoder/requestPermission"] = lambda p: asked.append(p) or {"decision": "allow_once"}
    sid = await new_session(d)
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "go"})
    first, second = results(d, sid)
    assert (workspace / "a.txt").exists() and (workspace / "b.txt").exists()
    assert "commands run without a sandbox here (this kernel has no Landlock)" in first["output"]
    assert "without a sandbox" not in second["output"]


@pytest.mark.parametrize("how", ["returns", "cancel", "daemon exits", "daemon killed"])
async def test_no_command_process_outlives(start_daemon, llm: FakeLLM, how: str) -> None:
    a, b, c = unique_sleep(), unique_sleep(), unique_sleep()
    markers = [f"sleep {a}", f"sleep {b}"] + ([] if how == "returns" else [f"sleep {c}"])
    tail = "echo started" if how == "returns" else f"sleep {c}"
    d = await start_daemon(extra="tools: {enabled: [run_command]}\n")
    d.handlers["toycoder/requestPermission"] = lambda p: {"decision": "allow_once"}
    llm.add(command(f"setsid sleep {a} > /dev/null 2>&1 & ( ( sleep {b} > /dev/null 2>&1 & ) & ) ; {tail}"),
            {"text": "ok"})
    try:
        sid = await new_session(d)
        _, fut = d.request_future("toycoder/prompt", {"sessionId": sid, "text": "go"})
        if how == "returns":
            await asyncio.wait_for(fut, 30)
            assert "started" in results(d, sid)[0]["output"]
        else:
            # the sleeps themselves, not the launcher or shell that carry their command line from the
            # start: the daemon dies mid-command (its death mid-start-up: test_sandbox's held init)
            assert await d.wait_for(lambda: all(processes_running(m) for m in markers), timeout=30)
            if how == "cancel":
                await d.call("toycoder/cancel", {"sessionId": sid})
                assert (await asyncio.wait_for(fut, 30))["result"]["stopReason"] == "cancelled"
            elif how == "daemon exits":
                await d.close()
            else:
                d.proc.kill()
                await d.proc.wait()
        assert await gone(d, markers)
        # Killed outright, too: the launcher's init (or the launcher, without a namespace) removes it.
        assert await d.wait_for(lambda: not cgroups_of(d.proc.pid), timeout=15), cgroups_of(d.proc.pid)
    finally:
        kill_markers(*markers)
        remove_cgroups_of(d.proc.pid)


def modes(root: Path) -> dict[Path, int]:
    """The mode of `root` and of each path under it, but for the daemon's atomic writes' temporaries
    (`.tmp`, renamed away at once; the kept file listing is written in the background): a path gone
    meanwhile is left out, never a FileNotFoundError (CI: the listing's temporary was renamed between
    rglob and stat)."""
    found = {}
    for path in [root, *root.rglob("*")]:
        if not path.name.endswith(".tmp"):
            try:
                found[path] = path.stat().st_mode
            except FileNotFoundError:
                continue
    return found


async def test_a_command_cannot_chmod_the_daemons_own_session_data(start_daemon, llm: FakeLLM, tmp_path: Path) -> None:
    """Issue 28: one `chmod 000` outside the workspace broke the daemon's own session writes. The
    command's `/` is read-only but for the writable roots, so the data dir keeps its modes and
    its time, and the next turn is saved."""
    data = tmp_path / "data"  # TOYCODER_DATA_DIR (tests/conftest.py)
    d = await start_daemon(extra="tools: {enabled: [run_command]}\n")
    d.handlers["toycoder/requestPermission"] = lambda p: {"decision": "allow_once"}  # the person allows it
    llm.add({"text": "first"})
    sid = await new_session(d)
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "one"})
    before = modes(data)
    llm.add(command(f"chmod -R 000 {data}; touch -d 2001-01-01 {data}; echo tried"), {"text": "second"})
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "two"})
    out = results(d, sid)[0]["output"]
    assert "tried" in out and "Read-only file system" in out, out
    after = modes(data)
    assert data in after and len(before.keys() & after.keys()) > 1, (before, after)  # the dir and the session at least
    assert {p: after[p] for p in before if p in after} == {p: m for p, m in before.items() if p in after}
    assert data.stat().st_mtime > 1.6e9  # not 2001 (the daemon's own writes may move it on)
    llm.add({"text": "third"})
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "three"})
    loaded = await d.call("toycoder/session/load", {"sessionId": sid})
    assert "third" in str(loaded), loaded
