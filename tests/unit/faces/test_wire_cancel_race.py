"""Issue 13, item 14: a cancel that arrives together with the answer to an open permission request
wins, every time, in both faces (CodeCompanion sends session/cancel and at once answers the
permission request "cancelled"). Before the fix, asyncio.wait_for on Python < 3.12 took the answer
as a denial, called the model again and ended the turn with end_turn. Each test loops the race."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, text_block
from acp.schema import DeniedOutcome, RequestPermissionResponse
from helpers import write_call, write_config
from inproc import acp_agent
from rpc import Daemon, frame

from toycoder_daemon.core.ports import PermissionRequest
from toycoder_daemon.faces.acp.frontend import AcpFrontend
from toycoder_daemon.faces.lsp.frontend import EditorFrontend
from toycoder_daemon.rpc.reply_wait import _reply_within_310, reply_within
from toycoder_daemon.testing.fake_llm import FakeLLM

ROUNDS = 25


class RacingEditor:
    """Answers session/request_permission by writing, in one write, session/cancel and then the
    "cancelled" answer to that request (the SDK's own late answer that follows is ignored)."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []
        self.stdin: Any = None

    def observe(self, event: Any) -> None:
        if event.direction == "incoming":
            self.frames.append(event.message)

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        pass

    async def request_permission(self, session_id: str, tool_call: Any, options: Any, **_: Any) -> Any:
        asked = [f for f in self.frames if f.get("method") == "session/request_permission"][-1]
        cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}
        answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"outcome": {"outcome": "cancelled"}}}
        self.stdin.write((json.dumps(cancel) + "\n" + json.dumps(answer) + "\n").encode())
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))


async def test_acp_cancel_wins_over_a_permission_answer_sent_with_it(
        tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    editor = RacingEditor()
    async with acp_agent(editor, write_config(tmp_path / "c.yaml", llm), observers=[editor.observe]) as (conn, proc):
        editor.stdin = proc.stdin
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        stops = []
        for i in range(ROUNDS):  # a session per round: a growing one would be compacted (another model call)
            sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
            llm.add(write_call(f"f{i}.txt", "x"))  # nothing after it: a second model call would be the bug
            resp = await conn.prompt(session_id=sid, prompt=[text_block(f"write f{i}")])
            stops.append(resp.stop_reason)
        assert stops == ["cancelled"] * ROUNDS
        assert len(llm.requests) == ROUNDS  # the model was never asked again after a cancel
        assert not any((workspace / f"f{i}.txt").exists() for i in range(ROUNDS))


async def test_lsp_cancel_wins_over_a_permission_answer_sent_with_it(daemon: Daemon, llm: FakeLLM,
                                                                      workspace: Path) -> None:
    sid = ""

    def racing_answer(params: dict[str, Any]) -> dict[str, Any]:
        asked = [r for r in daemon.requests_seen if r["method"] == "toycoder/requestPermission"][-1]
        cancel = frame({"jsonrpc": "2.0", "id": f"cancel-{asked['id']}", "method": "toycoder/cancel",
                        "params": {"sessionId": sid}})
        daemon.send_raw(cancel + frame({"jsonrpc": "2.0", "id": asked["id"], "result": {"decision": "reject"}}))
        return {"decision": "reject"}

    daemon.handlers["toycoder/requestPermission"] = racing_answer
    stops = []
    for i in range(ROUNDS):
        sid = (await daemon.call("toycoder/session/new", {}))["sessionId"]
        llm.add(write_call(f"f{i}.txt", "x"))
        stops.append((await daemon.call("toycoder/prompt", {"sessionId": sid, "text": f"write f{i}"}))["stopReason"])
    assert stops == ["cancelled"] * ROUNDS
    assert len(llm.requests) == ROUNDS


# ---- the race itself, made exact: the reply and the cancel in one loop iteration, both orders ------

class FakeLink:
    """The EditorLink (LSP face) and AcpClient (ACP face) of a frontend, with replies we set by hand."""

    def __init__(self) -> None:
        self.pending: asyncio.Future[Any] | None = None
        self.dropped: list[str] = []

    def _ask(self) -> asyncio.Future[Any]:
        self.pending = asyncio.get_running_loop().create_future()
        return self.pending

    # EditorLink
    def send_request(self, method: str, params: Any, msg_id: str) -> asyncio.Future[Any]:
        return self._ask()

    def send_show_message_request(self, kind: int, message: str, actions: list[str], msg_id: str) -> Any:
        return self._ask()

    def drop_request(self, msg_id: str) -> None:
        self.dropped.append(msg_id)

    def client_can(self, feature: str) -> bool:
        return True

    def supports_progress(self) -> bool:
        return False

    def permission_timeout(self) -> float:
        return 30.0

    def notify(self, method: str, params: Any) -> None:
        pass

    # acp_client.RawClient (session/request_permission and elicitation/create wait for the test)
    async def request(self, method: str, params: dict[str, Any]) -> Any:
        return await self._ask()


REQUEST = PermissionRequest("call_1", "write_file", "sensitive", "write_file f.txt", {"path": "f.txt"})


def acp_frontend(link: FakeLink, tmp_path: Path) -> AcpFrontend:
    app = SimpleNamespace(config=SimpleNamespace(permissions=SimpleNamespace(timeout_seconds=30.0)),
                          tools={}, workspace=SimpleNamespace(root=tmp_path))
    return AcpFrontend(link, app, "s1")  # type: ignore[arg-type]


@pytest.mark.parametrize("face", ["lsp", "acp"])
@pytest.mark.parametrize("reply_first", [True, False])
async def test_a_cancel_in_the_same_iteration_as_the_reply_wins(face: str, reply_first: bool, tmp_path: Path) -> None:
    link = FakeLink()
    frontend = EditorFrontend(link, "s1", "t1") if face == "lsp" else acp_frontend(link, tmp_path)
    reply = {"decision": "reject"} if face == "lsp" else {"outcome": {"outcome": "cancelled"}}
    for _ in range(ROUNDS):
        link.pending = None
        task = asyncio.ensure_future(frontend.confirm(REQUEST))
        while link.pending is None:
            await asyncio.sleep(0)
        if reply_first:
            link.pending.set_result(reply)
            task.cancel()
        else:
            task.cancel()
            if not link.pending.done():  # awaited directly (ACP), it was cancelled with the task
                link.pending.set_result(reply)
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_the_reply_still_times_out(tmp_path: Path) -> None:
    link = FakeLink()
    frontend = EditorFrontend(link, "s1", "t1")
    link.permission_timeout = lambda: 0.05  # type: ignore[method-assign]
    assert await frontend.confirm(REQUEST) == "reject"
    assert link.dropped  # the editor is told to close its prompt


@pytest.mark.parametrize("impl", [reply_within, _reply_within_310], ids=["3.11+", "3.10"])
async def test_reply_within_lets_a_cancel_win_returns_replies_and_times_out(impl: Any) -> None:
    loop = asyncio.get_running_loop()
    for _ in range(ROUNDS):
        reply: asyncio.Future[int] = loop.create_future()
        task = asyncio.ensure_future(impl(reply, 30))
        await asyncio.sleep(0)
        reply.set_result(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    with pytest.raises(asyncio.TimeoutError):
        await impl(loop.create_future(), 0.01)
    answered: asyncio.Future[int] = loop.create_future()
    loop.call_soon(answered.set_result, 5)
    assert await impl(answered, 30) == 5
