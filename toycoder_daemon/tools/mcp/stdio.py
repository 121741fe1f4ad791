"""The stdio transport of an MCP server, owned by us: we spawn the child, so its PID and process
group are ours to signal and reap, and we hand the SDK's ClientSession a pair of memory streams.

    child = StdioChild("toy", command, args, env=env, cwd=cwd)
    async with child.connect() as (read, write):
        session = ClientSession(read, write)
        ...
    child.returncode, child.stderr_tail()

- The child runs in its own session (so its own process group, pgid == pid), with stdin/stdout as
  the protocol channel: one JSON-RPC message per line, UTF-8. Its stderr goes to a pipe read by a
  thread: lines are logged at debug level (redacted) and the last ones kept for error messages.
  Nothing of the child ever reaches the daemon's stdout.
- Leaving `connect()` (normally, by an error or by cancellation) shuts the child down the way the
  MCP spec asks: close stdin, wait EXIT_GRACE, SIGTERM the group, wait TERM_GRACE, SIGKILL the
  group; then SIGKILL whatever the server left behind in its group. The shutdown runs shielded and
  every wait in it is bounded. asyncio's child watcher reaps the leader; `returncode` tells.
- A process that left the group (a daemonizer calling setsid) escapes by design, as with the SDK.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import signal
import subprocess
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

import anyio
import anyio.abc
import mcp_types as mt
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from toycoder_daemon.core.util import secrets

log = logging.getLogger(__name__)

EXIT_GRACE = 2.0
"""Seconds the server has to exit by itself once its stdin is closed (the SDK's value)."""
TERM_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL to the group (the SDK's value)."""
REAP_TIMEOUT = 2.0
"""Seconds to wait for the event loop to see a SIGKILLed leader exit."""
FLUSH_TIMEOUT = 0.5
"""Seconds the writer may take to send messages already accepted before stdin closes."""
STDERR_TAIL_LINES = 20
_POLL = 0.01

ToSession = MemoryObjectSendStream[SessionMessage | Exception]
FromSession = MemoryObjectReceiveStream[SessionMessage]
SessionStreams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]
"""What ClientSession takes: the server's messages (or parse errors) and ours."""


def parse_line(line: bytes) -> SessionMessage | Exception:
    """One stdout line as a message, or the parse error as a value (the session reports it)."""
    try:
        return SessionMessage(mt.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as e:  # pydantic's ValidationError is a ValueError
        log.debug("unparsable line from an MCP server: %r", secrets.clip(line.decode("utf-8", "replace"), 200).head)
        return e


def encode_message(message: SessionMessage) -> bytes:
    return (message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode("utf-8")


class StdioChild:
    """One stdio MCP server process. `connect()` may be entered once."""

    def __init__(self, name: str, command: str, args: Sequence[str], *, env: Mapping[str, str], cwd: Path):
        self.name = name
        self.command = command
        self.args = list(args)
        self.env = dict(env)
        self.cwd = cwd
        self.pid: int | None = None
        """The leader's PID, which is also the process group's id; None once it is reaped and swept."""
        self._process: anyio.abc.Process | None = None
        self._tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._tail_lock = threading.Lock()
        self._stderr_thread: threading.Thread | None = None

    @property
    def returncode(self) -> int | None:
        """The exit code once the child has exited (negative: killed by that signal)."""
        return self._process.returncode if self._process is not None else None

    # -- signals --

    def signal_group(self, sig: int) -> None:
        """Send `sig` to the whole process group (nothing if it is gone or already forgotten)."""
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL the group: synchronous, for paths where awaiting is not possible.

        Once the leader has been reaped the group id is forgotten: after this last sweep the
        number may be reused and must never be signalled again."""
        self.signal_group(signal.SIGKILL)
        if self.returncode is not None:
            self.pid = None

    # -- stderr --

    def _start_stderr_reader(self, fd: int) -> None:
        name, tail, lock = self.name, self._tail, self._tail_lock

        def pump() -> None:
            with os.fdopen(fd, "rb") as f:
                for raw in f:
                    line = raw.decode("utf-8", errors="replace").rstrip()
                    with lock:
                        tail.append(line)
                    log.debug("MCP server %s stderr: %s", name, secrets.redact(line))

        self._stderr_thread = threading.Thread(target=pump, name=f"mcp-stderr-{name}", daemon=True)
        self._stderr_thread.start()

    async def stderr_tail(self, lines: int = 3, *, wait: float = 0.5) -> list[str]:
        """The last non-empty stderr lines, after giving the reader up to `wait` s to reach EOF."""
        deadline = anyio.current_time() + wait
        thread = self._stderr_thread
        while thread is not None and thread.is_alive() and anyio.current_time() < deadline:
            await anyio.sleep(0.02)
        return self.recent_stderr(lines)

    def recent_stderr(self, lines: int = 3) -> list[str]:
        """The last non-empty stderr lines read so far."""
        with self._tail_lock:
            return [line for line in list(self._tail)[-lines:] if line.strip()]

    # -- the connection --

    async def _spawn(self) -> anyio.abc.Process:
        read_fd, write_fd = os.pipe()
        self._start_stderr_reader(read_fd)
        try:
            return await anyio.open_process(
                [self.command, *self.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=write_fd,
                cwd=self.cwd, env=self.env, start_new_session=True,
            )
        finally:
            os.close(write_fd)  # the child has its copy; ours would keep the pipe open forever

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[SessionStreams]:
        """Spawn the server and yield (read, write) streams for ClientSession; shut it down on exit.

        Raises OSError when the command cannot be started."""
        if self._process is not None:
            raise RuntimeError(f"MCP server {self.name} was already started")
        process = await self._spawn()
        self._process = process
        self.pid = process.pid
        # No await between the spawn and the try below: a cancellation there would leak the child.
        to_session, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write, from_session = anyio.create_memory_object_stream[SessionMessage](0)
        writer_done = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._read_stdout, process, to_session)
                tg.start_soon(self._write_stdin, process, from_session, to_session, writer_done)
                try:
                    yield read, write
                finally:
                    with anyio.CancelScope(shield=True):
                        # The session is done: the reader only drains from now on, the writer
                        # flushes what it accepted, then the process is stopped.
                        read.close()
                        write.close()
                        with anyio.move_on_after(FLUSH_TIMEOUT):
                            await writer_done.wait()
                        await self._stop(process)
                    tg.cancel_scope.cancel()  # a survivor holding stdout open must not block us
        finally:
            # Also reached when a native task.cancel() defeated the shielded shutdown above.
            self.kill()
            for stream in (read, write, to_session, from_session):
                stream.close()

    async def _read_stdout(self, process: anyio.abc.Process, to_session: ToSession) -> None:
        assert process.stdout is not None
        delivering = True
        buffer = b""
        try:
            async with to_session:
                async for chunk in process.stdout:
                    if not delivering:
                        continue  # keep draining: a server blocked on a full pipe cannot exit
                    lines = (buffer + chunk).split(b"\n")
                    buffer = lines.pop()
                    for line in lines:
                        if not line.strip():
                            continue
                        try:
                            await to_session.send(parse_line(line))
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            delivering = False
                            break
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass  # our shutdown closed stdout under the read; the session sees the stream end

    async def _write_stdin(self, process: anyio.abc.Process, from_session: FromSession, to_session: ToSession,
                           done: anyio.Event) -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for message in from_session:
                    await process.stdin.send(encode_message(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server stopped reading; it may still be alive. End the session's read stream
            # so a request does not wait forever for an answer that cannot come.
            await to_session.aclose()
        finally:
            done.set()

    async def _wait_exit(self, process: anyio.abc.Process, timeout: float) -> bool:
        # Not process.wait(): on 3.11+ it also waits for the pipes to close, and a child that
        # inherited them would make an exited server look hung.
        deadline = anyio.current_time() + timeout
        while process.returncode is None:
            if anyio.current_time() >= deadline:
                return False
            await anyio.sleep(_POLL)
        return True

    async def _stop(self, process: anyio.abc.Process) -> None:
        """Close stdin, then SIGTERM, then SIGKILL the group, each after its grace period."""
        assert process.stdin is not None and process.stdout is not None
        with contextlib.suppress(OSError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            await process.stdin.aclose()
        if not await self._wait_exit(process, EXIT_GRACE):
            self.signal_group(signal.SIGTERM)
            if not await self._wait_exit(process, TERM_GRACE):
                self.signal_group(signal.SIGKILL)
                if not await self._wait_exit(process, REAP_TIMEOUT):
                    log.warning("MCP server %s (pid %s) is still alive after SIGKILL", self.name, self.pid)
        self.kill()  # what the server left behind in its group (children that ignore stdin)
        with contextlib.suppress(OSError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            await process.stdout.aclose()
