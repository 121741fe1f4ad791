"""Backpressure (issue 13, "Also"): a client that stops reading stdout while a turn streams. The
rule (docs/security.md, "Wire"): the daemon's frame writes block, so it stops taking the model's
stream while the pipe is full and holds nothing beyond the pipe and one frame; nothing is queued
for the client. When the client reads again everything arrives, in order, and the turn ends.
A real process and a real pipe, because the pipe filling up is the point."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import write_config
from helpers import blocked_in_pipe_write, rss_bytes
from waiting import wait_until

from toycoder_daemon.testing.fake_llm import FakeLLM

ROOT = Path(__file__).resolve().parent.parent
REPLY = "".join(f"{i:07d} " for i in range(500_000))  # 4 MB of text
CHUNK = 64  # ~62,000 deltas: a queue of frames would hold far more than the text itself
GROWTH_LIMIT = 40 * 1024 * 1024


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
    def __init__(self, args: list[str], framed: bool, log: Any):
        self.proc = subprocess.Popen([sys.executable, "-m", "toycoder_daemon", *args], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        self.framed = framed

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


@pytest.mark.parametrize("face", ["lsp", "acp"])
def test_a_client_that_stops_reading_holds_the_turn_not_the_memory(face: str, tmp_path: Path, llm: FakeLLM,
                                                                   workspace: Path) -> None:
    llm.add({"text": REPLY, "chunk_size": CHUNK})
    cfg = write_config(tmp_path / "config.yaml", llm)
    with open(tmp_path / "daemon.log", "wb") as log:
        c = Client(["--config", str(cfg)] + (["--acp"] if face == "acp" else []), face == "lsp", log)
        try:
            if face == "lsp":
                c.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                        "params": {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {}}})
                c.answer(1)
                c.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
                c.send({"jsonrpc": "2.0", "id": 2, "method": "toycoder/session/new", "params": {}})
                sid = c.answer(2)["result"]["sessionId"]
                c.send({"jsonrpc": "2.0", "id": 3, "method": "toycoder/prompt", "params": {"sessionId": sid,
                                                                                          "text": "talk"}})
            else:
                c.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
                c.answer(1)
                c.send({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                        "params": {"cwd": str(workspace), "mcpServers": []}})
                sid = c.answer(2)["result"]["sessionId"]
                c.send({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                        "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "talk"}]}})
            baseline = rss_bytes(c.proc.pid)
            assert c.proc.stdout is not None
            fd = c.proc.stdout.fileno()
            # the client reads nothing: the pipe fills up and the daemon's writes block
            wait_until(lambda: blocked_in_pipe_write(c.proc.pid), 60, "the daemon to block on stdout",
                       describe=lambda: f"{unread(fd)} bytes unread")
            held = unread(fd)
            samples = rss_while_stuck(c.proc.pid)  # the daemon stays stuck while we do not read; its memory with it
            assert blocked_in_pipe_write(c.proc.pid) and unread(fd) == held and c.proc.poll() is None
            assert max(samples) - baseline < GROWTH_LIMIT
            text: list[str] = []

            def collect(msg: dict[str, Any]) -> None:
                p = msg.get("params") or {}
                u = p.get("update") or {}
                if u.get("kind") == "text_delta":
                    text.append(u["text"])
                elif u.get("sessionUpdate") == "agent_message_chunk":
                    text.append(u["content"]["text"])

            answer = c.answer(3, collect)  # reading again: everything arrives and the turn ends
            assert answer["result"]["stopReason"] == "end_turn"
            assert "".join(text) == REPLY
        finally:
            assert c.proc.stdin is not None
            c.proc.stdin.close()
            try:
                c.proc.wait(10)
            except subprocess.TimeoutExpired:
                c.proc.kill()
                c.proc.wait()
