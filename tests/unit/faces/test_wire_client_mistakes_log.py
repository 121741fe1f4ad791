"""Issue 13, item 15: a client's mistake (a prompt without sessionId, an unknown session, an unknown
method, bad params, a malformed frame) is logged as one line at debug or info, never as ERROR or
WARNING with a traceback: editors show the daemon's warnings and errors to their users, and ERROR
is for faults of the daemon. The client still gets its error answer."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, text_block
from helpers import write_config
from inproc import acp_agent
from rpc import Daemon, RpcError, frame

from toycoder_daemon.testing.fake_llm import FakeLLM


def loud(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Records a user would see: WARNING and above, or anything carrying a traceback."""
    return [f"{r.levelname} {r.name}: {r.getMessage()}" for r in caplog.records
            if r.levelno >= logging.WARNING or r.exc_info]


async def test_lsp_client_mistakes_are_quiet(daemon: Daemon, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    mistakes: list[tuple[str, Any, int]] = [
        ("toycoder/prompt", {"text": "hi"}, -32602),
        ("toycoder/prompt", {"sessionId": "nope", "text": "hi"}, -32010),
        ("toycoder/session/load", {"sessionId": "nope"}, -32010),
        ("toycoder/tools/setEnabled", {"sessionId": "nope", "name": "x", "enabled": "maybe"}, -32602),
        ("toycoder/no/such/method", {}, -32601),
        ("initialized", {}, -32600),
    ]
    for method, params, code in mistakes:
        with pytest.raises(RpcError) as e:
            await daemon.call(method, params)
        assert e.value.code == code, method
    daemon.send_raw(b"Content-Length: 9\r\n\r\n{not json")
    daemon.send_raw(b"Content-Length: 99999999999\r\n\r\n")
    daemon.notify("textDocument/didOpen", {"textDocument": 5})
    daemon.notify("toycoder/no/such/notification", {})
    daemon.send_raw(frame({"jsonrpc": "2.0", "id": "nobody-asked", "result": {}}))
    await daemon.wait_for(lambda: len(daemon.orphans) >= 2)
    assert (await daemon.call("toycoder/session/list", {})) == {"sessions": []}
    assert loud(caplog) == [], "\n".join(loud(caplog))
    said = [r.getMessage() for r in caplog.records if r.name.startswith("toycoder_daemon")]
    assert any("nope" in m for m in said)  # logged, at a quiet level
    assert all("\n" not in m for m in said)  # one line each


async def test_acp_client_mistakes_are_quiet(tmp_path: Path, llm: FakeLLM, workspace: Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    frames: list[dict[str, Any]] = []

    class Editor:
        async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
            pass

    def observe(event: Any) -> None:
        if event.direction == "incoming":
            frames.append(event.message)

    async with acp_agent(Editor(), write_config(tmp_path / "c.yaml", llm), observers=[observe]) as (conn, proc):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        with pytest.raises(RequestError) as unknown:
            await conn.prompt(session_id="nope", prompt=[text_block("hi")])
        assert unknown.value.code == -32002
        for bad in ({"jsonrpc": "2.0", "id": 50, "method": "session/prompt", "params": {"prompt": []}},
                    {"jsonrpc": "2.0", "id": 51, "method": "session/nope", "params": {}},
                    {"jsonrpc": "2.0", "method": "session/cancel", "params": {}},
                    {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "nope"}}):
            proc.stdin.write(json.dumps(bad).encode() + b"\n")
        proc.stdin.write(b"[]\n{not json\n")
        sid = (await asyncio.wait_for(conn.new_session(cwd=str(workspace), mcp_servers=[]), 10)).session_id
        assert sid  # the face still serves
        assert {f["id"]: f["error"]["code"] for f in frames if "error" in f and f["id"] in (50, 51)} == {
            50: -32602, 51: -32601}
    assert loud(caplog) == [], "\n".join(loud(caplog))
