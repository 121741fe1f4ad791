"""The ReAct engine with an in-process scripted model and a recording frontend (no transport)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from helpers import AllowAll
from waiting import wait_until_async

from toycoder_daemon.agent.react import answer_open_tool_calls, run_turn
from toycoder_daemon.agent.subagent import ChildFrontend
from toycoder_daemon.core.errors import ProviderError
from toycoder_daemon.core.ports import PermissionRequest, TextDelta, ToolCallFinished
from toycoder_daemon.testing.scripted_model import ScriptedModel
from toycoder_daemon.tools.base import ToolContext, ToolError, tool
from toycoder_daemon.tools.files.read import list_directory, read_file
from toycoder_daemon.tools.registry import ToolRegistry
from toycoder_daemon.tools.workspace import Workspace


class Recorder(AllowAll):
    """Records events and permission requests; answers every request with `decision`."""

    def __init__(self, decision: str = "allow_once"):
        self.events: list = []
        self.asked: list[PermissionRequest] = []
        self.decision = decision

    def emit(self, event) -> None:
        self.events.append(event)

    async def confirm(self, request: PermissionRequest):
        self.asked.append(request)
        return self.decision

    async def ask(self, question, options):
        return None

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]


@tool(level="safe")
async def boom(ctx: ToolContext) -> str:
    """Always fails."""
    raise RuntimeError("kaput")


@tool(level="safe")
async def structured(ctx: ToolContext, n: int) -> dict:
    """Returns a dict."""
    return {"n": n, "path": Path("x")}


@tool(level="safe")
async def slow(ctx: ToolContext) -> str:
    """Sleeps."""
    await asyncio.sleep(30)
    return "late"


@tool(level="sensitive")
async def touch(ctx: ToolContext, name: str) -> str:
    """Sensitive."""
    return f"touched {name}"


@tool(level="safe")
async def picky(ctx: ToolContext, count: int) -> str:
    """Validates."""
    if count < 0:
        raise ToolError("count must be positive")
    return str(count)


def setup(tmp_path: Path, script: list[dict], decision: str = "allow_once"):
    (tmp_path / "f.txt").write_text("one\ntwo\nthree\n")
    reg = ToolRegistry()
    for t in (read_file, list_directory, boom, structured, slow, touch, picky):
        reg.register(t)
    fe = Recorder(decision)
    ws = Workspace(tmp_path)
    model = ScriptedModel(script)
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]
    kwargs = dict(max_steps=5, make_context=lambda cid: ToolContext(ws, fe, cid))
    return model, messages, reg, fe, kwargs


def assert_invariant(messages: list[dict]) -> None:
    open_ids: set[str] = set()
    for m in messages:
        if m["role"] == "tool":
            open_ids.discard(m["tool_call_id"])
        else:
            assert not open_ids, f"unanswered tool calls {open_ids} before {m['role']}"
            open_ids = {c["id"] for c in m.get("tool_calls") or ()}
    assert not open_ids


async def test_final_answer_without_tools(tmp_path: Path) -> None:
    reply = {"text": "All done.", "chunk_size": 3, "usage": {"prompt_tokens": 10, "completion_tokens": 5}}
    model, messages, reg, fe, kw = setup(tmp_path, [reply])
    result = await run_turn(model, messages, reg, fe, **kw)
    assert (result.stop_reason, result.text, result.steps) == ("end_turn", "All done.", 1)
    assert "".join(e.text for e in fe.events if isinstance(e, TextDelta)) == "All done."
    assert messages[-1] == {"role": "assistant", "content": "All done."}
    assert result.usage.total_tokens == 15


async def test_tool_round_trip_and_observations(tmp_path: Path) -> None:
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "f.txt", "offset": 2, "limit": 1}},
                        {"name": "boom"}, {"name": "structured", "arguments": {"n": 3}},
                        {"name": "picky", "arguments": {"count": "many"}},
                        {"name": "picky", "arguments": {"count": -1}}]},
        {"text": "ok"},
    ]
    model, messages, reg, fe, kw = setup(tmp_path, script)
    result = await run_turn(model, messages, reg, fe, **kw)
    assert result.stop_reason == "end_turn" and result.steps == 2
    tool_msgs = [m["content"] for m in model.calls[1]["messages"] if m["role"] == "tool"]
    assert tool_msgs[0] == "f.txt: lines 2-2 of 3 (more: call read_file with offset=3)\n     2\ttwo"
    assert "RuntimeError: kaput" in tool_msgs[1]
    assert tool_msgs[2] == '{"n": 3, "path": "x"}'
    assert "count" in tool_msgs[3] and "integer" in tool_msgs[3]
    assert tool_msgs[4] == "error: count must be positive"
    statuses = [e.status for e in fe.events if isinstance(e, ToolCallFinished)]
    assert statuses == ["completed", "failed", "completed", "failed", "failed"]
    assert_invariant(messages)
    # the model was offered the registry's schemas, with descriptions from the signature
    names = [t["function"]["name"] for t in model.calls[0]["tools"]]
    assert "read_file" in names and "picky" in names
    read_schema = next(t for t in model.calls[0]["tools"] if t["function"]["name"] == "read_file")["function"]
    assert read_schema["parameters"]["required"] == ["path"]
    assert "1-based" in read_schema["parameters"]["properties"]["offset"]["description"]


async def test_max_steps(tmp_path: Path) -> None:
    model, messages, reg, fe, kw = setup(tmp_path, [{"tool_calls": [{"name": "list_directory"}]}] * 9)
    result = await run_turn(model, messages, reg, fe, **kw)
    assert result.stop_reason == "max_steps" and result.steps == 5
    assert len(model.calls) == 5
    assert_invariant(messages)


async def test_cancel_while_tool_runs_answers_every_call(tmp_path: Path) -> None:
    script = [{"tool_calls": [{"name": "slow"}, {"name": "read_file", "arguments": {"path": "f.txt"}}]}]
    model, messages, reg, fe, kw = setup(tmp_path, script)
    task = asyncio.create_task(run_turn(model, messages, reg, fe, **kw))
    await wait_until_async(lambda: "tool_call" in fe.kinds(), what="the tool call")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert_invariant(messages)
    assert [m["content"].split(":")[0] for m in messages if m["role"] == "tool"] == ["cancelled", "cancelled"]
    assert fe.events[-1].kind == "tool_result" and fe.events[-1].status == "cancelled"


async def test_cancel_while_streaming_keeps_partial_text(tmp_path: Path) -> None:
    # the second delta waits an hour: the turn is cancelled after the first
    model, messages, reg, fe, kw = setup(tmp_path, [{"text": ["partial answer", " never"], "chunk_delay": 3600}])
    task = asyncio.create_task(run_turn(model, messages, reg, fe, **kw))
    await wait_until_async(lambda: "".join(e.text for e in fe.events if isinstance(e, TextDelta)) == "partial answer",
                           what="the whole partial text")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert messages[-1] == {"role": "assistant", "content": "partial answer\n[interrupted by the user]",
                            "interrupted": True}  # the flag: transcripts show the text without the marker


async def test_provider_error_propagates_with_a_valid_conversation(tmp_path: Path) -> None:
    script = [{"tool_calls": [{"name": "list_directory"}]}, {"status": 500, "error": "down"}]
    model, messages, reg, fe, kw = setup(tmp_path, script)
    with pytest.raises(ProviderError):
        await run_turn(model, messages, reg, fe, **kw)
    assert_invariant(messages)


async def test_sensitive_tool_asks_and_denial_is_observation(tmp_path: Path) -> None:
    script = [{"tool_calls": [{"name": "touch", "arguments": {"name": "a"}}]}, {"text": "ok"}]
    model, messages, reg, fe, kw = setup(tmp_path, script, decision="reject")
    await run_turn(model, messages, reg, fe, **kw)
    assert fe.asked[0].tool == "touch" and fe.asked[0].title == "touch a"
    assert [e.status for e in fe.events if isinstance(e, ToolCallFinished)] == ["denied"]


async def test_child_frontend_tags_events(tmp_path: Path) -> None:
    model, messages, reg, fe, kw = setup(tmp_path, [{"text": "sub"}])
    child = ChildFrontend(fe, "call_parent")
    kw["make_context"] = lambda cid: ToolContext(Workspace(tmp_path), child, cid)
    await run_turn(model, messages, reg, child, **kw)
    assert fe.events and all(e.parent_tool_call_id == "call_parent" for e in fe.events)


def test_answer_open_tool_calls_only_fills_gaps() -> None:
    msgs = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "x", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "x", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "done"}]
    assert answer_open_tool_calls(msgs) == 1
    assert msgs[-1]["tool_call_id"] == "b"
    assert answer_open_tool_calls(msgs) == 0


@tool(level="safe")
async def writes_then_waits(ctx: ToolContext) -> str:
    """Writes, then is slow."""
    ctx.changed.append("/ws/written.txt")
    await asyncio.sleep(30)
    return "done"


async def test_a_cancelled_call_that_already_wrote_says_so(tmp_path: Path) -> None:
    model, messages, reg, fe, kw = setup(tmp_path, [{"tool_calls": [{"name": "writes_then_waits"}]}])
    reg.register(writes_then_waits)
    contexts: list[ToolContext] = []
    make_context = kw["make_context"]
    kw["make_context"] = lambda cid: contexts.append(make_context(cid)) or contexts[-1]
    task = asyncio.create_task(run_turn(model, messages, reg, fe, **kw))
    await wait_until_async(lambda: any(c.changed for c in contexts), what="the tool to write")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    finished = fe.events[-1]
    assert finished.status == "cancelled" and finished.changed_paths == ("/ws/written.txt",)
    assert "already written /ws/written.txt" in messages[-1]["content"]
    assert_invariant(messages)


async def test_scripted_model_speaks_the_fake_servers_dialect() -> None:
    from toycoder_daemon.testing.scripted_model import ScriptedModel

    with pytest.raises(ValueError, match="unknown reply field"):
        ScriptedModel([{"text": "x", "chunks": 3}])  # the old in-process dialect is gone
    model = ScriptedModel([
        {"text": "abcdefghij", "chunk_size": 4, "tool_calls": [{"name": "t", "arguments": {"a": 1}}],
         "expect": {"last_user_contains": "hello"}},
        {"status": 429, "error": "slow down"},
        {"text": "one two", "drop_after": 1},
    ])
    deltas: list[str] = []
    first = await model.stream_chat([{"role": "user", "content": "hello"}], None, deltas.append)
    assert deltas == ["abcd", "efgh", "ij"] and first.content == "abcdefghij"
    assert [(c.id, c.name, c.arguments) for c in first.tool_calls] == [("call_1", "t", '{"a": 1}')]
    assert first.finish_reason == "tool_calls" and first.usage is not None and first.usage.completion_tokens == 4
    with pytest.raises(ProviderError, match="slow down") as e:
        await model.stream_chat([{"role": "user", "content": "again"}])
    assert e.value.status == 429
    with pytest.raises(ProviderError, match="stream cut"):
        await model.stream_chat([{"role": "user", "content": "third"}])
    assert model.violations == []
    with pytest.raises(ProviderError, match="script exhausted"):
        await model.stream_chat([{"role": "user", "content": "fourth"}])
    assert model.violations == ["script exhausted (4 requests)"]
