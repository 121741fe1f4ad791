"""Tests for toycoder_daemon.testing.fake_llm, driven by the real openai SDK and raw HTTP."""

from __future__ import annotations

import http.client
import json
import os
import select
import subprocess
import sys
import time
from urllib.parse import urlsplit

import openai
import pytest
from helpers import ROOT
from waiting import scaled

from toycoder_daemon.testing.fake_llm import FakeLLM, load_script, tool_call_problems

USER = [{"role": "user", "content": "hi"}]


@pytest.fixture
def fake():
    with FakeLLM() as server:
        yield server


_clients: list[openai.OpenAI] = []


@pytest.fixture(autouse=True)
def _close_clients():
    yield
    while _clients:
        _clients.pop().close()


def client(server: FakeLLM | str, api_key: str = "k") -> openai.OpenAI:
    base_url = server if isinstance(server, str) else server.base_url
    _clients.append(openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=10))
    return _clients[-1]


def stream(server: FakeLLM, **kwargs) -> list:
    kwargs.setdefault("model", "m")
    kwargs.setdefault("messages", USER)
    return list(client(server).chat.completions.create(stream=True, **kwargs))


def raw_post(server: FakeLLM, body: dict, path: str = "/v1/chat/completions"):
    """(response, body bytes) for a raw POST, bypassing the SDK."""
    url = urlsplit(server.base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp, data


def sse_events(data: bytes) -> list:
    """Parsed `data:` payloads of an SSE body; "[DONE]" stays a string."""
    events = []
    for block in data.decode().split("\n\n"):
        if block:
            assert block.startswith("data: "), block
            payload = block[len("data: "):]
            events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def tool_deltas(chunks) -> list:
    return [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]


def assemble(chunks) -> dict[int, dict]:
    calls: dict[int, dict] = {}
    for tc in tool_deltas(chunks):
        call = calls.setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
        if tc.id:
            call["id"] = tc.id
        if tc.function and tc.function.name:
            call["name"] = tc.function.name
        if tc.function and tc.function.arguments:
            call["arguments"] += tc.function.arguments
    return calls


# ----- text streaming


def test_streamed_text_arrives_in_several_chunks(fake):
    fake.add({"text": "Hello, streaming world!", "chunk_size": 5})
    chunks = stream(fake, model="my-model")
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert pieces == ["Hello", ", str", "eamin", "g wor", "ld!"]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert {c.model for c in chunks} == {"my-model"}
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    assert [c.choices[0].finish_reason for c in chunks] == [None] * 5 + ["stop"]
    assert all(c.usage is None for c in chunks)


def test_text_list_is_one_delta_per_string_on_the_wire(fake):
    fake.add({"text": ["Hel", "lo", " there"]})
    resp, data = raw_post(fake, {"model": "m", "messages": USER, "stream": True})
    assert resp.status == 200
    assert resp.getheader("Content-Type").startswith("text/event-stream")
    events = sse_events(data)
    assert events[-1] == "[DONE]"
    first = events[0]
    assert set(first) == {"id", "object", "created", "model", "choices"}
    assert first["choices"] == [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}, "finish_reason": None}]
    assert [e["choices"][0]["delta"].get("content") for e in events[:-1]] == ["Hel", "lo", " there", None]
    assert events[-2]["choices"][0] == {"index": 0, "delta": {}, "finish_reason": "stop"}
    assert len({e["id"] for e in events[:-1]}) == 1


def test_usage_chunk_only_when_requested(fake):
    fake.add({"text": "abcdefgh", "chunk_size": 3}, {"text": "abcdefgh", "chunk_size": 3})
    messages = [{"role": "system", "content": "x" * 40},
                {"role": "user", "content": [{"type": "text", "text": "y" * 9}]}]
    chunks = stream(fake, messages=messages, stream_options={"include_usage": True})
    last = chunks[-1]
    assert last.choices == []
    assert (last.usage.prompt_tokens, last.usage.completion_tokens, last.usage.total_tokens) == (12, 3, 15)
    assert chunks[-2].choices[0].finish_reason == "stop"

    plain = stream(fake, messages=messages)
    assert all(c.usage is None and len(c.choices) == 1 for c in plain)
    assert plain[-1].choices[0].finish_reason == "stop"


