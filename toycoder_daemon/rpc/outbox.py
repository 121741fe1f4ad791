"""The protocol channel's writer: frames queued in order and written to stdout by one thread.

The event loop never blocks on a client that does not read. The queue is bounded by the rule in
docs/protocol.md ("Backpressure"): above `limit` bytes queued, streaming turns wait (the model's
stream is read through `core.ports.OUTPUT`, which awaits `room()`) while answers and other frames are
still queued; above `hard_limit` the thread that reads stdin stops reading (`wait_input`, never on
the event loop), so a client that sends requests without reading their answers is held back by its
own pipe, not by our memory; it still sees stdin close (`hung_up`), so the daemon can exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import select
import threading
from collections import deque
from typing import BinaryIO

log = logging.getLogger(__name__)

LIMIT = 1 << 20
"""Bytes queued above which streaming turns wait."""
HARD_LIMIT = 8 << 20
"""Bytes queued above which no more input is read."""
BATCH = 1 << 16
"""Small frames are joined into writes of up to this size (fewer syscalls, same order)."""
HANDOVER = 0.0003
"""Seconds a producer waits, at most, for the idle writer thread to take the frame it queued. Woken,
the thread still needs the GIL, which the event loop, busy with a stream, keeps for the switch
interval (faces/main.py's 2 ms) before it must give it up; blocked here, the loop gives it up at
once (two thread switches: ~0.07 ms at load 3-5). The bound keeps a busy machine, where the thread
is not scheduled at once, from stalling the loop (at 1 ms, a tenth of the writes waited 1.2-1.7 ms)."""
HANGUP_CHECK = 0.1
"""Seconds between looks at the input for a hangup while `wait_input` holds the reader."""
_HANGUP = 0
if hasattr(select, "poll"):
    _HANGUP = select.POLLHUP | select.POLLERR | select.POLLNVAL | getattr(select, "POLLRDHUP", 0)


def hung_up(fd: int) -> bool:
    """The input's writers are all gone (a pipe reports POLLHUP even with unread data left, a
    socket POLLRDHUP), or the fd is closed: what is left can be read to EOF without blocking."""
    if not _HANGUP:  # no poll(2) (Windows): the gate then waits for the queue alone
        return False
    poller = select.poll()
    poller.register(fd, _HANGUP)
    try:
        return any(events & _HANGUP for _, events in poller.poll(0))
    except OSError:
        return True


def _settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class Outbox:
    """A file-like target for the faces' frame writers (`write`, `flush`, `close`): `write` only
    queues, the "stdout-writer" thread writes. Each frame is written whole and in order."""

    def __init__(self, out: BinaryIO, *, limit: int = LIMIT, hard_limit: int = HARD_LIMIT):
        self._out = out
        self.limit = limit
        self.hard_limit = hard_limit
        self._cond = threading.Condition()
        self._frames: deque[bytes] = deque()
        self.queued = 0
        """Bytes queued and not yet written (a frame being written still counts)."""
        self._writing = False
        self._idle = False
        """The writer thread waits for frames."""
        self._taken = 0
        """Batches the writer thread has taken (a producer handing a frame over waits for the count to move)."""
        self._closed = False
        self.broken = False
        """The client closed its end: frames are dropped from now on."""
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._accepted = 0
        """Bytes ever queued."""
        self._done = 0
        """Bytes ever written (or dropped: the client is gone)."""
        self._written_waiters: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        """`all_written` futures, each with the `_accepted` mark it waits for."""
        self._thread = threading.Thread(target=self._run, name="stdout-writer", daemon=True)
        self._thread.start()

    # ---- producers (the event loop, or a reader thread answering a bad frame) ----------------

    def write(self, data: bytes) -> None:
        with self._cond:
            if self.broken or self._closed:
                return
            self._frames.append(data)
            self.queued += len(data)
            self._accepted += len(data)
            self._cond.notify_all()
            if self._idle:  # hand it over: the frame leaves now, not after the loop's next switch interval
                taken = self._taken
                self._cond.wait_for(lambda: self._taken != taken or self.broken or self._closed, HANDOVER)

    def flush(self) -> None:
        """Nothing to do here: the thread flushes after each write (`drain` waits for it)."""

    def full(self) -> bool:
        return self.queued >= self.limit and not self.broken

    async def room(self) -> None:
        """Return once the queue is below `limit` (at once when it is, or when the client is gone)."""
        loop = asyncio.get_running_loop()
        with self._cond:
            if not self.full():
                return
            fut: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, fut))
        await fut

    def all_written(self) -> asyncio.Future[None]:
        """A future of the running loop, done once every frame queued before this call is in the
        client's pipe (or dropped: the client is gone). Work that may wait for an answer to reach the
        client (the LSP face's App opening after `initialize`) starts then, not while the writer
        thread still needs the GIL to write it."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self._cond:
            if self._done >= self._accepted or self.broken:
                fut.set_result(None)
            else:
                self._written_waiters.append((self._accepted, loop, fut))
        return fut

    def wait_input(self, fd: int | None = None) -> bool:
        """For the thread that reads stdin (never the event loop: it would stop the daemon), before
        it reads: block while the queue is over `hard_limit`. `fd` is that input: once its client
        closed it, return False at once, so the reader reads on to EOF and the face exits even
        though the client reads nothing (without `fd`, only the queue is waited for)."""
        with self._cond:
            while not (self.queued < self.hard_limit or self.broken or self._closed):
                if fd is not None and hung_up(fd):
                    return False
                self._cond.wait(HANGUP_CHECK if fd is not None else None)
            return True

    def drain(self, timeout: float) -> bool:
        """Block until everything queued is written (False on timeout); for shutting down."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._frames and not self._writing or self.broken, timeout)

    def close(self) -> None:
        """Stop taking frames; the thread writes what is queued and ends (the stream stays open:
        it belongs to the caller)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # ---- the writer thread ----------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                self._idle = True
                self._cond.wait_for(lambda: bool(self._frames) or self._closed)
                self._idle = False
                if not self._frames:
                    return
                batch = [self._frames.popleft()]
                size = len(batch[0])
                while self._frames and size + len(self._frames[0]) <= BATCH:
                    size += len(self._frames[0])
                    batch.append(self._frames.popleft())
                self._writing = True
                self._taken += 1
                self._cond.notify_all()  # the producer handing it over goes on
            try:
                self._out.write(batch[0] if len(batch) == 1 else b"".join(batch))
                self._out.flush()
            except (OSError, ValueError) as e:  # the client closed its end: nothing can reach it
                log.info("protocol stream closed: %s", e)
                with self._cond:
                    self.broken = True
                    self._frames.clear()
                    self.queued = 0
            with self._cond:
                self._writing = False
                if not self.broken:
                    self.queued -= size
                self._done = self._accepted if self.broken else self._done + size
                self._cond.notify_all()
                if self._written_waiters:
                    self._settle_written()
                if self.queued < self.limit and self._waiters:
                    waiters, self._waiters = self._waiters, []
                    for loop, fut in waiters:
                        with contextlib.suppress(RuntimeError):  # that loop is closed
                            loop.call_soon_threadsafe(_settle, fut)


    def _settle_written(self) -> None:
        """With the lock held: the `all_written` futures whose frames are all out."""
        left = []
        for mark, loop, fut in self._written_waiters:
            if mark <= self._done:
                with contextlib.suppress(RuntimeError):  # that loop is closed
                    loop.call_soon_threadsafe(_settle, fut)
            else:
                left.append((mark, loop, fut))
        self._written_waiters = left


async def written(out: object, timeout: float = 1.0) -> None:
    """At the end of serving: what an Outbox holds goes out (the client may still read) within
    `timeout`; a plain stream is written already."""
    if isinstance(out, Outbox):
        out.close()
        await asyncio.to_thread(out.drain, timeout)
