"""run_command, ask_user and open editor buffers, end to end through the real daemon."""

from __future__ import annotations

import asyncio
from pathlib import Path

from helpers import new_session, processes_running, processes_with, sleep_command
from helpers import tool_results as results
from rpc import Daemon
from waiting import scaled

from toycoder_daemon.testing.fake_llm import FakeLLM


def command(cmd: str, timeout: float | None = None) -> dict:
    args: dict = {"command": cmd}
    if timeout:
        args["timeout"] = timeout
    return {"tool_calls": [{"name": "run_command", "arguments": args}]}


async def test_run_command_is_disabled_by_default(daemon: Daemon, llm: FakeLLM) -> None:
    llm.add(command("echo hi"), {"text": "ok"})
    sid = await new_session(daemon)
    tools = {t["name"]: t for t in (await daemon.call("toycoder/tools/list", {"sessionId": sid}))["tools"]}
    assert tools["run_command"] == {**tools["run_command"], "permission": "dangerous", "enabled": False}
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "run"})
    out = results(daemon, sid)[0]
    assert out["status"] == "denied" and "/tool enable run_command" in out["output"]
    assert daemon.requests_seen == []  # nobody was asked


async def test_enabled_command_asks_with_command_preview_and_reports_exit_code(daemon: Daemon, llm: FakeLLM,
                                                                               workspace: Path) -> None:
    asked: list[dict] = []
    daemon.handlers["toycoder/requestPermission"] = lambda p: asked.append(p) or {"decision": "allow_once"}
    llm.add(command("ls src && echo to-stderr >&2; exit 3"), {"text": "ok"})
    sid = await new_session(daemon)
    await daemon.call("toycoder/tools/setEnabled", {"sessionId": sid, "name": "run_command", "enabled": True})
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "run"})
    assert asked[0]["level"] == "dangerous"
    # the command, then the sandbox policy it will run under as a shell comment (issue 14)
    assert asked[0]["preview"] == {"kind": "command", "cwd": str(workspace.resolve()),
                                   "command": "ls src && echo to-stderr >&2; exit 3\n# sandbox: workspace-write, network off"}
    out = results(daemon, sid)[0]
    assert out["status"] == "completed"
    assert "exit code 3" in out["output"] and "app.py" in out["output"] and "to-stderr" in out["output"]


async def test_timeout_kills_the_whole_group(start_daemon, llm: FakeLLM) -> None:
    d = await start_daemon(extra="permissions: {allow: ['run_command(sleep *)']}\ntools: {enabled: [run_command]}\n")
    d.handlers["toycoder/requestPermission"] = lambda p: {"decision": "allow_once"}
    first, second = sleep_command(171), sleep_command(172)
    llm.add(command(f"{first} & {second}", timeout=1), {"text": "ok"})
    sid = await new_session(d)
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "sleep"})
    out = results(d, sid)[0]
    assert "timed out after 1s" in out["output"]
    # a compound command never rides the `sleep *` allow rule: the person was asked
    assert [r["method"] for r in d.requests_seen] == ["toycoder/requestPermission"]
    await d.wait_for(lambda: processes_with(first) == processes_with(second) == [], what="both sleeps to be gone")


async def test_cancel_kills_a_running_command(start_daemon, llm: FakeLLM) -> None:
    d = await start_daemon(extra="permissions: {allow: ['run_command(sleep *)']}\ntools: {enabled: [run_command]}\n")
    sleep = sleep_command(173)
    llm.add(command(sleep))
    sid = await new_session(d)
    _, fut = d.request_future("toycoder/prompt", {"sessionId": sid, "text": "sleep"})
    await d.wait_for(lambda: processes_running(sleep), timeout=30, what="the command to start")
    await d.call("toycoder/cancel", {"sessionId": sid})
    assert (await asyncio.wait_for(fut, scaled(30)))["result"]["stopReason"] == "cancelled"
    assert results(d, sid)[0]["status"] == "cancelled", d.updates(sid)
    await d.wait_for(lambda: processes_with(sleep) == [], what="the cancelled command to be gone")


async def test_secrets_are_scrubbed_from_the_command_environment(start_daemon, llm: FakeLLM, monkeypatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-abcdef-123")
    monkeypatch.setenv("INNOCENT_LOOKING", "test-key-1")  # holds the provider key's value
    d = await start_daemon(extra="tools: {enabled: [run_command]}\npermissions: {allow: [run_command(env)]}\n")
    llm.add(command("env"), {"text": "ok"})
    sid = await new_session(d)
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "env"})
    out = results(d, sid)[0]["output"]
    assert "PATH=" in out
    assert "tok-abcdef-123" not in out and "MY_SERVICE_TOKEN" not in out
    assert "test-key-1" not in out and "INNOCENT_LOOKING" not in out


