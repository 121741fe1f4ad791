"""Many sessions streaming in one event loop: a stream that has hundreds of events in hand (one
network read of a reply that fell behind) lets the loop run other work every STEP_EVENTS events,
so a request waits for one such step per stream, not for a whole backlog (issue 17)."""

from __future__ import annotations

import asyncio
from collections import Counter

from test_lean_stream_http import MSGS, canned, http, sse, text_chunk

from toycoder_daemon.llm.http_stream import STEP_EVENTS
from toycoder_daemon.llm.openai_client import OpenAIChatModel

EVENTS = 1000


async def test_a_backlog_of_events_is_handled_in_steps_with_the_loop_running_between() -> None:
    body = sse(*[text_chunk(f"t{i} ") for i in range(EVENTS)], text_chunk("", "stop"), "data: [DONE]\n\n")
    async with canned(http(200, body)) as (url, _):  # one write, Content-Length: few big reads
        model = OpenAIChatModel("p", "m", url, ["k"], max_retries=0)
        passes = 0
        running = True

        async def other_work() -> None:
            nonlocal passes
            while running:
                await asyncio.sleep(0)
                passes += 1

        seen: list[int] = []
        ticker = asyncio.ensure_future(other_work())
        try:
            reply = await model.stream_chat(MSGS, on_delta=lambda _: seen.append(passes))
        finally:
            running = False
            await ticker
            await model.aclose()
    assert reply.content == "".join(f"t{i} " for i in range(EVENTS))
    per_pass = Counter(seen)  # deltas handled while the other task did not get to run
    assert len(seen) == EVENTS and max(per_pass.values()) <= STEP_EVENTS
