"""The early turn's client (acp_early_link.py) in-process: its requests and the client's responses
by id, the filter that keeps routing them after the hand-over, and the capabilities the early path
reads from the answered initialize, which must be the SDK's reading (acp_turn.plain_caps)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from acp.schema import InitializeRequest
from inproc_app import eventually

from toycoder_daemon import acp_early_link, acp_fs
from toycoder_daemon.acp_client import ClientError
from toycoder_daemon.acp_early_link import EarlyClient, Replies
from toycoder_daemon.acp_turn import Caps, plain_caps


def line(msg: dict[str, Any]) -> bytes:
    return json.dumps(msg).encode() + b"\n"


async def test_requests_get_their_responses_by_id_and_errors_raise() -> None:
    written: list[dict[str, Any]] = []
    client = EarlyClient(written.append)
    await client.notify("session/update", {"sessionId": "s", "update": {}})
    first = asyncio.ensure_future(client.request("fs/read_text_file", {"sessionId": "s", "path": "/a"}))
    second = asyncio.ensure_future(client.request("terminal/create", {"sessionId": "s", "command": "ls"}))
    await eventually(lambda: len(written) == 3, "both requests written")
    assert [m.get("id") for m in written] == [None, 0, 1] and written[1]["method"] == "fs/read_text_file"
    assert list(written[0]) == ["jsonrpc", "method", "params"] and list(written[1]) == ["jsonrpc", "id", "method", "params"]
    assert not client.response({"jsonrpc": "2.0", "id": 7, "result": {}})  # not ours: the SDK's
    assert not client.response({"jsonrpc": "2.0", "id": "0", "result": {}})
    assert client.response({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}})
    assert client.response({"jsonrpc": "2.0", "id": 0, "result": {"content": "x"}})
    assert await first == {"content": "x"}
    with pytest.raises(ClientError) as e:
        await second
    assert e.value.code == -32601 and str(e.value) == "Method not found"
    assert client.response({"jsonrpc": "2.0", "id": 0, "result": {}})  # a late one is still ours: dropped
    assert client.pending == {}


async def test_after_the_hand_over_frames_go_through_the_sdk() -> None:
    class Sdk:
        def __init__(self) -> None:
            self.sent: list[str] = []

        async def notify(self, method: str, params: dict[str, Any]) -> None:
            self.sent.append(method)

        async def request(self, method: str, params: dict[str, Any]) -> Any:
            self.sent.append(method)
            return {"ok": True}

    written: list[dict[str, Any]] = []
    client = EarlyClient(written.append)
    client.sdk = sdk = Sdk()
    await client.notify("session/update", {})
    assert await client.request("fs/read_text_file", {}) == {"ok": True}
    assert written == [] and sdk.sent == ["session/update", "fs/read_text_file"] and client.next_id == 0


async def test_replies_takes_the_early_responses_out_and_passes_the_rest_as_it_came() -> None:
    client = EarlyClient(lambda m: None)
    waiting = asyncio.ensure_future(client.request("session/request_permission", {}))
    await eventually(lambda: bool(client.pending), "the request sent")
    other = line({"jsonrpc": "2.0", "id": 5, "method": "session/list", "params": {}})
    ours = line({"jsonrpc": "2.0", "id": 0, "result": {"outcome": {"outcome": "cancelled"}}})
    theirs = line({"jsonrpc": "2.0", "id": 3, "result": {}})
    after = line({"jsonrpc": "2.0", "id": 6, "method": "session/list", "params": {}})
    data = other + ours[:10]
    chunks = [data, ours[10:] + theirs, after[:7], after[7:], b""]

    async def read() -> bytes:
        return chunks.pop(0)

    replies = Replies(read, client)
    got = b""
    while chunk := await replies.read():
        got += chunk
    assert got == other + theirs + after
    assert await waiting == {"outcome": {"outcome": "cancelled"}}


async def test_replies_passes_chunks_untouched_when_nothing_waits() -> None:
    chunks = [b'{"partial', b'": 1}\n{"x"', b""]

    async def read() -> bytes:
        return chunks.pop(0)

    replies = Replies(read, EarlyClient(lambda m: None))
    assert [await replies.read(), await replies.read(), await replies.read()] == [b'{"partial', b'": 1}\n{"x"', b""]


@pytest.mark.parametrize("params", [
    {"protocolVersion": 1},
    {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True},
     "clientInfo": {"name": "zed", "version": "0.200.0"}},
    {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True}, "elicitation": {"form": {}}}},
    {"protocolVersion": 1, "clientCapabilities": {"elicitation": {"url": {}}, "terminal": False, "_meta": {"a": 1}}},
    {"protocolVersion": 1, "clientCapabilities": None, "clientInfo": {"name": "x", "version": "1", "title": None}},
])
def test_plain_capabilities_are_read_as_the_sdk_reads_them(params: dict[str, Any]) -> None:
    read = plain_caps(params)
    assert read is not None
    caps = InitializeRequest.model_validate(params).client_capabilities
    can_read, can_write = acp_fs.declared(caps)
    sdk = Caps(elicit=bool(caps and caps.elicitation and caps.elicitation.form is not None), read=can_read,
               write=can_write)
    assert read == (sdk, bool(caps and caps.terminal))


@pytest.mark.parametrize("params", [
    None,  # initialize was the SDK's
    {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": "yes"}}},
    {"protocolVersion": 1, "clientCapabilities": {"terminal": 1}},
    {"protocolVersion": 1, "clientCapabilities": {"somethingNew": {}}},
    {"protocolVersion": 1, "clientCapabilities": []},
    {"protocolVersion": 1, "clientInfo": {"name": "x"}},  # no version: the SDK refuses the params
])
def test_capabilities_that_are_not_plain_leave_prompts_to_the_sdk(params: dict[str, Any] | None) -> None:
    assert plain_caps(params) is None


ALLOW = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


@pytest.mark.parametrize("reply", [
    {"id": 0, "result": ALLOW},  # no "jsonrpc"
    {"jsonrpc": "1.0", "id": 0, "result": ALLOW},
    {"jsonrpc": "2.0", "id": 0},  # neither result nor error: the SDK's transport answers -32600
    {"jsonrpc": "2.0", "id": 0, "error": "no"},  # an error that is not an object: dropped there
])
async def test_a_reply_the_sdks_transport_refuses_is_left_to_it(reply: dict[str, Any]) -> None:
    """The early client takes only what rpc_checks accepts (what the SDK path acts on); the rest
    passes on, to be refused there as it is for any other line, and the request still waits."""
    client = EarlyClient(lambda m: None)
    waiting = asyncio.ensure_future(client.request("session/request_permission", {}))
    await eventually(lambda: bool(client.pending), "the request sent")
    assert not client.response(reply)
    chunks = [line(reply), b""]

    async def read() -> bytes:
        return chunks.pop(0)

    assert await Replies(read, client).read() == line(reply)
    assert not waiting.done() and 0 in client.pending
    waiting.cancel()


async def test_a_reply_with_both_result_and_error_is_read_result_first() -> None:
    client = EarlyClient(lambda m: None)
    waiting = asyncio.ensure_future(client.request("session/request_permission", {}))
    await eventually(lambda: bool(client.pending), "the request sent")
    assert client.response({"jsonrpc": "2.0", "id": 0, "result": ALLOW, "error": {"code": -1, "message": "no"}})
    assert await waiting == ALLOW


async def test_a_line_past_the_limit_passes_instead_of_being_held(monkeypatch: pytest.MonkeyPatch) -> None:
    """While an early request waits, a line that grows past MAX_LINE without its newline is not
    buffered: its bytes pass as they come (the SDK's transport drops the line), and lines after its
    newline are looked at again."""
    monkeypatch.setattr(acp_early_link, "MAX_LINE", 64)
    client = EarlyClient(lambda m: None)
    waiting = asyncio.ensure_future(client.request("session/request_permission", {}))
    await eventually(lambda: bool(client.pending), "the request sent")
    before = line({"jsonrpc": "2.0", "id": 5, "method": "session/list", "params": {}})
    ours = line({"jsonrpc": "2.0", "id": 0, "result": ALLOW})
    chunks = [before + b"x" * 40, b"x" * 40, b"x" * 100, b"x\n" + ours + b"{", b"}\n", b""]

    async def read() -> bytes:
        return chunks.pop(0)

    replies = Replies(read, client)
    assert await replies.read() == before  # the start of the long line is held while it is short
    assert await replies.read() == b"x" * 80  # past the limit: passed on at once
    assert await replies.read() == b"x" * 100
    assert await replies.read() == b"x\n"  # its end; our response after it is still taken out
    assert await replies.read() == b"{}\n"
    assert await waiting == ALLOW