def test_scripted_usage_overrides_defaults(fake):
    fake.add({"text": "hi", "usage": {"prompt_tokens": 1000, "completion_tokens": 7}})
    resp = client(fake).chat.completions.create(model="m", messages=USER)
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens, resp.usage.total_tokens) == (1000, 7, 1007)


def test_long_stream_arrives_complete(fake):
    fake.add({"text": [f"<{i}>" for i in range(2000)]})
    start = time.perf_counter()
    chunks = stream(fake)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "".join(f"<{i}>" for i in range(2000))
    assert len(chunks) == 2001
    assert time.perf_counter() - start < scaled(5)


# ----- tool calls


def test_tool_call_arguments_split_over_deltas(fake):
    args = {"path": "src/main.py", "line": 42, "note": "üñí"}
    fake.add({"tool_calls": [{"name": "read_file", "arguments": args}]})
    chunks = stream(fake)
    deltas = tool_deltas(chunks)
    assert len(deltas) == 4  # header + 3 argument pieces
    head, rest = deltas[0], deltas[1:]
    assert (head.index, head.id, head.type, head.function.name, head.function.arguments) == (
        0, "call_1", "function", "read_file", "")
    assert all(d.id is None and d.function.name is None and d.function.arguments for d in rest)
    assert json.loads(assemble(chunks)[0]["arguments"]) == args
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_two_calls_interleaved_and_sequential(fake):
    calls = [{"name": "grep", "arguments": {"pattern": "def main", "glob": "*.py"}},
             {"name": "read_file", "arguments": {"path": "README.md"}, "id": "call_custom"}]
    fake.add({"tool_calls": calls, "interleave": True}, {"tool_calls": calls})

    interleaved = stream(fake)
    assert [d.index for d in tool_deltas(interleaved)] == [0, 1, 0, 1, 0, 1, 0, 1]
    got = assemble(interleaved)
    assert (got[0]["id"], got[0]["name"]) == ("call_1", "grep")
    assert (got[1]["id"], got[1]["name"]) == ("call_custom", "read_file")
    assert [json.loads(got[i]["arguments"]) for i in (0, 1)] == [c["arguments"] for c in calls]

    sequential = stream(fake)
    assert [d.index for d in tool_deltas(sequential)] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert assemble(sequential)[0]["id"] == "call_2"  # default ids are unique per server


def test_raw_string_arguments_sent_as_is_and_arg_chunks_zero(fake):
    broken = '{"path": "a.py", "line": '
    fake.add({"tool_calls": [{"name": "read_file", "arguments": broken}], "arg_chunks": 0})
    chunks = stream(fake)
    deltas = tool_deltas(chunks)
    assert len(deltas) == 1 and deltas[0].function.arguments == broken


def test_text_then_tool_calls_in_one_reply(fake):
    fake.add({"text": "Let me look.", "tool_calls": [{"name": "ls", "arguments": {}}]})
    chunks = stream(fake)
    kinds = ["text" if c.choices[0].delta.content else "tool" if c.choices[0].delta.tool_calls else "end"
             for c in chunks]
    assert kinds == ["text", "text", "text", "tool", "tool", "tool", "end"]  # "{}" -> 2 pieces
    assert json.loads(assemble(chunks)[0]["arguments"]) == {}


