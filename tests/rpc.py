"""A raw asyncio JSON-RPC client that drives the real daemon subprocess over stdio.

Tests use it where they need control of the bytes (malformed frames) or of the editor's answers
(permission, ask_user); pytest-lsp covers the standard client path in test_lsp_client.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from waiting import DEFAULT_TIMEOUT, scaled, wait_until_async

ROOT = Path(__file__).resolve().parent.parent


class RpcError(Exception):
    def __init__(self, error: dict[str, Any]):
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.message = error.get("message", "")


def frame(obj: Any) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class Daemon:
    def __init__(self, proc: asyncio.subprocess.Process):
        self.proc = proc
        self._ids = itertools.count(1)
        self._pending: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.notifications: list[dict[str, Any]] = []
        self.requests_seen: list[dict[str, Any]] = []
        self.handlers: dict[str, Callable[[dict[str, Any]], Awaitable[Any] | Any]] = {}
        self.orphans: list[dict[str, Any]] = []  # responses with an unknown id (e.g. id null errors)
        self.header_blocks: list[bytes] = []  # each frame's header lines as read, in order
        self._notified = asyncio.Event()
        self._reader = asyncio.ensure_future(self._read())
        self._stderr = bytearray()
        self._stderr_reader = asyncio.ensure_future(self._drain_stderr())  # a full pipe would block the daemon

    @classmethod
    async def start(cls, *args: str, env: dict[str, str] | None = None, cwd: str | None = None,
                    program: Sequence[str] = (sys.executable, "-m", "toycoder_daemon")) -> Daemon:
        """`program`: the daemon command before `args` (e.g. an installed `toycoder-daemon`)."""
        proc = await asyncio.create_subprocess_exec(
            *program, *args,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **(env or {})}, cwd=cwd or str(ROOT),
            start_new_session=True,  # its own group: conftest's cleanup can kill it without touching pytest
        )
        return cls(proc)

    async def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            headers = {}
            block = b""
            while True:
                line = await out.readline()
                if not line:
                    assert not block, f"stdout ended inside a header block: {block!r}"
                    return
                block += line
                line = line.strip()
                if not line:
                    break
                k, _, v = line.decode().partition(":")
                headers[k.strip().lower()] = v.strip()
            self.header_blocks.append(block)
            body = await out.readexactly(int(headers["content-length"]))
            msg = json.loads(body)
            if "method" in msg and "id" in msg:
                self.requests_seen.append(msg)
                asyncio.ensure_future(self._answer(msg))
            elif "method" in msg:
                self.notifications.append(msg)
                self._notified.set()
            else:
                fut = self._pending.pop(msg.get("id"), None)
                if fut is None:
                    self.orphans.append(msg)
                    self._notified.set()
                elif not fut.done():
                    fut.set_result(msg)

    async def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        while chunk := await self.proc.stderr.read(65536):
            self._stderr += chunk

    async def _answer(self, msg: dict[str, Any]) -> None:
        handler = self.handlers.get(msg["method"])
        if handler is None:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "result": None}
        else:
            result = handler(msg["params"])
            if asyncio.iscoroutine(result):
                result = await result
            reply = {"jsonrpc": "2.0", "id": msg["id"], "result": result}
        self.send_raw(frame(reply))

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)

    def notify(self, method: str, params: Any = None) -> None:
        self.send_raw(frame({"jsonrpc": "2.0", "method": method, "params": params}))

    def request_future(self, method: str, params: Any = None) -> tuple[int, asyncio.Future[dict[str, Any]]]:
        msg_id = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = fut
        self.send_raw(frame({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}))
        return msg_id, fut

    async def call(self, method: str, params: Any = None, timeout: float = 20) -> Any:
        _, fut = self.request_future(method, params)
        msg = await asyncio.wait_for(fut, scaled(timeout))
        if "error" in msg:
            raise RpcError(msg["error"])
        return msg["result"]

    async def initialize(self, root: str | Path, *, toycoder_caps: dict[str, Any] | None = None,
                         options: dict[str, Any] | None = None,
                         progress: bool = False, client: str | None = None) -> dict[str, Any]:
        """`client`: the clientInfo.name to give (none by default)."""
        default = {"permissionRequest": True, "askUser": True}
        caps: dict[str, Any] = {"experimental": {"toycoder": default if toycoder_caps is None else toycoder_caps}}
        if progress:
            caps["window"] = {"workDoneProgress": True}
        params: dict[str, Any] = {"processId": os.getpid(), "rootUri": Path(root).resolve().as_uri(),
                                  "capabilities": caps, "initializationOptions": options or {}}
        if client is not None:
            params["clientInfo"] = {"name": client}
        result = await self.call("initialize", params)
        self.notify("initialized", {})
        return dict(result)

    def updates(self, session_id: str | None = None) -> list[dict[str, Any]]:
        return [n["params"] for n in self.notifications if n["method"] == "toycoder/update"
                and (session_id is None or n["params"]["sessionId"] == session_id)]

    def streamed_text(self, session_id: str | None = None) -> str:
        """Text deltas joined, minus the partial text of replies that were retried."""
        text = ""
        reply_start = 0
        for p in self.updates(session_id):
            u = p["update"]
            if p.get("parentToolCallId"):
                continue
            if u["kind"] == "text_delta":
                text += u["text"]
            elif u["kind"] == "retry":
                text = text[:reply_start]
            elif u["kind"] == "tool_call":
                reply_start = len(text)
        return text

    async def read_to_end(self) -> None:
        """Wait until the reader has taken all of stdout, to its end, as frames; it fails on bytes that
        are no frame (a header block without Content-Length, a body cut short, one that is not JSON)."""
        await asyncio.wait_for(asyncio.shield(self._reader), scaled(10))

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = DEFAULT_TIMEOUT,
                       what: str = "the condition") -> Any:
        """Wait until predicate() is truthy (waiting.wait_until_async, re-checked on every message)."""
        return await wait_until_async(predicate, timeout, what, wake=self._notified)

    async def close(self) -> int:
        if self.proc.returncode is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            except Exception:
                pass
            try:
                await asyncio.wait_for(self.proc.wait(), scaled(10))
            except asyncio.TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        self._reader.cancel()
        return self.proc.returncode  # type: ignore[return-value]

    def daemon_pid(self) -> int:
        """The process running the daemon: the launcher's warm child, or the launcher itself."""
        from warm_helpers import serving_pid

        return serving_pid(self.proc.pid)

    async def stderr_text(self) -> str:
        """Everything the daemon logged (complete once it has exited)."""
        if self.proc.returncode is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._stderr_reader), 5)
        return self._stderr.decode(errors="replace")
