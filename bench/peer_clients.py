"""Stdio JSON-RPC drivers for the peer bench: our daemon (LSP face, ACP face), codex app-server and
claude-agent-acp.

Each driver spawns its peer fresh, times `initialize` from spawn, opens a session and runs a turn,
reporting when the first streamed text arrived and when the turn ended. Frames are stamped on
arrival by one reader task per process. Requests from a peer to the client are answered with
null (none are expected for a plain-text reply).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

CLK_TCK = os.sysconf("SC_CLK_TCK")
LAUNCH_VAR = "BENCH_LAUNCH"
"""A marker unique to each spawn, in its environment: a warm daemon runs in a child of our fork
server, outside the spawned process's tree, and is found (and counted as that launch's) by it."""


@dataclass
class Turn:
    """One prompt's timeline: perf_counter stamps and the streamed text."""
    started: float
    first_chunk: float | None = None
    ended: float | None = None
    text: list[str] = field(default_factory=list)
    done: asyncio.Event = field(default_factory=asyncio.Event)


class Peer:
    name = "peer"
    framing = "jsonl"  # or "lsp" (Content-Length headers)
    has_history = True
    """Whether open_history can hand it a stored N-message history (the big-history case)."""

    def __init__(self, proc: asyncio.subprocess.Process, spawned: float, marker: str = ""):
        self.proc = proc
        self.spawned = spawned
        self.marker = marker
        self._others: list[int] | None = None
        self._ids = itertools.count(1)
        self._pending: dict[Any, asyncio.Future[tuple[float, dict[str, Any]]]] = {}
        self.turns: dict[str, Turn] = {}  # session id -> the turn running in it
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def spawn(cls, argv: list[str], env: dict[str, str], cwd: str) -> Any:
        marker = uuid.uuid4().hex
        t0 = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, env={**env, LAUNCH_VAR: marker}, cwd=cwd, limit=1 << 26)
        return cls(proc, t0, marker)

    # -- framing ---------------------------------------------------------------------------
    def send(self, obj: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **obj}).encode()
        assert self.proc.stdin is not None
        if self.framing == "lsp":
            self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        else:
            self.proc.stdin.write(body + b"\n")

    async def _frame(self) -> bytes | None:
        out = self.proc.stdout
        assert out is not None
        if self.framing == "jsonl":
            line = await out.readline()
            return line or None
        length = None
        while True:
            line = await out.readline()
            if not line:
                return None
            if not line.strip():
                break
            k, _, v = line.decode().partition(":")
            if k.strip().lower() == "content-length":
                length = int(v)
        return await out.readexactly(length or 0)

    async def _read(self) -> None:
        while True:
            raw = await self._frame()
            if raw is None:
                for fut in self._pending.values():
                    if not fut.done():
                        fut.set_exception(RuntimeError(f"{self.name} closed stdout"))
                return
            if not raw.strip():
                continue
            now = time.perf_counter()
            msg = json.loads(raw)
            if "method" in msg and "id" in msg:
                self.send({"id": msg["id"], "result": None})
            elif "method" in msg:
                self.on_notification(now, msg["method"], msg.get("params") or {})
            else:
                fut = self._pending.pop(msg.get("id"), None)
                if fut is not None and not fut.done():
                    fut.set_result((now, msg))

    def request(self, method: str, params: Any = None) -> asyncio.Future[tuple[float, dict[str, Any]]]:
        msg_id = next(self._ids)
        fut: asyncio.Future[tuple[float, dict[str, Any]]] = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = fut
        self.send({"id": msg_id, "method": method, "params": params})
        return fut

    async def call(self, method: str, params: Any = None, timeout: float = 120) -> tuple[float, Any]:
        t, msg = await asyncio.wait_for(self.request(method, params), timeout)
        if "error" in msg:
            raise RuntimeError(f"{self.name}: {method} failed: {msg['error']}")
        return t, msg["result"]

    # -- per-peer protocol -----------------------------------------------------------------
    async def initialize(self, cwd: str) -> float:
        """Seconds from spawn to the initialize response."""
        raise NotImplementedError

    async def new_session(self, cwd: str) -> str:
        raise NotImplementedError

    def start_prompt(self, sid: str, text: str) -> Turn:
        raise NotImplementedError

    async def open_history(self, cwd: str, sid: str, history: list[dict[str, Any]]) -> str:
        """Open a session holding `history` (chat messages); its id. Ours load `sid`, written to the
        session store beforehand (peers.write_session); codex resumes a thread given the history."""
        raise NotImplementedError

    async def cheap_request(self, sid: str) -> None:
        """A request that does no model work and no disk I/O (its latency shows whether the peer
        stays responsive)."""
        raise NotImplementedError

    async def list_request(self, sid: str) -> None:
        """The stored-session list (reads the session store: a slow one under load is a complaint
        of its own)."""
        raise NotImplementedError

    def on_notification(self, now: float, method: str, params: dict[str, Any]) -> None:
        pass

    def _chunk(self, sid: str | None, now: float, text: str) -> None:
        turn = self.turns.get(sid or "")
        if turn is not None:
            if turn.first_chunk is None:
                turn.first_chunk = now
            turn.text.append(text)

    def _end(self, sid: str, now: float) -> None:
        turn = self.turns.get(sid)
        if turn is not None and turn.ended is None:
            turn.ended = now
            turn.done.set()

    # -- measurements ----------------------------------------------------------------------
    def processes(self) -> list[int]:
        """The spawned process, and those outside its tree that carry its marker and whose parent
        does not (our warm child, a child of the fork server; looked for once it has answered).
        Children of either are not counted, as a cold daemon's children are not; neither is the
        fork server's own import work, like a page cache."""
        if self._others is None:
            entry = f"{LAUNCH_VAR}={self.marker}".encode()
            marked: dict[int, int] = {}
            for name in os.listdir("/proc"):
                if name.isdigit():
                    try:
                        with open(f"/proc/{name}/environ", "rb") as f:
                            if entry not in f.read().split(b"\0"):
                                continue
                        with open(f"/proc/{name}/stat") as f:
                            marked[int(name)] = int(f.read().rsplit(")", 1)[1].split()[1])
                    except OSError:
                        continue
            self._others = [pid for pid, parent in marked.items() if pid != self.proc.pid and parent not in marked]
        return [self.proc.pid, *self._others]

    def cpu_seconds(self) -> float:
        total = 0.0
        for pid in self.processes():
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / CLK_TCK
        return total

    def run_ms(self) -> float:
        """CPU milliseconds the launch's processes have run so far, to the nanosecond (the
        scheduler's count per thread, /proc/<pid>/task/<tid>/schedstat; threads that ended are not
        in it). For short spans, where utime/stime's 10 ms ticks are too coarse: spawn -> initialize."""
        total = 0
        for pid in self.processes():
            try:
                for tid in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                        total += int(f.read().split()[0])
            except OSError:  # ended meanwhile
                continue
        return total / 1e6

    def _sum_kib(self, path: str, keys: tuple[str, ...]) -> float:
        total = 0
        for pid in self.processes():
            with open(f"/proc/{pid}/{path}") as f:
                total += sum(int(line.split()[1]) for line in f if line.split(":")[0] in keys)
        return total / 1024

    def rss_mib(self) -> float:
        """Resident memory of the launch's processes (a warm child's includes the pages it shares
        with the fork server)."""
        return self._sum_kib("status", ("VmRSS",))

    def uss_mib(self) -> float:
        """Memory only the launch's processes hold (private pages): what a launch costs beside a
        fork server that is running anyway."""
        return self._sum_kib("smaps_rollup", ("Private_Clean", "Private_Dirty"))

    async def close(self) -> None:
        if self.proc.returncode is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except asyncio.TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        self._reader.cancel()


