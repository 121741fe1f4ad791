"""run_command in the ACP client's terminal (`terminal/*`, when the client declared the capability).

The command (our sandbox launcher around the shell: tools/shell/sandbox/command.Prepared.portable) is
started with `terminal/create`; the tool call shows the terminal live (`{"type": "terminal"}`
content); we wait for its exit with our timeout, polling `terminal/output` meanwhile only until we
hold the output's start (the client keeps just the end once its byte limit is reached); on timeout
or cancel it is killed, and it is released in every case.

Errors: a `terminal/create` the client answers with a JSON-RPC error (method not found...) means
the command did not start: CommandNotStarted, run_command runs it locally, and this connection
stops using terminals (said once, at debug). A success we cannot read (no string terminalId) may
have started it: the tool call fails (TerminalFailed), the terminal is killed and released when its
id can be read at all, and this connection stops using terminals. After the command started, an
error fails the tool call (running it again locally could run it twice).

Replies are read as the schema types them, more strictly than the SDK's models (which coerce):
terminal/output needs a string `output` and a boolean `truncated` (`"false"` or `0` is malformed:
the tool call fails); in terminal/wait_for_exit only a non-negative integer `exitCode` is a code
(`3.0`, `"3"` or `true` read as none) and only a string `signal` is one. Clients built on the TS SDK
send plain JSON numbers and booleans (tests/acp_ts_client: a child's exit code and signal as Node
gives them), so they read the same either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from toycoder_daemon.core.ports import CommandNotStarted, CommandOutput, CommandRequest
from toycoder_daemon.faces.acp.client import ClientError, MalformedReply, RawClient, field
from toycoder_daemon.rpc.reply_wait import reply_within
from toycoder_daemon.tools.base import ToolError

log = logging.getLogger(__name__)

CREATE_TIMEOUT = 30.0
"""Seconds for terminal/create's answer; later, the command may be running: the call fails."""
CLEANUP_TIMEOUT = 5.0
"""Seconds for each of kill, the exit after it, the last output and release."""
POLL = (0.1, 1.0)
"""First and longest interval between terminal/output polls while the output's start is not held."""
MIN_OUTPUT_LIMIT = 1 << 20
"""outputByteLimit asked of the client: at least this, and four times the model's share."""


_late: set[asyncio.Task[None]] = set()
"""Kill-and-release of terminals created after we stopped waiting (kept referenced until done)."""


async def _through_cancels(cleanup: Coroutine[Any, Any, None]) -> bool:
    """Run `cleanup` to its end even when the task is cancelled meanwhile (a cancelled prompt is
    cancelled again by its request; every step is bounded in time); True if a cancel came."""
    task = asyncio.ensure_future(cleanup)
    cancelled = False
    while True:
        try:
            await asyncio.shield(task)
            return cancelled
        except asyncio.CancelledError:
            if task.done():
                return True
            cancelled = True


@dataclass
class Output:
    """A terminal/output answer."""

    output: str
    truncated: bool
    exited: bool


@dataclass
class Terminals:
    """Per connection: whether the client's terminals are (still) used."""

    usable: bool


class TerminalFailed(ToolError):
    """The client failed the command after it started (the tool call fails with this)."""


