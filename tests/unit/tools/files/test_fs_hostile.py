"""Hostile workspaces against the file tools (issue 13): names that are not UTF-8, FIFOs and
sockets, a huge one-line file, and a directory swapped for a symlink to outside mid-call."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import AllowAll
from waiting import scaled

from toycoder_daemon.core.util import secrets
from toycoder_daemon.core.util.atomic import SymlinkInPath, atomic_write
from toycoder_daemon.tools.base import ToolContext
from toycoder_daemon.tools.escape import NAME_NOTE
from toycoder_daemon.tools.files.edit import edit_file, write_file
from toycoder_daemon.tools.files.read import LINE_CAP, list_directory, read_file
from toycoder_daemon.tools.registry import ToolOutcome, ToolRegistry
from toycoder_daemon.tools.search.tools import glob_search, grep_search
from toycoder_daemon.tools.workspace import Workspace


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    return root


async def call(ws: Path, name: str, **args: object) -> ToolOutcome:
    reg = ToolRegistry()
    for t in (read_file, list_directory, write_file, edit_file, glob_search, grep_search):
        reg.register(t)
    return await reg.dispatch(name, json.dumps(args), ToolContext(Workspace(ws), AllowAll(), "c1"))


def encodes(out: ToolOutcome) -> str:
    out.output.encode("utf-8")  # what the session file, the wire and the provider do with it
    return out.output


# -- 1. names that are not UTF-8, lone surrogates from the model ----------------------------------

async def test_latin1_names_are_listed_escaped_and_open_as_shown(ws: Path) -> None:
    (ws / os.fsdecode(b"caf\xe9.txt")).write_text("hello there\n")
    listing = encodes(await call(ws, "list_directory"))
    assert "file  caf\\xe9.txt  (12 bytes)" in listing and NAME_NOTE in listing
    found = encodes(await call(ws, "glob_search", pattern="*.txt"))
    assert found.splitlines() == ["caf\\xe9.txt", NAME_NOTE]
    hits = encodes(await call(ws, "grep_search", pattern="hello"))
    assert hits.splitlines() == ["caf\\xe9.txt:1: hello there", NAME_NOTE]
    read = await call(ws, "read_file", path="caf\\xe9.txt")  # as the listing showed it
    assert read.status == "completed" and encodes(read).endswith("     1\thello there")
    assert read.output.startswith("caf\\xe9.txt: lines 1-1 of 1")


async def test_a_lone_surrogate_in_a_model_path_fails_the_call_not_the_session(ws: Path) -> None:
    out = await call(ws, "read_file", path="nope\udcff.txt")
    assert out.status == "failed" and "nope\\xff.txt" in encodes(out)
    out = await call(ws, "write_file", path="bad\ud800.txt", content="x")
    assert out.status == "failed" and "bad\\ud800.txt" in encodes(out) and "not a possible file name" in out.output
    out = await call(ws, "edit_file", path="nope\udcff.txt", old_string="a", new_string="b")
    assert out.status == "failed" and "nope\\xff.txt" in encodes(out)


# -- 2. special files ------------------------------------------------------------------------------

@contextlib.contextmanager
def unblocked_after(fifo: Path, seconds: float) -> Iterator[list[str]]:
    """If the code under test blocks on `fifo` for `seconds`, open its other end so it returns
    (and the test can fail instead of hanging); the list says whether that was needed."""
    done = threading.Event()
    freed: list[str] = []

    def guard() -> None:
        if done.wait(seconds):
            return
        freed.append("blocked")
        while not done.is_set():
            for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_RDONLY | os.O_NONBLOCK):
                with contextlib.suppress(OSError):
                    os.close(os.open(fifo, flags))
            done.wait(0.05)

    t = threading.Thread(target=guard, daemon=True)
    t.start()
    try:
        yield freed
    finally:
        done.set()
        t.join()


async def test_fifo_is_refused_by_every_file_tool_without_blocking(ws: Path) -> None:
    fifo = ws / "pipe"
    os.mkfifo(fifo)
    with unblocked_after(fifo, scaled(3)) as freed:
        outs = [await call(ws, "read_file", path="pipe"),
                await call(ws, "write_file", path="pipe", content="x"),
                await call(ws, "edit_file", path="pipe", old_string="a", new_string="b")]
    assert freed == [], "a file tool blocked on the FIFO"
    for out in outs:
        assert out.status == "failed" and "is a FIFO (named pipe), not a regular file" in out.output, out.output
    assert fifo.is_fifo()
    listing = (await call(ws, "list_directory")).output
    assert "other pipe  (a FIFO (named pipe))" in listing


async def test_fifo_gitignore_blocks_neither_the_loop_nor_cancel(ws: Path) -> None:
    (ws / "sub" / "deeper").mkdir(parents=True)
    (ws / "sub" / "deeper" / "a.txt").write_text("needle\n")
    os.mkfifo(ws / "sub" / ".gitignore")
    with unblocked_after(ws / "sub" / ".gitignore", scaled(5)) as freed:
        search = asyncio.ensure_future(call(ws, "grep_search", pattern="needle", path="sub/deeper"))
        other = await call(ws, "read_file", path="sub/deeper/a.txt")  # runs while the search waits
        search.cancel()  # rg itself may wait on the FIFO: cancelling kills it
        with contextlib.suppress(asyncio.CancelledError):
            await search
    assert freed == [], "the FIFO .gitignore blocked the event loop"
    assert other.status == "completed"


async def test_socket_is_refused(ws: Path) -> None:
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(ws / "sock"))
        out = await call(ws, "read_file", path="sock")
        assert out.status == "failed" and "is a socket, not a regular file" in out.output
        out = await call(ws, "edit_file", path="sock", old_string="a", new_string="b")
        assert out.status == "failed" and "is a socket" in out.output


# -- 4. a huge one-line file -----------------------------------------------------------------------

async def test_a_huge_line_is_read_in_bounded_memory_and_a_key_at_the_cut_is_redacted(ws: Path) -> None:
    key = "sk-fs13-" + "k" * 28
    secrets.register([key])
    try:
        size = 48 * 1024 * 1024
        with (ws / "min.js").open("w") as f:
            f.write("x" * (LINE_CAP - 10) + key)  # the key crosses the cut
            f.write("y" * (size - LINE_CAP - len(key) + 10))
        tracemalloc.start()
        out = await call(ws, "read_file", path="min.js")
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    finally:
        secrets._values.discard(key)
    assert out.status == "completed"
    assert peak < 8 * 1024 * 1024, f"reading used {peak} bytes"
    head, line = out.output.splitlines()
    assert head == "min.js: lines 1-1 of 1"
    # redacted before the cut: the key is *** whole, and the count is of the redacted line
    dropped = size - len(key) + len("***") - LINE_CAP
    assert line == ("     1\t" + "x" * (LINE_CAP - 10) + "***" + "y" * 7
                    + f" [... {dropped} more characters on this line]")


async def test_lines_after_a_cut_line_are_numbered_and_whole(ws: Path) -> None:
    (ws / "f.txt").write_bytes(b"a" * 200_000 + b"\r\nsecond\r\n\nlast")
    out = (await call(ws, "read_file", path="f.txt")).output.splitlines()
    assert out[0] == "f.txt: lines 1-4 of 4"
    assert out[1] == "     1\t" + "a" * LINE_CAP + f" [... {200_000 - LINE_CAP} more characters on this line]"
    assert out[2:] == ["     2\tsecond", "     3\t", "     4\tlast"]


# -- 6. a directory swapped for a symlink to outside ---------------------------------------------

def swapper(ws: Path, outside: Path, stop: threading.Event) -> None:
    """Keep swapping ws/sub between the real directory and a symlink to `outside`."""
    real, link = ws / ".real", ws / ".link"
    n = 0
    while not stop.is_set():
        with contextlib.suppress(OSError):
            if not link.is_symlink() and not (ws / "sub").is_symlink():
                os.symlink(outside, link)
            os.rename(ws / "sub", real)
            os.rename(link, ws / "sub")
            os.rename(ws / "sub", link)
            os.rename(real, ws / "sub")
        if (ws / "sub").is_dir() and not (ws / "sub").is_symlink() and real.exists():
            n += 1  # a tool made a new sub/ in the gap: put it aside, keep swapping
            with contextlib.suppress(OSError):
                os.rename(ws / "sub", ws / f".made{n}")
                os.rename(real, ws / "sub")


async def test_a_swapped_directory_never_leads_a_read_or_a_write_outside(tmp_path: Path, ws: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("OUTSIDE SECRET\n")
    (ws / "sub").mkdir()
    (ws / "sub" / "f.txt").write_text("inside\n")
    stop = threading.Event()
    t = threading.Thread(target=swapper, args=(ws, outside, stop), daemon=True)
    t.start()
    try:
        statuses: set[str] = set()
        for i in range(300):
            read = await call(ws, "read_file", path="sub/f.txt")
            assert "OUTSIDE" not in read.output, f"read {i} returned the outside file"
            wrote = await call(ws, "write_file", path=f"sub/w{i}.txt", content="x")
            statuses.add(read.status)
            statuses.add(wrote.status)
    finally:
        stop.set()
        t.join()
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"], "a write landed outside"
    assert (outside / "f.txt").read_text() == "OUTSIDE SECRET\n"
    assert "completed" in statuses  # the swaps did not simply make every call fail


def test_atomic_write_nofollow_refuses_a_symlink_in_the_path_and_keeps_the_mode(tmp_path: Path) -> None:
    base = tmp_path.resolve()
    (base / "out").mkdir()
    (base / "ws").mkdir()
    os.symlink(base / "out", base / "ws" / "d")
    with pytest.raises(SymlinkInPath):
        atomic_write(base / "ws" / "d" / "new" / "f.txt", b"x", nofollow=True, parents=True)
    assert list((base / "out").iterdir()) == []
    target = base / "ws" / "a" / "b" / "f.sh"
    atomic_write(target, b"one", nofollow=True, parents=True)
    target.chmod(0o751)
    atomic_write(target, b"two", nofollow=True, keep_mode=True)
    assert target.read_bytes() == b"two" and (target.stat().st_mode & 0o777) == 0o751
    assert sorted(p.name for p in target.parent.iterdir()) == ["f.sh"]  # no temp file left behind