async def test_ask_user_with_options(daemon: Daemon, llm: FakeLLM) -> None:
    asked: list[dict] = []
    daemon.handlers["toycoder/askUser"] = lambda p: asked.append(p) or {"answer": "tabs"}
    ask = {"question": "Tabs or spaces?", "options": ["tabs", "spaces"]}
    llm.add({"tool_calls": [{"name": "ask_user", "arguments": ask}]}, {"text": "Tabs it is."})
    sid = await new_session(daemon)
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "format"})
    assert asked[0]["question"] == "Tabs or spaces?" and asked[0]["options"] == ["tabs", "spaces"]
    assert asked[0]["sessionId"] == sid
    assert results(daemon, sid)[0]["output"] == "The user answered: tabs"


async def test_ask_user_dismissed_and_fallbacks(start_daemon, llm: FakeLLM) -> None:
    d = await start_daemon()
    d.handlers["toycoder/askUser"] = lambda p: {"cancelled": True}
    llm.add({"tool_calls": [{"name": "ask_user", "arguments": {"question": "Sure?"}}]}, {"text": "ok"})
    sid = await new_session(d)
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "x"})
    assert "did not answer" in results(d, sid)[0]["output"]

    plain = await start_daemon(caps={})
    seen: list[dict] = []
    plain.handlers["window/showMessageRequest"] = lambda p: seen.append(p) or {"title": "B"}
    llm.add({"tool_calls": [{"name": "ask_user", "arguments": {"question": "A or B?", "options": ["A", "B"]}}]},
            {"tool_calls": [{"name": "ask_user", "arguments": {"question": "Free text?"}}]}, {"text": "ok"})
    sid = await new_session(plain)
    await plain.call("toycoder/prompt", {"sessionId": sid, "text": "x"})
    outputs = [r["output"] for r in results(plain, sid)]
    assert outputs[0] == "The user answered: B" and seen[0]["message"] == "A or B?"
    assert "did not answer" in outputs[1] and len(seen) == 1


async def test_read_file_sees_the_editors_unsaved_text(daemon: Daemon, llm: FakeLLM, workspace: Path) -> None:
    uri = (workspace / "src" / "app.py").resolve().as_uri()
    daemon.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                            "text": "def add(a, b):\n    return a + b\n"}})
    edited = "def add(a, b):\n    return b + a  # edited\n"
    daemon.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                             "contentChanges": [{"text": edited}]})
    read = {"tool_calls": [{"name": "read_file", "arguments": {"path": "src/app.py"}}]}
    llm.add(read, {"text": "ok"})
    sid = await new_session(daemon)
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "read"})
    out = results(daemon, sid)[0]["output"]
    assert "return b + a  # edited" in out and "unsaved" in out
    daemon.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    llm.add(read, {"text": "ok"})
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "again"})
    out = results(daemon, sid)[1]["output"]
    assert "return a + b" in out and "unsaved" not in out


async def test_cancel_right_as_the_command_starts_leaves_nothing(start_daemon, llm: FakeLLM) -> None:
    """Cancel lands while the process exists but its pipes are still being set up."""
    d = await start_daemon(extra="permissions: {allow: ['run_command(sleep *)']}\ntools: {enabled: [run_command]}\n")
    for i in range(5):
        sleep = sleep_command(170 + i)
        llm.add(command(sleep))
        sid = await new_session(d)
        _, fut = d.request_future("toycoder/prompt", {"sessionId": sid, "text": "sleep"})
        await d.wait_for(lambda sleep=sleep: processes_running(sleep), timeout=30, what="the command to start")
        await d.call("toycoder/cancel", {"sessionId": sid})
        assert (await asyncio.wait_for(fut, scaled(30)))["result"]["stopReason"] == "cancelled"
        await d.wait_for(lambda sleep=sleep: processes_with(sleep) == [], what=f"command {i} to be gone")


async def test_the_daemons_key_never_reaches_model_editor_or_session_file(start_daemon, llm: FakeLLM, workspace: Path,
                                                                         tmp_path: Path) -> None:
    (workspace / ".env").write_text("OPENAI_API_KEY=test-key-1\n")  # the key the daemon was configured with
    d = await start_daemon()
    llm.add({"tool_calls": [{"name": "read_file", "arguments": {"path": ".env"}}]}, {"text": "ok"})
    sid = await new_session(d)
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "read .env"})
    out = results(d, sid)[0]["output"]
    assert "OPENAI_API_KEY=***" in out and "test-key-1" not in out
    assert "test-key-1" not in str(llm.requests[1]["body"]["messages"])
    await d.close()
    for f in (tmp_path / "data").rglob("*.jsonl"):
        assert "test-key-1" not in f.read_text()
        assert f.stat().st_mode & 0o077 == 0  # private to its owner
