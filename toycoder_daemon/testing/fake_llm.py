"""A scripted, OpenAI-compatible model server for tests and demos.

Every ``POST /v1/chat/completions`` (or ``/chat/completions``) consumes the next
reply of a script, in order, and answers it streamed (SSE, exact
``chat.completion.chunk`` shape) or as one ``chat.completion`` JSON, according
to the request's ``stream`` flag. ``GET /v1/models`` lists the model names seen; ``GET /props``
answers llama-server's (the dialect's ``n_ctx`` and ``supports_tools``); ``POST /api/show`` answers
Ollama's when the dialect plays Ollama (its ``ollama_capabilities``).

    with FakeLLM([{"text": "Hello!"}, {"tool_calls": [{"name": "read", "arguments": {"path": "a"}}]}]) as llm:
        client = openai.OpenAI(api_key="k", base_url=llm.base_url, max_retries=0)
        ...
        assert llm.requests[0]["headers"]["authorization"] == "Bearer k"
        assert llm.violations == []

Reply fields (unknown fields raise ``ValueError`` when the script is loaded):

``text``         str (split every ``chunk_size`` characters, default 4) or a list
                 of str (one delta each). Streamed before any tool calls.
``tool_calls``   list of ``{name, arguments, id?}``. ``arguments`` is a dict
                 (JSON-encoded here) or a raw string sent as is (may be invalid
                 JSON on purpose). Default ids are ``call_1``, ``call_2``... unique
                 per server. Like OpenAI, each call opens with a header delta
                 (``index, id, type, function.name, arguments: ""``), then its
                 arguments follow in ``arg_chunks`` pieces (default 3;
                 ``arg_chunks: 0`` puts all arguments in the header delta).
``interleave``   true: the deltas of several calls are sent round-robin.
``finish_reason`` override; default ``tool_calls`` if there are calls, else ``stop``.
``usage``        ``{prompt_tokens?, completion_tokens?}``; defaults: characters of
                 all message contents // 4, and the number of deltas.
``status``       fault: answer this HTTP status with an OpenAI-style error body;
                 ``error`` (str message, or dict merged into the error object)
                 and ``retry_after`` (seconds, sent as ``Retry-After``).
``drop_after``   fault: stream N deltas, then shut the socket down: no finish
                 chunk, no ``[DONE]``, and the chunked HTTP body is left
                 unterminated. The openai SDK (httpx) then raises
                 ``openai.APIConnectionError`` while iterating the stream, after
                 yielding the N chunks. Non-streaming: the socket is closed before
                 any response (the SDK raises ``APIConnectionError`` too).
``delay``        seconds to wait before the first byte of the response.
``chunk_delay``  seconds to wait between deltas.
``expect``       checks on the request consuming this reply; failures go to
                 ``violations``: ``last_user_contains``, ``last_tool_contains``
                 (substring), ``has_tools`` (bool), ``model`` (str).
``note``         ignored; lets JSON scripts carry comments.

Server-side checks (each appends a readable string to ``violations``):

* tool invariant (``check_tool_invariant=True``): in ``messages``, the ids of an
  assistant message's ``tool_calls`` must each be answered by a ``tool`` message
  before the next non-tool message, and a tool message may not answer an unknown
  id. Violations get OpenAI's kind of HTTP 400 and consume no reply.
* script exhausted: HTTP 500 ``fake_llm: script exhausted (N requests)``, where N
  counts the chat-completion requests received so far (this one included).

Other violations start with ``request N:``, N being the 1-based position in ``requests``.

``dialect`` (``dialects.Dialect``, settable while serving) plays a real server's differences.

Every request, whatever its path or outcome, is appended to ``requests`` as
``{"path", "body" (parsed JSON or None), "headers" (lower-case names)}``.

CLI: ``python -m toycoder_daemon.testing.fake_llm --script FILE|- [--port N]
[--host H] [--no-check]`` prints the base URL as its first stdout line, logs one
line per request to stderr and serves until SIGTERM/SIGINT (exit status 0).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TextIO

from toycoder_daemon.testing import dialects
from toycoder_daemon.testing import script as steps
from toycoder_daemon.testing.replies import error_body, load_script, plan_deltas, tool_call_problems

__all__ = ["FakeLLM", "load_script", "tool_call_problems", "main"]

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
MODELS_PATHS = ("/v1/models", "/models")


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stuck client connection must never block stop()
    fake: FakeLLM

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-stream (a cancelled turn) is normal here, not worth a traceback.
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: every response has Content-Length or is chunked
    disable_nagle_algorithm = True  # each SSE event leaves at once instead of waiting for an ACK
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.fake.track_connection(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.fake.track_connection(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # FakeLLM.log gets one summary line per request instead

    # ----- plumbing
    def _log(self, status: int | str, detail: str = "") -> None:
        self.server.fake.log_line(f"{self.command} {self.path} -> {status} {detail}".rstrip())

    def _send_json(self, status: int, obj: dict[str, Any] | None, headers: dict[str, Any] | None = None) -> None:
        data = b"" if obj is None else json.dumps(obj).encode()  # None: an empty body
        self.send_response(status)
        self._server_header()
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, status: int, message: str, extra: dict[str, Any] | None = None,
                    headers: dict[str, Any] | None = None) -> None:
        self._log(status, message)
        self._send_json(status, error_body(status, message, extra), headers)

    def _server_header(self) -> None:
        if self.server.fake.dialect.server:
            self.send_header("Server", self.server.fake.dialect.server)
    def _abort(self) -> None:
        # FIN in the middle of a chunked body: the client cannot mistake it for a normal end.
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    # ----- endpoints
    def do_GET(self) -> None:
        fake = self.server.fake
        path = self.path.split("?", 1)[0]
        fake.record_get(path, self.headers)
        if path.rstrip("/") in MODELS_PATHS:
            self._log(200)
            models = [dialects.model_entry(fake.dialect, m) for m in fake.models()]
            self._send_json(200, {"object": "list", "data": models})
        elif path.rstrip("/") == "/props":
            self._log(200)
            self._send_json(200, dialects.props(fake.dialect))
        else:
            self._send_error(404, f"fake_llm: no route GET {path}")

    def do_POST(self) -> None:
        fake = self.server.fake
        path = self.path.split("?", 1)[0]
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        n = fake.record(path, body, self.headers)
        if path.rstrip("/") == "/api/show":  # Ollama's native API: a model's capabilities
            status, shown = dialects.ollama_show(fake.dialect, body, fake.models())
            self._log(status)
            return self._send_json(status, shown)
        if path.rstrip("/") not in CHAT_PATHS:
            return self._send_error(404, f"fake_llm: no route POST {path}")
        if not isinstance(body, dict):
            return self._send_error(400, "fake_llm: request body is not a JSON object")
        if fake.check_tool_invariant:
            problems = tool_call_problems(body.get("messages"))
            if problems:
                fake.add_violation(f"request {n}: " + "; ".join(problems))
                return self._send_error(400, (
                    "An assistant message with 'tool_calls' must be followed by tool messages responding "
                    "to each 'tool_call_id', and each tool message must answer one of them: "
                    + "; ".join(problems)))
        verdict = dialects.judge(fake.dialect, body)
        if verdict is not None:  # the real server's own answer (an empty 200: llama-cpp-python's overflow)
            self._log(verdict[0], "dialect")
            return self._send_json(*verdict)
        reply = fake.take_reply(body.get("model"))
        if reply is None:
            message = f"fake_llm: script exhausted ({fake.chat_requests()} requests)"
            fake.add_violation(message)
            return self._send_error(500, message)
        for problem in steps.expect_problems(reply.get("expect") or {}, body.get("messages") or [],
                                             body.get("tools"), body.get("model")):
            fake.add_violation(f"request {n}: {problem}")
        if reply.get("delay"):
            time.sleep(reply["delay"])
        f = steps.fault(reply)
        if f is not None:
            headers = {}
            if f.retry_after is not None:
                ra = f.retry_after
                headers["Retry-After"] = str(int(ra)) if ra.is_integer() else str(ra)
            return self._send_error(f.status, f.message, f.extra, headers)
        self._answer(fake, n, body, dialects.shape_reply(fake.dialect, body, reply))

    def _answer(self, fake: FakeLLM, n: int, body: dict[str, Any], reply: dict[str, Any]) -> None:
        deltas, calls = plan_deltas(reply, fake.new_call_id)
        finish = steps.finish_reason(reply, bool(calls))
        prompt, completion = steps.usage(reply, sum(
            len(steps.text_of(m.get("content"))) for m in body.get("messages") or [] if isinstance(m, dict)), len(deltas))
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        drop = reply.get("drop_after")
        head = {"id": f"chatcmpl-fake{n}", "created": int(time.time()), "model": body.get("model") or fake.model}

        if not body.get("stream"):
            if drop is not None:
                self._log("dropped", "no response sent")
                return self._abort()
            text = "".join(d.get("content", "") for d in deltas)
            message: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
            if calls:
                message["tool_calls"] = [{"id": i, "type": "function", "function": {"name": nm, "arguments": a}}
                                         for i, nm, a in calls]
            self._log(200, f"json, {len(calls)} tool call(s)")
            return self._send_json(200, {**head, "object": "chat.completion", "choices": [
                {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}], "usage": usage})

        self.send_response(200)
        self._server_header()
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        head["object"] = "chat.completion.chunk"
        deltas = deltas or [{"content": ""}]
        deltas[0] = {"role": "assistant", **deltas[0]}
        chunk_delay = reply.get("chunk_delay") or 0
        for i, delta in enumerate(deltas if drop is None else deltas[:drop]):
            if chunk_delay and i:
                time.sleep(chunk_delay)
            self._event({**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        if drop is not None:
            self._log(200, f"stream dropped after {min(drop, len(deltas))} of {len(deltas)} deltas")
            return self._abort()
        self._event({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        if (body.get("stream_options") or {}).get("include_usage") and fake.dialect.usage:
            self._event({**head, "choices": [], "usage": usage})
        # [DONE] and the chunked-body terminator in one write.
        self.wfile.write(b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")
        self._log(200, f"stream, {len(deltas)} deltas, finish_reason={finish}")

    def _event(self, obj: dict[str, Any]) -> None:
        data = b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
        # One HTTP chunk per SSE event and one write per chunk: wfile is unbuffered
        # (wbufsize=0), so this is a single sendall and the client sees it at once.
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))


class FakeLLM:
    """The scripted server. Use as a context manager, or call ``start()``/``stop()``."""

    log: TextIO | None = None  # where to write one line per request (the CLI sets stderr)

    def __init__(self, script: list[dict[str, Any]] | None = None, *, host: str = "127.0.0.1", port: int = 0,
                 check_tool_invariant: bool = True, model: str = "fake-model") -> None:
        self.host, self.port = host, port
        self.check_tool_invariant = check_tool_invariant
        self.model = model
        self.dialect = dialects.Dialect()
        self.requests: list[dict[str, Any]] = []
        self.gets: list[dict[str, Any]] = []
        """GET requests (model lists), in order."""
        self.violations: list[str] = []
        self.connections = 0  # TCP connections accepted so far (shows keep-alive at work)
        self._script: list[dict[str, Any]] = []
        self._models = [model]
        self._call_ids = 0
        self._cond = threading.Condition()  # guards all of the state above
        self._open: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.add(*(script or []))

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeLLM is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def add(self, *replies: dict[str, Any]) -> None:
        """Append replies to the script (also while serving)."""
        for reply in replies:
            steps.check_reply(reply)
        with self._cond:
            self._script.extend(replies)

    def start(self) -> FakeLLM:
        if self._server is None:
            self._server = _Server((self.host, self.port), _Handler)
            self._server.fake = self
            # A short poll interval keeps stop() fast (serve_forever checks for shutdown this often).
            self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                            name="fake-llm", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        with self._cond:
            for sock in self._open:  # wake handlers idling on keep-alive connections
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> None:
        """Block until at least ``n`` requests have been recorded; ``TimeoutError`` otherwise."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.requests) >= n, timeout):
                raise TimeoutError(f"fake_llm: {len(self.requests)} of {n} requests after {timeout}s")

    # ----- used by the handler threads
    def record_get(self, path: str, headers: Any) -> None:
        """A GET (a model list): kept apart from `requests`, so asking which models the server has
        (ACP's config options do on session/new) does not shift the chat requests tests index."""
        with self._cond:
            self.gets.append({"path": path, "headers": {k.lower(): v for k, v in headers.items()}})

    def record(self, path: str, body: Any, headers: Any) -> int:
        with self._cond:
            self.requests.append({"path": path, "body": body,
                                  "headers": {k.lower(): v for k, v in headers.items()}})
            self._cond.notify_all()
            return len(self.requests)

    def add_violation(self, text: str) -> None:
        with self._cond:
            self.violations.append(text)
        self.log_line(f"VIOLATION {text}")

    def take_reply(self, model: Any) -> dict[str, Any] | None:
        with self._cond:
            if isinstance(model, str) and model not in self._models:
                self._models.append(model)
            return self._script.pop(0) if self._script else None

    def models(self) -> list[str]:
        """The models /v1/models lists: the configured one, then each one a request named."""
        with self._cond:
            return list(self._models)

    def chat_requests(self) -> int:
        with self._cond:
            return sum(r["path"].rstrip("/") in CHAT_PATHS for r in self.requests)

    def new_call_id(self) -> str:
        with self._cond:
            self._call_ids += 1
            return f"call_{self._call_ids}"

    def track_connection(self, sock: socket.socket, is_open: bool) -> None:
        with self._cond:
            if is_open:
                self.connections += 1
                self._open.add(sock)
            else:
                self._open.discard(sock)

    def log_line(self, line: str) -> None:
        if self.log is not None:
            print(f"fake_llm: {line}", file=self.log, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m toycoder_daemon.testing.fake_llm",
                                     description="Serve a scripted OpenAI-compatible model.")
    parser.add_argument("--script", required=True, help="JSON (or .yaml/.yml) list of replies; '-' = JSON on stdin")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 = any free port")
    parser.add_argument("--model", default="fake-model")
    parser.add_argument("--no-check", action="store_true", help="do not check tool_call_id pairing")
    args = parser.parse_args(argv)

    fake = FakeLLM(load_script(args.script), host=args.host, port=args.port,
                   check_tool_invariant=not args.no_check, model=args.model)
    fake.log = sys.stderr

    def exit_cleanly(signum: int, frame: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, exit_cleanly)
    signal.signal(signal.SIGINT, exit_cleanly)
    fake.start()
    print(fake.base_url, flush=True)  # the first stdout line: callers wait for it
    try:
        while True:
            time.sleep(3600)  # signals interrupt the sleep and raise SystemExit
    finally:
        fake.stop()


if __name__ == "__main__":
    sys.exit(main())
