"""Replies cut by the output limit (issue 18): the daemon sends max_tokens, continues a cut reply at
most twice, then ends the turn with stopReason max_tokens, a notice, and exit code 4 in `toycoder -p`.
Through the real daemon against the scripted server; the summary case in-process
(unit/agent/test_length_limit.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import new_session, write_config
from rpc import Daemon

from toycoder_daemon.agent.react import CONTINUE_PROMPT, LENGTH_NOTICE
from toycoder_daemon.testing.fake_llm import FakeLLM


async def test_a_cut_reply_is_continued_and_max_tokens_is_sent(daemon: Daemon, llm: FakeLLM) -> None:
    llm.add({"text": "The story begins and", "finish_reason": "length"}, {"text": " ends well."})
    sid = await new_session(daemon)
    result = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "tell a story"})
    assert result["stopReason"] == "end_turn"
    assert result["text"] == "The story begins and ends well."
    first, second = (r["body"] for r in llm.requests)
    assert first["max_tokens"] == 4096  # the default output limit goes with every request
    assert second["messages"][-2] == {"role": "assistant", "content": "The story begins and"}
    assert second["messages"][-1] == {"role": "user", "content": CONTINUE_PROMPT}


async def test_still_cut_after_two_continuations_ends_with_max_tokens(daemon: Daemon, llm: FakeLLM) -> None:
    llm.add(*({"text": f"part {i} ", "finish_reason": "length"} for i in range(3)), {"text": "Next answer."})
    sid = await new_session(daemon)
    result = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "loop forever"})
    assert result["stopReason"] == "max_tokens"
    assert result["text"] == "part 0 part 1 part 2 \n\n" + LENGTH_NOTICE
    assert len(llm.requests) == 3  # the first request and two continuations, no more
    assert daemon.streamed_text(sid).endswith(LENGTH_NOTICE)
    loaded = await daemon.call("toycoder/session/load", {"sessionId": sid})
    assert LENGTH_NOTICE in loaded["transcript"][-1]["text"]  # kept in the history, seen on resume
    # the session goes on normally
    again = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "short please"})
    assert again["stopReason"] == "end_turn" and again["text"] == "Next answer."


def test_one_shot_exits_4_on_a_cut_reply(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    cfg = write_config(tmp_path / "c.yaml", llm)
    llm.add(*({"text": "cut", "finish_reason": "length"} for _ in range(3)))
    p = subprocess.run([sys.executable, "-m", "toycoder_daemon.cli", "--config", str(cfg), "-p", "go"],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, cwd=str(workspace))
    assert p.returncode == 4, p.stderr
    assert LENGTH_NOTICE in p.stdout
