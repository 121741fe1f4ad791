"""The permission round trip with the editor: the request and its diff preview, malformed answers,
the showMessageRequest fallback, cancel and late replies. The gate's decisions (allow always,
reject, rules, edits that cannot apply): test_permission_gate.py, in-process."""

from __future__ import annotations

import asyncio

from helpers import new_session, write_call
from helpers import tool_results as results
from rpc import Daemon, frame
from waiting import scaled

from toycoder_daemon.testing.fake_llm import FakeLLM


async def test_write_asks_with_a_diff_and_allow_once_asks_again(daemon: Daemon, llm: FakeLLM, workspace) -> None:
    asked: list[dict] = []
    daemon.handlers["toycoder/requestPermission"] = lambda p: asked.append(p) or {"decision": "allow_once"}
    llm.add(write_call("README.md", "# Demo\nA bigger project.\n"), write_call("notes/new.txt", "hi\n"),
            {"text": "done"})
    sid = await new_session(daemon)
    result = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "edit"})
    assert result["text"] == "done"
    assert len(asked) == 2
    first = asked[0]
    assert first["tool"] == "write_file" and first["level"] == "sensitive" and first["sessionId"] == sid
    assert first["preview"]["kind"] == "diff" and first["preview"]["path"] == "README.md"
    assert first["preview"]["uri"] == (workspace / "README.md").resolve().as_uri()
    assert "-A tiny project." in first["preview"]["diff"] and "+A bigger project." in first["preview"]["diff"]
    assert asked[1]["preview"]["diff"].startswith("--- /dev/null")
    assert (workspace / "README.md").read_text() == "# Demo\nA bigger project.\n"
    assert (workspace / "notes" / "new.txt").read_text() == "hi\n"
    assert [r["status"] for r in results(daemon, sid)] == ["completed", "completed"]
    assert [r["changedPaths"] for r in results(daemon, sid)] == [[str((workspace / "README.md").resolve())],
                                                                  [str((workspace / "notes" / "new.txt").resolve())]]


async def test_malformed_or_error_answers_are_a_rejection(daemon: Daemon, llm: FakeLLM, workspace) -> None:
    daemon.handlers["toycoder/requestPermission"] = lambda p: {"decision": "yes please"}
    llm.add(write_call("x.txt", "1"), {"text": "ok"})
    sid = await new_session(daemon)
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "go"})
    assert not (workspace / "x.txt").exists()
    assert results(daemon, sid)[0]["status"] == "denied"


async def test_client_without_capability_gets_show_message_request(start_daemon, llm: FakeLLM, workspace) -> None:
    d = await start_daemon(caps={})
    seen: list[dict] = []
    d.handlers["window/showMessageRequest"] = lambda p: seen.append(p) or {"title": "Allow"}
    llm.add(write_call("y.txt", "yes"), {"text": "ok"})
    sid = await new_session(d)
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "go"})
    assert [a["title"] for a in seen[0]["actions"]] == ["Allow", "Always allow", "Deny"]
    assert "write_file y.txt" in seen[0]["message"]
    assert (workspace / "y.txt").read_text() == "yes"


async def test_cancel_while_waiting_for_permission_then_late_reply(daemon: Daemon, llm: FakeLLM, workspace) -> None:
    """pygls 2.1.1 #621: a reply to a request whose waiter was cancelled used to raise in the daemon."""
    pending: asyncio.Future = asyncio.get_running_loop().create_future()

    async def hold(params: dict) -> dict:
        pending.set_result(params)
        await asyncio.sleep(3600)  # never answered through the handler
        return {}

    daemon.handlers["toycoder/requestPermission"] = hold
    llm.add(write_call("late.txt", "late"))
    sid = await new_session(daemon)
    _, fut = daemon.request_future("toycoder/prompt", {"sessionId": sid, "text": "go"})
    await asyncio.wait_for(pending, scaled(10))
    request_id = daemon.requests_seen[-1]["id"]
    await daemon.call("toycoder/cancel", {"sessionId": sid})
    reply = await asyncio.wait_for(fut, scaled(10))
    assert reply["result"]["stopReason"] == "cancelled"
    # the daemon told the editor to drop its prompt
    await daemon.wait_for(lambda: any(n["method"] == "$/cancelRequest" and n["params"]["id"] == request_id
                                      for n in daemon.notifications))
    # the person answers anyway, late
    daemon.send_raw(frame({"jsonrpc": "2.0", "id": request_id, "result": {"decision": "allow_once"}}))
    llm.add({"text": "still alive"})
    assert (await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "again"}))["text"] == "still alive"
    assert not (workspace / "late.txt").exists()
    assert results(daemon, sid)[0]["status"] == "cancelled"
    assert llm.violations == []
    await daemon.close()
    assert "InvalidStateError" not in await daemon.stderr_text()
