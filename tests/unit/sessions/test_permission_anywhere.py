"""Permission and questions answered from any attached editor (issue 32): a turn's permission request
or ask_user question goes to every client that has the session open, in every daemon; the first
answer decides, every client gets `permission_resolved` and the requests still open are withdrawn;
a cancel from the observer's client cancels the turn. Two faces in-process on one data and runtime
dir (the LSP face through tests/inproc.py's start_lsp, the ACP face through acp_face), as
test_shared_sessions.py does; the daemon processes: e2e/test_permission_anywhere_e2e.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from acp import text_block
from acp.schema import ClientCapabilities, ElicitationCapabilities, ElicitationFormCapabilities
from acp_client import Editor, acp_face
from acp_client import new_session as acp_new_session
from helpers import new_session, write_config
from inproc import start_lsp
from rpc import Daemon
from waiting import scaled

from toycoder_daemon.testing.fake_llm import FakeLLM

WRITE = {"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "hi\n"}}]}
ASK = {"tool_calls": [{"name": "ask_user", "arguments": {"question": "Which colour?", "options": ["red", "blue"]}}]}


class Person:
    """An LSP client's person: answers toycoder/requestPermission and toycoder/askUser with `answer`,
    or never (None) until `release` is set (then a late "reject" / dismissal, which must not count)."""

    def __init__(self, d: Daemon, permission: str | None = None, question: str | None = None):
        self.release = asyncio.Event()
        self.asked: list[dict[str, Any]] = []

        async def permission_answer(params: dict[str, Any]) -> Any:
            self.asked.append(params)
            if permission is None:
                await self.release.wait()
            return {"decision": permission or "reject"}

        async def question_answer(params: dict[str, Any]) -> Any:
            self.asked.append(params)
            if question is None:
                await self.release.wait()
                return {"cancelled": True}
            return {"answer": question}

        d.handlers["toycoder/requestPermission"] = permission_answer
        d.handlers["toycoder/askUser"] = question_answer


@asynccontextmanager
async def two_lsp(tmp_path: Path, llm: FakeLLM, workspace: Path) -> AsyncIterator[tuple[Daemon, Daemon, str]]:
    """Daemon a (its client "Neovim") with a new session, open in daemon b ("Visual Studio Code")."""
    config = write_config(tmp_path / "config.yaml", llm)
    a, b = await start_lsp(config), await start_lsp(config)
    try:
        await a.initialize(workspace, client="Neovim")
        await b.initialize(workspace, client="Visual Studio Code")
        sid = await new_session(a, title="shared")
        await b.call("toycoder/session/load", {"sessionId": sid})
        yield a, b, sid
    finally:
        await a.close()
        await b.close()


def of(d: Daemon, sid: str, kind: str) -> list[dict[str, Any]]:
    return [u["update"] for u in d.updates(sid) if u["update"]["kind"] == kind]


def withdrawn(d: Daemon, method: str) -> list[Any]:
    """The ids of `method` requests the daemon cancelled ($/cancelRequest)."""
    asked = {r["id"] for r in d.requests_seen if r["method"] == method}
    return [n["params"]["id"] for n in d.notifications if n["method"] == "$/cancelRequest" and n["params"]["id"] in asked]


async def test_lsp_a_permission_raised_in_a_is_answered_from_bs_client(tmp_path, llm, workspace) -> None:
    async with two_lsp(tmp_path, llm, workspace) as (a, b, sid):
        origin, observer = Person(a), Person(b, permission="allow_once")
        llm.add(WRITE, {"text": "Written."})
        try:
            result = await a.call("toycoder/prompt", {"sessionId": sid, "text": "write notes"})
        finally:
            origin.release.set()
        assert result["stopReason"] == "end_turn" and result["text"] == "Written."
        assert (workspace / "notes.txt").read_text() == "hi\n"  # b's "allow" decided
        # both clients were asked the same question, about the same call of a's turn
        [mine], [theirs] = origin.asked, observer.asked
        assert {k: theirs[k] for k in ("sessionId", "turnId", "toolCallId", "title")} == {
            k: mine[k] for k in ("sessionId", "turnId", "toolCallId", "title")}
        resolved = {"kind": "permission_resolved", "toolCallId": mine["toolCallId"], "decision": "allow_once",
                    "by": "Visual Studio Code"}
        assert of(a, sid, "permission_resolved") == [resolved]
        await b.wait_for(lambda: of(b, sid, "permission_resolved"), what="b to hear the resolution")
        assert of(b, sid, "permission_resolved") == [resolved]
        # a's own prompt is withdrawn, after it heard who decided; b's answered, it is not
        await a.wait_for(lambda: withdrawn(a, "toycoder/requestPermission"), what="a's prompt to be withdrawn")
        [cancel] = [i for i, n in enumerate(a.notifications) if n["method"] == "$/cancelRequest"]
        [told] = [i for i, n in enumerate(a.notifications) if n["method"] == "toycoder/update"
                  and n["params"]["update"]["kind"] == "permission_resolved"]
        assert told < cancel
        assert withdrawn(b, "toycoder/requestPermission") == []


async def test_lsp_the_origins_own_answer_withdraws_the_observers_prompt(tmp_path, llm, workspace) -> None:
    async with two_lsp(tmp_path, llm, workspace) as (a, b, sid):
        observer = Person(b)
        first = asyncio.Event()

        async def answer_once_b_asks(params: dict[str, Any]) -> Any:
            await first.wait()  # the person in a answers only once b shows the prompt too
            return {"decision": "reject"}

        a.handlers["toycoder/requestPermission"] = answer_once_b_asks
        llm.add(WRITE, {"text": "Not written."})
        turn = asyncio.ensure_future(a.call("toycoder/prompt", {"sessionId": sid, "text": "write notes"}))
        try:
            await b.wait_for(lambda: observer.asked, what="b's client to be asked")
            first.set()
            assert (await turn)["text"] == "Not written."
        finally:
            observer.release.set()
        assert not (workspace / "notes.txt").exists()
        await b.wait_for(lambda: withdrawn(b, "toycoder/requestPermission"), what="b's prompt to be withdrawn")
        assert [(u["decision"], u["by"]) for u in of(b, sid, "permission_resolved")] == [("reject", "Neovim")]
        assert [(u["decision"], u["by"]) for u in of(a, sid, "permission_resolved")] == [("reject", "Neovim")]


async def test_lsp_a_question_is_answered_from_the_observer(tmp_path, llm, workspace) -> None:
    async with two_lsp(tmp_path, llm, workspace) as (a, b, sid):
        origin, observer = Person(a), Person(b, question="blue")
        llm.add(ASK, {"text": "Blue it is.", "expect": {"last_tool_contains": "The user answered: blue"}})
        try:
            result = await a.call("toycoder/prompt", {"sessionId": sid, "text": "paint it"})
        finally:
            origin.release.set()
        assert result["text"] == "Blue it is." and llm.violations == []
        [asked] = observer.asked
        assert (asked["question"], asked["options"]) == ("Which colour?", ["red", "blue"])
        [call] = of(a, sid, "tool_call")
        assert of(a, sid, "permission_resolved") == [{"kind": "permission_resolved", "toolCallId": call["toolCallId"],
                                                     "decision": "answered", "by": "Visual Studio Code"}]
        await a.wait_for(lambda: withdrawn(a, "toycoder/askUser"), what="a's question to be withdrawn")


async def test_lsp_a_cancel_from_the_observer_cancels_the_turn_and_its_open_prompts(tmp_path, llm, workspace) -> None:
    async with two_lsp(tmp_path, llm, workspace) as (a, b, sid):
        origin, observer = Person(a), Person(b)  # nobody answers
        llm.add(WRITE, {"text": "never"})
        turn = asyncio.ensure_future(a.call("toycoder/prompt", {"sessionId": sid, "text": "write notes"}))
        try:
            await b.wait_for(lambda: observer.asked, what="b's client to be asked")
            await b.call("toycoder/cancel", {"sessionId": sid})
            assert (await asyncio.wait_for(turn, scaled(20)))["stopReason"] == "cancelled"
            await a.wait_for(lambda: withdrawn(a, "toycoder/requestPermission"), what="a's prompt to be withdrawn")
            await b.wait_for(lambda: withdrawn(b, "toycoder/requestPermission"), what="b's prompt to be withdrawn")
        finally:
            origin.release.set()
            observer.release.set()
        assert not (workspace / "notes.txt").exists()
        assert of(a, sid, "permission_resolved") == []  # nobody decided


async def test_lsp_opened_while_a_call_waits_elsewhere_the_turn_comes_live_from_its_start(
        tmp_path, llm, workspace) -> None:
    """Not the half turn the file has (its pending call would read "interrupted"), then the turn again."""
    config = write_config(tmp_path / "config.yaml", llm)
    a, b = await start_lsp(config), await start_lsp(config)
    try:
        await a.initialize(workspace, client="Neovim")
        await b.initialize(workspace, client="Visual Studio Code")
        sid = await new_session(a, title="shared")
        llm.add({"text": "Earlier."})
        await a.call("toycoder/prompt", {"sessionId": sid, "text": "before"})
        origin, observer = Person(a), Person(b, permission="allow_once")
        llm.add(WRITE, {"text": "Written."})
        turn = asyncio.ensure_future(a.call("toycoder/prompt", {"sessionId": sid, "text": "write notes"}))
        await a.wait_for(lambda: origin.asked, what="a's client to be asked")
        loaded = await b.call("toycoder/session/load", {"sessionId": sid})  # b opens it now
        assert [(e["role"], e["text"]) for e in loaded["transcript"]] == [("user", "before"), ("assistant", "Earlier.")]
        try:
            assert (await asyncio.wait_for(turn, scaled(20)))["text"] == "Written."  # b's client answered
        finally:
            origin.release.set()
        await b.wait_for(lambda: len(of(b, sid, "turn_elsewhere")) == 2, what="b to hear the turn end")
        assert of(b, sid, "turn_elsewhere")[0]["prompt"] == "write notes"
        [asked] = observer.asked  # the question still open when b came was asked there too
        assert asked["toolCallId"] == origin.asked[0]["toolCallId"]
        assert [u["name"] for u in of(b, sid, "tool_call")] == ["write_file"]
        assert "".join(u["text"] for u in of(b, sid, "text_delta")) == "Written."
        llm.add({"text": "again"})  # a later turn: by its end the file has long been read
        await a.call("toycoder/prompt", {"sessionId": sid, "text": "more"})
        await b.wait_for(lambda: len(of(b, sid, "turn_elsewhere")) == 4, what="b to hear the next turn")
        assert of(b, sid, "session_changed") == []  # the turn was not told again from the file
    finally:
        await a.close()
        await b.close()


# ---- the ACP face -------------------------------------------------------------------------------

class Holding(Editor):
    """An ACP client whose person answers a permission only once `release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        await self.release.wait()
        return await super().request_permission(*args, **kwargs)

    async def create_elicitation(self, *args: Any, **kwargs: Any) -> Any:
        await self.release.wait()
        return await super().create_elicitation(*args, **kwargs)


def resolutions(editor: Editor) -> list[tuple[str, str, str, str]]:
    return [(u["toolCallId"], u["status"], u["_meta"]["toycoder"]["permissionResolved"]["decision"],
             u["_meta"]["toycoder"]["permissionResolved"]["by"])
            for u in editor.updates("tool_call_update") if "_meta" in u]


async def test_acp_a_permission_raised_in_one_is_answered_from_twos_client(tmp_path, llm, workspace) -> None:
    holding = Holding()
    async with acp_face(tmp_path, llm, editor=holding, name="zed") as (one, _, _), \
            acp_face(tmp_path, llm, name="other-zed") as (two, editor, _):
        sid = await acp_new_session(one, workspace)
        await two.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
        llm.add(WRITE, {"text": "Written."})
        try:
            answer = await asyncio.wait_for(one.prompt(session_id=sid, prompt=[text_block("write notes")]), scaled(20))
        finally:
            holding.release.set()
        assert answer.stop_reason == "end_turn" and (workspace / "notes.txt").read_text() == "hi\n"
        [mine] = holding.requests("session/request_permission")
        [theirs] = editor.requests("session/request_permission")
        call = mine["toolCall"]["toolCallId"]
        assert theirs["toolCall"]["toolCallId"] == call and theirs["sessionId"] == sid
        assert resolutions(holding) == [(call, "in_progress", "allow_once", "other-zed")]
        await editor.wait_for(lambda f: resolutions(editor) != [])
        assert resolutions(editor) == [(call, "in_progress", "allow_once", "other-zed")]


async def test_acp_a_question_is_answered_from_the_observer(tmp_path, llm, workspace) -> None:
    caps = ClientCapabilities(elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities()))
    holding = Holding()
    async with acp_face(tmp_path, llm, editor=holding, caps=caps, name="zed") as (one, _, _), \
            acp_face(tmp_path, llm, caps=caps, name="other-zed") as (two, editor, _):
        editor.answer = "blue"
        sid = await acp_new_session(one, workspace)
        await two.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
        llm.add(ASK, {"text": "Blue it is.", "expect": {"last_tool_contains": "The user answered: blue"}})
        try:
            answer = await asyncio.wait_for(one.prompt(session_id=sid, prompt=[text_block("paint it")]), scaled(20))
        finally:
            holding.release.set()
        assert answer.stop_reason == "end_turn" and llm.violations == []
        assert [a["message"] for a in editor.asked] == ["Which colour?"]
        [call] = holding.updates("tool_call")
        assert resolutions(holding) == [(call["toolCallId"], "in_progress", "answered", "other-zed")]


async def test_acp_a_cancel_from_the_observer_cancels_the_turn(tmp_path, llm, workspace) -> None:
    holding, watching = Holding(), Holding()
    async with acp_face(tmp_path, llm, editor=holding, name="zed") as (one, _, _), \
            acp_face(tmp_path, llm, editor=watching, name="other-zed") as (two, _, _):
        sid = await acp_new_session(one, workspace)
        await two.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
        llm.add(WRITE, {"text": "never"})
        turn = asyncio.ensure_future(one.prompt(session_id=sid, prompt=[text_block("write notes")]))
        try:
            await watching.wait_for(lambda f: f.get("method") == "session/request_permission")
            await two.cancel(session_id=sid)
            assert (await asyncio.wait_for(turn, scaled(20))).stop_reason == "cancelled"
        finally:
            holding.release.set()
            watching.release.set()
        assert not (workspace / "notes.txt").exists() and resolutions(holding) == []