class ToyLSP(Peer):
    name = "toycoder (LSP)"
    framing = "lsp"

    async def initialize(self, cwd: str) -> float:
        t, _ = await self.call("initialize", {"processId": os.getpid(), "rootUri": f"file://{cwd}", "capabilities": {},
                                              "initializationOptions": {}})
        self.send({"method": "initialized", "params": {}})
        return t - self.spawned

    async def new_session(self, cwd: str) -> str:
        _, r = await self.call("toycoder/session/new", {})
        return str(r["sessionId"])

    def start_prompt(self, sid: str, text: str) -> Turn:
        turn = self.turns[sid] = Turn(time.perf_counter())
        fut = self.request("toycoder/prompt", {"sessionId": sid, "text": text})
        fut.add_done_callback(lambda f: self._end(sid, f.result()[0]) if not f.exception() else None)
        return turn

    async def cheap_request(self, sid: str) -> None:
        await self.call("toycoder/tools/list", {"sessionId": sid})

    async def list_request(self, sid: str) -> None:
        await self.call("toycoder/session/list", {})

    async def open_history(self, cwd: str, sid: str, history: list[dict[str, Any]]) -> str:
        await self.call("toycoder/session/load", {"sessionId": sid})
        return sid

    def on_notification(self, now: float, method: str, params: dict[str, Any]) -> None:
        if method == "toycoder/update" and params.get("update", {}).get("kind") == "text_delta":
            self._chunk(params.get("sessionId"), now, params["update"]["text"])


