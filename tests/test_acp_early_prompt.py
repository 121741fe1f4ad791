"""The first prompt of a new ACP process is answered before the ACP SDK is in (acp_early.py): a real
daemon whose `acp` import waits until the test releases it (helpers.held_import) streams a turn,
asks permission, is cancelled; a turn that starts early goes on across the hand-over to the SDK; and
its frames equal the SDK path's for the same scripted turn."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from conftest import write_config
from helpers import held_import, write_call
from waiting import DEFAULT_TIMEOUT, wait_until

from toycoder_daemon.testing.fake_llm import FakeLLM

ROOT = Path(__file__).resolve().parent.parent
CAPS = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
        "clientInfo": {"name": "test", "version": "1"}}


class AcpDaemon:
    """`toycoder-daemon --acp` with the SDK import held (unless `held` is False); its lines arrive
    in `lines`, read on a thread."""

    def __init__(self, tmp_path: Path, config: Path, *, held: bool = True, env: dict[str, str] | None = None):
        extra, self.entered, self.release = held_import(tmp_path, "acp") if held else ({}, tmp_path / "x", tmp_path / "y")
        self.proc = subprocess.Popen([sys.executable, "-m", "toycoder_daemon", "--acp", "--config", str(config)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env={**os.environ, **extra, **(env or {})}, cwd=ROOT)
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.put(json.loads(raw))

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def until(self, pred: Any) -> dict[str, Any]:
        """Read (keeping every line in `seen`) up to the first line `pred` takes."""
        while True:
            msg = self.lines.get(timeout=DEFAULT_TIMEOUT)
            self.seen.append(msg)
            if pred(msg):
                return msg

    def answer(self, msg_id: Any) -> dict[str, Any]:
        return self.until(lambda m: m.get("id") == msg_id and "method" not in m)

    def request(self, method: str) -> dict[str, Any]:
        return self.until(lambda m: m.get("method") == method and "id" in m)

    def start(self, workspace: Path) -> str:
        self.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": CAPS})
        self.answer(1)
        self.send({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                   "params": {"cwd": str(workspace), "mcpServers": []}})
        return str(self.answer(2)["result"]["sessionId"])

    def prompt(self, msg_id: int, sid: str, text: str) -> None:
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": "session/prompt",
                   "params": {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}})

    def turn_then_asking(self, sid: str, first: str, second: str) -> dict[str, Any]:
        """Prompt 3 (`first`) to its answer, then prompt 4 (`second`) to its permission request."""
        self.prompt(3, sid, first)
        self.answer(3)
        self.prompt(4, sid, second)
        return self.request("session/request_permission")

    def allow(self, asked: dict[str, Any]) -> None:
        """Answer a permission request: allow once."""
        self.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"outcome": {"outcome": "selected",
                                                                              "optionId": "allow_once"}}})

    def updates(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [m["params"]["update"] for m in self.seen if m.get("method") == "session/update"
                and (kind is None or m["params"]["update"]["sessionUpdate"] == kind)]

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout=DEFAULT_TIMEOUT)


def test_an_early_prompt_streams_and_answers_while_the_sdk_is_held(tmp_path: Path, workspace: Path,
                                                                   llm: FakeLLM) -> None:
    llm.add({"text": "Hello from before the SDK.", "chunk_size": 4})
    d = AcpDaemon(tmp_path, write_config(tmp_path / "c.yaml", llm))
    try:
        sid = d.start(workspace)
        d.prompt(3, sid, "hi")
        done = d.answer(3)
        assert not d.release.exists()
        assert done["result"]["stopReason"] == "end_turn" and done["result"]["usage"]["totalTokens"] > 0
        assert "".join(u["content"]["text"] for u in d.updates("agent_message_chunk")) == "Hello from before the SDK."
        assert d.updates("available_commands_update")  # announced after session/new, as the SDK path does
        assert all(m.get("params", {}).get("sessionId", sid) == sid for m in d.seen)
    finally:
        d.release.touch()
        assert d.close() == 0
    assert llm.violations == []


def test_a_permission_round_trip_while_the_sdk_is_held(tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    llm.add(write_call("notes.txt", "noted\n"), {"text": "written"})
    d = AcpDaemon(tmp_path, write_config(tmp_path / "c.yaml", llm))
    try:
        sid = d.start(workspace)
        d.prompt(3, sid, "take a note")
        asked = d.request("session/request_permission")
        assert asked["params"]["sessionId"] == sid and asked["params"]["toolCall"]["status"] == "pending"
        d.allow(asked)
        assert d.answer(3)["result"]["stopReason"] == "end_turn"
        assert not d.release.exists()
        assert (workspace / "notes.txt").read_text() == "noted\n"
        assert d.updates("tool_call_update")[-1]["status"] == "completed"
    finally:
        d.release.touch()
        assert d.close() == 0


def test_a_cancelled_early_turn_answers_cancelled(tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    llm.add(write_call("notes.txt", "noted\n"))
    d = AcpDaemon(tmp_path, write_config(tmp_path / "c.yaml", llm))
    try:
        sid = d.start(workspace)
        d.prompt(3, sid, "take a note")
        d.request("session/request_permission")
        d.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
        assert d.answer(3)["result"]["stopReason"] == "cancelled"
        assert not d.release.exists() and not (workspace / "notes.txt").exists()
    finally:
        d.release.touch()
        assert d.close() == 0


def test_a_turn_started_early_goes_on_across_the_hand_over(tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    """While an early turn waits for permission, a line that needs the SDK comes: it is answered
    once the SDK is in, the turn still waiting; the client's answer to the permission request (sent
    before the hand-over) still reaches the turn, which ends with its updates in order."""
    llm.add(write_call("notes.txt", "noted\n"), {"text": "written after the hand-over", "chunk_size": 3})
    d = AcpDaemon(tmp_path, write_config(tmp_path / "c.yaml", llm))
    try:
        sid = d.start(workspace)
        d.send({"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": {"cwd": str(workspace), "mcpServers": []}})
        other = d.answer(3)["result"]["sessionId"]
        d.prompt(4, sid, "take a note")
        asked = d.request("session/request_permission")
        d.send({"jsonrpc": "2.0", "id": 5, "method": "session/set_mode",
                "params": {"sessionId": other, "modeId": "read-only"}})  # the SDK's
        wait_until(d.entered.exists, what="the SDK import to start")
        d.release.touch()
        assert d.answer(5).get("result") == {}  # answered while the turn waits
        assert not any(m.get("id") == 4 for m in d.seen)
        d.allow(asked)
        assert d.answer(4)["result"]["stopReason"] == "end_turn"
        assert (workspace / "notes.txt").read_text() == "noted\n"
        mine = [u for m in d.seen if m.get("method") == "session/update" and m["params"]["sessionId"] == sid
                for u in [m["params"]["update"]]]
        kinds = [u["sessionUpdate"] for u in mine if u["sessionUpdate"] != "available_commands_update"]
        assert kinds.index("tool_call") < kinds.index("tool_call_update") < kinds.index("agent_message_chunk")
        assert "".join(u["content"]["text"] for u in mine if u["sessionUpdate"] == "agent_message_chunk") \
            == "written after the hand-over"
        assert [u["status"] for u in mine if u["sessionUpdate"] == "tool_call_update"] == ["in_progress", "completed"]
    finally:
        d.release.touch()
        assert d.close() == 0


def turn_frames(tmp_path: Path, workspace: Path, llm: FakeLLM, *, early: bool) -> list[dict[str, Any]]:
    """The frames of two scripted turns (text; a tool call with permission, then text), early (the
    SDK held all along) or on the SDK path (the fast start off), ids normalised."""
    tmp_path.mkdir()
    llm.add({"text": "Let me write it.", "chunk_size": 5})
    llm.add(write_call("notes.txt", "noted\n"), {"text": "Done, it is written.", "chunk_size": 5})
    d = AcpDaemon(tmp_path, write_config(tmp_path / "c.yaml", llm), held=early,
                  env={} if early else {"TOYCODER_NO_FAST_START": "1"})
    try:
        sid = d.start(workspace)
        asked = d.turn_then_asking(sid, "first", "take a note")
        d.allow(asked)
        d.answer(4)
        assert not d.release.exists()
    finally:
        d.release.touch()
        assert d.close() == 0
    (workspace / "notes.txt").unlink()
    text = json.dumps([m for m in d.seen if m.get("id") not in (1, 2)]).replace(sid, "SID")
    frames: list[dict[str, Any]] = []
    for m in json.loads(re.sub(r'"call_\d+"', '"CALL"', text)):  # FakeLLM numbers its calls across runs
        if "method" in m:  # each path numbers its own requests
            m.pop("id", None)
        update = m.get("params", {}).get("update", {})
        update.pop("updatedAt", None)  # the second a title was set
        last = frames[-1].get("params", {}).get("update", {}) if frames else {}
        if update.get("sessionUpdate") == "agent_message_chunk" == last.get("sessionUpdate"):
            last["content"]["text"] += update["content"]["text"]  # how deltas coalesce is timing
            continue
        frames.append(m)
    return frames


def test_the_early_turns_frames_equal_the_sdk_paths(tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    """The same turns, first on the early path, then with the fast start off (every prompt the
    SDK's): the same frames, as JSON, in the same order."""
    early = turn_frames(tmp_path / "early", workspace, llm, early=True)
    sdk = turn_frames(tmp_path / "sdk", workspace, llm, early=False)
    assert [m.get("method") or "answer" for m in early] == [m.get("method") or "answer" for m in sdk]
    assert early == sdk
    assert any(m.get("method") == "session/request_permission" for m in early)



def test_a_cancel_in_the_same_write_as_its_prompt_cancels_it(tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    """The cancel is read with the prompt (one chunk): it runs after the prompt began its turn, as
    the SDK runs both (tasks in arrival order), so the turn answers cancelled."""
    llm.add({"text": "a reply the cancel should have stopped", "delay": 1.0})
    d = AcpDaemon(tmp_path, write_config(tmp_path / "c.yaml", llm))
    try:
        sid = d.start(workspace)
        prompt = {"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                  "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}}
        cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
        assert d.proc.stdin is not None
        d.proc.stdin.write((json.dumps(prompt) + "\n" + json.dumps(cancel) + "\n").encode())
        d.proc.stdin.flush()
        assert d.answer(3)["result"]["stopReason"] == "cancelled"
        assert not d.release.exists() and d.updates("agent_message_chunk") == []
    finally:
        d.release.touch()
        assert d.close() == 0


def test_a_blank_line_is_skipped_early(tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    """The SDK's transport skips blank lines; so does the early path (it does not need the SDK for
    one): the prompt after it is answered with the SDK held."""
    llm.add({"text": "answered early"})
    d = AcpDaemon(tmp_path, write_config(tmp_path / "c.yaml", llm))
    try:
        sid = d.start(workspace)
        assert d.proc.stdin is not None
        d.proc.stdin.write(b"\n  \r\n")
        d.prompt(3, sid, "hi")
        assert d.answer(3)["result"]["stopReason"] == "end_turn"
        assert not d.release.exists()
    finally:
        d.release.touch()
        assert d.close() == 0


def test_a_prompt_then_the_end_of_input_answers_cancelled_on_the_sdk_path(tmp_path: Path, workspace: Path,
                                                                         llm: FakeLLM) -> None:
    """The input ends right after a prompt (fast start off: the SDK's): its task may still be on its
    way to its turn (App.prompt loads the session, takes its lock) when the Apps shut down; it answers
    cancelled, as a running turn does, not -32603 from the session file closed under it."""
    llm.add({"text": "never needed", "delay": 1.0})
    d = AcpDaemon(tmp_path, write_config(tmp_path / "c.yaml", llm), held=False, env={"TOYCODER_NO_FAST_START": "1"})
    sid = d.start(workspace)
    d.prompt(3, sid, "hi")
    assert d.close() == 0
    assert d.answer(3).get("result", {}).get("stopReason") == "cancelled"


def test_a_title_set_during_an_early_turn_is_told_after_the_hand_over(tmp_path: Path, workspace: Path,
                                                                     llm: FakeLLM) -> None:
    """The model's title arrives while the second early turn waits for permission (a busy session's
    news waits for its turn's end); the SDK comes in meanwhile and adopts the session with what the
    early path told the client, so the title still goes out when the turn ends."""
    config = write_config(tmp_path / "c.yaml", llm)
    config.write_text(config.read_text().replace("auto_title: false", "auto_title: true"))
    llm.add({"text": "Hello."}, {"text": "A title", "delay": 0.5},
            write_call("notes.txt", "noted\n"), {"text": "done"})
    d = AcpDaemon(tmp_path, config)
    try:
        sid = d.start(workspace)
        d.prompt(3, sid, "hi")
        d.answer(3)
        wait_until(lambda: len(llm.requests) == 2, what="the title asked for")  # before the turn asks: replies go in order
        d.prompt(4, sid, "take a note")
        asked = d.request("session/request_permission")
        wait_until(lambda: any("A title" in f.read_text(errors="replace")
                               for f in (tmp_path / "data").rglob("*") if f.is_file()), what="the title stored")
        d.send({"jsonrpc": "2.0", "id": 5, "method": "session/list", "params": {"cwd": "relative"}})  # the SDK's
        wait_until(d.entered.exists, what="the SDK import to start")
        d.release.touch()
        d.answer(5)
        d.allow(asked)
        assert d.answer(4)["result"]["stopReason"] == "end_turn"

        def told(m: dict[str, Any]) -> bool:
            return m.get("method") == "session/update" and m["params"]["update"].get("title") == "A title"

        if not any(told(m) for m in d.seen):  # the news goes out at the turn's end, before or after its answer
            d.until(told)
    finally:
        d.release.touch()
        assert d.close() == 0
