"""A new `toycoder-daemon --acp` process as a client sees it, raw frames on real pipes: the first
requests and their end of input, `initialize`'s odd params, lines written together, a reply the
face refuses, and what the end of input does to a prompt. (The in-process tests are test_acp*.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tty
from pathlib import Path
from typing import Any

import pytest
from acp_daemon import AcpDaemon
from helpers import ROOT, write_call, write_config
from waiting import DEFAULT_TIMEOUT, wait_until

from toycoder_daemon import __version__
from toycoder_daemon.testing.fake_llm import FakeLLM

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}


def line(msg: Any) -> bytes:
    return json.dumps(msg).encode() + b"\n"


def test_requests_then_the_end_of_input_at_once_are_all_answered(tmp_path: Path, workspace: Path,
                                                                  llm: FakeLLM) -> None:
    """initialize and session/new in one write, then stdin closes: both answered, exit 0."""
    config = write_config(tmp_path / "config.yaml", llm)
    request = line(INIT) + line({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                                 "params": {"cwd": str(workspace), "mcpServers": []}})
    proc = subprocess.run([sys.executable, "-m", "toycoder_daemon", "--acp", "--config", str(config)], cwd=ROOT,
                          input=request, capture_output=True, timeout=DEFAULT_TIMEOUT)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    answers = {a["id"]: a for a in map(json.loads, proc.stdout.splitlines()) if "id" in a}
    assert set(answers) == {1, 2} and answers[2]["result"]["sessionId"]
    assert answers[1]["result"]["agentInfo"] == {"name": "toycoder-daemon", "title": "ToyCoder", "version": __version__}


@pytest.mark.parametrize(("params", "code"), [
    ({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True},
                                                   "terminal": True},
      "clientInfo": {"name": "zed", "version": "0.200.0"}}, None),
    ({"protocolVersion": 7, "clientCapabilities": None, "_meta": {"x": 1}}, None),  # we speak 1
    ({"protocolVersion": "2024-11-05"}, None),  # a date (Zed once sent one): the SDK reads it as 1
    ({"protocolVersion": 1, "clientCapabilities": 5}, None),  # unreadable: nothing declared
    ({"protocolVersion": 1, "clientCapabilities": {"fs": 5}}, None),
    ({"protocolVersion": -1}, -32602),
    ({"clientCapabilities": {}}, -32602),
])
def test_initialize_answers_version_1_or_says_what_is_wrong(tmp_path: Path, llm: FakeLLM, params: dict[str, Any],
                                                            code: int | None) -> None:
    d = AcpDaemon(write_config(tmp_path / "config.yaml", llm))
    try:
        d.send({"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": params})
        got = d.answer("i")
        if code is None:
            assert got["result"]["protocolVersion"] == 1 and got["result"]["agentCapabilities"]["loadSession"] is True
        else:
            assert got["error"]["code"] == code
        d.send({"jsonrpc": "2.0", "id": True, "method": "initialize", "params": {"protocolVersion": 1}})
        assert d.until(lambda m: "error" in m)["error"]["code"] == -32600  # a boolean id is no id
    finally:
        assert d.close() == 0


@pytest.mark.parametrize("kind", ["file", "pty"])
def test_stdin_may_be_a_file_or_a_pty(tmp_path: Path, workspace: Path, llm: FakeLLM, kind: str) -> None:
    """The SDK's own stdio cannot read a regular file; the face reads any stdin, to its end."""
    requests = line(INIT) + line({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                                  "params": {"cwd": str(workspace), "mcpServers": []}})
    config = write_config(tmp_path / "config.yaml", llm)
    if kind == "file":
        (tmp_path / "stdin").write_bytes(requests)
        fd = os.open(tmp_path / "stdin", os.O_RDONLY)
        d = AcpDaemon(config, stdin=fd)
        os.close(fd)
    else:
        master, fd = os.openpty()
        tty.setraw(fd)  # bytes as written: no echo, no line editing
        d = AcpDaemon(config, stdin=fd)
        os.close(fd)
        os.write(master, requests)
    try:
        assert d.answer(1)["result"]["protocolVersion"] == 1
        assert d.answer(2)["result"]["sessionId"]
    finally:
        if kind == "pty":
            os.close(master)  # the terminal hangs up: the end of input
        assert d.close() == 0


