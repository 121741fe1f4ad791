"""Backpressure (issue 13, "Also"; issue 17): a client that stops reading stdout while a turn streams.
The rule (docs/protocol.md, "Backpressure"): frames are queued in order and written by one writer
thread; above a bounded queue the streaming turn waits (it stops taking the model's stream), while
the daemon goes on taking and answering other requests. When the client reads again everything
arrives, in order, and the turns end. A client that sends requests and reads no answers is held
back by its own pipe. When stdin closes the daemon exits even with a stuck writer, also over the
hard limit. A real process and a real pipe, because the pipe filling up is the point (the gate's
logic in-process: test_outbox_gate.py)."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, pipe_writers, rss_bytes, write_config
from waiting import scaled, wait_until
from warm_helpers import serving_pid

from toycoder_daemon.app.application import App
from toycoder_daemon.testing.fake_llm import FakeLLM

REPLY = "".join(f"{i:07d} " for i in range(500_000))  # 4 MB of text
CHUNK = 64  # ~62,000 deltas: an unbounded queue of frames would hold far more than the text itself
GROWTH_LIMIT = 40 * 1024 * 1024
SECOND = "the second session's reply"


def unread(fd: int) -> int:
    buf = bytearray(4)
    fcntl.ioctl(fd, termios.FIONREAD, buf)
    return int.from_bytes(buf, sys.byteorder)


def rss_while_stuck(pid: int, samples: int = 25, every: float = 0.04) -> list[int]:
    """Resident memory sampled over a second while nothing reads the daemon's stdout (a steady
    state observed over time, not a wait for one)."""
    out = []
    for _ in range(samples):
        out.append(rss_bytes(pid))
        time.sleep(every)
    return out


class Client:
    def __init__(self, args: list[str], framed: bool, log: Any, env: dict[str, str] | None = None):
        self.proc = subprocess.Popen([sys.executable, "-m", "toycoder_daemon", *args], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                     env={**os.environ, **(env or {})})
        self.framed = framed

    def daemon_pid(self) -> int:
        """The process running the daemon: the launcher's warm child, or the launcher itself."""
        return serving_pid(self.proc.pid)

    def send(self, msg: dict[str, Any]) -> None:
        body = json.dumps(msg).encode()
        data = b"Content-Length: %d\r\n\r\n" % len(body) + body if self.framed else body + b"\n"
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def read(self) -> dict[str, Any]:
        out = self.proc.stdout
        assert out is not None
        if not self.framed:
            line = out.readline()
            assert line, "the daemon closed stdout"
            return json.loads(line)  # type: ignore[no-any-return]
        length = 0
        while (line := out.readline()) != b"\r\n":
            assert line, "the daemon closed stdout"
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        return json.loads(out.read(length))  # type: ignore[no-any-return]

    def answer(self, msg_id: Any, on_message: Any = None) -> dict[str, Any]:
        while True:
            msg = self.read()
            if "method" not in msg and msg.get("id") == msg_id:
                return msg
            if on_message:
                on_message(msg)


def start(c: Client, face: str, workspace: Path, sessions: int) -> list[str]:
    """initialize and open `sessions` sessions; their ids."""
    if face == "lsp":
        c.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {}}})
        c.answer(1)
        c.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    else:
        c.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
        c.answer(1)
    sids = []
    for n in range(sessions):
        if face == "lsp":
            c.send({"jsonrpc": "2.0", "id": 100 + n, "method": "toycoder/session/new", "params": {}})
        else:
            c.send({"jsonrpc": "2.0", "id": 100 + n, "method": "session/new",
                    "params": {"cwd": str(workspace), "mcpServers": []}})
        sids.append(c.answer(100 + n)["result"]["sessionId"])
    return sids


