"""The lean streaming path's parts on their own: the SSE decoder, chunk reading, reply assembly."""

from __future__ import annotations

import json

import pytest

from toycoder_daemon.llm import json_codec
from toycoder_daemon.llm.chunks import MalformedChunk, ReplyAssembler, StreamCut, StreamErrorEvent, read_chunk
from toycoder_daemon.llm.http_stream import encode_request
from toycoder_daemon.llm.sse import SSEDecoder


def feed_all(parts: list[bytes]) -> tuple[list[bytes], SSEDecoder]:
    dec = SSEDecoder()
    out: list[bytes] = []
    for p in parts:
        out += dec.feed(p)
    return out, dec


def every_split(stream: bytes) -> list[list[bytes]]:
    return [[stream[:i], stream[i:]] for i in range(len(stream) + 1)] + [[bytes([b]) for b in stream]]


STREAM = b'data: {"a":1}\n\ndata: {"b":2}\n\ndata: [DONE]\n\n'


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_events_survive_any_split_and_line_ending(eol: bytes) -> None:
    stream = STREAM.replace(b"\n", eol)
    for parts in every_split(stream):
        events, dec = feed_all(parts)
        assert events == [b'{"a":1}', b'{"b":2}', b"[DONE]"], parts
        assert not dec.pending()


def test_comments_other_fields_and_multi_line_data() -> None:
    stream = (b": keep-alive\n\nevent: message\nid: 7\nretry: 100\ndata: {\"x\":\ndata:1}\n\n"
              b"data\n\n:another comment\ndata: last\n\n")
    for parts in every_split(stream):
        events, _ = feed_all(parts)
        assert events == [b'{"x":\n1}', b"", b"last"]  # a comment alone dispatches nothing
    assert json.loads(events[0]) == {"x": 1}


def test_a_cut_mid_line_or_mid_event_is_never_dispatched() -> None:
    events, dec = feed_all([b'data: {"a":1}\n\ndata: {"b"'])
    assert events == [b'{"a":1}'] and dec.pending()
    events, dec = feed_all([b'data: {"a":1}\n\ndata: {"b":2}\n'])  # line complete, event not
    assert events == [b'{"a":1}'] and dec.pending()


def chunk(delta: dict | None = None, finish: str | None = None, **extra) -> dict:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "c", "object": "chat.completion.chunk", "choices": choices, **extra}


def test_text_tool_call_fragments_and_usage_assemble_into_the_reply() -> None:
    seen: list[str] = []
    reply = ReplyAssembler(seen.append)
    for obj in [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hel"}), chunk({"content": "lo"}),
        chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "read", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"pa'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'th": "a"}'}}]}),
        chunk({}, "tool_calls"),
        chunk(None, usage={"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}),
    ]:
        reply.add(read_chunk(json_codec.loads(json_codec.dumps(obj))))
    r = reply.reply()
    assert seen == ["Hel", "lo"] and r.content == "Hello" and r.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in r.tool_calls] == [("call_a", "read", '{"path": "a"}'), ("call_b", "ls", "{}")]
    assert r.usage is not None and (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (5, 7, 12)


def test_no_finish_reason_is_a_cut_and_an_error_event_raises() -> None:
    reply = ReplyAssembler(lambda t: None)
    reply.add(read_chunk(chunk({"content": "partial"})))
    with pytest.raises(StreamCut):
        reply.reply()
    with pytest.raises(StreamErrorEvent, match="overloaded"):
        read_chunk({"error": {"message": "overloaded", "type": "server_error"}})


def test_content_parts_are_read_as_their_text_and_other_content_is_an_error() -> None:
    """Some OpenAI-compatible servers stream `content` as a list of content parts: their text parts
    are the reply (a "thinking" part is not). A number, an object or a part that is neither is not
    passed on as text (it would reach the clients and the history as a non-string)."""
    parts = [{"type": "text", "text": "Hel"}, {"type": "thinking", "thinking": [{"type": "text", "text": "hmm"}]},
             "l", {"text": "o"}]
    assert read_chunk(chunk({"content": parts})).text == "Hello"
    assert read_chunk(chunk({"content": []})).text == ""
    for content in (5, 1.5, True, {"text": "hi"}, [{"type": "text", "text": 5}], [7]):
        with pytest.raises(MalformedChunk, match=f"delta content is {type(content).__name__} "):
            read_chunk(chunk({"content": content}))


def test_the_request_body_drops_bookkeeping_fields_and_survives_a_lone_surrogate() -> None:
    msgs = [{"role": "user", "content": "hi \ud800"}, {"role": "tool", "tool_call_id": "c", "content": "x", "status": "ok"}]
    body = json.loads(encode_request("m", msgs, [{"type": "function"}]))
    assert body["messages"][1] == {"role": "tool", "tool_call_id": "c", "content": "x"}
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True} and body["tools"]
    assert body["messages"][0]["content"] == "hi \ufffd"  # llm.base.for_api scrubs it (safejson): the body always encodes