class TerminalRunner:
    where = "the client's terminal"

    def __init__(self, client: RawClient, session_id: str, terminals: Terminals,
                 show: Callable[[str, str], None], before: Callable[[], Awaitable[None]] | None = None):
        self.client = client
        self.session_id = session_id
        self.terminals = terminals
        self.show = show
        """show(tool_call_id, terminal_id): put the terminal into the tool call's content."""
        self.before = before
        """Awaited before terminal/create: the updates sent so far (the tool call) go out first."""

    async def run(self, request: CommandRequest) -> CommandOutput:
        if self.before is not None:
            await self.before()
        limit = max(MIN_OUTPUT_LIMIT, 4 * request.head_bytes)
        tid = await self._create(request, limit)
        stopped = False
        try:
            self.show(request.tool_call_id, tid)
            return await self._follow(tid, request)
        except asyncio.CancelledError:
            stopped = True
            raise
        finally:  # always, even cancelled: a terminal we leave is never freed
            if await _through_cancels(self._end(tid, kill=stopped)):
                raise asyncio.CancelledError

    async def _end(self, tid: str, *, kill: bool) -> None:
        if kill:
            await self._quietly("kill", tid)
        await self._quietly("release", tid)

    def _call(self, method: str, tid: str) -> Coroutine[Any, Any, Any]:
        """terminal/kill, release, output or wait_for_exit."""
        return self.client.request(f"terminal/{method}", {"sessionId": self.session_id, "terminalId": tid})

    async def _output(self, tid: str) -> Output:
        got = await self._call("output", tid)
        return Output(field(got, "output", str, "terminal/output"), field(got, "truncated", bool, "terminal/output"),
                      isinstance(got.get("exitStatus"), dict))

    async def _exit(self, tid: str) -> tuple[int | None, str | None]:
        """(exit code, signal) of terminal/wait_for_exit; values it cannot read are None, as the SDK has it."""
        got = await self._call("wait_for_exit", tid)
        if not isinstance(got, dict):
            raise MalformedReply(f"terminal/wait_for_exit: the result is not an object: {str(got)[:100]}")
        code, signal = got.get("exitCode"), got.get("signal")
        return (code if isinstance(code, int) and not isinstance(code, bool) and code >= 0 else None,
                signal if isinstance(signal, str) else None)

    async def _create(self, request: CommandRequest, limit: int) -> str:
        program, *args = request.argv
        env = [{"name": k, "value": v} for k, v in request.env.items()]
        creating = asyncio.ensure_future(self.client.request("terminal/create", {
            "sessionId": self.session_id, "command": program, "args": args, "env": env, "cwd": request.cwd,
            "outputByteLimit": limit}))
        try:
            made = await reply_within(asyncio.shield(creating), CREATE_TIMEOUT)
            tid = _terminal_id(made)
            if not tid:
                raise MalformedReply(f"no terminalId in {str(made)[:100]}")
            return tid
        except ClientError as e:  # only an error reply says it did not start
            self.terminals.usable = False
            raise CommandNotStarted(f"terminal/create failed: {e}") from None
        except MalformedReply as e:  # a success we cannot read: it may be running there
            self.terminals.usable = False
            if (found := _terminal_id(made, loose=True)) and await _through_cancels(self._end(found, kill=True)):
                raise asyncio.CancelledError from None
            raise TerminalFailed(f"{self.where} answered terminal/create with a malformed result ({e}); "
                                 "the command may have run there, so it was not run again here (this connection "
                                 "runs later commands locally)") from None
        except asyncio.CancelledError:  # the client may be starting it: wait (bounded) and free it
            await _through_cancels(self._free_when_made(creating))
            raise
        except asyncio.TimeoutError:
            creating.add_done_callback(self._free_late)  # if it ever comes
            raise TerminalFailed(f"{self.where} did not answer terminal/create in {CREATE_TIMEOUT:g}s; "
                                 "the command may have started there") from None

    async def _follow(self, tid: str, request: CommandRequest) -> CommandOutput:
        first: list[str] = []  # the longest untruncated output seen: the stream's start
        poller = asyncio.ensure_future(self._poll_head(tid, request.head_bytes, first))
        timed_out = False
        try:
            try:
                code, signal = await reply_within(self._exit(tid), request.timeout)
            except asyncio.TimeoutError:
                timed_out = True
                await self._quietly("kill", tid)
                code, signal = await self._quietly("wait_for_exit", tid, self._exit) or (None, None)
        except (ClientError, MalformedReply) as e:
            raise TerminalFailed(f"{self.where} failed while the command ran: {e}") from None
        finally:
            poller.cancel()
        try:
            last = await reply_within(self._output(tid), CLEANUP_TIMEOUT)
        except (ClientError, MalformedReply, asyncio.TimeoutError) as e:
            raise TerminalFailed(f"{self.where} did not give the command's output: {e}") from None
        return CommandOutput(last.output, last.truncated, first[0] if first else "", code, signal, timed_out)

    async def _poll_head(self, tid: str, wanted: int, first: list[str]) -> None:
        """Poll until the output holds `wanted` bytes (or the client truncated it: too late)."""
        delay = POLL[0]
        while True:
            await asyncio.sleep(delay)
            delay = min(POLL[1], delay * 2)
            try:
                seen = await self._output(tid)
            except Exception as e:  # only the start is lost: the command's end is still awaited
                log.debug("terminal/output while running: %s", e)
                return
            if seen.truncated:
                return
            first[:] = [seen.output]
            if len(seen.output.encode("utf-8")) >= wanted or seen.exited:
                return

    async def _free_when_made(self, creating: asyncio.Future[Any]) -> None:
        with contextlib.suppress(Exception):
            tid = _terminal_id(await reply_within(creating, CLEANUP_TIMEOUT))
            if tid:
                await self._end(tid, kill=True)

    def _free_late(self, creating: asyncio.Future[Any]) -> None:
        if creating.cancelled() or creating.exception() is not None:
            return
        tid = _terminal_id(creating.result())
        if tid:
            task = asyncio.ensure_future(self._end(tid, kill=True))
            _late.add(task)
            task.add_done_callback(_late.discard)

    async def _quietly(self, what: str, tid: str, read: Callable[[str], Awaitable[Any]] | None = None) -> Any:
        """A cleanup step (terminal/`what`, its answer read by `read`): bounded in time; a failure is
        logged, not raised (the others still run)."""
        try:
            return await reply_within(read(tid) if read else self._call(what, tid), CLEANUP_TIMEOUT)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.info("terminal %s %s: %s", tid, what, e)
            return None


def _terminal_id(made: Any, *, loose: bool = False) -> str | None:
    """The terminalId of a terminal/create answer; `loose`: also a number (a malformed answer's id,
    to kill and release it)."""
    tid = made.get("terminalId") if isinstance(made, dict) else None
    if loose and isinstance(tid, int) and not isinstance(tid, bool):
        return str(tid)
    return tid if isinstance(tid, str) and tid else None


def terminal_runner(client: RawClient, session_id: str, terminals: Terminals | None,
                    show: Callable[[str, str], None],
                    before: Callable[[], Awaitable[None]] | None = None) -> TerminalRunner | None:
    """The runner when the client declared terminals and they have not failed on this connection."""
    if terminals is None or not terminals.usable:
        return None
    return TerminalRunner(client, session_id, terminals, show, before)

