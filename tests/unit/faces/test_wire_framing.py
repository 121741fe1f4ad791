"""Issue 13, items 3 and 10: the ACP face refuses what is not a JSON-RPC object with an answer and a
line cap, as the LSP face does, and in both faces a request to a notification method is answered."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION
from helpers import write_config
from inproc import acp_agent
from rpc import Daemon, RpcError

from toycoder_daemon.rpc.ndjson import MAX_LINE, Lines
from toycoder_daemon.testing.fake_llm import FakeLLM


class Editor:
    """An ACP client that only records the frames it receives."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []

    def observe(self, event: Any) -> None:
        if event.direction == "incoming":
            self.frames.append(event.message)

    def errors(self) -> list[tuple[Any, int]]:
        return [(f["id"], f["error"]["code"]) for f in self.frames if "error" in f]

    async def wait_errors(self, n: int, timeout: float = 5.0) -> list[tuple[Any, int]]:
        async def poll() -> None:
            while len(self.errors()) < n:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(poll(), timeout)
        return self.errors()


async def test_acp_lines_that_are_not_json_rpc_objects_are_answered_and_the_face_keeps_serving(
        tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    editor = Editor()
    async with acp_agent(editor, write_config(tmp_path / "c.yaml", llm), observers=[editor.observe]) as (conn, proc):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        lines = [b"[]", b"null", b"42", b'"x"', b"{not json", b'{"id": 7, "method": "session/list"}',
                 b'{"jsonrpc": "2.0", "id": 8, "error": "not an object"}', b"\xff\xfe", b"[" * 50_000]
        proc.stdin.write(b"\n".join(lines) + b"\n")
        errors = await editor.wait_errors(8)
        assert errors == [(None, -32600)] * 4 + [(None, -32700), (7, -32600), (None, -32700), (None, -32700)]
        assert proc.returncode is None
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        assert session.session_id
        listed = await conn.list_sessions(cwd=str(workspace))
        assert listed.sessions == []  # served; the new session has no messages, so is not listed


async def test_acp_a_line_over_the_cap_is_refused_and_the_next_line_is_read(
        tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    editor = Editor()
    async with acp_agent(editor, write_config(tmp_path / "c.yaml", llm), observers=[editor.observe]) as (conn, proc):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        huge = b'{"jsonrpc": "2.0", "id": 9, "method": "session/list", "params": {"x": "' + b"a" * MAX_LINE + b'"}}\n'
        proc.stdin.write(huge)
        del huge
        [(msg_id, code)] = await editor.wait_errors(1)
        assert (msg_id, code) == (None, -32600)
        assert "limit" in next(f for f in editor.frames if "error" in f)["error"]["message"]
        assert (await conn.list_sessions(cwd=str(workspace))).sessions == []


def test_lines_never_hold_more_than_the_cap_of_an_oversized_line() -> None:
    lines = Lines(max_line=10_000)
    held: list[int] = []
    refused: list[bytes] = []
    for _ in range(2000):  # an 8 MB line, then a good one
        passed, refusals = lines.feed(b"z" * 4096)
        held.append(len(lines._buf))
        assert passed == b"" and refusals == []
    passed, refusals = lines.feed(b'\n{"jsonrpc": "2.0", "method": "ok"}\n')
    refused += refusals
    assert passed == b'{"jsonrpc": "2.0", "method": "ok"}\n'  # passed on as it came
    assert max(held) <= 10_000 + 4096
    assert [json.loads(s)["error"]["code"] for s in refused] == [-32600]
    assert lines.end() == (b"", [])


def test_lines_split_anywhere_pass_whole_and_a_last_line_without_newline_counts() -> None:
    lines = Lines(notifications={"session/cancel"})
    data = (b'{"jsonrpc":"2.0","id":1,"method":"a"}\n \r\n{"jsonrpc":"2.0","id":2,"method":"session/cancel"}\n'
            b'{"jsonrpc":"2.0","method":"b"}')
    out, refused = b"", []
    for i in range(len(data)):  # one byte at a time
        passed, refusals = lines.feed(data[i:i + 1])
        out += passed
        refused += refusals
    passed, refusals = lines.end()
    assert out + passed == b'{"jsonrpc":"2.0","id":1,"method":"a"}\n{"jsonrpc":"2.0","method":"b"}\n'
    assert [json.loads(r)["id"] for r in refused + refusals] == [2]


async def test_acp_a_request_to_a_notification_method_gets_an_error(
        tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    editor = Editor()
    async with acp_agent(editor, write_config(tmp_path / "c.yaml", llm), observers=[editor.observe]) as (conn, proc):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": "c1", "method": "session/cancel",
                                     "params": {"sessionId": sid}}).encode() + b"\n")
        [(msg_id, code)] = await editor.wait_errors(1)
        assert (msg_id, code) == ("c1", -32600)
        assert "notification" in next(f for f in editor.frames if "error" in f)["error"]["message"]


@pytest.mark.parametrize("method", ["initialized", "exit", "textDocument/didOpen", "$/cancelRequest"])
async def test_lsp_a_request_to_a_notification_method_gets_an_error(daemon: Daemon, method: str) -> None:
    with pytest.raises(RpcError) as e:
        await daemon.call(method, {})
    assert e.value.code == -32600 and "notification" in e.value.message
    assert (await daemon.call("toycoder/session/list", {})) == {"sessions": []}  # still serving, not exited
