"""The ACP face answers `initialize` before the ACP SDK is imported (acp_fast.py), with the same
answer the SDK path gives; frames that arrive meanwhile wait, in order. No timing is asserted
here: bench/cold_start.py measures it."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import acp
import pytest
from conftest import write_config
from helpers import held_import
from inproc_app import eventually
from waiting import DEFAULT_TIMEOUT, wait_until

from toycoder_daemon.acp import serve_acp
from toycoder_daemon.acp_early import EarlyAcp
from toycoder_daemon.acp_fast import PROTOCOL_VERSION, StdinPump, fast_initialize
from toycoder_daemon.app import App
from toycoder_daemon.ndjson import encode_line
from toycoder_daemon.testing.fake_llm import FakeLLM

ROOT = Path(__file__).resolve().parent.parent

PARAMS = [
    {"protocolVersion": 1},
    {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True},
                                                  "terminal": True},
     "clientInfo": {"name": "zed", "version": "0.200.0"}},
    {"protocolVersion": 7, "clientCapabilities": None, "_meta": {"x": 1}},
]


def line(msg: dict[str, Any]) -> bytes:
    return json.dumps(msg).encode() + b"\n"


class Collected:
    """A face's output stream, kept in memory."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.chunks.append(data)

    def flush(self) -> None:
        pass


async def sdk_answer(request: bytes) -> bytes:
    """What the face answers when the request goes through the SDK (the path without the fast start)."""
    reader = asyncio.StreamReader()
    reader.feed_data(request)
    reader.feed_eof()
    out = Collected()
    chunks = out.chunks
    await serve_acp(out, None, reader=reader)  # type: ignore[arg-type]
    return b"".join(chunks)


def test_protocol_version_is_the_sdks() -> None:
    assert PROTOCOL_VERSION == acp.PROTOCOL_VERSION


@pytest.mark.parametrize("params", PARAMS)
async def test_fast_answer_equals_the_sdk_answer(params: dict[str, Any]) -> None:
    request = line({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": params})
    fast = fast_initialize(request.rstrip(b"\n"))
    assert fast is not None
    assert fast[1] == params
    assert fast[0] == await sdk_answer(request)  # byte for byte


@pytest.mark.parametrize("msg", [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "1"}},
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": 5}},
    {"jsonrpc": "2.0", "id": True, "method": "initialize", "params": {"protocolVersion": 1}},
    {"jsonrpc": "2.0", "method": "initialize", "params": {"protocolVersion": 1}},
    {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}},
    [1, 2],
])
def test_odd_first_lines_are_left_to_the_sdk(msg: Any) -> None:
    assert fast_initialize(json.dumps(msg).encode()) is None


def test_pump_finds_a_split_first_line_and_keeps_the_rest_in_order() -> None:
    r, w = os.pipe()
    pump = StdinPump(r)
    with os.fdopen(w, "wb", buffering=0) as wf:
        wf.write(b'{"a":')
        result: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=lambda: result.put(pump.first_line()), daemon=True).start()
        wf.write(b'1}\n{"b":2}\n')
        wf.write(b'{"c":3}\n')
        assert result.get(timeout=DEFAULT_TIMEOUT) == b'{"a":1}'
    pump.drop_first_line()

    async def rest() -> bytes:
        out = b""
        while chunk := await asyncio.wait_for(pump.read(), DEFAULT_TIMEOUT):
            out += chunk
        return out

    assert asyncio.run(rest()) == b'{"b":2}\n{"c":3}\n'
    os.close(r)


def test_pump_first_line_is_none_at_eof_without_a_newline() -> None:
    r, w = os.pipe()
    pump = StdinPump(r)
    os.write(w, b"no newline")
    os.close(w)
    assert pump.first_line() is None
    assert asyncio.run(pump.read()) == b"no newline"  # still there for the SDK to refuse
    os.close(r)


