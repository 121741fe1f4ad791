"""The protocol channel's writer thread (outbox.py) on a real pipe, in-process: order kept, the
queue's limits (turns wait above `limit`, input waits above `hard_limit`), a closed client end."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest
from waiting import wait_until, wait_until_async

from toycoder_daemon.rpc.outbox import Outbox


def pipe() -> tuple[int, object]:
    r, w = os.pipe()
    return r, os.fdopen(w, "wb")


def read_exactly(fd: int, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = os.read(fd, n - len(out))
        assert chunk, "the pipe closed early"
        out += chunk
    return bytes(out)


def test_frames_arrive_whole_and_in_order() -> None:
    r, w = pipe()
    box = Outbox(w)  # type: ignore[arg-type]
    frames = [b"%d:" % i + b"x" * (i * 37 % 5000) + b"\n" for i in range(2000)]
    for f in frames:
        box.write(f)
    assert read_exactly(r, sum(map(len, frames))) == b"".join(frames)
    assert box.drain(10) and box.queued == 0
    os.close(r)


def test_a_frame_for_the_idle_writer_is_handed_over_before_write_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The producer waits (at most HANDOVER) until the idle thread has the frame, so a loop that keeps
    the GIL afterwards does not hold the frame back; with the thread busy, write only queues."""
    import toycoder_daemon.rpc.outbox as outbox

    monkeypatch.setattr(outbox, "HANDOVER", 30.0)  # generous: no timing is asserted
    r, w = pipe()
    box = Outbox(w)  # type: ignore[arg-type]
    wait_until(lambda: box._idle, 10, "the writer thread to wait for frames")
    box.write(b"first\n")
    assert box._taken == 1  # taken before write returned
    assert read_exactly(r, 6) == b"first\n"
    assert box.drain(10)
    os.close(r)


async def test_a_full_queue_holds_the_producer_until_the_client_reads() -> None:
    r, w = pipe()
    box = Outbox(w, limit=256 * 1024)  # type: ignore[arg-type]
    frame = b"y" * 4096
    for _ in range(200):  # 800 KiB: the pipe takes 64 KiB, the rest stays queued
        box.write(frame)
    await wait_until_async(lambda: box.queued < 200 * 4096, 10, "the writer to fill the pipe")
    assert box.full()
    waiter = asyncio.ensure_future(box.room())
    done, _ = await asyncio.wait({waiter}, timeout=0.2)  # a steady state observed, not a wait for one
    assert not done  # nothing reads: the producer waits
    box.write(b"an answer still queues\n")  # answers are not held back
    got = await asyncio.to_thread(read_exactly, r, 200 * 4096 + 23)
    await asyncio.wait_for(waiter, 10)
    assert got.endswith(b"an answer still queues\n") and not box.full()
    os.close(r)


def test_input_waits_above_the_hard_limit() -> None:
    r, w = pipe()
    box = Outbox(w, limit=64 * 1024, hard_limit=512 * 1024)  # type: ignore[arg-type]
    for _ in range(256):  # 1 MiB queued and nothing read
        box.write(b"z" * 4096)
    passed = threading.Event()

    def reader() -> None:
        box.wait_input()
        passed.set()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    assert not passed.wait(0.2)  # the reader thread is held (a bounded check of a steady state)
    read_exactly(r, 256 * 4096)
    wait_until(passed.is_set, 10, "the reader to be let through")
    os.close(r)


async def test_a_closed_client_end_drops_frames_and_frees_waiters() -> None:
    r, w = pipe()
    box = Outbox(w, limit=16 * 1024)  # type: ignore[arg-type]
    for _ in range(64):
        box.write(b"q" * 4096)
    await wait_until_async(box.full, 10, "the queue to fill")
    waiter = asyncio.ensure_future(box.room())
    os.close(r)  # the client goes away: the blocked write fails with EPIPE
    await asyncio.wait_for(waiter, 10)
    assert box.broken and box.queued == 0 and not box.full()
    box.write(b"dropped")
    assert box.queued == 0 and box.drain(1)


async def test_all_written_waits_for_what_was_queued_before_it() -> None:
    """`all_written` is done once every frame queued before it is in the pipe, not when it is
    queued: with the pipe full, a frame stays in the writer and the future waits; frames queued
    after the call are not waited for."""
    r, w = pipe()
    box = Outbox(w)  # type: ignore[arg-type]
    assert (await asyncio.wait_for(box.all_written(), 10)) is None  # nothing queued: done at once
    filler = b"f" * (256 * 1024)  # more than the pipe takes: the writer blocks in write
    box.write(filler)
    box.write(b"the answer\n")
    written = box.all_written()
    box.write(b"later\n")
    await wait_until_async(lambda: box._writing, 10, "the writer to start on the filler")
    done, _ = await asyncio.wait({written}, timeout=0.2)  # a steady state observed, not a wait for one
    assert not done  # the answer is not in the pipe: nothing reads
    got = await asyncio.to_thread(read_exactly, r, len(filler) + 11)
    assert got.endswith(b"the answer\n")
    await asyncio.wait_for(written, 10)
    assert await asyncio.to_thread(read_exactly, r, 6) == b"later\n"
    os.close(r)


async def test_all_written_is_done_when_the_client_is_gone() -> None:
    r, w = pipe()
    box = Outbox(w)  # type: ignore[arg-type]
    box.write(b"x" * (256 * 1024))
    written = box.all_written()
    os.close(r)  # the write fails: the frames are dropped, nothing will ever be written
    await asyncio.wait_for(written, 10)
    assert box.broken
