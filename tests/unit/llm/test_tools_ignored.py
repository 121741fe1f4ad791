"""Noticing that a server ignored the tools it was offered (issue 18): the detector on the texts real
models write when their calls go unparsed, and on ordinary text that must not raise the alarm; then an
in-process App whose model is the real OpenAI client against the scripted server, to see the notice
come once per session (and again in a new one)."""

from __future__ import annotations

from pathlib import Path

import pytest
from inproc_app import RecordingFrontend, config_for_tests

from toycoder_daemon.app.application import App
from toycoder_daemon.llm.openai_client import OpenAIChatModel
from toycoder_daemon.llm.tools_ignored import MARK, dropped_by_quirks, notice, unparsed_call
from toycoder_daemon.sessions.store import SessionStore
from toycoder_daemon.testing.dialects import Dialect
from toycoder_daemon.testing.fake_llm import FakeLLM

TOOLS = ["read_file", "list_directory"]
READ = {"name": "read_file", "arguments": {"path": "src/app.py"}}


@pytest.mark.parametrize(("text", "seen"), [
    ('<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>', "a <tool_call> tag"),
    ('Let me look.\n<tool_call>\n{"name": "list_directory", "arguments": {}}\n</tool_call>', "a <tool_call> tag"),
    ('<tool_call>{"name": "search_web", "arguments": {"q": "x"}}</tool_call>', "a <tool_call> tag"),  # a made-up tool
    ('<think>\nThe user wants a search.\n</think>\n\n<tool_call>\n{"name": "search_web", "arguments": {}}\n</tool_call>',
     "a <tool_call> tag"),  # after its reasoning, the reply opens with the call
    ('[TOOL_CALLS][{"name": "read_file", "arguments": {"path": "a.py"}}]', "a [TOOL_CALLS] tag"),
    ('functools[{"name": "read_file", "arguments": {"path": "a.py"}}]', "a functools tag"),
    ('<|python_tag|>{"name": "read_file", "parameters": {"path": "a.py"}}', "a <|python_tag|> tag"),
    ('<function=read_file>{"path": "a.py"}</function>', "a <function=...> tag"),
    ('{"name": "read_file", "arguments": {"path": "a.py"}}', 'a JSON {"name", "arguments"} object'),
    ('```json\n{"name": "read_file", "parameters": {"path": "a.py"}}\n```', 'a JSON {"name", "arguments"} object'),
    ('```xml\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>\n```',
     "a <tool_call> tag"),  # the whole reply one fence: its body is the reply
    ('[{"name": "read_file", "arguments": {}}, {"name": "list_directory", "arguments": {}}]',
     'a JSON {"name", "arguments"} object'),
    ('{"tool_call": {"name": "read_file", "arguments": {"path": "a.py"}}}', 'a JSON {"name", "arguments"} object'),
])
def test_a_tool_call_left_in_the_text_is_seen(text: str, seen: str) -> None:
    assert unparsed_call(text, TOOLS) == seen


@pytest.mark.parametrize("text", [
    "",
    "The file defines add(a, b), which returns a + b.",
    "Models like Qwen wrap their calls in <tool_call> tags; the server parses them.",
    "Use `<function=name>` for Llama 3.1, e.g. <function=get_weather>{...}.",  # not a tool offered here
    'Here is a tool call: {"name": "read_file", "arguments": {"path": "a.py"}} and that is all you need.',
    '{"name": "Ada", "arguments": ["one", "two"]}',  # JSON with those keys, but no tool of ours
    '{"name": "read_file"}',  # no arguments: a config snippet, not a call
    '```python\nprint({"name": "read_file", "arguments": {}})\n```',
    '[1, 2, 3]',
    '<tool_call> is how this format opens a call; </tool_call> closes it.',
    # a format explained in prose: an example naming another tool on its own line, or any tool mid-line or fenced
    ("Qwen and Hermes models wrap a call in tags, for example:\n\n"
     '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n\n'
     "The server's parser turns that into a tool_calls entry."),
    'Mistral emits `[TOOL_CALLS] [{"name": "search", "arguments": {"q": "x"}}]` as plain tokens.',
    'Mistral emits `[TOOL_CALLS] [{"name": "read_file", "arguments": {"path": "a.py"}}]` as plain tokens.',
    'Llama 3.1 writes `<function=read_file>{"path": "a.py"}</function>` for a call.',
    'For example:\n```\n<tool_call>\n{"name": "read_file", "arguments": {}}\n</tool_call>\n```\nis a Hermes call.',
    "{ not json at all }",
])
def test_ordinary_text_raises_no_alarm(text: str) -> None:
    assert unparsed_call(text, TOOLS) is None