def test_first_session_is_answered_while_the_sdk_import_is_held(tmp_path: Path, workspace: Path,
                                                                 llm: FakeLLM) -> None:
    """A stand-in `acp` package first on the path holds the SDK import until the test releases it:
    initialize, session/new and session/list are answered meanwhile (acp_early.py); a request for the
    SDK (session/set_mode) and what follows it wait, in order, and are answered once the SDK is in,
    for the session opened before it. The session's commands are announced after session/new, as
    the SDK path announces them."""
    held, entered, release = held_import(tmp_path, "acp")
    env = {**os.environ, **held}
    config = write_config(tmp_path / "config.yaml", llm)
    proc = subprocess.Popen([sys.executable, "-m", "toycoder_daemon", "--acp", "--config", str(config)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    lines: queue.Queue[bytes] = queue.Queue()
    assert proc.stdout is not None and proc.stdin is not None
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()  # type: ignore[union-attr]

    def send(*msgs: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(b"".join(line(m) for m in msgs))
        proc.stdin.flush()

    def read() -> dict[str, Any]:
        return json.loads(lines.get(timeout=DEFAULT_TIMEOUT))  # type: ignore[no-any-return]

    notes: list[dict[str, Any]] = []

    def answer() -> dict[str, Any]:
        while "id" not in (msg := read()):
            notes.append(msg)
        return msg

    try:
        request = line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": PARAMS[1]})
        proc.stdin.write(request)
        send({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(workspace), "mcpServers": []}})
        assert read() == json.loads(fast_initialize(request.rstrip(b"\n"))[0])  # type: ignore[index]
        new = answer()
        assert new["id"] == 2 and new["result"]["modes"]["currentModeId"] == "ask"
        sid = new["result"]["sessionId"]
        send({"jsonrpc": "2.0", "id": 3, "method": "session/list", "params": {}})
        assert [s["sessionId"] for s in answer()["result"]["sessions"]] == [sid]
        wait_until(entered.exists, what="the daemon to start importing the SDK (the process is idle)")
        assert not release.exists()  # all of that while the SDK import was held
        assert [n["params"]["update"]["sessionUpdate"] for n in notes] == ["available_commands_update"]
        send({"jsonrpc": "2.0", "id": 4, "method": "session/set_mode", "params": {"sessionId": sid, "modeId": "read-only"}},
             {"jsonrpc": "2.0", "id": 5, "method": "session/list", "params": {}})
        release.touch()
        seen: list[dict[str, Any]] = []

        def update_kinds() -> list[str]:
            return [m["params"]["update"]["sessionUpdate"] for m in seen if m.get("method") == "session/update"]

        while not {4, 5} <= {m.get("id") for m in seen}:
            seen.append(read())
        assert "available_commands_update" not in update_kinds()  # not again when the SDK takes the session
        answers = {m["id"]: m for m in seen if "id" in m}
        assert "error" not in answers[4], answers[4]
        assert [s["sessionId"] for s in answers[5]["result"]["sessions"]] == [sid]
    finally:
        proc.stdin.close()
        proc.wait(timeout=DEFAULT_TIMEOUT)
    assert proc.returncode == 0


async def test_the_answered_initialize_is_recorded_as_the_sdk_would() -> None:
    """The client's capabilities of a fast-answered initialize reach the agent (fs/terminal use them)."""
    from toycoder_daemon.acp import ToyCoderAgent

    agent = ToyCoderAgent()
    await agent.took_initialize(PARAMS[1])
    caps = agent.client_capabilities
    assert caps is not None and caps.fs.read_text_file and caps.terminal
    assert caps == acp.schema.InitializeRequest.model_validate(PARAMS[1]).client_capabilities


def by_id(output: bytes) -> dict[Any, bytes]:
    """The response lines of a face's output, by id, as written."""
    return {json.loads(x)["id"]: x + b"\n" for x in output.splitlines() if "method" not in json.loads(x)}


async def sdk_answers(request: bytes, ids: set[Any]) -> bytes:
    """What the SDK path answers to these lines, the input kept open until every id is answered."""
    reader = asyncio.StreamReader()
    reader.feed_data(request)
    out = Collected()
    chunks = out.chunks
    task = asyncio.ensure_future(serve_acp(out, None, reader=reader))  # type: ignore[arg-type]
    await eventually(lambda: ids <= set(by_id(b"".join(chunks))), "the SDK path's answers")
    reader.feed_eof()
    await task
    return b"".join(chunks)


async def early_answer(request: bytes) -> tuple[bytes, EarlyAcp]:
    """What acp_early.py answers to these lines before the SDK is in (the input then ends)."""
    r, w = os.pipe()
    pump = StdinPump(r)
    os.write(w, request)
    os.close(w)
    out = Collected()
    chunks = out.chunks
    early = EarlyAcp(pump, out, None)  # type: ignore[arg-type]
    await early.run()
    await early.shutdown()
    os.close(r)
    return b"".join(chunks), early


async def test_early_session_answers_equal_the_sdk_answers(workspace: Path) -> None:
    stored = App.open(workspace)
    s = stored.new_session("a stored one")
    s.messages.append({"role": "user", "content": "hello ü \U0001f600"})
    await stored.shutdown()
    requests = b"".join(line(m) for m in [
        {"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}},
        {"jsonrpc": "2.0", "id": "two", "method": "session/list", "params": {"cwd": str(workspace)}},
    ])
    ours, early = await early_answer(requests)
    assert early.ended
    assert by_id(ours) == by_id(await sdk_answers(requests, {1, "two"}))  # byte for byte
    assert json.loads(by_id(ours)["two"])["result"]["sessions"][0]["title"] == "a stored one"
    new = line({"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": {"cwd": str(workspace), "mcpServers": []}})
    ours, early = await early_answer(new)
    theirs = json.loads(by_id(await sdk_answers(new, {3}))[3])
    mine = json.loads(by_id(ours)[3])
    assert list(early.sessions) == [mine["result"]["sessionId"]]
    mine["result"]["sessionId"] = theirs["result"]["sessionId"]  # each its own id; all else equal, key order too
    assert encode_line(mine) == encode_line(theirs) and list(mine["result"]) == list(theirs["result"])
    assert json.dumps(mine) == json.dumps(theirs)


@pytest.mark.parametrize("msg", [
    {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "relative", "mcpServers": []}},
    {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/", "mcpServers": [{"name": "x"}]}},
    {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/"}},
    {"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {"cwd": 5}},
    {"jsonrpc": "2.0", "id": 1, "method": "session/load", "params": {"cwd": "/", "sessionId": "x", "mcpServers": []}},
    {"jsonrpc": "2.0", "method": "session/new", "params": {"cwd": "/", "mcpServers": []}},
    [1, 2],
])
async def test_what_early_does_not_answer_goes_back_to_the_sdk_in_order(msg: Any) -> None:
    rest = line({"jsonrpc": "2.0", "id": 9, "method": "session/list", "params": {}})
    ours, early = await early_answer(line(msg) + rest)
    assert ours == b"" and not early.ended and early.sessions == {}
    early.hand_back()
    assert await early.pump.read() == line(msg) + rest  # untouched, for the SDK


def test_input_ending_before_the_sdk_still_gets_its_answers(tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    """initialize and session/new, then the end of input at once: both answered, exit 0, the SDK
    import still held (never needed)."""
    held, entered, release = held_import(tmp_path, "acp")
    config = write_config(tmp_path / "config.yaml", llm)
    request = line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": PARAMS[0]}) + line(
        {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(workspace), "mcpServers": []}})
    proc = subprocess.run([sys.executable, "-m", "toycoder_daemon", "--acp", "--config", str(config)], cwd=ROOT,
                          input=request, capture_output=True, env={**os.environ, **held}, timeout=DEFAULT_TIMEOUT)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    answers = [json.loads(x) for x in proc.stdout.splitlines() if b'"id"' in x]
    assert [a["id"] for a in answers] == [1, 2] and answers[1]["result"]["sessionId"]
    assert not release.exists()
