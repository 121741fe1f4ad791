"""Bad input on a real daemon's stdin gets a clear error, the daemon keeps serving, and it exits on
EOF (the subprocess layer; protocol-level errors are tested in-process in test_lsp_inproc.py)."""

from __future__ import annotations

import asyncio
import time

from rpc import Daemon, frame
from waiting import scaled

from toycoder_daemon.testing.fake_llm import FakeLLM


async def wait_orphan(d: Daemon, code: int) -> dict:
    return await d.wait_for(lambda: next((o for o in d.orphans if o["error"]["code"] == code), None))


async def test_unparsable_json_gets_parse_error_then_valid_request_works(daemon: Daemon) -> None:
    body = b'{"jsonrpc": "2.0", "id": 7, "method": '
    daemon.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    err = await wait_orphan(daemon, -32700)
    assert err["id"] is None and "Parse error" in err["error"]["message"]
    daemon.send_raw(b"Content-Length: 4\r\n\r\n\xff\xfe\x00\x01")  # not even UTF-8
    await daemon.wait_for(lambda: len([o for o in daemon.orphans if o["error"]["code"] == -32700]) == 2)
    assert (await daemon.call("toycoder/session/list", {})) == {"sessions": []}


async def test_absurd_content_length_is_refused_without_allocating(daemon: Daemon) -> None:
    daemon.send_raw(b"Content-Length: 99999999999999\r\n\r\n")
    err = await wait_orphan(daemon, -32600)
    assert "over the limit" in err["error"]["message"]
    daemon.send_raw(b"Content-Length: banana\r\n\r\n")
    await daemon.wait_for(lambda: len([o for o in daemon.orphans if o["error"]["code"] == -32600]) == 2)
    assert (await daemon.call("toycoder/session/list", {})) == {"sessions": []}
    assert daemon.proc.returncode is None


async def test_exits_promptly_when_stdin_closes_mid_turn(daemon: Daemon, llm: FakeLLM) -> None:
    llm.add({"text": "never finishing " * 100, "chunk_delay": 0.05})
    sid = (await daemon.call("toycoder/session/new", {}))["sessionId"]
    daemon.request_future("toycoder/prompt", {"sessionId": sid, "text": "go"})
    await daemon.wait_for(lambda: daemon.updates(sid))
    t = time.monotonic()
    code = await daemon.close()
    assert time.monotonic() - t < scaled(5)
    assert code == 0


async def test_shutdown_then_exit(daemon: Daemon) -> None:
    assert await daemon.call("shutdown", None) is None
    daemon.notify("exit")
    assert await asyncio.wait_for(daemon.proc.wait(), 5) == 0


async def test_stdout_carries_only_frames(daemon: Daemon, llm: FakeLLM) -> None:
    # The reader in rpc.py parses every byte of stdout as frames, to the end; anything else fails it.
    llm.add({"text": "ok"})
    sid = (await daemon.call("toycoder/session/new", {}))["sessionId"]
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "hi"})
    assert daemon.proc.stdin is not None
    daemon.proc.stdin.close()
    assert await asyncio.wait_for(daemon.proc.wait(), scaled(10)) == 0
    await daemon.read_to_end()
    assert daemon.streamed_text(sid) == "ok"
    assert daemon.notifications and all(n["jsonrpc"] == "2.0" and isinstance(n["method"], str) for n in daemon.notifications)


async def test_oversized_frame_is_skipped_and_the_next_one_is_read(daemon: Daemon) -> None:
    # e.g. a didOpen of a 40 MiB file: refused, its body read past, the next frames served
    big = b'{"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"x": "' + b"a" * (40 << 20) + b'"}}'
    daemon.send_raw(b"Content-Length: %d\r\n\r\n" % len(big) + big)
    daemon.send_raw(frame({"jsonrpc": "2.0", "id": 901, "method": "toycoder/session/list", "params": {}}))
    assert (await daemon.call("toycoder/session/list", {}, timeout=60)) == {"sessions": []}
    err = await wait_orphan(daemon, -32600)
    assert "over the limit" in err["error"]["message"]


async def test_garbage_after_a_bad_header_resynchronises(daemon: Daemon) -> None:
    daemon.send_raw(b"Content-Length: lots\r\n\r\n{\"half\": ")  # unknown length, body without newline
    assert (await daemon.call("toycoder/session/list", {})) == {"sessions": []}
    daemon.send_raw(b"Content-Length: -5\r\n\r\n")
    assert (await daemon.call("toycoder/session/list", {})) == {"sessions": []}