def test_blank_lines_are_skipped(tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    llm.add({"text": "answered"})
    d = AcpDaemon(write_config(tmp_path / "config.yaml", llm))
    try:
        sid = d.start(workspace)
        d.write(b"\n  \r\n")
        d.prompt(3, sid, "hi")
        assert d.answer(3)["result"]["stopReason"] == "end_turn"
        assert not [m for m in d.seen if "error" in m]
    finally:
        assert d.close() == 0


def test_a_cancel_in_the_same_write_as_its_prompt_cancels_it(tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    """The cancel is read with the prompt: it runs after the prompt began its turn (the SDK runs
    messages as tasks in arrival order), so the turn answers cancelled."""
    llm.add({"text": "a reply the cancel should have stopped", "delay": 1.0})
    d = AcpDaemon(write_config(tmp_path / "config.yaml", llm))
    try:
        sid = d.start(workspace)
        d.send(d.prompt_msg(3, sid, "hi"), {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
        assert d.answer(3)["result"]["stopReason"] == "cancelled"
        assert d.updates("agent_message_chunk") == []
    finally:
        assert d.close() == 0


@pytest.mark.parametrize("reply", [
    {"id": "ID", "result": "ALLOW"},  # no "jsonrpc"
    {"jsonrpc": "1.0", "id": "ID", "result": "ALLOW"},
    {"jsonrpc": "2.0", "id": "ID"},  # neither result nor error
])
def test_a_malformed_reply_to_a_permission_request_is_refused_and_the_request_still_waits(
        tmp_path: Path, workspace: Path, llm: FakeLLM, reply: dict[str, Any]) -> None:
    llm.add(write_call("notes.txt", "noted\n"), {"text": "written"})
    d = AcpDaemon(write_config(tmp_path / "config.yaml", llm))
    try:
        sid = d.start(workspace)
        d.prompt(3, sid, "take a note")
        asked = d.request("session/request_permission")
        allow = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
        d.send(json.loads(json.dumps(reply).replace('"ID"', json.dumps(asked["id"])).replace('"ALLOW"',
                                                                                           json.dumps(allow))))
        refused = d.until(lambda m: "error" in m)
        assert refused["id"] == asked["id"] and refused["error"]["code"] == -32600
        assert not (workspace / "notes.txt").exists()
        d.allow(asked)
        assert d.answer(3)["result"]["stopReason"] == "end_turn"
        assert (workspace / "notes.txt").read_text() == "noted\n"
    finally:
        assert d.close() == 0


def test_a_prompt_then_the_end_of_input_answers_cancelled(tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    """The input ends right after a prompt: its task may still be on its way to its turn (App.prompt
    loads the session, takes its lock) when the Apps shut down; it answers cancelled, as a running
    turn does, not -32603 from the session file closed under it."""
    llm.add({"text": "never needed", "delay": 1.0})
    d = AcpDaemon(write_config(tmp_path / "config.yaml", llm))
    sid = d.start(workspace)
    d.prompt(3, sid, "hi")
    assert d.close() == 0
    assert d.answer(3).get("result", {}).get("stopReason") == "cancelled"


def test_a_title_set_while_a_turn_waits_for_permission_is_told(tmp_path: Path, workspace: Path,
                                                               llm: FakeLLM) -> None:
    """The model's title arrives while the second turn waits for permission (a busy session's news
    waits for its turn's end): it still goes out, as a session_info_update."""
    config = write_config(tmp_path / "config.yaml", llm)
    config.write_text(config.read_text().replace("auto_title: false", "auto_title: true"))
    llm.add({"text": "Hello."}, {"text": "A title", "delay": 0.5},
            write_call("notes.txt", "noted\n"), {"text": "done"})
    d = AcpDaemon(config)
    try:
        sid = d.start(workspace)
        d.prompt(3, sid, "hi")
        d.answer(3)
        wait_until(lambda: len(llm.requests) == 2, what="the title asked for")  # before the turn asks: replies go in order
        d.prompt(4, sid, "take a note")
        asked = d.request("session/request_permission")
        wait_until(lambda: any("A title" in f.read_text(errors="replace")
                               for f in Path(os.environ["TOYCODER_DATA_DIR"]).rglob("*") if f.is_file()),
                   what="the title stored")
        d.allow(asked)
        assert d.answer(4)["result"]["stopReason"] == "end_turn"

        def told(m: dict[str, Any]) -> bool:
            return m.get("method") == "session/update" and m["params"]["update"].get("title") == "A title"

        if not any(told(m) for m in d.seen):  # the news goes out at the turn's end, before or after its answer
            d.until(told)
    finally:
        assert d.close() == 0
