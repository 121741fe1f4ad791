"""run_command: a shell command in the workspace (dangerous: disabled until enabled, then it asks).

The command runs under /bin/sh -c in its own process group with stdin from /dev/null and an
environment without secrets. Timeout, cancel, the end of the command and the daemon's exit kill the
whole group. Output is capped keeping its head and tail. On Linux it runs under the OS sandbox
(sandbox/): writes confined, network off, and what it started ends with it (in a PID namespace
without exception; docs/security.md says what the subreaper fallback cannot promise). Unsandboxed
(`sandbox: false`, or no sandbox here) only the group is killed: what left it (`setsid`) keeps
running, and a daemon killed outright leaves the whole command running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from toycoder_daemon.core.ports import CommandNotStarted, CommandRequest, CommandRunner
from toycoder_daemon.core.util import secrets
from toycoder_daemon.tools.base import ToolContext, ToolError, tool

if TYPE_CHECKING:
    from toycoder_daemon.tools.shell.sandbox.command import Prepared

log = logging.getLogger(__name__)

KILL_GRACE = 2.0
KILL_TREE_LIMIT = 5.0
"""Seconds _stop keeps killing below a launcher before it gives up and KILLs the launcher."""

_live_groups: dict[int, int] = {}
"""Process groups of commands still running, with the signal that ends each when the daemon exits."""


def kill_all() -> None:
    """A sandboxed command's group gets TERM, not KILL: its launcher then ends the whole tree, also
    what left the group (setsid), and the daemon's death would TERM it anyway. A KILL would cut that
    clean-up short, and without a PID namespace nothing else ends what left the group."""
    for pgid, sig in list(_live_groups.items()):
        _kill_group(pgid, sig)
    _live_groups.clear()


class HeadTail:
    """Keeps the first and last `limit // 2` bytes of a stream and counts the rest.

    Each side also keeps a margin as long as the longest secret, so a key lying across a cut is
    redacted whole before the cut (secrets.clip); only the `limit // 2` bytes are shown."""

    def __init__(self, limit: int):
        self.half = max(1, limit // 2)
        self.keep = self.half + secrets.longest()
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.lost: str | None = None
        """Why an unknown part of the stream is missing after the head (gap())."""

    def gap(self, why: str) -> None:
        """What was fed so far is the start; what follows is the end; an unknown middle is lost."""
        self.lost = why

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.keep - len(self.head) if self.lost is None else 0
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.keep:
                del self.tail[: len(self.tail) - self.keep]

    def text(self) -> str:
        if self.lost is None and self.total <= len(self.head) + len(self.tail):  # all here: one text to clip
            whole = secrets.clip((self.head + self.tail).decode("utf-8", errors="replace"), self.half, self.half,
                                 in_bytes=True)
            first, last, cut = whole.head, whole.tail, whole.dropped
        else:
            head = self.head.decode("utf-8", errors="replace")
            tail = self.tail.decode("utf-8", errors="replace")
            first = "".join(secrets.clip(head, self.half, in_bytes=True, cut_after=True)[:2])
            last = "".join(secrets.clip(tail, 0, self.half, in_bytes=True, cut_before=True)[:2])
            cut = self.total - 2 * self.half  # bytes of the stream not shown
            if self.lost is not None:
                return f"{first}\n[... output cut from the middle ({self.lost}) ...]\n{last}"
        if cut <= 0:
            return first
        return f"{first}\n[... {cut} bytes of output cut from the middle ...]\n{last}"


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _kill_tree(root: int, *, within: float = KILL_TREE_LIMIT) -> None:
    """KILL every process below `root`, in or out of its group, until none is left (or `within`
    seconds pass). A sandbox launcher without a PID namespace is a subreaper, so what the command
    started and left the group (setsid) is still below it, and would outlive a KILL of the group
    that cut the launcher's own clean-up short. One pass is not enough: a process that forks and
    lets its parent exit changes pid faster than a walk; while the launcher lives its orphans come
    back below it, so repeating until nothing is left catches it. Each pass signals by pidfd (a
    reused pid is never signalled) and waits for one of its kills to land, longer each time."""
    from toycoder_daemon.tools.shell.sandbox import tree  # only on this rare path

    # The launcher may have exited and been reaped by now: its pid then names whoever took it, and
    # its start time (checked on every pass) tells them apart.
    launcher = tree.identify(root)
    if launcher is None:
        return
    deadline = time.monotonic() + within
    wait = tree.FIRST_WAIT
    while time.monotonic() < deadline and tree.kill_below(root, launcher[1], wait):
        wait = tree.next_wait(wait)


async def _stop(proc: asyncio.subprocess.Process, run: Prepared, grace: float = KILL_GRACE) -> None:
    """TERM the group, then KILL whatever is still there."""
    _kill_group(proc.pid, signal.SIGTERM)
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(proc.wait(), grace)
    if proc.returncode is None:  # still there after the grace: its tree first, while it is below it
        run.kill()  # its cgroup, when it has one: the walk below then finds nothing left running
        await asyncio.to_thread(_kill_tree, proc.pid)
    _kill_group(proc.pid, signal.SIGKILL)


async def _command_preview(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    # The policy rides in the command text too (as a shell comment) so every client shows it today.
    from toycoder_daemon.tools.shell.sandbox import (
        command as sandboxing,  # here: a new process' first turn rarely needs it (~5 ms)
    )

    policy = await sandboxing.preview(ctx.settings, ctx.workspace.root, args)
    return {"kind": "command", "command": f"{args['command']}\n# {policy}", "cwd": str(ctx.workspace.root),
            "sandbox": policy}


def _title(args: dict[str, Any]) -> str:
    command = " ".join(str(args.get("command", "")).split())
    return f"run_command {command[:80]}{'…' if len(command) > 80 else ''}"


@tool(level="dangerous", title=_title, preview=_command_preview)
async def run_command(
    ctx: ToolContext,
    command: Annotated[str, "Shell command, run with /bin/sh -c in the workspace root"],
    timeout: Annotated[float | None, "Seconds before the command is killed (default and maximum from config)"] = None,
    sandbox: Annotated[bool, "false to run unsandboxed after the sandbox blocked a needed write (asks)"] = True,
    network: Annotated[bool, "true when the command needs the network (asks)"] = False,
) -> str:
    """Run a shell command in the workspace root and return its exit code and output (stdout and
    stderr together, long output shortened in the middle). It has no stdin; it is killed with
    everything it started when it times out. Use it for builds, tests, git and other CLI tools. On Linux
    it normally runs sandboxed: writes only in the workspace and $TMPDIR, no network, .git read-only."""
    s = ctx.settings
    default, ceiling, limit = s.command_timeout, s.command_max_timeout, s.output_max_bytes
    seconds = min(timeout if timeout and timeout > 0 else default, ceiling)
    started = time.monotonic()
    from toycoder_daemon.tools.shell.sandbox import command as sandboxing

    try:
        run = await sandboxing.prepare(s, ctx.workspace.root, command, {"sandbox": sandbox, "network": network})
    except sandboxing.SandboxRefused as e:
        raise ToolError(str(e)) from None
    try:
        runner = ctx.frontend.command_runner() if sys.platform.startswith("linux") else None  # our launcher: Linux
        if runner is not None:
            try:
                return await _run_elsewhere(runner, run, ctx, command, seconds, limit, started)
            except CommandNotStarted as e:  # it did not run there: here, as if no runner was offered
                log.debug("run_command runs locally: %s could not start it (%s)", runner.where, e)
        return await _run(run, ctx, command, seconds, limit, started)
    finally:
        await run.cleanup()


async def _run_elsewhere(runner: CommandRunner, run: Prepared, ctx: ToolContext, command: str,
                         seconds: float, limit: int, started: float) -> str:
    """Through the frontend's runner (the ACP client's terminal), wrapped in our launcher."""
    out = HeadTail(limit)
    done = await runner.run(CommandRequest(ctx.tool_call_id, tuple(run.portable()), run.env,
                                           run.portable_cwd, seconds, out.keep))
    if done.truncated:  # the runner kept only the end: the start as first seen, then a gap
        out.feed(done.head.encode("utf-8")[:out.keep])
        out.gap(f"{runner.where} kept only the end of the output")
    out.feed(done.output.encode("utf-8"))
    elapsed = time.monotonic() - started
    if done.timed_out:
        status = f"timed out after {seconds:g}s; the command and everything it started were killed"
    elif done.exit_code is None:
        status = f"killed by signal {done.signal or 'unknown'} ({elapsed:.1f}s)"
    else:
        status = f"exit code {done.exit_code} ({elapsed:.1f}s)"
    return _observation(run, ctx, command, status, out)


def _observation(run: Prepared, ctx: ToolContext, command: str, status: str, out: HeadTail) -> str:
    body = out.text().rstrip("\n") or "(no output)"
    notes = run.observation(out.text(), str(ctx.workspace.root))
    return f"$ {command}\n{status}\n{body}" + (f"\n{notes}" if notes else "")


async def _run(run: Prepared, ctx: ToolContext, command: str, seconds: float, limit: int,
               started: float) -> str:
    spawn = asyncio.ensure_future(asyncio.create_subprocess_exec(
        *run.argv, cwd=run.cwd, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=run.env,
        start_new_session=True,
    ))
    try:
        proc = await asyncio.shield(spawn)
    except asyncio.CancelledError:
        # Cancelled while the pipes were being set up: the process exists and may have started the
        # command; end it as any cancel does (TERM first: a launcher then ends what left the group).
        proc = await spawn
        await asyncio.shield(_stop(proc, run))
        raise
    _live_groups[proc.pid] = signal.SIGTERM if run.spec is not None else signal.SIGKILL
    out = HeadTail(limit)

    async def pump() -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(65536):
            out.feed(chunk)

    reader = asyncio.ensure_future(pump())
    timed_out = False
    try:
        await asyncio.wait_for(proc.wait(), seconds)
    except asyncio.TimeoutError:
        timed_out = True
        await _stop(proc, run)
    except asyncio.CancelledError:
        await asyncio.shield(_stop(proc, run))
        _live_groups.pop(proc.pid, None)
        reader.cancel()
        raise
    # Background children still hold the pipe open: the command is over, so they go too.
    _kill_group(proc.pid, signal.SIGKILL)
    _live_groups.pop(proc.pid, None)
    try:
        await asyncio.wait_for(reader, KILL_GRACE)
    except asyncio.TimeoutError:
        reader.cancel()
    elapsed = time.monotonic() - started
    if timed_out:
        status = f"timed out after {seconds:g}s; the command and everything it started were killed"
    else:
        status = f"exit code {proc.returncode} ({elapsed:.1f}s)"
    return _observation(run, ctx, command, status, out)


# ---- a command fed on stdin, its streams kept apart (hooks: agent/hooks/) ---------------------

@dataclass
class Finished:
    """How a command run by `run_fed` ended, with the start of each stream."""

    exit_code: int | None
    """None when it timed out or was killed by a signal."""
    stdout: bytes
    stderr: bytes
    stdout_cut: int = 0
    """Bytes of stdout past the cap that were dropped (likewise stderr_cut)."""
    stderr_cut: int = 0
    timed_out: bool = False


async def run_fed(run: Prepared, stdin: bytes, seconds: float, cap: int, *, grace: float = KILL_GRACE) -> Finished:
    """Run a prepared command (sandbox.command.prepare) with `stdin`, in its own process group, keeping
    the first `cap` bytes of stdout and of stderr. At `seconds` the group gets TERM, `grace` seconds
    later KILL (with the tree below a sandbox launcher), as run_command's own commands; a cancel
    does the same, and the daemon's exit kills it (kill_all)."""
    # create_subprocess_exec's own two steps, so the transport is ours to close: a pipe something
    # outside the group still holds would leave it to the garbage collector, after the loop closed
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.subprocess_exec(
        lambda: asyncio.subprocess.SubprocessStreamProtocol(limit=2 ** 16, loop=loop),
        *run.argv, cwd=run.cwd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=run.env, start_new_session=True)
    proc = asyncio.subprocess.Process(transport, protocol, loop)
    try:
        return await _fed(proc, run, stdin, seconds, cap, grace)
    finally:
        transport.close()


