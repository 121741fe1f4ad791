"""Waiting for a client's reply (permission, a question) with a timeout, in a way that lets a
cancellation of the turn win over a reply that arrives at the same moment.

`asyncio.wait_for` before Python 3.12 runs the awaited thing in a task of its own; when the waiting
task is cancelled in the loop iteration in which that inner task finishes, it returns the result
and drops the cancellation (a client that sends session/cancel and at once answers the permission
request "cancelled" got its answer taken as a denial, and the turn went on). Here the reply is
awaited in the caller's own task, so a cancel is always delivered: `asyncio.timeout` on 3.11+, and
on 3.10 a timer that cancels the task and is told apart from an outside cancel by a flag.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def reply_within(reply: Awaitable[T], timeout: float) -> T:
    """`await reply`, raising TimeoutError after `timeout` seconds; a cancel of the current task
    always propagates as CancelledError, whatever the reply did meanwhile."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(timeout):
            return await reply
    return await _reply_within_310(reply, timeout)


async def _reply_within_310(reply: Awaitable[T], timeout: float) -> T:
    task = asyncio.current_task()
    assert task is not None
    expired = False

    def expire() -> None:
        nonlocal expired
        expired = True
        task.cancel()

    timer = asyncio.get_running_loop().call_later(timeout, expire)
    try:
        return await reply
    except asyncio.CancelledError:
        if expired:  # (a cancel that coincides with the timer counts as the timeout: a rejection)
            raise asyncio.TimeoutError from None
        raise
    finally:
        timer.cancel()
