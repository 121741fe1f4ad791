"""A second, independent ACP client: the official TypeScript SDK (tests/acp_ts_client, npm
`@agentclientprotocol/sdk`) drives `python -m toycoder_daemon --acp` through one scenario that touches
every ACP method and update kind we serve (issue 15), and every frame, both ways, is checked against
the SDK's ACP JSON Schema (schema/v1/schema.unstable.json: v1 with the unstable methods we serve, such
as session/fork). This test scripts the model, runs the node script
and asserts the scenario's outcomes and zero schema violations.

A violation in a frame the daemon sent is a daemon bug; one in a frame the SDK sent means the SDK and
its schema disagree."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    PLANNER_ANSWER,
    ROOT,
    SEEDED,
    TESTS,
    TOY_MCP_SERVER,
    plan_call,
    planner_call,
    processes_with,
    run_call,
    sleep_command,
    unique_marker,
    write_call,
    write_config,
)
from waiting import scaled, wait_until

from toycoder_daemon.testing.fake_llm import FakeLLM

CLIENT = TESTS / "acp_ts_client"
CALC = "def add(a, b):\n    return a + b\n"
UNSAVED = CALC + "# typed in the editor, not saved\n"


def node_client() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (Node 20 runs the TypeScript ACP client)")
    if not (CLIENT / "node_modules" / "@agentclientprotocol" / "sdk").is_dir():
        pytest.fail("tests/acp_ts_client/node_modules is missing: run `npm ci` in tests/acp_ts_client "
                    "(./scripts/test does)")
    return node


def script(llm: FakeLLM, sleep: str) -> None:
    """The model's side of the scenario, in the order scenario.mjs prompts."""
    edit = {"tool_calls": [{"name": "edit_file", "arguments": {
        "path": "calc.py", "old_string": "a + b", "new_string": "b + a"}}]}
    llm.add(
        # the first turn: plan, read the unsaved buffer, edit it, run a command, call the MCP tool
        planner_call(), {"text": PLANNER_ANSWER},
        plan_call(("Read src/app.py", "completed"), ("Add subtract()", "in_progress"), ("Add tests", "pending")),
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}]},
        {**edit, "expect": {"last_tool_contains": "# typed in the editor, not saved"}},
        {**run_call("echo terminal-ran-$((6*7))"),
         "expect": {"last_tool_contains": "edited calc.py through the editor"}},
        {"tool_calls": [{"name": "mcp__toy__add", "arguments": {"a": 2, "b": 40}}],
         "expect": {"last_tool_contains": "terminal-ran-42"}},
        {**plan_call(("Read src/app.py", "completed"), ("Add subtract()", "completed"), ("Add tests", "completed")),
         "expect": {"last_tool_contains": "42"}},
        {"text": "Done."},
        {"text": "Adding subtract", "expect": {"model": "fake-fast"}},  # the title, after the first turn
        write_call("read-only.txt", "x\n"), {"text": "refused"},
        write_call("accept-edits.txt", "x\n"), {"text": "written"},
        {"text": "Resumed.", "expect": {"last_user_contains": "after resume"}},
        {"tool_calls": [{"name": "run_command", "arguments": {"command": sleep}}]},  # cancelled while it runs
    )


