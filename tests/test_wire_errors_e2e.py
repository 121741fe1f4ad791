"""Bad input over the wire gets a clear error, and the daemon keeps serving."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from rpc import Daemon, RpcError, frame
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


async def test_invalid_requests(daemon: Daemon) -> None:
    daemon.send_raw(frame([1, 2, 3]))
    daemon.send_raw(frame({"id": 5, "method": "toycoder/session/list"}))  # no jsonrpc
    daemon.send_raw(frame({"jsonrpc": "2.0", "id": 6, "method": 42}))
    await daemon.wait_for(lambda: len([o for o in daemon.orphans if o["error"]["code"] == -32600]) == 3)
    ids = sorted(str(o["id"]) for o in daemon.orphans)
    assert ids == ["5", "6", "None"]
    with pytest.raises(RpcError) as e:
        await daemon.call("toycoder/no/such/method", {})
    assert e.value.code == -32601


@pytest.mark.parametrize(
    "method, params, field",
    [
        ("toycoder/prompt", {"text": "hi"}, "sessionId"),
        ("toycoder/prompt", {"sessionId": "x", "text": 5}, "text"),
        ("toycoder/tools/setEnabled", {"sessionId": "x", "name": "read_file", "enabled": "maybe"}, "enabled"),
        ("toycoder/session/load", "abc", "object"),
        ("toycoder/session/load", [], "sessionId"),  # [] is an empty object (Lua clients send it)
    ],
)
async def test_bad_params_name_the_field(daemon: Daemon, method: str, params, field: str) -> None:
    with pytest.raises(RpcError) as e:
        await daemon.call(method, params)
    assert e.value.code == -32602
    assert field in e.value.message


async def test_unknown_session(daemon: Daemon) -> None:
    for method, params in [
        ("toycoder/prompt", {"sessionId": "nope", "text": "hi"}),
        ("toycoder/cancel", {"sessionId": "nope"}),
        ("toycoder/session/load", {"sessionId": "nope"}),
        ("toycoder/session/delete", {"sessionId": "nope"}),
        ("toycoder/tools/list", {"sessionId": "nope"}),
    ]:
        with pytest.raises(RpcError) as e:
            await daemon.call(method, params)
        assert e.value.code == -32010, method
        assert "nope" in e.value.message


async def test_requests_before_initialize(start_daemon, workspace) -> None:
    d = await start_daemon(init=False)
    with pytest.raises(RpcError) as e:
        await d.call("toycoder/session/new", {})
    assert e.value.code == -32002
    await d.initialize(workspace)
    assert (await d.call("toycoder/session/new", {}))["sessionId"]


async def test_broken_config_gives_config_error_naming_file_and_field(tmp_path, workspace) -> None:
    cfg = tmp_path / "broken.yaml"
    cfg.write_text("agent:\n  max_steps: lots\n")
    d = await Daemon.start("--config", str(cfg))
    try:
        await d.initialize(workspace)
        shown = await d.wait_for(lambda: [n for n in d.notifications if n["method"] == "window/showMessage"])
        assert "agent.max_steps" in shown[0]["params"]["message"]
        sid = (await d.call("toycoder/session/new", {}))["sessionId"]
        with pytest.raises(RpcError) as e:
            await d.call("toycoder/prompt", {"sessionId": sid, "text": "hi"})
        assert e.value.code == -32013
        assert str(cfg) in e.value.message and "agent.max_steps" in e.value.message
        assert "integer" in e.value.message
    finally:
        await d.close()


async def test_missing_api_key_is_a_clear_provider_error(tmp_path, workspace) -> None:
    d = await Daemon.start()  # built-in defaults, no OPENAI_API_KEY in the environment
    try:
        await d.initialize(workspace)
        sid = (await d.call("toycoder/session/new", {}))["sessionId"]
        with pytest.raises(RpcError) as e:
            await d.call("toycoder/prompt", {"sessionId": sid, "text": "hi"})
        assert e.value.code == -32012 and "OPENAI_API_KEY" in e.value.message
    finally:
        await d.close()


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
    # The reader in rpc.py parses every byte of stdout as frames; anything else would break it.
    llm.add({"text": "ok"})
    sid = (await daemon.call("toycoder/session/new", {}))["sessionId"]
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "hi"})
    await daemon.close()
    assert daemon.proc.stdout is not None
    assert await daemon.proc.stdout.read() == b""
    assert all(json.dumps(n) for n in daemon.notifications)


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


async def test_deep_nesting_and_a_second_initialize(daemon: Daemon, workspace) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    daemon.send_raw(b"Content-Length: %d\r\n\r\n" % len(deep) + deep)
    err = await wait_orphan(daemon, -32700)
    assert err["id"] is None
    with pytest.raises(RpcError) as e:
        await daemon.call("initialize", {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {}})
    assert e.value.code == -32600 and "already" in e.value.message
    assert (await daemon.call("toycoder/session/list", {})) == {"sessions": []}
