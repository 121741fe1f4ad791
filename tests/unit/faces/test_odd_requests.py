"""Odd input on both faces never gives -32603 (issue 28, "Damaged data and odd input"): a
non-boolean where the wire takes a boolean is -32602 (never a lax "yes" that enables run_command);
a session id longer than a file name may be is -32602, with no traceback in the log; a request method
sent as a notification (`toycoder/prompt`, ACP's `session/prompt`) runs nothing and is logged; a
request after `shutdown` is answered -32600."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block
from acp_client import acp_face, new_session
from rpc import Daemon, RpcError

from toycoder_daemon.testing.fake_llm import FakeLLM
from toycoder_daemon.wire import protocol as wire

LONG_ID = "a" * 300
"""Over NAME_MAX (255 bytes) once the store adds its suffix, and on its own."""


def no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()], caplog.text


@pytest.mark.parametrize("enabled", ["yes", 1, "true", None])
async def test_set_enabled_takes_booleans_only(daemon: Daemon, enabled: Any) -> None:
    sid = (await daemon.call(wire.SESSION_NEW, {}))["sessionId"]
    with pytest.raises(RpcError) as e:
        await daemon.call(wire.TOOLS_SET_ENABLED, {"sessionId": sid, "name": "run_command", "enabled": enabled})
    assert e.value.code == -32602 and "enabled" in e.value.message
    [tool] = [t for t in (await daemon.call(wire.TOOLS_LIST, {"sessionId": sid}))["tools"] if t["name"] == "run_command"]
    assert tool["enabled"] is False


async def test_restore_force_takes_booleans_only(daemon: Daemon) -> None:
    sid = (await daemon.call(wire.SESSION_NEW, {}))["sessionId"]
    with pytest.raises(RpcError) as e:
        await daemon.call(wire.CHECKPOINT_RESTORE, {"sessionId": sid, "turnId": "1", "force": "no"})
    assert e.value.code == -32602 and "force" in e.value.message


LONG_ID_CALLS = [
    (wire.SESSION_LOAD, {}), (wire.SESSION_DELETE, {}), (wire.SESSION_CLOSE, {}), (wire.CANCEL, {}),
    (wire.SESSION_SET_MODE, {"mode": "ask"}), (wire.PROMPT, {"text": "hi"}), (wire.TOOLS_LIST, {}),
    (wire.TOOLS_SET_ENABLED, {"name": "read_file", "enabled": False}), (wire.MODELS_LIST, {}),
    (wire.MODELS_SET, {"model": "fake-model"}), (wire.CHECKPOINT_LIST, {}), (wire.CHECKPOINT_RESTORE, {"turnId": "1"}),
]


@pytest.mark.parametrize("method, params", LONG_ID_CALLS, ids=[m for m, _ in LONG_ID_CALLS])
async def test_a_session_id_over_name_max_is_invalid_params(daemon: Daemon, method: str, params: dict[str, Any],
                                                           caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG), pytest.raises(RpcError) as e:
        await daemon.call(method, {"sessionId": LONG_ID, **params})
    assert e.value.code == -32602 and "sessionId" in e.value.message
    no_traceback(caplog)
    assert (await daemon.call(wire.SESSION_LIST, {})) == {"sessions": []}  # the daemon goes on


async def test_acp_a_session_id_over_name_max_is_invalid_params(tmp_path: Path, llm: FakeLLM, workspace: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    async with acp_face(tmp_path, llm) as (conn, _, _):
        for method, params, code in [("session/load", {"cwd": str(workspace), "mcpServers": []}, -32602),
                                     ("session/resume", {"cwd": str(workspace)}, -32602),
                                     # checked first: only a session open on the connection takes a prompt
                                     ("session/prompt", {"prompt": [text_block("hi").model_dump()]}, -32002)]:
            with caplog.at_level(logging.DEBUG), pytest.raises(RequestError) as e:
                await conn._conn.send_request(method, {"sessionId": LONG_ID, **params})
            assert e.value.code == code, (method, e.value)
        # a delete of an id no session can have succeeds, as a delete of any unknown id does (ACP)
        assert await conn._conn.send_request("session/delete", {"sessionId": LONG_ID}) in ({}, None)
        no_traceback(caplog)
        assert await new_session(conn, workspace)


async def test_a_prompt_sent_as_a_notification_runs_no_turn(daemon: Daemon, llm: FakeLLM,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    sid = (await daemon.call(wire.SESSION_NEW, {}))["sessionId"]
    with caplog.at_level(logging.INFO):
        daemon.notify(wire.PROMPT, {"sessionId": sid, "text": "do it quietly"})
        loaded = await daemon.call(wire.SESSION_LOAD, {"sessionId": sid})  # read after the notification
    assert loaded["transcript"] == []
    assert "toycoder/prompt sent as a notification" in caplog.text
    llm.add({"text": "seen"})  # a hidden turn would take this reply, or make the prompt busy
    assert (await daemon.call(wire.PROMPT, {"sessionId": sid, "text": "hi"}))["stopReason"] == "end_turn"
    assert daemon.streamed_text(sid) == "seen"
    [request] = llm.requests
    assert [m["content"] for m in request["body"]["messages"] if m["role"] == "user"] == ["hi"]


async def test_acp_a_prompt_sent_as_a_notification_runs_no_turn(tmp_path: Path, llm: FakeLLM, workspace: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        sid = await new_session(conn, workspace)
        with caplog.at_level(logging.INFO):
            await conn._conn.send_notification("session/prompt", {"sessionId": sid,
                                                                  "prompt": [text_block("quietly").model_dump()]})
            await new_session(conn, workspace)  # a round trip after the notification
        assert "session/prompt sent as a notification" in caplog.text
        llm.add({"text": "seen"})
        assert (await conn.prompt(session_id=sid, prompt=[text_block("hi")])).stop_reason == "end_turn"
        assert editor.text() == "seen"
        [request] = llm.requests
        assert [m["content"] for m in request["body"]["messages"] if m["role"] == "user"] == ["hi"]


async def test_requests_after_shutdown_are_invalid_requests(daemon: Daemon) -> None:
    assert await daemon.call("shutdown", None) is None
    for method, params in [(wire.SESSION_LIST, {}), (wire.SESSION_NEW, {}), ("shutdown", None)]:
        with pytest.raises(RpcError) as e:
            await daemon.call(method, params)
        assert e.value.code == -32600 and "shutdown" in e.value.message
