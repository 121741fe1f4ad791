"""`toycoder-daemon --acp` as a real process, driven line by line (raw frames, no SDK client): for
tests of what a client sees from a new process, its stdin's end included."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from helpers import ROOT
from waiting import DEFAULT_TIMEOUT, scaled

LINE_TIMEOUT = 20
"""Seconds for each line, as rpc.Daemon.call's answer: a new process's first answer waits for its cold imports
(and, in a fresh clone, their bytecode being written), slow on a loaded machine."""

CAPS = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
        "clientInfo": {"name": "test", "version": "1"}}


class AcpDaemon:
    """`toycoder-daemon --acp`; its lines arrive in `lines`, read on a thread. Its stdin is a pipe
    the test writes, or `stdin` (an fd the test gives: a file, a pty)."""

    def __init__(self, config: Path, *, env: dict[str, str] | None = None, stdin: int | None = None):
        self.proc = subprocess.Popen([sys.executable, "-m", "toycoder_daemon", "--acp", "--config", str(config)],
                                     stdin=subprocess.PIPE if stdin is None else stdin, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env={**os.environ, **(env or {})}, cwd=ROOT)
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.put(json.loads(raw))

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, *msgs: dict[str, Any]) -> None:
        """The messages in one write."""
        self.write(b"".join(json.dumps(m).encode() + b"\n" for m in msgs))

    def until(self, pred: Any) -> dict[str, Any]:
        """Read (keeping every line in `seen`) up to the first line `pred` takes; each line within
        LINE_TIMEOUT."""
        while True:
            msg = self.lines.get(timeout=scaled(LINE_TIMEOUT))
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

    @staticmethod
    def prompt_msg(msg_id: int, sid: str, text: str) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": msg_id, "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}}

    def prompt(self, msg_id: int, sid: str, text: str) -> None:
        self.send(self.prompt_msg(msg_id, sid, text))

    def allow(self, asked: dict[str, Any]) -> None:
        """Answer a permission request: allow once."""
        self.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"outcome": {"outcome": "selected",
                                                                              "optionId": "allow_once"}}})

    def updates(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [m["params"]["update"] for m in self.seen if m.get("method") == "session/update"
                and (kind is None or m["params"]["update"]["sessionUpdate"] == kind)]

    def close(self) -> int:
        """Close our end of stdin (if it is ours) and wait for the process to exit."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=DEFAULT_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # ours: started by this object
            self.proc.wait()
            raise
