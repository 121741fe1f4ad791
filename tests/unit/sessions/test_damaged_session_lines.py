"""Hand-edited session files (issue 28, "Damaged data"): a line that is no object, a scalar, a line
nested 100k deep, a message whose content is a dict, malformed tool calls, an unreadable createdAt,
settings of the wrong type, "yes" as a tool override. Each is skipped or repaired and logged at
warning; the rest of the history is intact, and load, list and prompt work afterwards, in the App
and through the LSP face (never -32603)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from inproc_app import InProc

from toycoder_daemon.sessions.store import SessionStore
from toycoder_daemon.testing.fake_llm import FakeLLM

DEEP = b"[" * 100_000 + b"]" * 100_000


def msg(m: Any) -> bytes:
    return json.dumps({"t": "msg", "m": m}).encode()


def meta(**fields: Any) -> bytes:
    return json.dumps({"t": "meta", **fields}).encode()


def call(**fields: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [fields]}


DAMAGED: dict[str, bytes] = {
    "a list line": b"[1, 2]",
    "a number line": b"42",
    "a string line": b'"hello"',
    "a null line": b"null",
    "a line nested 100k deep": DEEP,
    "a meta line nested 100k deep": b'{"t": "meta", "x": ' + DEEP + b"}",
    "dict content": msg({"role": "user", "content": {"text": "hi"}, "turn": "t9"}),
    "list content of a tool result": msg({"role": "tool", "tool_call_id": "c0", "content": [1, 2]}),
    "a message with no role": msg({"content": "x"}),
    "a message that is a string": msg("hello"),
    "tool_calls a string": msg({"role": "assistant", "content": None, "tool_calls": "read_file"}),
    "a tool call that is a number": msg({"role": "assistant", "content": None, "tool_calls": [1]}),
    "a tool call without id": msg(call(function={"name": "read_file", "arguments": "{}"})),
    "a tool call without function": msg(call(id="c5")),
    "a tool call whose name is a list": msg(call(id="c6", function={"name": ["x"], "arguments": "{}"})),
    "a tool result naming no call": msg({"role": "tool", "tool_call_id": 7, "content": "x"}),
    "createdAt a string": meta(createdAt="yesterday"),
    "createdAt a list": meta(createdAt=[1]),
    "createdAt past year 9999": meta(createdAt=1e20),
    "createdAt infinite": b'{"t": "meta", "createdAt": Infinity}',
    "title a dict": meta(title={"x": 1}),
    "mode a list": meta(mode=["ask"]),
    "always a number": meta(always=5),
    "toolOverrides a list": meta(toolOverrides=[1]),
    "turnEnds a list": meta(turnEnds=[1]),
    "a context record with bad head": json.dumps({"t": "context", "start": 1, "head": [1, "x"]}).encode(),
    "a context record with bad start": json.dumps({"t": "context", "start": "1", "head": []}).encode(),
}


def write_damaged(data_dir: Path, workspace: Path, line: bytes) -> str:
    """A good session (one turn) with `line` after it, written by hand."""
    store = SessionStore(data_dir, workspace.resolve())
    sid = store.new_id()
    store.dir.mkdir(parents=True, exist_ok=True)
    good = [meta(id=sid, title="Damaged", createdAt=1.0, mode="ask"),
            msg({"role": "user", "content": "hi", "turn": "t1"}),
            msg({"role": "assistant", "content": "hello"})]
    (store.dir / f"{sid}.jsonl").write_bytes(b"".join(r + b"\n" for r in [*good, line]))
    return sid


@pytest.mark.parametrize("line", DAMAGED.values(), ids=DAMAGED.keys())
async def test_a_damaged_line_is_skipped_or_repaired_and_the_session_works(
        line: bytes, tmp_path: Path, workspace: Path, caplog: pytest.LogCaptureFixture) -> None:
    p = InProc(workspace.resolve(), tmp_path / "data")
    try:
        sid = write_damaged(tmp_path / "data", workspace, line)
        with caplog.at_level(logging.WARNING, logger="toycoder_daemon.sessions"):
            s = await p.app.load(sid)
        assert any(r.levelno == logging.WARNING and ": line 4" in r.getMessage() for r in caplog.records), caplog.text
        entries = s.transcript()
        assert [(e.role, e.text) for e in entries[:2]] == [("user", "hi"), ("assistant", "hello")]
        assert 0 <= s.created_at <= 253402300799 and isinstance(s.title, str)
        assert [row.id for row in p.app.store.list()] == [sid]
        p.script.add({"text": "still here"})
        out = await p.prompt(sid, "again")
        assert out.result.stop_reason == "end_turn"
        sent = p.script.calls[-1]["messages"]
        assert all(isinstance(m.get("content"), str) or m.get("content") is None for m in sent)
        assert sent[-1] == {"role": "user", "content": "again", "turn": sent[-1]["turn"]}
    finally:
        await p.close()


async def test_repairs_keep_what_is_readable(tmp_path: Path, workspace: Path) -> None:
    """Dict content stays visible as its JSON; a call's dict arguments become their JSON text; the
    readable calls of a message stay, its unreadable ones go, and the kept call gets its answer."""
    p = InProc(workspace.resolve(), tmp_path / "data")
    try:
        bad_calls = {"role": "assistant", "content": None, "tool_calls": [
            1, {"id": "c1", "function": {"name": "read_file", "arguments": {"path": "README.md"}}}]}
        sid = write_damaged(tmp_path / "data", workspace,
                            msg({"role": "user", "content": {"text": "hi"}}) + b"\n" + msg(bad_calls))
        entries = (await p.app.load(sid)).transcript()
        assert ("user", '{"text": "hi"}') in [(e.role, e.text) for e in entries]
        [c] = [e for e in entries if e.role == "tool_call"]
        assert (c.tool_call_id, c.name, json.loads(c.text)) == ("c1", "read_file", {"path": "README.md"})
        p.script.add({"text": "ok"})
        assert (await p.prompt(sid, "go on")).result.stop_reason == "end_turn"
        sent = p.script.calls[-1]["messages"]
        assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ["c1"]  # answered as interrupted
    finally:
        await p.close()


async def test_a_tool_override_of_yes_does_not_enable_a_tool(tmp_path: Path, workspace: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    p = InProc(workspace.resolve(), tmp_path / "data")
    try:
        sid = write_damaged(tmp_path / "data", workspace,
                            meta(toolOverrides={"run_command": "yes", "read_file": False}))
        with caplog.at_level(logging.WARNING, logger="toycoder_daemon.sessions"):
            s = await p.app.load(sid)
        assert not s.tools.is_enabled("run_command")
        assert not s.tools.is_enabled("read_file")  # the readable override next to it is kept
        assert "run_command" in caplog.text
    finally:
        await p.close()


@pytest.mark.parametrize("name", ["a number line", "a line nested 100k deep", "dict content", "tool_calls a string",
                                  "createdAt past year 9999", "title a dict", "mode a list"])
async def test_the_lsp_face_loads_lists_and_prompts_a_damaged_session(
        name: str, start_daemon: Any, llm: FakeLLM, tmp_path: Path, workspace: Path) -> None:
    sid = write_damaged(tmp_path / "data", workspace, DAMAGED[name])
    d = await start_daemon()
    loaded = await d.call("toycoder/session/load", {"sessionId": sid})
    assert [e["role"] for e in loaded["transcript"]][:2] == ["user", "assistant"]
    assert [s["sessionId"] for s in (await d.call("toycoder/session/list", {}))["sessions"]] == [sid]
    llm.add({"text": "fine"})
    assert (await d.call("toycoder/prompt", {"sessionId": sid, "text": "again"}))["stopReason"] == "end_turn"


@pytest.mark.parametrize("name", ["a list line", "a line nested 100k deep", "dict content", "a tool call without id",
                                  "createdAt a string", "title a dict"])
async def test_the_acp_face_loads_and_prompts_a_damaged_session(name: str, tmp_path: Path, llm: FakeLLM,
                                                                workspace: Path) -> None:
    from acp import text_block
    from acp_client import acp_face

    sid = write_damaged(tmp_path / "data", workspace, DAMAGED[name])
    llm.add({"text": "fine"})
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        await conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
        assert editor.text("user_message_chunk").startswith("hi") and editor.text().startswith("hello")
        assert (await conn.prompt(session_id=sid, prompt=[text_block("again")])).stop_reason == "end_turn"
