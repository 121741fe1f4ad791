"""Issue 13 item 16: duplicate tool-call ids in one model reply. Decision (agent/react.py
`unique_call_ids`): every call runs, and a repeated (or empty) id is renamed `<id>-dupN`, so the
stored conversation pairs each call with exactly one result, as strict providers demand."""

from __future__ import annotations

from collections import Counter

from inproc_app import InProc, SharedScript

from toycoder_daemon.agent.react import unique_call_ids
from toycoder_daemon.core.ports import ToolCallFinished
from toycoder_daemon.llm.base import ToolCall


def pairing_problems(messages: list[dict]) -> list[str]:
    """What a strict provider checks: ids unique per reply, each answered exactly once, in order."""
    problems: list[str] = []
    for i, m in enumerate(messages):
        if m["role"] != "assistant" or not m.get("tool_calls"):
            continue
        ids = [c["id"] for c in m["tool_calls"]]
        if len(set(ids)) != len(ids) or "" in ids:
            problems.append(f"message {i}: tool-call ids not unique: {ids}")
        answers = []
        for t in messages[i + 1:]:
            if t["role"] != "tool":
                break
            answers.append(t["tool_call_id"])
        if Counter(answers) != Counter(ids):
            problems.append(f"message {i}: calls {ids} answered by {answers}")
    return problems


async def test_duplicate_ids_in_one_reply_are_renamed_and_all_run(tmp_path, workspace) -> None:
    p = InProc(workspace, tmp_path / "data", None, SharedScript())
    p.script.add({"tool_calls": [{"id": "call_same", "name": "read_file", "arguments": {"path": "README.md"}},
                                 {"id": "call_same", "name": "read_file", "arguments": {"path": "src/app.py"}},
                                 {"id": "call_same", "name": "list_directory", "arguments": {}}]},
                 {"text": "done"})
    sid = p.new_session()
    assert (await p.prompt(sid, "look")).result.stop_reason == "end_turn"
    sent = p.script.calls[-1]["messages"]
    assert pairing_problems(sent) == []
    tools = [m for m in sent if m["role"] == "tool"]
    assert "# Demo" in tools[0]["content"] and "return a + b" in tools[1]["content"] and "src" in tools[2]["content"]
    finished = [e.tool_call_id for e in p.frontend.of(sid) if isinstance(e, ToolCallFinished)]
    assert finished == ["call_same", "call_same-dup2", "call_same-dup3"]
    await p.close()  # releases the lock
    # the stored session is as valid: a new App on the same store sends the same pairing
    script = SharedScript()
    again = InProc(workspace, tmp_path / "data", None, script)
    try:
        script.add({"text": "ok"})
        await again.prompt(sid, "more")
        assert pairing_problems(script.calls[-1]["messages"]) == [] and len(script.calls[-1]["messages"]) == 8
    finally:
        await again.close()


def test_unique_call_ids_never_collides_with_an_id_of_the_reply() -> None:
    calls = [ToolCall("a", "t", "{}"), ToolCall("a", "t", "{}"), ToolCall("a-dup2", "t", "{}"), ToolCall("", "t", "{}")]
    ids = [c.id for c in unique_call_ids(calls)]
    assert ids[0] == "a" and ids[2] == "a-dup2" and len(set(ids)) == 4 and "" not in ids