def run_client(node: str, setup: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """Runs scenario.mjs in its own process group (a timeout ends node, the daemon and its terminals)."""
    setup_path = tmp_path / "setup.json"
    setup_path.write_text(json.dumps(setup))
    proc = subprocess.Popen([node, str(CLIENT / "scenario.mjs"), str(setup_path)], cwd=CLIENT, env=dict(os.environ),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=scaled(90))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # leftovers of a failed run
    log = Path(setup["log"])
    print(f"--- scenario.mjs (exit {proc.returncode}) ---\n{out}\n--- daemon log ---\n"
          f"{log.read_text(errors='replace') if log.exists() else ''}")  # shown when the test failed
    report: dict[str, Any] = json.loads(Path(setup["report"]).read_text())
    assert report["failure"] is None, report["failure"]
    assert proc.returncode == 0 and report["exit"] == {"code": 0, "signal": None}
    return report


def test_the_typescript_sdk_client_sees_only_schema_valid_frames(tmp_path: Path, llm: FakeLLM,
                                                                 workspace: Path) -> None:
    node = node_client()
    calc = (workspace / "calc.py").resolve()
    calc.write_text(CALC)
    sleep = sleep_command(178)
    script(llm, sleep)
    config = write_config(tmp_path / "config.yaml", llm, extra="tools: {enabled: [run_command]}\n")
    config.write_text(config.read_text().replace("auto_title: false", "auto_title: true"))
    tag = unique_marker("toycoder-ts-client-mcp")
    report = run_client(node, {
        "python": sys.executable, "config": str(config), "repoRoot": str(ROOT), "workspace": str(workspace.resolve()),
        "buffers": {str(calc): UNSAVED}, "sleepCommand": sleep,
        "mcpServer": {"name": "toy", "command": sys.executable, "args": [TOY_MCP_SERVER, "--tag", tag], "env": []},
        "report": str(tmp_path / "report.json"), "log": str(tmp_path / "daemon.log"),
    }, tmp_path)
    frames = [(f["from"], f["msg"]) for f in report["frames"]]
    steps, sid = report["steps"], report["steps"]["sessionId"]

    def sent(method: str) -> list[dict[str, Any]]:
        return [m["params"] for who, m in frames if who == "agent" and m.get("method") == method and "id" in m]

    def updates(kind: str) -> list[dict[str, Any]]:
        return [m["params"]["update"] for who, m in frames if who == "agent" and m.get("method") == "session/update"
                and m["params"]["update"]["sessionUpdate"] == kind]

    # the edit of the unsaved buffer: asked with its location, written through fs/write_text_file only
    assert str(calc) in [r["path"] for r in sent("fs/read_text_file")]
    assert {"sessionId": sid, "path": str(calc), "content": UNSAVED.replace("a + b", "b + a")} in sent("fs/write_text_file")
    assert report["buffers"][str(calc)] == UNSAVED.replace("a + b", "b + a") and calc.read_text() == CALC
    asked = sent("session/request_permission")
    [where] = asked[0]["toolCall"]["locations"]
    assert where == {"path": str(calc), "line": 2}  # absolute; the changed line (not the hunk's start)
    assert [a["toolCall"]["kind"] for a in asked] == ["edit", "execute", "other", "execute"]
    # the terminal ran the command; the MCP tool answered
    terminals = [u for u in updates("tool_call_update") if any(c["type"] == "terminal" for c in u.get("content") or [])]
    assert len(sent("terminal/create")) == 2 and len(terminals) >= 2 and sent("terminal/wait_for_exit")
    assert "terminal-ran-42" in json.dumps(updates("tool_call_update"))
    assert any("42" in json.dumps(u.get("content")) for u in updates("tool_call_update") if u.get("status") == "completed"
               and u["toolCallId"] == next(t["toolCallId"] for t in updates("tool_call") if t["title"] == "mcp toy/add"))
    # plans: seeded by the planner, then kept by the model; resume and load (its replay) send it again
    plans = [[(e["content"], e["priority"], e["status"]) for e in u["entries"]] for u in updates("plan")]
    assert plans[0] == SEEDED and [s for _, _, s in plans[2]] == ["completed"] * 3 and len(plans) == 5
    assert plans[3:] == [plans[2]] * 2
    # the title, the modes (read-only refused without asking, accept-edits wrote without asking)
    assert [u["title"] for u in updates("session_info_update")] == ["Adding subtract"] * 2  # after the first turn; told again after the load's replay
    assert [u["currentModeId"] for u in updates("current_mode_update")] == ["read-only", "accept-edits"]  # changes only
    assert steps["new"]["modes"]["currentModeId"] == "ask"
    assert not any(str(p).endswith("read-only.txt") for p in report["buffers"])
    # each mode's write starts at once (nothing asks about it): refused in read-only before the file is
    # read, and announced before its file is read in accept-edits
    calls = {u["rawInput"]["path"]: u for u in updates("tool_call") if u["kind"] == "edit"}
    assert calls["read-only.txt"]["status"] == calls["accept-edits.txt"]["status"] == "in_progress"
    assert not any(r["path"].endswith("read-only.txt") for r in sent("fs/read_text_file"))
    announced = next(i for i, (_, m) in enumerate(frames) if m.get("method") == "session/update"
                     and m["params"]["update"].get("toolCallId") == calls["accept-edits.txt"]["toolCallId"])
    read = next(i for i, (_, m) in enumerate(frames) if m.get("method") == "fs/read_text_file"
                and m["params"]["path"].endswith("accept-edits.txt"))
    assert announced < read
    assert report["buffers"][str(workspace.resolve() / "accept-edits.txt")] == "x\n"
    assert not (workspace / "read-only.txt").exists() and not (workspace / "accept-edits.txt").exists()
    # close, resume, load (a replay), cancel in the terminal, delete
    assert steps["promptAfterClose"]["code"] == -32002
    assert steps["resumed"]["stopReason"] == "end_turn" and steps["resume"]["modes"]["currentModeId"] == "accept-edits"
    assert any(u["content"]["text"] == "after resume" for u in updates("user_message_chunk"))
    assert steps["cancelled"]["stopReason"] == "cancelled"
    killed = sent("terminal/kill")
    assert [k["terminalId"] for k in killed] == [sent("terminal/release")[-1]["terminalId"]]
    wait_until(lambda: processes_with(sleep) == [], 10, "the cancelled command to end")
    assert sid in steps["listedBeforeDelete"] and sid not in steps["listedAfterDelete"] and steps["delete"] == {}
    # issue 33's frames (validated with the rest): config options, fork, the list without cwd
    assert [o["id"] for o in steps["setConfigOption"]["configOptions"]] == ["model", "mode"]
    forks = [steps["fork"]["sessionId"], steps["forkEarly"]["sessionId"]]
    assert len(set(forks) | {sid}) == 3 and set(forks) <= set(steps["listedAll"])
    assert len(llm.requests) == 16 and llm.violations == []
    # the SDK refused nothing the daemon sent: the client's only error is its answer for the new file
    # it has no buffer for (asked before it is written; read-only.txt is refused before any read)
    refused = [(m["id"], m["error"]["code"]) for who, m in frames if who == "client" and "error" in m]
    assert [code for _, code in refused] == [-32002], refused

    print(f"{report['validated']} frames validated against the ACP schema")
    # the validator catches a real frame broken in one place (so zero violations means something)
    assert report["mutants"] and all(report["mutants"].values()), report["mutants"]
    assert report["validated"] == len(frames) > 100
    assert report["violations"] == [], json.dumps(report["violations"], indent=1)[:20000]
