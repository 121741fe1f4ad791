"""Issue 13 items 5 and 9 through the real daemon: a deny rule on rm holds against a path, a
wrapper and another deleting program; a provider key at a tool's cut point never reaches the
editor or the model in part."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import new_session
from rpc import Daemon

from toycoder_daemon.testing.fake_llm import FakeLLM

KEY = "sk-e2e0123456789abcdefghijklmnopqrst"  # 36 characters


def results(d: Daemon, sid: str) -> list[dict]:
    return [u["update"] for u in d.updates(sid) if u["update"]["kind"] == "tool_result"]


def call(name: str, **args: object) -> dict:
    return {"tool_calls": [{"name": name, "arguments": args}]}


async def test_deny_rm_holds_against_paths_wrappers_and_other_deleters(start_daemon, llm: FakeLLM,
                                                                       workspace: Path) -> None:
    d = await start_daemon(extra="tools: {enabled: [run_command]}\n"
                                 "permissions: {allow: [run_command], deny: ['run_command(rm *)']}\n")
    asked: list[dict] = []
    d.handlers["toycoder/requestPermission"] = lambda p: asked.append(p) or {"decision": "reject"}
    (workspace / "victim.txt").write_text("keep me\n")
    llm.add(call("run_command", command="/bin/rm victim.txt"), call("run_command", command="setsid rm victim.txt"),
            call("run_command", command="find . -name victim.txt -delete"), call("run_command", command="ls"),
            {"text": "done"})
    sid = await new_session(d)
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "clean up"})
    out = results(d, sid)
    assert [r["status"] for r in out] == ["denied", "denied", "denied", "completed"]
    assert "run_command(rm *)" in out[0]["output"] and "run_command(rm *)" in out[1]["output"]
    assert [a["arguments"]["command"] for a in asked] == ["find . -name victim.txt -delete"]  # asked, then refused
    assert "victim.txt" in out[3]["output"]
    assert (workspace / "victim.txt").read_text() == "keep me\n"


async def test_a_key_at_each_cut_point_never_leaks_in_part(start_daemon, llm: FakeLLM, workspace: Path) -> None:
    d = await start_daemon(keys=[KEY], extra="tools: {enabled: [run_command]}\n"
                                             "permissions: {allow: [run_command]}\n")
    # 20 of the key's characters before each tool's cut: what survived redaction before
    (workspace / "grep.txt").write_text("needle " + "a" * (300 - 7 - 20) + KEY + "b" * 100 + "\n")
    (workspace / "read.txt").write_text("a" * (4000 - 20) + KEY + "b" * 100 + "\n")
    (workspace / "out.txt").write_text("a" * (15_000 - 20) + KEY + "b" * 40_000 + KEY[-1:] + "c" * 15_000)
    llm.add(call("grep_search", pattern="needle"), call("read_file", path="read.txt"),
            call("run_command", command="cat out.txt"), {"text": "done"})
    sid = await new_session(d)
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "look"})
    out = results(d, sid)
    assert [r["status"] for r in out] == ["completed"] * 3
    assert "[...]" in out[0]["output"] and "more characters on this line" in out[1]["output"]
    assert "cut from the middle" in out[2]["output"]
    seen = json.dumps(out) + json.dumps([r["body"] for r in llm.requests])
    assert [KEY[i:i + 8] for i in range(len(KEY) - 7) if KEY[i:i + 8] in seen] == []