async def _fed(proc: asyncio.subprocess.Process, run: Prepared, stdin: bytes, seconds: float, cap: int,
               grace: float) -> Finished:
    _live_groups[proc.pid] = signal.SIGTERM if run.spec is not None else signal.SIGKILL
    kept = {"out": bytearray(), "err": bytearray()}
    cut = {"out": 0, "err": 0}

    async def pump(stream: asyncio.StreamReader | None, name: str) -> None:
        assert stream is not None
        while chunk := await stream.read(65536):
            room = cap - len(kept[name])
            kept[name] += chunk[:max(room, 0)]
            cut[name] += max(len(chunk) - max(room, 0), 0)

    async def feed() -> None:
        assert proc.stdin is not None
        try:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # it need not read its input
                proc.stdin.write(stdin)
                await proc.stdin.drain()
        finally:
            proc.stdin.close()  # also when it exited first: an open pipe would outlive the process

    readers = [asyncio.ensure_future(pump(proc.stdout, "out")), asyncio.ensure_future(pump(proc.stderr, "err")),
               asyncio.ensure_future(feed())]
    timed_out = False
    try:
        await asyncio.wait_for(proc.wait(), seconds)
    except asyncio.TimeoutError:
        timed_out = True
        await _stop(proc, run, grace)
    except asyncio.CancelledError:
        await asyncio.shield(_stop(proc, run, grace))
        _live_groups.pop(proc.pid, None)
        await asyncio.shield(asyncio.wait(readers, timeout=KILL_GRACE))  # run_fed closes the transport then
        for r in readers:
            r.cancel()
        raise
    _kill_group(proc.pid, signal.SIGKILL)  # what it left in the background goes with it
    _live_groups.pop(proc.pid, None)
    done, pending = await asyncio.wait(readers, timeout=KILL_GRACE)
    for r in pending:
        r.cancel()
    code = None if timed_out or proc.returncode is None or proc.returncode < 0 else proc.returncode
    return Finished(code, bytes(kept["out"]), bytes(kept["err"]), cut["out"], cut["err"], timed_out)
