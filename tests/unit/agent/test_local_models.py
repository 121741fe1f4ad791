"""Local models (issue 31) through the LSP face in-process, against the scripted server playing
llama-server: a reply cut at the full context window ends the turn with its notice and keeps all that
streamed; the continuation that cannot fit is never sent; the session stays usable and /compact makes
room; a server whose chat template takes no tools (/props) is said so and runs without tools. The
overflow errors themselves: e2e/test_context_overflow_e2e.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from helpers import new_session
from rpc import Daemon

from toycoder_daemon.agent.react import CONTINUE_PROMPT, WINDOW_NOTICE
from toycoder_daemon.llm import tools_ignored
from toycoder_daemon.testing.dialects import Dialect
from toycoder_daemon.testing.fake_llm import FakeLLM

STORY = "Once upon a time " * 150  # 2,550 characters: the reply that fills the window


def chat_requests(llm: FakeLLM) -> list[dict]:
    return [r for r in llm.requests if r["path"].endswith("/chat/completions")]


def request_chars(request: dict) -> int:
    """What the daemon's estimate counts: the messages and the tools' schemas, as JSON."""
    body = request["body"]
    return sum(len(json.dumps(m, ensure_ascii=False)) for m in body["messages"]) + len(json.dumps(body.get("tools") or []))


async def as_llama_server(daemon: Daemon, llm: FakeLLM, room: int, **dialect: object) -> int:
    """Play a llama-server whose window holds one short exchange and `room` characters more; its n_ctx."""
    llm.add({"text": "ok"})
    await daemon.call("toycoder/prompt", {"sessionId": await new_session(daemon), "text": "x"})
    n_ctx = (request_chars(llm.requests[-1]) + room) // 4
    llm.dialect = Dialect(server="llama.cpp", n_ctx=n_ctx, context_chars=n_ctx * 4, **dialect)  # type: ignore[arg-type]
    return n_ctx


async def cut_at_the_window(daemon: Daemon, llm: FakeLLM) -> tuple[str, int]:
    """A session whose first reply filled the window: (its id, n_ctx)."""
    n_ctx = await as_llama_server(daemon, llm, 1500)
    llm.add({"text": STORY, "finish_reason": "length"})
    sid = await new_session(daemon)
    result = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "tell me a long story"})
    notice = WINDOW_NOTICE.format(size=f" ({n_ctx} tokens)")
    assert result["stopReason"] == "max_tokens"
    assert result["text"] == STORY + "\n\n" + notice  # everything streamed, then why it stopped
    return sid, n_ctx


async def test_a_reply_cut_at_the_full_window_ends_the_turn_keeping_all_it_streamed(daemon: Daemon, llm: FakeLLM) -> None:
    sent = len(chat_requests(llm))
    sid, n_ctx = await cut_at_the_window(daemon, llm)
    assert len(chat_requests(llm)) == sent + 2  # the story's request; the continuation that cannot fit was not sent
    assert all(CONTINUE_PROMPT not in str(r["body"]) for r in chat_requests(llm))
    assert STORY in daemon.streamed_text(sid)
    loaded = await daemon.call("toycoder/session/load", {"sessionId": sid})
    assert loaded["transcript"][-1]["text"].startswith(STORY)  # kept in the history, seen on resume
    assert any(r["path"] == "/props" for r in llm.gets)  # where the window (and the tools) were learned


async def test_after_a_reply_that_filled_the_window_the_next_prompt_fits(daemon: Daemon, llm: FakeLLM) -> None:
    sid, n_ctx = await cut_at_the_window(daemon, llm)
    llm.add({"text": "And they lived happily."})
    result = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "how does it end?"})
    assert result["stopReason"] == "end_turn" and result["text"] == "And they lived happily."
    assert request_chars(chat_requests(llm)[-1]) // 4 <= n_ctx  # the cut reply was cut to fit; sent once
    assert "characters of it were cut" in daemon.streamed_text(sid)
    assert llm.violations == []


async def test_compact_makes_room_by_cutting_the_reply_that_filled_the_window(daemon: Daemon, llm: FakeLLM) -> None:
    sid, n_ctx = await cut_at_the_window(daemon, llm)
    result = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "/compact"})
    assert result["text"].startswith("context made room: nothing old enough to summarise")
    sent = len(chat_requests(llm))
    llm.add({"text": "The end."})
    again = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "finish it"})
    assert again["text"] == "The end."
    assert len(chat_requests(llm)) == sent + 1  # nothing more to cut: the prompt went at once
    assert request_chars(chat_requests(llm)[-1]) // 4 <= n_ctx


async def test_a_continuation_the_server_refuses_ends_the_turn_with_what_streamed(daemon: Daemon, llm: FakeLLM) -> None:
    """A window not known before (no llama.cpp to ask): the server's overflow answer to the continuation
    ends the turn the same way, and no message of the turn is lost."""
    llm.add({"text": "ok"})
    await daemon.call("toycoder/prompt", {"sessionId": await new_session(daemon), "text": "x"})
    content = sum(len(m["content"] or "") for m in llm.requests[-1]["body"]["messages"])
    llm.dialect = Dialect(context_chars=content + 1000, overflow="openai")  # an OpenAI-style server: no /props
    llm.add({"text": STORY, "finish_reason": "length"})
    sid = await new_session(daemon)
    result = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "tell me a long story"})
    assert result["stopReason"] == "max_tokens"
    assert result["text"].startswith(STORY) and "filled the model's context window" in result["text"]
    assert CONTINUE_PROMPT in str(chat_requests(llm)[-1]["body"])  # sent, refused with a 400
    loaded = await daemon.call("toycoder/session/load", {"sessionId": sid})
    assert [e["text"][:20] for e in loaded["transcript"]] == ["tell me a long story", STORY[:20]]


def no_tools_messages(daemon: Daemon) -> list[dict]:
    """The window/showMessage notices that say the server takes no tools."""
    return [n["params"] for n in daemon.notifications
            if n["method"] == "window/showMessage" and tools_ignored.MARK in n["params"]["message"]]


@pytest.mark.parametrize("server", ["llama.cpp", "ollama"])
async def test_a_server_without_tools_is_told_as_the_session_opens_and_runs_without_them(
        start_daemon: Callable[..., Any], llm: FakeLLM, server: str) -> None:
    """A brand-new daemon: the session's opening asks the server in the background (/v1/models names its
    kind; llama.cpp's /props, or Ollama's /api/show for the model, says no tools); the person is told
    before any prompt, and the first request goes without tools. Its ACP twin: faces/acp/test_acp.py;
    the process: e2e/test_dialects_e2e.py."""
    llama = server == "llama.cpp"
    llm.dialect = (Dialect(server="llama.cpp", n_ctx=100_000, supports_tools=False) if llama
                   else Dialect(ollama_capabilities=["completion"]))
    asked = ["/v1/models", "/props"] if llama else ["/v1/models"]
    daemon = await start_daemon()
    sid = await new_session(daemon)
    await daemon.wait_for(lambda: no_tools_messages(daemon), what="the no-tools notice")
    [told] = no_tools_messages(daemon)
    assert told["type"] == 2 and "runs without tools" in told["message"]  # a warning
    said, fix = (("chat_template_caps.supports_tools is false", "--chat-template-file") if llama
                 else ("Ollama says fake-model has no tools capability", "ollama show MODEL"))
    assert said in told["message"] and fix in told["message"]  # why, with the fix
    assert chat_requests(llm) == []  # before any prompt
    assert [g["path"] for g in llm.gets] == asked
    assert [r["body"] for r in llm.requests if r["path"] == "/api/show"] == ([] if llama else [{"model": "fake-model"}])
    llm.add({"text": "I cannot look, but hello."}, {"text": "Still here."})
    first = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "read src/app.py"})
    assert first["text"] == "I cannot look, but hello."  # told already: not again in the reply
    assert "tools" not in chat_requests(llm)[0]["body"]  # the first request runs without tools
    second = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "again"})
    assert second["text"] == "Still here." and "tools" not in chat_requests(llm)[1]["body"]
    other = await new_session(daemon)  # every session is told as it opens; the server is not asked again
    await daemon.wait_for(lambda: len(no_tools_messages(daemon)) == 2, what="the second session's notice")
    assert [g["path"] for g in llm.gets] == asked and len(llm.requests) == len(chat_requests(llm)) + (0 if llama else 1)
    assert other != sid and llm.violations == []


async def test_a_server_found_without_tools_by_an_answer_says_so_in_that_reply(daemon: Daemon, llm: FakeLLM) -> None:
    """The server the session opened with said nothing of tools (here: it became a llama-server after
    the daemon asked): its first answer names llama.cpp, /props is read then, and that reply says so."""
    await as_llama_server(daemon, llm, 100_000, supports_tools=False)
    llm.add({"text": "I cannot look, but hello."}, {"text": "Still here."})
    sid = await new_session(daemon)
    first = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "read src/app.py"})
    assert "chat_template_caps.supports_tools is false" in first["text"]
    assert "--jinja" in daemon.streamed_text(sid) and "--chat-template-file" in daemon.streamed_text(sid)
    # the first answer from this server told llama.cpp (its Server header), and /props was read then
    assert llm.requests[-1]["path"] == "/v1/chat/completions" and [g["path"] for g in llm.gets].count("/props") == 1
    second = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "again"})
    assert second["text"] == "Still here."  # said once per session
    assert "tools" not in chat_requests(llm)[-1]["body"]  # run without tools, not silently dropped by the server
    assert no_tools_messages(daemon) == []  # the session's opening did not know
    other = await new_session(daemon)  # known now: a new session is told as it opens, not in its reply
    await daemon.wait_for(lambda: no_tools_messages(daemon), what="the no-tools notice")
    llm.add({"text": "Hi."})
    third = await daemon.call("toycoder/prompt", {"sessionId": other, "text": "hi"})
    assert third["text"] == "Hi." and "tools" not in chat_requests(llm)[-1]["body"]