def prompt(c: Client, face: str, msg_id: int, sid: str, text: str) -> None:
    if face == "lsp":
        c.send({"jsonrpc": "2.0", "id": msg_id, "method": "toycoder/prompt", "params": {"sessionId": sid, "text": text}})
    else:
        c.send({"jsonrpc": "2.0", "id": msg_id, "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}})


def stuck_writer(c: Client, fd: int) -> list[int]:
    """Wait until the daemon's writer thread sleeps on the full pipe; the blocked threads."""
    return wait_until(lambda: pipe_writers(c.daemon_pid()), 60, "the daemon's writer to block on stdout",
                      describe=lambda: f"{unread(fd)} bytes unread")


def stop(c: Client) -> None:
    assert c.proc.stdin is not None
    if not c.proc.stdin.closed:
        c.proc.stdin.close()
    try:
        c.proc.wait(10)
    except subprocess.TimeoutExpired:
        c.proc.kill()
        c.proc.wait()


@pytest.mark.parametrize("face", ["lsp", "acp"])
def test_a_client_that_stops_reading_holds_its_turns_not_the_daemon_nor_the_memory(
        face: str, tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    llm.add({"text": REPLY, "chunk_size": CHUNK}, {"text": SECOND})
    cfg = write_config(tmp_path / "config.yaml", llm)
    with open(tmp_path / "daemon.log", "wb") as log:
        c = Client(["--config", str(cfg)] + (["--acp"] if face == "acp" else []), face == "lsp", log)
        try:
            first, second = start(c, face, workspace, 2)
            baseline = rss_bytes(c.daemon_pid())
            prompt(c, face, 3, first, "talk")
            assert c.proc.stdout is not None
            fd = c.proc.stdout.fileno()
            # the client reads nothing: the pipe fills up and the writer thread blocks, not the loop
            writers = stuck_writer(c, fd)
            assert c.daemon_pid() not in writers
            held = unread(fd)
            samples = rss_while_stuck(c.daemon_pid())  # the turn stays held while we do not read; the memory with it
            assert pipe_writers(c.daemon_pid()) and unread(fd) == held and c.proc.poll() is None
            assert max(samples) - baseline < GROWTH_LIMIT
            # still not reading: the daemon takes another request meanwhile (its turn reaches the model)
            prompt(c, face, 4, second, "and you?")
            wait_until(lambda: len(llm.requests) >= 2, 30, "the second prompt to reach the model")
            assert unread(fd) == held and pipe_writers(c.daemon_pid())
            text: dict[str, list[str]] = {first: [], second: []}
            answers: dict[int, dict[str, Any]] = {}

            def collect(msg: dict[str, Any]) -> None:
                p = msg.get("params") or {}
                u = p.get("update") or {}
                if u.get("kind") == "text_delta":
                    text[p["sessionId"]].append(u["text"])
                elif u.get("sessionUpdate") == "agent_message_chunk":
                    text[p["sessionId"]].append(u["content"]["text"])
                elif "method" not in msg and msg.get("id") in (3, 4):
                    answers[msg["id"]] = msg

            while len(answers) < 2:  # reading again: everything arrives and both turns end
                collect(c.read())
            assert [answers[i]["result"]["stopReason"] for i in (3, 4)] == ["end_turn", "end_turn"]
            assert "".join(text[first]) == REPLY
            assert "".join(text[second]) == SECOND
        finally:
            stop(c)


@pytest.mark.parametrize("face", ["lsp", "acp"])
def test_the_daemon_exits_when_stdin_closes_even_while_its_writer_is_stuck(
        face: str, tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    llm.add({"text": REPLY, "chunk_size": CHUNK})
    cfg = write_config(tmp_path / "config.yaml", llm)
    with open(tmp_path / "daemon.log", "wb") as log:
        c = Client(["--config", str(cfg)] + (["--acp"] if face == "acp" else []), face == "lsp", log)
        try:
            (sid,) = start(c, face, workspace, 1)
            prompt(c, face, 3, sid, "talk")
            assert c.proc.stdout is not None
            stuck_writer(c, c.proc.stdout.fileno())
            assert c.proc.stdin is not None
            c.proc.stdin.close()
            assert c.proc.wait(10) == 0  # within the exit grace, not killed
        finally:
            stop(c)


def held_back(c: Client, frame: bytes) -> bool:
    """Write `frame` over and over without blocking until stdin's pipe is full (True): the daemon
    stopped reading it. False when it took them all (call again)."""
    assert c.proc.stdin is not None
    fd = c.proc.stdin.fileno()
    os.set_blocking(fd, False)
    try:
        for _ in range(256):
            os.write(fd, frame)  # under PIPE_BUF: written whole or not at all
    except BlockingIOError:
        return True
    finally:
        os.set_blocking(fd, True)
    return False


@pytest.mark.parametrize("face", ["lsp", "acp"])
def test_over_the_hard_limit_the_client_is_held_back_and_stdin_closing_still_ends_the_daemon(
        face: str, tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    """Review 2: the gate ran on the event loop (the daemon froze, the reader was never held) and
    hid the end of input (the daemon lived on as long as the client kept stdout open)."""
    cfg = write_config(tmp_path / "config.yaml", llm)
    stored = App.open(workspace, str(cfg))
    s = stored.new_session("big")
    s.messages.append({"role": "user", "content": "x" * (3 << 20)})  # each load's answer (or replay) carries it
    asyncio.run(stored.shutdown())
    with open(tmp_path / "daemon.log", "wb") as log:
        c = Client(["--config", str(cfg)] + (["--acp"] if face == "acp" else []), face == "lsp", log)
        try:
            start(c, face, workspace, 0)
            for i in range(4):  # ~12 MiB out, none read: over the 8 MiB hard limit
                if face == "lsp":
                    c.send({"jsonrpc": "2.0", "id": 10 + i, "method": "toycoder/session/load",
                            "params": {"sessionId": s.id}})
                else:
                    c.send({"jsonrpc": "2.0", "id": 10 + i, "method": "session/load",
                            "params": {"sessionId": s.id, "cwd": str(workspace), "mcpServers": []}})
            assert c.proc.stdout is not None
            stuck_writer(c, c.proc.stdout.fileno())
            if face == "lsp":  # a notification that asks for nothing
                body = json.dumps({"jsonrpc": "2.0", "method": "$/setTrace", "params": {"value": "off"}}).encode()
                frame = b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            else:
                frame = json.dumps({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": s.id}}).encode() + b"\n"
            wait_until(lambda: held_back(c, frame), 30, "the daemon to stop reading stdin")
            assert c.proc.stdin is not None
            c.proc.stdin.close()  # and still reads nothing
            assert c.proc.wait(scaled(10)) == 0  # within the exit grace, not killed
        finally:
            stop(c)