def test_no_tools_offered_means_no_alarm() -> None:
    assert unparsed_call('<tool_call>{"name": "read_file", "arguments": {}}</tool_call>', []) is None


def test_the_notice_names_the_server_and_what_to_set() -> None:
    seen = notice("local", "http://127.0.0.1:8080/v1/chat/completions", "a <tool_call> tag")
    assert seen.startswith(MARK) and "http://127.0.0.1:8080/v1/chat/completions" in seen and "'local'" in seen
    assert "a <tool_call> tag" in seen and "--jinja" in seen and "\n" not in seen
    dropped = notice("local", "http://h/v1/chat/completions", None)
    assert "no_tool_choice" in dropped and "providers.local.quirks" in dropped
    assert dropped_by_quirks("llama-cpp-python", frozenset({"no_tool_choice"}))
    assert not dropped_by_quirks("llama-cpp-python", frozenset())  # tool_choice is sent: tools are kept
    assert not dropped_by_quirks("vllm", frozenset({"no_tool_choice"}))


def real_client_app(tmp_path: Path, workspace: Path, llm: FakeLLM, quirks: list[str] | None = None) -> App:
    def factory(provider: str, name: str) -> OpenAIChatModel:
        return OpenAIChatModel(provider, name, llm.base_url, ["k1"], retry_interval=0.01, quirks=quirks)

    return App(workspace, config_for_tests(), model_factory=factory, store=SessionStore(tmp_path / "data", workspace))


async def test_the_notice_comes_once_per_session(tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    llm.dialect = Dialect(tools_as_text=True)
    app, fe = real_client_app(tmp_path, workspace, llm), RecordingFrontend()
    try:
        sid = app.new_session().id
        llm.add({"tool_calls": [READ]}, {"tool_calls": [READ]})
        first = await app.prompt(sid, "what is app.py?", lambda s, t: fe.bind(s))
        assert first.result.stop_reason == "end_turn" and "<tool_call>" in first.result.text
        assert MARK in first.result.text and llm.base_url + "/chat/completions" in first.result.text
        second = await app.prompt(sid, "and now?", lambda s, t: fe.bind(s))
        assert MARK not in second.result.text  # said once in this session
        assert fe.streamed_text(sid).count(MARK) == 1
        other = app.new_session().id
        llm.add({"tool_calls": [READ]})
        third = await app.prompt(other, "what is app.py?", lambda s, t: fe.bind(s))
        assert MARK in third.result.text  # a new session is told too
        assert fe.of(sid, "tool_call") == [] and len(llm.requests) == 3  # no call ran: one request a turn
    finally:
        await app.shutdown()


async def test_ordinary_replies_and_parsed_calls_raise_no_notice(tmp_path: Path, workspace: Path,
                                                                 llm: FakeLLM) -> None:
    app, fe = real_client_app(tmp_path, workspace, llm), RecordingFrontend()
    try:
        sid = app.new_session().id
        llm.add({"text": "Hello! I can read files with tools like read_file."}, {"tool_calls": [READ]},
                {"text": '{"name": "read_file", "arguments": "was the call"} is what I sent.'})
        await app.prompt(sid, "hi", lambda s, t: fe.bind(s))
        done = await app.prompt(sid, "what is app.py?", lambda s, t: fe.bind(s))
        assert done.result.stop_reason == "end_turn"
    finally:
        await app.shutdown()
    assert MARK not in fe.streamed_text(sid)


async def test_llama_cpp_python_with_no_tool_choice_is_named(tmp_path: Path, workspace: Path,
                                                             llm: FakeLLM) -> None:
    # the config leaves tool_choice out; llama-cpp-python (owned_by "me" in /v1/models) then drops the tools
    llm.dialect = Dialect(tools_need_choice=True, server="uvicorn", owned_by="me")
    app, fe = real_client_app(tmp_path, workspace, llm, quirks=["no_tool_choice"]), RecordingFrontend()
    try:
        sid = app.new_session().id
        llm.add({"tool_calls": [READ]}, {"text": "fine"})
        first = await app.prompt(sid, "what is app.py?", lambda s, t: fe.bind(s))
        await app.prompt(sid, "again", lambda s, t: fe.bind(s))
    finally:
        await app.shutdown()
    assert first.result.text.startswith("I cannot.") and "remove it from providers.openai.quirks" in first.result.text
    assert fe.streamed_text(sid).count(MARK) == 1
    assert sum(r["path"].endswith("/models") for r in llm.gets) == 1  # asked once which server it is
