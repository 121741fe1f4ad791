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
from waiting import DEFAULT_TIMEOUT, wait_until

from toycoder_daemon.acp import serve_acp
from toycoder_daemon.acp_fast import PROTOCOL_VERSION, StdinPump, fast_initialize
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


async def sdk_answer(request: bytes) -> bytes:
    """What the face answers when the request goes through the SDK (the path without the fast start)."""
    reader = asyncio.StreamReader()
    reader.feed_data(request)
    reader.feed_eof()
    chunks: list[bytes] = []

    class Out:
        def write(self, data: bytes) -> None:
            chunks.append(data)

        def flush(self) -> None:
            pass

    await serve_acp(Out(), None, reader=reader)  # type: ignore[arg-type]
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


def test_initialize_is_answered_while_the_sdk_import_is_held(tmp_path: Path, workspace: Path,
                                                            llm: FakeLLM) -> None:
    """A stand-in `acp` package first on the path holds the SDK import until the test releases it:
    the answer to initialize arrives meanwhile, and a session/new sent meanwhile waits and is
    answered once the SDK is in."""
    held, entered, release = held_import(tmp_path, "acp")
    env = {**os.environ, **held}
    config = write_config(tmp_path / "config.yaml", llm)
    proc = subprocess.Popen([sys.executable, "-m", "toycoder_daemon", "--acp", "--config", str(config)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    lines: queue.Queue[bytes] = queue.Queue()
    assert proc.stdout is not None and proc.stdin is not None
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
    try:
        request = line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": PARAMS[1]})
        proc.stdin.write(request + line({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                                         "params": {"cwd": str(workspace), "mcpServers": []}}))
        proc.stdin.flush()
        answer = json.loads(lines.get(timeout=DEFAULT_TIMEOUT))
        assert answer == json.loads(fast_initialize(request.rstrip(b"\n"))[0])  # type: ignore[index]
        wait_until(entered.exists, what="the daemon to start importing the SDK")
        assert lines.empty() and not release.exists()  # session/new waits for the SDK
        release.touch()
        while (msg := json.loads(lines.get(timeout=DEFAULT_TIMEOUT))).get("id") != 2:
            assert "id" not in msg, msg  # only notifications come before the answer
        assert msg["result"]["sessionId"]
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
