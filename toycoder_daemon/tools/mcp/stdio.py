"""The stdio transport of an MCP server, owned by us: we spawn the child, so its PID and process
group are ours to signal and reap, and we hand the SDK's ClientSession a pair of memory streams.

    child = StdioChild("toy", command, args, env=env, cwd=cwd)
    async with child.connect() as (read, write):
        session = ClientSession(read, write)
        ...
    child.returncode, child.stderr_tail()

- The child runs in its own session (so its own process group, pgid == pid), with stdin/stdout as
  the protocol channel: one JSON-RPC message per line, UTF-8, each at most MAX_MESSAGE_BYTES (a
  longer one is dropped while it is read, never held: a request it answered fails with an error).
- The child is launch.py, which leads the group, forks the server into it and waits for it; when
  the daemon dies (a SIGKILL too) its death signal makes it end the group: TERM, then KILL.
  `kill_all` ends every server's group at the daemon's exit (faces/main.py), before os._exit. Its stderr goes to a pipe read by a
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
import errno
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
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
MAX_MESSAGE_BYTES = 8 << 20
"""Longest message line read from a server (a tools/call result far larger is cut to the tools'
output_max_bytes anyway); a longer line is counted and dropped as it streams, never held."""
EXIT_TERM_GRACE = 1.0
"""Seconds between TERM and KILL to the servers' groups when the daemon exits (kill_all)."""
LAUNCH = str(Path(__file__).with_name("launch.py"))
ARGV_VAR = "TOYCODER_MCP_ARGV"
"""launch.py's: the server's argv, as JSON (launch.py imports nothing of ours)."""

_live: set[int] = set()
"""Process groups of the stdio servers not yet reaped and swept (kill_all ends them at exit)."""
_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)')
_BODY = re.compile(rb'"(?:result|error|method|params)"\s*:')

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


def too_long(head: bytes, size: int) -> SessionMessage | Exception:
    """What stands for a message line over MAX_MESSAGE_BYTES: an error answer to the request it
    answered (its id, when the line names one before its body), so the call fails at once instead of
    waiting for its timeout; else the error as a value."""
    reason = (f"the MCP server's message ({size} bytes) is over the {MAX_MESSAGE_BYTES}-byte limit; "
              "it was dropped unread")
    m = _ID.search(head)
    body = _BODY.search(head)
    if m is not None and (body is None or m.start() < body.start()):
        answer = {"jsonrpc": "2.0", "id": json.loads(m.group(1)), "error": {"code": mt.INTERNAL_ERROR, "message": reason}}
        return parse_line(json.dumps(answer).encode())
    log.warning("%s", reason)
    return ValueError(reason)


def kill_all(grace: float = EXIT_TERM_GRACE) -> None:
    """At the daemon's exit, synchronously: TERM every server's group (their stdin is closed by then,
    or closes as the daemon exits), wait up to `grace` seconds for their launchers to end, then KILL
    the groups, so no server outlives the daemon."""
    groups = list(_live)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(_running(g) for g in groups) and time.monotonic() < deadline:
        time.sleep(_POLL)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    _live.clear()


def _running(pid: int) -> bool:
    """The process exists and has not exited (a zombie has)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True


def _program(command: str, env: Mapping[str, str], cwd: Path) -> str:
    """The server's executable, found as exec would find it (OSError as the spawn would raise it):
    launch.py execs it, and a missing program must fail the start as it did without the launcher."""
    if os.sep in command:
        path = command if os.path.isabs(command) else os.path.join(cwd, command)
    else:
        path = shutil.which(command, path=env.get("PATH", os.defpath)) or ""
    if not path or not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), command)
    return path


def encode_message(message: SessionMessage) -> bytes:
    return (message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode("utf-8")


class _Lines:
    """Stdout's bytes as messages, one per line; a line over MAX_MESSAGE_BYTES is counted, not kept
    (its first KiB names the request it answers: too_long)."""

    def __init__(self) -> None:
        self.delivering = True
        self._buffer = bytearray()
        self._head: bytes | None = None  # set while an over-long line streams past
        self._size = 0

    def feed(self, chunk: bytes) -> list[SessionMessage | Exception]:
        if not self.delivering:
            return []
        out: list[SessionMessage | Exception] = []
        start = 0
        while start <= len(chunk):
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if self._head is not None:
                self._size += len(piece)
            else:
                self._buffer += piece
                if len(self._buffer) > MAX_MESSAGE_BYTES:
                    self._head, self._size = bytes(self._buffer[:1024]), len(self._buffer)
                    self._buffer = bytearray()  # freed now, not at the line's end
            if end < 0:
                break
            if self._head is not None:
                out.append(too_long(self._head, self._size))
                self._head = None
            elif self._buffer.strip():
                out.append(parse_line(bytes(self._buffer)))
            self._buffer = bytearray()
            start = end + 1
        return out


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
        if self.returncode is not None and self.pid is not None:
            _live.discard(self.pid)
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
        program = _program(self.command, self.env, self.cwd)
        read_fd, write_fd = os.pipe()
        self._start_stderr_reader(read_fd)
        try:
            # launch.py (isolated: nothing of the server's cwd is imported) leads the group and ends
            # it when the daemon dies
            process = await anyio.open_process(
                [sys.executable, "-I", "-S", LAUNCH, str(os.getpid())],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=write_fd, cwd=self.cwd,
                env={**self.env, ARGV_VAR: json.dumps([program, *self.args])}, start_new_session=True,
            )
        finally:
            os.close(write_fd)  # the child has its copy; ours would keep the pipe open forever
        _live.add(process.pid)
        return process

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
        lines = _Lines()
        try:
            async with to_session:
                async for chunk in process.stdout:
                    for message in lines.feed(chunk):
                        try:
                            await to_session.send(message)
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            lines.delivering = False  # keep draining: a server blocked on a full pipe cannot exit
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