class ToyACP(Peer):
    name = "toycoder --acp"

    async def initialize(self, cwd: str) -> float:
        t, _ = await self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        return t - self.spawned

    async def new_session(self, cwd: str) -> str:
        _, r = await self.call("session/new", {"cwd": cwd, "mcpServers": []})
        return str(r["sessionId"])

    def start_prompt(self, sid: str, text: str) -> Turn:
        turn = self.turns[sid] = Turn(time.perf_counter())
        fut = self.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
        fut.add_done_callback(lambda f: self._end(sid, f.result()[0]) if not f.exception() else None)
        return turn

    async def cheap_request(self, sid: str) -> None:
        """ACP has no request answered from memory like tools/list: an unknown method is answered
        -32601 by the SDK's router, so this times the face's request path itself (stdin, transport,
        the SDK's task per message, the answer's write) with no work. (`authenticate` was this until
        we advertised an auth method, `setup`, whose authenticate reads the config again.)"""
        _, msg = await self.request("bench/none", {})
        if msg.get("error", {}).get("code") != -32601:
            raise RuntimeError(f"{self.name}: bench/none answered {msg}")

    async def list_request(self, sid: str) -> None:
        await self.call("session/list", {})

    async def open_history(self, cwd: str, sid: str, history: list[dict[str, Any]]) -> str:
        await self.call("session/resume", {"sessionId": sid, "cwd": cwd, "mcpServers": []})  # no replay: like codex
        return sid

    def on_notification(self, now: float, method: str, params: dict[str, Any]) -> None:
        update = params.get("update") or {}
        if method == "session/update" and update.get("sessionUpdate") == "agent_message_chunk":
            self._chunk(params.get("sessionId"), now, (update.get("content") or {}).get("text", ""))


def response_items(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages as the Responses API items codex keeps a thread's history in (the system
    message becomes a developer message)."""
    items: list[dict[str, Any]] = []
    for m in history:
        role = m["role"]
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]})
            continue
        if m.get("content"):
            kind = "output_text" if role == "assistant" else "input_text"
            items.append({"type": "message", "role": "developer" if role == "system" else role,
                          "content": [{"type": kind, "text": m["content"]}]})
        for tc in m.get("tool_calls") or []:
            items.append({"type": "function_call", "name": tc["function"]["name"],
                          "arguments": tc["function"]["arguments"], "call_id": tc["id"]})
    return items


class Codex(Peer):
    name = "codex app-server"
    experimental = False
    """Ask for the experimental API (thread/resume's `history`, for open_history)."""

    async def initialize(self, cwd: str) -> float:
        caps = {"capabilities": {"experimentalApi": True}} if self.experimental else {}
        t, _ = await self.call("initialize", {"clientInfo": {"name": "toycoder-bench", "version": "0"}, **caps})
        self.send({"method": "initialized"})
        return t - self.spawned

    async def new_session(self, cwd: str) -> str:
        _, r = await self.call("thread/start", {"cwd": cwd, "approvalPolicy": "never", "sandbox": "read-only",
                                                "ephemeral": True})
        return str(r["thread"]["id"])

    def start_prompt(self, sid: str, text: str) -> Turn:
        turn = self.turns[sid] = Turn(time.perf_counter())
        self.request("turn/start", {"threadId": sid, "input": [{"type": "text", "text": text}]})
        return turn  # the response comes at once; the turn ends with turn/completed

    async def cheap_request(self, sid: str) -> None:
        await self.call("thread/loaded/list", {})

    async def list_request(self, sid: str) -> None:
        await self.call("thread/list", {})

    async def open_history(self, cwd: str, sid: str, history: list[dict[str, Any]]) -> str:
        """thread/resume with `history`: the thread starts from the given items instead of a rollout
        file (app-server 0.171's documented way to hand it a history; the alternative, `path`, reads
        a rollout file we would have to write in codex's private format)."""
        _, r = await self.call("thread/resume", {"threadId": str(uuid.uuid4()), "history": response_items(history),
                                                 "cwd": cwd, "approvalPolicy": "never", "sandbox": "read-only"})
        return str(r["thread"]["id"])

    def on_notification(self, now: float, method: str, params: dict[str, Any]) -> None:
        if method == "item/agentMessage/delta":
            self._chunk(params.get("threadId"), now, params.get("delta", ""))
        elif method == "turn/completed":
            self._end(str(params.get("threadId")), now)


class ClaudeACP(ToyACP):
    """@zed-industries/claude-agent-acp: a node ACP adapter that runs the Claude Code CLI (node)
    per session and speaks Anthropic's Messages API (bench/peer_llm.py serves that dialect too)."""
    name = "claude-agent-acp"
    has_history = False  # its sessions are the CLI's private JSONL files; we do not write those

    def processes(self) -> list[int]:
        """The adapter and every process under it: the CLI it spawns per session does the turn's
        work (unlike our daemon's children, which a plain-text turn does not have)."""
        parents: dict[int, int] = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    with open(f"/proc/{name}/stat") as f:
                        parents[int(name)] = int(f.read().rsplit(")", 1)[1].split()[1])
                except OSError:
                    continue
        tree = [self.proc.pid]
        for pid in tree:  # grows while walked: breadth-first over the children
            tree += [child for child, parent in parents.items() if parent == pid]
        return tree
