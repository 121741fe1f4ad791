"""One fake model server for the peer bench: the same reply, chunked the same way, in both dialects.

codex 0.171 speaks only the Responses API (`wire_api = "chat"` is rejected), our daemon speaks
Chat Completions; `toycoder_daemon.testing.fake_llm` serves only the latter. This server answers
`POST .../chat/completions` and `POST .../responses` with N streamed text deltas ("tok0 ",
"tok1 ", ...), one SSE event per delta and one HTTP chunk per event on both paths, so neither
peer gets cheaper framing. It serves every request the same reply; N is set per turn by the bench.

`PeerLLM` runs the server in a child process (`python bench/peer_llm.py` prints its base URL), so
the bench's own reading of the peers' output does not share a GIL with the server's writing;
`POST /bench/tokens/N` sets the reply length, `GET /bench/stats` returns the request counters.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as a real server's (uvicorn, asyncio): a small event is not held for an ACK
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the bench prints tables
        pass

    def do_GET(self) -> None:
        if self.path == "/bench/stats":
            return self._json(200, {"requests": self.server.requests, "request_bytes": self.server.request_bytes})
        if self.path.rstrip("/").endswith("/models"):  # codex asks for a model list; an empty one is fine
            return self._json(200, {"object": "list", "data": [], "models": []})
        self._json(404, {"error": {"message": f"no route GET {self.path}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        if self.path.startswith("/bench/tokens/"):
            self.server.tokens = int(self.path.rsplit("/", 1)[1])
            return self._json(200, {"tokens": self.server.tokens})
        self.server.requests += 1
        self.server.request_bytes += len(body)
        path = self.path.split("?", 1)[0].rstrip("/")  # the Agent SDK adds ?beta=true
        n = self.server.tokens
        if path.endswith("/chat/completions"):
            events = _chat_events(n)
        elif path.endswith("/responses"):
            events = _responses_events(n)
        elif path.endswith("/messages"):
            if not json.loads(body or b"{}").get("stream"):  # the Agent SDK's side requests (titles, probes)
                return self._json(200, _messages_reply(n))
            events = _messages_events(n)
        else:
            return self._json(404, {"error": {"message": f"no route POST {self.path}"}})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        w = self.wfile
        try:
            for ev in events:
                w.write(b"%x\r\n%s\r\n" % (len(ev), ev))
                w.flush()
            w.write(b"0\r\n\r\n")
            w.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _json(self, status: int, obj: Any) -> None:
        data = _dump(obj)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _chat_events(n: int) -> Iterator[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        obj = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": "fake-model",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if delta is not None else [], **extra}
        return b"data: " + _dump(obj) + b"\n\n"

    yield chunk({"role": "assistant", "content": ""})
    yield from (chunk({"content": f"tok{i} "}) for i in range(n))
    yield chunk({}, "stop")
    yield (b"data: " + _dump({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
                              "model": "fake-model", "choices": [],
                              "usage": {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": n + 10}})
           + b"\n\n")
    yield b"data: [DONE]\n\n"


def _responses_events(n: int) -> Iterator[bytes]:
    def ev(obj: dict[str, Any]) -> bytes:
        return b"event: " + obj["type"].encode() + b"\ndata: " + _dump(obj) + b"\n\n"

    text = "".join(f"tok{i} " for i in range(n))
    msg = {"type": "message", "id": "msg_bench", "role": "assistant", "status": "completed",
           "content": [{"type": "output_text", "text": text, "annotations": []}]}
    yield ev({"type": "response.created", "response": {"id": "resp_bench"}})
    yield ev({"type": "response.output_item.added", "output_index": 0,
              "item": {**msg, "status": "in_progress", "content": []}})
    yield from (ev({"type": "response.output_text.delta", "item_id": "msg_bench", "output_index": 0,
                    "content_index": 0, "delta": f"tok{i} "}) for i in range(n))
    yield ev({"type": "response.output_item.done", "output_index": 0, "item": msg})
    yield ev({"type": "response.completed", "response": {
        "id": "resp_bench", "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                                      "output_tokens": n, "output_tokens_details": {"reasoning_tokens": 0},
                                      "total_tokens": n + 10}}})


def _messages_reply(n: int) -> dict[str, Any]:
    return {"id": "msg_bench", "type": "message", "role": "assistant", "model": "fake-model",
            "content": [{"type": "text", "text": "".join(f"tok{i} " for i in range(n))}],
            "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": n}}


def _messages_events(n: int) -> Iterator[bytes]:
    """Anthropic's Messages API stream (claude-agent-acp's dialect), one text delta per event."""
    def ev(obj: dict[str, Any]) -> bytes:
        return b"event: " + obj["type"].encode() + b"\ndata: " + _dump(obj) + b"\n\n"

    start = {**_messages_reply(0), "content": [], "stop_reason": None, "usage": {"input_tokens": 10, "output_tokens": 1}}
    yield ev({"type": "message_start", "message": start})
    yield ev({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
    yield from (ev({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": f"tok{i} "}})
                for i in range(n))
    yield ev({"type": "content_block_stop", "index": 0})
    yield ev({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
              "usage": {"output_tokens": n}})
    yield ev({"type": "message_stop"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # 20+ sessions connect at once: the default backlog (5) drops connections under load
    tokens = 10
    requests = 0
    request_bytes = 0


class PeerLLM:
    """`with PeerLLM() as llm: llm.set_tokens(2000); ... llm.base_url` (the server runs in a child process)."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen([sys.executable, __file__], stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        self.base_url = self._proc.stdout.readline().strip()
        if not self.base_url:
            raise RuntimeError("bench/peer_llm.py did not start")
        self._root = self.base_url.rsplit("/v1", 1)[0]

    def set_tokens(self, n: int) -> None:
        urllib.request.urlopen(urllib.request.Request(f"{self._root}/bench/tokens/{n}", data=b"", method="POST")).read()

    def stats(self) -> dict[str, int]:
        with urllib.request.urlopen(f"{self._root}/bench/stats") as r:
            return dict(json.loads(r.read()))

    def __enter__(self) -> PeerLLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self._proc.terminate()
        self._proc.wait(10)


def main() -> None:
    server = _Server(("127.0.0.1", 0), _Handler)
    print(f"http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    server.serve_forever()  # until SIGTERM from PeerLLM


if __name__ == "__main__":
    main()
