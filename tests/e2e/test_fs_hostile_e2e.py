"""Hostile workspaces against the real daemon (issue 13): a session goes on after names that are
not UTF-8 and a model's lone surrogate; a FIFO is refused; the daemon exits within a second of
stdin closing even while a worker thread is stuck reading a FIFO."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from acp import text_block
from acp_client import acp_face
from acp_client import new_session as acp_session
from helpers import new_session, tool_results
from rpc import Daemon, RpcError
from waiting import scaled

from toycoder_daemon.testing.fake_llm import FakeLLM


def tool(name: str, **args: object) -> dict:
    return {"tool_calls": [{"name": name, "arguments": args}]}


async def closed_within(d: Daemon, seconds: float) -> int:
    """Close the daemon's stdin; its exit code, failing if it took longer than `seconds`."""
    assert d.proc.stdin is not None
    t = time.monotonic()
    d.proc.stdin.close()
    try:
        code = await asyncio.wait_for(d.proc.wait(), scaled(seconds))
    except asyncio.TimeoutError:
        raise AssertionError(f"the daemon did not exit within {seconds} s of stdin closing") from None
    assert time.monotonic() - t < scaled(seconds)
    return code


async def test_the_session_goes_on_after_a_latin1_name_and_a_lone_surrogate(
        start_daemon: Callable[..., Awaitable[Daemon]], llm: FakeLLM, workspace: Path) -> None:
    (workspace / os.fsdecode(b"caf\xe9.txt")).write_text("hi\n")
    llm.add(tool("list_directory"), {"text": "listed"})
    llm.add(tool("read_file", path="nope\udcff.txt"), {"text": "read"})
    llm.add(tool("grep_search", pattern="hi"), {"text": "grepped"})
    llm.add({"text": "still here"})
    daemon = await start_daemon()
    sid = await new_session(daemon)
    for text in ("list", "read", "grep", "again"):
        assert (await daemon.call("toycoder/prompt", {"sessionId": sid, "text": text}))["stopReason"] == "end_turn"
    listed, missing, grepped = tool_results(daemon, sid)
    assert "file  caf\\xe9.txt  (3 bytes)" in listed["output"] and "shown as \\xNN" in listed["output"]
    assert missing["status"] == "failed" and "nope\\xff.txt" in missing["output"]
    assert grepped["output"].startswith("caf\\xe9.txt:1: hi")
    await daemon.close()
    # the session file took all of it: another daemon loads the session whole
    again = await start_daemon()
    loaded = await again.call("toycoder/session/load", {"sessionId": sid})
    assert "nope\\\\xff.txt" in json.dumps(loaded) and "still here" in json.dumps(loaded)


async def test_the_acp_face_goes_on_too(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    (workspace / os.fsdecode(b"caf\xe9.txt")).write_text("hi\n")
    llm.add(tool("list_directory"), {"text": "listed"})
    llm.add(tool("read_file", path="nope\udcff.txt"), {"text": "read"})
    llm.add({"text": "still here"})
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        sid = await acp_session(conn, workspace)
        for text in ("list", "read", "again"):
            assert (await conn.prompt(session_id=sid, prompt=[text_block(text)])).stop_reason == "end_turn"
        listed, missing = (u["rawOutput"]["output"] for u in editor.updates("tool_call_update"))
        assert "file  caf\\xe9.txt  (3 bytes)" in listed and missing == "error: file not found: nope\\xff.txt"
        assert editor.text().endswith("still here")


async def test_a_fifo_is_refused_and_the_daemon_still_exits_at_once(daemon: Daemon, llm: FakeLLM,
                                                                    workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    llm.add(tool("read_file", path="pipe"), {"text": "refused"})
    sid = await new_session(daemon)
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "read"})
    out = tool_results(daemon, sid)[0]
    assert out["status"] == "failed" and "FIFO" in out["output"]
    assert await closed_within(daemon, 1.0) == 0


async def test_a_fifo_session_file_or_agents_md_is_never_waited_on(
        start_daemon: Callable[..., Awaitable[Daemon]], llm: FakeLLM, tmp_path: Path, workspace: Path) -> None:
    first = await start_daemon()
    llm.add({"text": "hello"})
    sid = await new_session(first)
    await first.call("toycoder/prompt", {"sessionId": sid, "text": "hi"})
    await first.close()
    [stored] = (tmp_path / "data" / "sessions").glob(f"*/{sid}.jsonl")
    stored.unlink()
    os.mkfifo(stored)  # nobody ever writes to it: opening it for reading would block for good
    os.mkfifo(workspace / "AGENTS.md")
    second = await start_daemon()
    with pytest.raises(RpcError) as e:
        await second.call("toycoder/session/load", {"sessionId": sid})
    assert e.value.code == -32010  # not a session file: not found, answered at once
    other = await new_session(second)  # the prompt skips the FIFO AGENTS.md instead of waiting on it
    llm.add({"text": "fine"})
    assert (await second.call("toycoder/prompt", {"sessionId": other, "text": "go"}))["text"] == "fine"
    assert await closed_within(second, 1.0) == 0
