"""First chunk and event-loop stall of one prompt in a long conversation: the SDK's create()
against our lean path (OpenAIChatModel), in one process, interleaved, against bench/peer_llm.py.

The SDK walks and transforms every message on the event loop before sending; the lean path
builds and encodes the body once, in a worker thread above a few dozen messages. "loop stall" is
the longest gap a 1 ms ticker task saw during the request: what every other session would wait.

Run:  .venv/bin/python bench/big_history.py [--messages 5000] [--runs 5] [--tokens 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from peer_llm import PeerLLM  # noqa: E402

from toycoder_daemon.llm.openai_client import OpenAIChatModel  # noqa: E402


def history(n: int) -> list[dict[str, Any]]:
    """A conversation of n messages: user/assistant turns with a tool call and its result each."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent. " * 20}]
    i = 0
    while len(msgs) < n - 1:
        msgs.append({"role": "user", "content": f"step {i}: read the file and fix the bug " * 3})
        msgs.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": "read_file", "arguments": f'{{"path": "f{i}.py"}}'}}]})
        msgs.append({"role": "tool", "tool_call_id": f"call_{i}", "content": "def f():\n    return 1\n" * 10,
                     "status": "completed"})
        i += 1
    msgs = msgs[: n - 1]
    msgs.append({"role": "user", "content": "say hello"})
    return msgs


async def measure(fn: Any) -> tuple[float, float]:
    """(seconds to the first text, the longest event-loop stall in seconds) of one request."""
    stall = 0.0
    running = True

    async def ticker() -> None:
        nonlocal stall
        last = time.perf_counter()
        while running:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            stall = max(stall, now - last)
            last = now

    tick = asyncio.ensure_future(ticker())
    await asyncio.sleep(0.01)
    t0 = time.perf_counter()
    first = await fn()
    running = False
    await tick
    return first - t0, stall


async def main_async(args: argparse.Namespace) -> int:
    import openai

    msgs = history(args.messages)
    with PeerLLM() as llm:
        llm.set_tokens(args.tokens)
        client = openai.AsyncOpenAI(api_key="k", base_url=llm.base_url, max_retries=0)
        ours = OpenAIChatModel("bench", "fake-model", llm.base_url, ["k"])

        async def sdk() -> float:
            first = 0.0
            stream = await client.chat.completions.create(model="fake-model", messages=msgs, stream=True,  # type: ignore[arg-type]
                                                          stream_options={"include_usage": True})
            async for chunk in stream:
                if not first and chunk.choices and chunk.choices[0].delta.content:
                    first = time.perf_counter()
            return first

        async def lean() -> float:
            first = 0.0

            def on_delta(_: str) -> None:
                nonlocal first
                first = first or time.perf_counter()

            await ours.stream_chat(msgs, on_delta=on_delta)
            return first

        rows: dict[str, list[tuple[float, float]]] = {"sdk create()": [], "lean path": []}
        for r in range(args.warmup + args.runs):
            for name, fn in (("sdk create()", sdk), ("lean path", lean))[:: 1 if r % 2 else -1]:
                m = await measure(fn)
                if r >= args.warmup:
                    rows[name].append(m)
        await client.close()
        await ours.aclose()
        stats = llm.stats()
    print(f"big_history: {args.messages:,} messages ({stats['request_bytes'] / max(stats['requests'], 1) / 1e6:.1f} MB "
          f"per request), {args.tokens} tokens per reply; medians of {args.runs} interleaved runs")
    print(f"{'':16}{'1st chunk ms':>14}{'loop stall ms':>15}")
    for name, ms in rows.items():
        print(f"{name:16}{statistics.median(f for f, _ in ms) * 1000:14.0f}{statistics.median(s for _, s in ms) * 1000:15.0f}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=200)
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
