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

from toycoder_daemon.testing.fake_llm import FakeLLM

ROOT = Path(__file__).resolve().parent.parent
REPLY = "".join(f"{i:07d} " for i in range(500_000))  # 4 MB of text
CHUNK = 64  # ~62,000 deltas: a queue of frames would hold far more than the text itself
GROWTH_LIMIT = 40 * 1024 * 1024


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def unread(fd: int) -> int:
    buf = bytearray(4)
    fcntl.ioctl(fd, termios.FIONREAD, buf)
    return int.from_bytes(buf, sys.byteorder)


def blocked_writing(pid: int) -> bool:
    """The daemon's main thread (the event loop) sleeps in write(2) on the full stdout pipe."""
    return Path(f"/proc/{pid}/task/{pid}/wchan").read_text().strip().endswith("pipe_write")  # anon_pipe_write on 6.x


def poll(pred: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


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
            baseline = rss(c.proc.pid)
            assert c.proc.stdout is not None
            fd = c.proc.stdout.fileno()
            # the client reads nothing: the pipe fills up and the daemon's writes block
            poll(lambda: blocked_writing(c.proc.pid), 60, f"the daemon to block on stdout ({unread(fd)} unread)")
            held = unread(fd)
            samples = []
            for _ in range(25):  # the daemon stays stuck while we do not read; its memory with it
                samples.append(rss(c.proc.pid))
                time.sleep(0.04)
            assert blocked_writing(c.proc.pid) and unread(fd) == held and c.proc.poll() is None
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
