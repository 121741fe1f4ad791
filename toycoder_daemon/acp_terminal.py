"""run_command in the ACP client's terminal (`terminal/*`, when the client declared the capability).

The command (our sandbox launcher around the shell: tools/sandbox/command.Prepared.portable) is
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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from acp import RequestError
from acp.schema import EnvVariable
from pydantic import ValidationError

from .ports import CommandNotStarted, CommandOutput, CommandRequest
from .reply_wait import reply_within
from .tools.base import ToolError

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


class TerminalClient(Protocol):
    """The client methods used (the SDK's AgentSideConnection has them)."""

    async def create_terminal(self, session_id: str, command: str, args: list[str] | None = None,
                              env: list[EnvVariable] | None = None, cwd: str | None = None,
                              output_byte_limit: int | None = None, **kwargs: Any) -> Any: ...
    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any: ...
    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any: ...
    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any: ...
    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any: ...


@dataclass
class Terminals:
    """Per connection: whether the client's terminals are (still) used."""

    usable: bool


class TerminalFailed(ToolError):
    """The client failed the command after it started (the tool call fails with this)."""


class TerminalRunner:
    where = "the client's terminal"

    def __init__(self, client: TerminalClient, session_id: str, terminals: Terminals,
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
            await self._quietly("kill", self.client.kill_terminal, tid)
        await self._quietly("release", self.client.release_terminal, tid)

    async def _create(self, request: CommandRequest, limit: int) -> str:
        program, *args = request.argv
        env = [EnvVariable(name=k, value=v) for k, v in request.env.items()]
        creating = asyncio.ensure_future(self.client.create_terminal(
            self.session_id, program, args, env, request.cwd, limit))
        try:
            made = await reply_within(asyncio.shield(creating), CREATE_TIMEOUT)
            tid = getattr(made, "terminal_id", None)
            if not isinstance(tid, str) or not tid:
                raise ValueError(f"no terminalId in {made!r}")
            return tid
        except RequestError as e:  # only an error reply says it did not start
            self.terminals.usable = False
            raise CommandNotStarted(f"terminal/create failed: {e}") from None
        except (ValidationError, ValueError) as e:  # a success we cannot read: it may be running there
            self.terminals.usable = False
            if (found := _terminal_id_in(e)) is not None and await _through_cancels(self._end(found, kill=True)):
                raise asyncio.CancelledError from None
            raise TerminalFailed(f"{self.where} answered terminal/create with a malformed result ({_short(e)}); "
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
                status = await reply_within(self.client.wait_for_terminal_exit(self.session_id, tid), request.timeout)
            except asyncio.TimeoutError:
                timed_out = True
                await self._quietly("kill", self.client.kill_terminal, tid)
                status = await self._quietly("wait after kill", self.client.wait_for_terminal_exit, tid)
        except (RequestError, ValidationError) as e:
            raise TerminalFailed(f"{self.where} failed while the command ran: {e}") from None
        finally:
            poller.cancel()
        try:
            last = await reply_within(self.client.terminal_output(self.session_id, tid), CLEANUP_TIMEOUT)
        except (RequestError, ValidationError, asyncio.TimeoutError) as e:
            raise TerminalFailed(f"{self.where} did not give the command's output: {e}") from None
        code = getattr(status, "exit_code", None) if status is not None else None
        signal = getattr(status, "signal", None) if status is not None else None
        return CommandOutput(last.output, bool(last.truncated), first[0] if first else "", code, signal, timed_out)

    async def _poll_head(self, tid: str, wanted: int, first: list[str]) -> None:
        """Poll until the output holds `wanted` bytes (or the client truncated it: too late)."""
        delay = POLL[0]
        while True:
            await asyncio.sleep(delay)
            delay = min(POLL[1], delay * 2)
            try:
                seen = await self.client.terminal_output(self.session_id, tid)
            except Exception as e:  # only the start is lost: the command's end is still awaited
                log.debug("terminal/output while running: %s", e)
                return
            if seen.truncated:
                return
            first[:] = [seen.output]
            if len(seen.output.encode("utf-8")) >= wanted or seen.exit_status is not None:
                return

    async def _free_when_made(self, creating: asyncio.Future[Any]) -> None:
        with contextlib.suppress(Exception):
            made = await reply_within(creating, CLEANUP_TIMEOUT)
            await self._end(made.terminal_id, kill=True)

    def _free_late(self, creating: asyncio.Future[Any]) -> None:
        if creating.cancelled() or creating.exception() is not None:
            return
        tid = getattr(creating.result(), "terminal_id", None)
        if isinstance(tid, str):
            task = asyncio.ensure_future(self._end(tid, kill=True))
            _late.add(task)
            task.add_done_callback(_late.discard)

    async def _quietly(self, what: str, method: Callable[..., Any], tid: str) -> Any:
        """A cleanup step: bounded in time; a failure is logged, not raised (the others still run)."""
        try:
            return await reply_within(method(self.session_id, tid), CLEANUP_TIMEOUT)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.info("terminal %s %s: %s", tid, what, e)
            return None


def _terminal_id_in(error: Exception) -> str | None:
    """The terminalId of a malformed terminal/create answer (e.g. a number), to kill and release it."""
    if isinstance(error, ValidationError):
        for item in error.errors():
            value = item.get("input")
            if item.get("loc") in (("terminalId",), ("terminal_id",)) and isinstance(value, (str, int)) \
                    and not isinstance(value, bool) and str(value):
                return str(value)
    return None


def _short(error: Exception) -> str:
    if isinstance(error, ValidationError):
        return "; ".join(f"{'.'.join(map(str, i['loc'])) or 'result'}: {i['msg']}" for i in error.errors()[:3])
    return str(error)[:200]


def terminal_runner(client: Any, session_id: str, terminals: Terminals | None,
                    show: Callable[[str, str], None],
                    before: Callable[[], Awaitable[None]] | None = None) -> TerminalRunner | None:
    """The runner when the client declared terminals and they have not failed on this connection."""
    if terminals is None or not terminals.usable:
        return None
    return TerminalRunner(client, session_id, terminals, show, before)

