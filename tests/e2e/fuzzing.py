"""The faces under generated input (hypothesis), shared by test_fuzz_lsp_face.py and
test_fuzz_acp_face.py (one file per face, so the two run on different workers): random bytes, odd
headers, JSON of every type, deep nesting, unicode edge cases (lone surrogates, NUL, astral), and
well-formed requests with random params. Each example is written at once, then a sentinel request;
the daemon must answer the sentinel (it stays alive and keeps serving), answer every generated
request exactly once, send only well-formed JSON-RPC, and keep its memory bounded. A real process,
because staying alive and its memory are the point. 10,000+ frames per face in the default tier;
TOYCODER_SLOW=1 runs ten times as many."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from helpers import ROOT, rss_bytes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toycoder_daemon.wire import protocol as wire

SLOW = os.environ.get("TOYCODER_SLOW") == "1"
TARGET_FRAMES = 100_000 if SLOW else 10_000
PER_EXAMPLE = (20, 50)
EXAMPLES = TARGET_FRAMES // PER_EXAMPLE[0]  # an upper bound: the run stops once TARGET_FRAMES were sent
RSS_GROWTH_LIMIT = 200 * 1024 * 1024

# ---- values --------------------------------------------------------------------------------------

edge_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", "\x00", "\udcff", "nope\udcff.txt", "\ud83d", "😀" * 5, "\u202e", "a\r\nb", "\\", '"']),
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 70), 2 ** 70),
                    st.floats(allow_nan=False, allow_infinity=False), edge_text)
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(edge_text, inner, max_size=4)), max_leaves=12)


def dumps(value: Any) -> bytes:
    return json.dumps(value).encode()  # ensure_ascii: lone surrogates travel as \\udcff escapes


def deep(n: int) -> bytes:
    return b"[" * n + b"]" * n


# ---- the daemon in a process, read on a thread ---------------------------------------------------

class Peer:
    """One daemon process: write bytes, collect every message it sends (parsed)."""

    def __init__(self, args: list[str], cwd: Path, stderr: Any, framed: bool):
        self.proc = subprocess.Popen([sys.executable, "-m", "toycoder_daemon", *args], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
        self.framed = framed
        self.messages: list[dict[str, Any]] = []
        self.answers: dict[Any, int] = {}
        self.bad: list[bytes] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            if self.framed:
                length = None
                while True:
                    line = out.readline()
                    if not line:
                        return
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                    elif line == b"\r\n":
                        break
                body = out.read(length or 0)
            else:
                body = out.readline()
                if not body:
                    return
            self._take(body)

    def _take(self, body: bytes) -> None:
        try:
            msg = json.loads(body)
            ok = isinstance(msg, dict) and msg.get("jsonrpc") == "2.0" and (
                "method" in msg or ("id" in msg and (("result" in msg) != ("error" in msg))))
        except ValueError:
            msg, ok = None, False
        with self._cond:
            if not ok:
                self.bad.append(body[:200])
            else:
                self.messages.append(msg)
                if "method" not in msg:
                    key = json.dumps(msg["id"])
                    self.answers[key] = self.answers.get(key, 0) + 1
            self._cond.notify_all()

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def wait_answered(self, ids: list[Any], timeout: float = 20.0) -> None:
        keys = [json.dumps(i) for i in ids]
        with self._cond:
            if not self._cond.wait_for(lambda: all(k in self.answers for k in keys) or self.proc.poll() is not None,
                                       timeout):
                missing = [k for k in keys if k not in self.answers]
                raise AssertionError(f"no answer to {missing[:5]} within {timeout}s")
        assert self.proc.poll() is None, f"the daemon exited with {self.proc.returncode}"

    def rss(self) -> int:
        return rss_bytes(self.proc.pid)

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


# ---- one face's generator and the run ------------------------------------------------------------

ids = itertools.count(1_000_000)


def fuzz(peer: Peer, pieces: Any, request_methods: list[str], sentinel: dict[str, Any],
         encode: Any, calls: Any = None) -> tuple[int, int]:
    """Run the generated examples against `peer`; returns (frames sent, requests tracked)."""
    sent = [0, 0]

    def request(method: str, params: Any, with_id: bool) -> tuple[bytes, Any]:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        msg_id = next(ids) if with_id else None
        if with_id:
            msg["id"] = msg_id if msg_id % 2 else f"fz-{msg_id}"
            msg_id = msg["id"]
        return encode(dumps(msg)), msg_id

    requests = st.builds(request, st.one_of(st.sampled_from(request_methods), edge_text.filter(
        lambda m: m not in ("exit", "shutdown"))), json_values, st.booleans())
    face_calls = st.nothing() if calls is None else calls
    requests = st.one_of(requests, face_calls.map(lambda c: request(c["method"], c["params"], True)))
    raw = pieces.map(lambda b: (b, None))
    examples = st.lists(st.one_of(raw, requests), min_size=PER_EXAMPLE[0], max_size=PER_EXAMPLE[1])

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=not SLOW,
              suppress_health_check=list(HealthCheck))
    @given(examples)
    def run(example: list[tuple[bytes, Any]]) -> None:
        if sent[0] >= TARGET_FRAMES:
            return
        expect = [msg_id for _, msg_id in example if msg_id is not None]
        marker = f"sentinel-{next(ids)}"
        peer.write(b"".join(data for data, _ in example) + encode(dumps({**sentinel, "id": marker})))
        peer.wait_answered([*expect, marker])
        sent[0] += len(example)
        sent[1] += len(expect)

    run()
    return sent[0], sent[1]


def check(peer: Peer, frames: int, tracked: int, rss_before: int) -> None:
    assert frames >= TARGET_FRAMES and tracked > 0
    assert peer.bad == []
    twice = {k: n for k, n in peer.answers.items() if n > 1 and k != "null"}
    assert twice == {}, f"answered more than once: {list(twice)[:5]}"
    null_codes = {m["error"]["code"] for m in peer.messages if "method" not in m and m["id"] is None}
    assert null_codes <= {wire.PARSE_ERROR, wire.INVALID_REQUEST}
    assert peer.rss() - rss_before < RSS_GROWTH_LIMIT
    assert peer.close() == 0