def test_non_streaming_reply_with_tool_calls(fake):
    fake.add({"tool_calls": [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": "raw"}]},
             {"text": ["Done", "."]})
    resp = client(fake).chat.completions.create(model="m", messages=USER)
    assert resp.object == "chat.completion" and resp.model == "m"
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert [(t.id, t.function.name) for t in choice.message.tool_calls] == [("call_1", "a"), ("call_2", "b")]
    assert json.loads(choice.message.tool_calls[0].function.arguments) == {"x": 1}
    assert choice.message.tool_calls[1].function.arguments == "raw"
    assert resp.usage.completion_tokens == 8  # per call: header delta + 3 argument pieces

    text = client(fake).chat.completions.create(model="m", messages=USER)
    assert text.choices[0].message.content == "Done."
    assert text.choices[0].finish_reason == "stop" and text.choices[0].message.tool_calls is None


# ----- faults


def test_status_429_with_retry_after(fake):
    fake.add({"status": 429, "retry_after": 7, "error": "slow down"}, {"status": 429, "retry_after": 2})
    resp, data = raw_post(fake, {"model": "m", "messages": USER, "stream": True})
    assert resp.status == 429
    assert resp.getheader("Retry-After") == "7"
    assert json.loads(data)["error"] == {"message": "slow down", "type": "requests", "param": None,
                                         "code": "rate_limit_exceeded"}

    with pytest.raises(openai.RateLimitError) as info:
        client(fake).chat.completions.create(model="m", messages=USER, stream=True)
    assert info.value.status_code == 429
    assert info.value.response.headers["retry-after"] == "2"
    assert len(fake.requests) == 2


def test_drop_after_breaks_the_stream(fake):
    fake.add({"text": "abcdefghijklmnop", "drop_after": 2}, {"text": "abcdefgh", "drop_after": 1})
    got = []
    # The SDK yields the chunks that arrived, then raises: the chunked body is never terminated.
    with pytest.raises(openai.APIConnectionError):
        for chunk in client(fake).chat.completions.create(model="m", messages=USER, stream=True):
            got.append(chunk)
    assert [c.choices[0].delta.content for c in got] == ["abcd", "efgh"]
    assert all(c.choices[0].finish_reason is None for c in got)

    url = urlsplit(fake.base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    conn.request("POST", "/v1/chat/completions", json.dumps({"model": "m", "messages": USER, "stream": True}))
    resp = conn.getresponse()
    with pytest.raises(http.client.IncompleteRead) as info:
        resp.read()
    conn.close()
    assert b"abcd" in info.value.partial and b"[DONE]" not in info.value.partial
    assert b"finish_reason\":\"stop" not in info.value.partial


def test_drop_after_non_streaming_closes_without_response(fake):
    fake.add({"text": "never", "drop_after": 0})
    with pytest.raises(openai.APIConnectionError):
        client(fake).chat.completions.create(model="m", messages=USER)


def test_delay_and_chunk_delay(fake):
    fake.add({"text": "ab", "delay": 0.3}, {"text": ["a", "b", "c", "d"], "chunk_delay": 0.05})
    start = time.perf_counter()
    it = iter(client(fake).chat.completions.create(model="m", messages=USER, stream=True))
    next(it)
    assert time.perf_counter() - start >= 0.3
    list(it)

    start = time.perf_counter()
    chunks = stream(fake)
    assert time.perf_counter() - start >= 0.15  # three gaps between four deltas
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "abcd"


def test_script_exhausted_is_500_and_recorded(fake):
    fake.add({"text": "only one"})
    stream(fake)
    list(client(fake).models.list())  # not a chat request: not counted below
    with pytest.raises(openai.InternalServerError) as info:
        stream(fake)
    assert info.value.status_code == 500
    assert "fake_llm: script exhausted (2 requests)" in str(info.value)
    assert fake.violations == ["fake_llm: script exhausted (2 requests)"]


# ----- recording, checks, misc


def test_requests_recorded_with_headers(fake):
    fake.add({"text": "one"}, {"text": "two"})
    tools = [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}]
    client(fake, api_key="sk-test-123").chat.completions.create(model="m1", messages=USER, tools=tools)
    resp, _ = raw_post(fake, {"model": "m2", "messages": [{"role": "user", "content": "raw"}]},
                       path="/chat/completions")
    assert resp.status == 200
    fake.wait_for_requests(2)
    first, second = fake.requests
    assert first["path"] == "/v1/chat/completions"
    assert first["headers"]["authorization"] == "Bearer sk-test-123"
    assert first["headers"]["content-type"] == "application/json"
    assert first["body"]["model"] == "m1" and first["body"]["messages"] == USER
    assert first["body"]["tools"] == tools
    assert second["path"] == "/chat/completions" and second["body"]["messages"][0]["content"] == "raw"
    assert "authorization" not in second["headers"]
    with pytest.raises(TimeoutError):
        fake.wait_for_requests(3, timeout=0.1)


def test_models_lists_configured_and_seen_models():
    with FakeLLM([{"text": "x"}], model="base-model") as server:
        stream(server, model="other-model")
        ids = [m.id for m in client(server).models.list()]
    assert ids == ["base-model", "other-model"]


BAD_HISTORY = [
    {"role": "user", "content": "do it"},
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "call_a", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
    {"role": "user", "content": "and?"},
]


def test_tool_invariant_violation_is_400_and_consumes_nothing(fake):
    fake.add({"text": "first reply"})
    with pytest.raises(openai.BadRequestError) as info:
        stream(fake, messages=BAD_HISTORY)
    assert "tool_call_id" in str(info.value)
    assert len(fake.violations) == 1 and "call_a" in fake.violations[0]

    ok = [*BAD_HISTORY[:2], {"role": "tool", "tool_call_id": "call_a", "content": "a.py"}, BAD_HISTORY[2]]
    chunks = stream(fake, messages=ok)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "first reply"
    assert len(fake.violations) == 1


def test_tool_invariant_can_be_disabled():
    with FakeLLM([{"text": "fine"}], check_tool_invariant=False) as server:
        chunks = stream(server, messages=BAD_HISTORY)
        assert chunks[-1].choices[0].finish_reason == "stop"
        assert server.violations == []


def test_tool_call_problems_rules():
    call = lambda i: {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}  # noqa: E731
    asst = {"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c2")]}
    tool = lambda i: {"role": "tool", "tool_call_id": i, "content": "r"}  # noqa: E731
    user = {"role": "user", "content": "u"}
    assert tool_call_problems([user, asst, tool("c2"), tool("c1"), user]) == []
    assert tool_call_problems([user, asst, tool("c1"), tool("c2")]) == []
    assert tool_call_problems([user, asst, tool("c1")]) == [
        "messages[1]: tool_call_id c2 not answered before the end of messages"]
    assert tool_call_problems([user, asst, tool("c1"), user, tool("c2")]) == [
        "messages[1]: tool_call_id c2 not answered before messages[3] (user)",
        "messages[4]: tool message answers unknown tool_call_id 'c2'"]
    assert tool_call_problems([user, tool("zz")]) == ["messages[1]: tool message answers unknown tool_call_id 'zz'"]


