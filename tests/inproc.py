"""Both wire faces in the test's own process and event loop, with the real App (as
python-lsp-server's tests build their server on in-memory streams).

* LSP: `start_lsp(config)` -> an `rpc.Daemon` whose "process" is `rpc_io.serve` on a task: bytes
  the test writes go down an os.pipe into the production frame reader (`stdio.read_frames` on its
  thread), frames the server writes land in the Daemon's stdout reader.
* ACP: `acp_agent(editor, config)` -> the SDK's ClientSideConnection wired to `serve_acp`: the
  client writes down an os.pipe into the face's stdin reader (its thread), frames the face writes
  land in the client's StreamReader.

No subprocess, no interpreter start, no pygls import per test: a test costs what its turn costs.
The scripted model server (FakeLLM) already runs in-process.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from acp.client.connection import ClientSideConnection
from rpc import Daemon

from toycoder_daemon.faces.acp.agent import serve_acp
from toycoder_daemon.faces.lsp.server import make_server
from toycoder_daemon.faces.lsp.transport import serve


class _Feed:
    """A binary 'file' whose writes arrive in an asyncio StreamReader (same loop, same thread)."""

    def __init__(self, reader: asyncio.StreamReader):
        self.reader = reader
        self.closed = False

    def write(self, data: bytes) -> int:
        if self.closed:  # as a pipe whose reader is gone: what is written after the close is lost
            return len(data)
        self.reader.feed_data(data)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True
        if not self.reader.at_eof():
            self.reader.feed_eof()


class _Stdin:
    """The test's end of the face's stdin pipe."""

    def __init__(self, fd: int):
        self._file = os.fdopen(fd, "wb")

    def write(self, data: bytes) -> None:
        self._file.write(data)  # the reader thread drains the pipe, so a big write only waits for it
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()  # EOF for the frame reader: the face shuts down


class InProcess:
    """What rpc.Daemon uses of asyncio.subprocess.Process, for a face running on a task."""

    def __init__(self, task: asyncio.Task[int], stdin: _Stdin, stdout: asyncio.StreamReader, on_exit: Any):
        self.pid = os.getpid()
        self._task = task
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = asyncio.StreamReader()
        self.stderr.feed_eof()  # logs go to pytest's log capture instead
        self._on_exit = on_exit

    @property
    def returncode(self) -> int | None:
        if not self._task.done():
            return None
        return -9 if self._task.cancelled() or self._task.exception() else self._task.result()

    async def wait(self) -> int:
        await asyncio.wait({self._task})
        self._on_exit()
        code = self.returncode
        assert code is not None
        return code

    def kill(self) -> None:
        self._task.cancel()


async def start_lsp(config: Path | None = None) -> Daemon:
    """The LSP face in-process, not yet initialized (call `initialize` on the result)."""
    read_fd, write_fd = os.pipe()
    stdin_r = os.fdopen(read_fd, "rb")
    stdout = asyncio.StreamReader(limit=1 << 26)
    out = _Feed(stdout)
    task = asyncio.ensure_future(serve(make_server(str(config) if config else None), stdin_r, out))

    stdin = _Stdin(write_fd)

    def exited() -> None:
        out.close()
        stdin.close()  # first: the reader thread, maybe in a read of stdin_r, sees EOF and lets it go
        stdin_r.close()

    return Daemon(InProcess(task, stdin, stdout, exited))  # type: ignore[arg-type]


class _PipeStdin(asyncio.WriteTransport):
    """The ACP client's end of the face's stdin pipe, written by the event loop without blocking it
    (the face's reader thread hands lines to the same loop: a blocking write could wait for itself).
    As on a pipe whose reader is gone, what is written after the close is lost."""

    def __init__(self, pipe: asyncio.WriteTransport):
        super().__init__()
        self._pipe = pipe

    def write(self, data: bytes) -> None:  # type: ignore[override]
        if not self._pipe.is_closing():
            self._pipe.write(data)

    def is_closing(self) -> bool:
        return self._pipe.is_closing()

    def close(self) -> None:
        self._pipe.close()  # EOF for the face once what is buffered is written


@asynccontextmanager
async def acp_agent(editor: Any, config: Path, *, observers: list[Any] | None = None,
                    use_unstable_protocol: bool = False) -> AsyncIterator[tuple[ClientSideConnection, InProcess]]:
    """The ACP face in-process; yields the client connection and the face's 'process'."""
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    to_client = asyncio.StreamReader(limit=1 << 26)
    task = asyncio.ensure_future(serve_acp(_Feed(to_client), str(config), stdin=read_fd))  # type: ignore[arg-type]
    pipe, _ = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, os.fdopen(write_fd, "wb", 0))
    stdin = _PipeStdin(pipe)  # the client's writes and the test's close share one end, as on a pipe
    writer = asyncio.StreamWriter(stdin, asyncio.streams.FlowControlMixin(), None, loop)  # type: ignore[arg-type]
    conn = ClientSideConnection(editor, writer, to_client, observers=observers or [],
                                use_unstable_protocol=use_unstable_protocol)
    closed: list[int] = []

    def exited() -> None:  # the face reads its stdin to EOF and leaves the fd to its owner
        if not closed:
            closed.append(read_fd)
            os.close(read_fd)

    proc = InProcess(task, stdin, to_client, exited)  # type: ignore[arg-type]
    try:
        yield conn, proc
    finally:
        stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        finally:
            await conn.close()
