"""The one way tests wait: poll a predicate until it holds or a deadline passes.

    wait_until(predicate, timeout, what)              # sync; returns the truthy value
    await wait_until_async(predicate, timeout, what)  # async; the predicate may be a coroutine function

A test never sleeps a fixed time and then asserts: it waits for the condition it is about to assert
(a process gone, a file written, a message seen) and fails with `what` when the deadline passes.

Timeouts scale with TOYCODER_TEST_TIMEOUT_SCALE (a float, default 1): on a loaded machine set it to
e.g. 3 and every deadline (these helpers, rpc.Daemon.call/wait_for, `scaled(...)` bounds) grows
threefold. Polling stops as soon as the condition holds, so a larger scale costs nothing when the
machine is fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

SCALE_VAR = "TOYCODER_TEST_TIMEOUT_SCALE"
DEFAULT_TIMEOUT = 10.0


def timeout_scale() -> float:
    """The factor from TOYCODER_TEST_TIMEOUT_SCALE (default 1); a bad value is an error, not ignored."""
    raw = os.environ.get(SCALE_VAR, "").strip()
    if not raw:
        return 1.0
    try:
        scale = float(raw)
    except ValueError:
        raise ValueError(f"{SCALE_VAR}={raw!r} is not a number") from None
    if scale <= 0:
        raise ValueError(f"{SCALE_VAR}={raw!r} must be positive")
    return scale


def scaled(seconds: float) -> float:
    """A deadline (or an upper bound on how long something may take) adjusted for a slow machine."""
    return seconds * timeout_scale()


def _failure(what: str, timeout: float, last: Any, describe: Callable[[], str] | None) -> AssertionError:
    detail = f"\n{describe()}" if describe is not None else ""
    return AssertionError(f"timed out after {timeout:.1f}s waiting for {what} (last value: {last!r}){detail}")


def wait_until(predicate: Callable[[], T], timeout: float = DEFAULT_TIMEOUT, what: str = "the condition", *,
               interval: float = 0.02, describe: Callable[[], str] | None = None) -> T:
    """Call predicate() until it returns something truthy and return that; AssertionError after the
    (scaled) timeout. `describe()` adds context to the failure (a log tail, the screen)."""
    limit = scaled(timeout)
    deadline = time.monotonic() + limit
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _failure(what, limit, value, describe)
        time.sleep(interval)


async def wait_until_async(predicate: Callable[[], Any], timeout: float = DEFAULT_TIMEOUT,
                           what: str = "the condition", *, interval: float = 0.02,
                           wake: asyncio.Event | None = None, describe: Callable[[], str] | None = None) -> Any:
    """The async twin of wait_until; predicate() may return an awaitable. With `wake`, the predicate
    is also re-checked as soon as that event is set (rpc.Daemon sets it on every incoming message),
    so waits end without a poll's lag."""
    limit = scaled(timeout)
    deadline = time.monotonic() + limit
    while True:
        if wake is not None:
            wake.clear()  # before the check: a message arriving during it still wakes the wait below
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _failure(what, limit, value, describe)
        pause = min(interval, remaining)
        if wake is None:
            await asyncio.sleep(pause)
        else:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(wake.wait(), pause)