def test_expect_checks_record_violations(fake):
    fake.add({"text": "a", "expect": {"last_user_contains": "hi", "has_tools": False}},
             {"text": "b", "expect": {"last_user_contains": "foo", "has_tools": True}})
    stream(fake)
    assert fake.violations == []
    stream(fake)  # the reply is still served
    assert len(fake.violations) == 2
    assert "last_user_contains='foo'" in fake.violations[0] and "has_tools=True" in fake.violations[1]


def test_unknown_reply_field_is_rejected():
    with pytest.raises(ValueError, match="tool_call"):
        FakeLLM([{"tool_call": []}])


async def test_async_client_streams_over_one_keep_alive_connection(fake):
    fake.add({"text": "one"}, {"text": "two"}, {"text": "three"})
    aclient = openai.AsyncOpenAI(api_key="k", base_url=fake.base_url, max_retries=0, timeout=10)
    texts = []
    for _ in range(3):
        s = await aclient.chat.completions.create(model="m", messages=USER, stream=True)
        texts.append("".join([c.choices[0].delta.content or "" async for c in s]))
    await aclient.close()
    assert texts == ["one", "two", "three"]
    assert fake.connections == 1


def test_load_script_json_and_yaml(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps({"replies": [{"text": "j"}]}))
    (tmp_path / "s.yaml").write_text("- text: y\n- tool_calls:\n    - {name: ls, arguments: {path: .}}\n")
    assert load_script(tmp_path / "s.json") == [{"text": "j"}]
    assert load_script(str(tmp_path / "s.yaml")) == [
        {"text": "y"}, {"tool_calls": [{"name": "ls", "arguments": {"path": "."}}]}]


@pytest.mark.parametrize("from_stdin", [False, True])
def test_cli_prints_base_url_first_and_serves(tmp_path, from_stdin):
    script = json.dumps([{"text": "from the cli"}])
    path = tmp_path / "script.json"
    path.write_text(script)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(
        [sys.executable, "-m", "toycoder_daemon.testing.fake_llm", "--script", "-" if from_stdin else str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        if from_stdin:
            proc.stdin.write(script)
        proc.stdin.close()
        assert select.select([proc.stdout], [], [], 10)[0], "no base URL printed"
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        resp = client(base_url).chat.completions.create(model="m", messages=USER)
        assert resp.choices[0].message.content == "from the cli"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    err = proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    assert proc.returncode == 0
    assert "POST /v1/chat/completions -> 200" in err
