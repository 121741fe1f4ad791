"""The LSP face under generated input: framing (odd headers, lengths), bodies and requests
(fuzzing.py says what is generated and what must hold)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fuzzing import Peer, check, deep, dumps, fuzz, json_values
from helpers import write_config
from hypothesis import strategies as st

from toycoder_daemon.testing.fake_llm import FakeLLM
from toycoder_daemon.wire import protocol as wire


def test_fuzz_lsp_face(tmp_path: Path, llm: FakeLLM, workspace: Path,
                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # hypothesis keeps nothing (database=None), but stay out of the repo anyway
    def frame(body: bytes) -> bytes:
        return b"Content-Length: %d\r\n\r\n" % len(body) + body

    headers = st.sampled_from([b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n",
                               b"content-length :  ", b"X: y\r\n", b"\r\n", b"garbage without colon\r\n"])
    pieces = st.one_of(
        st.binary(max_size=300).map(frame),  # random bytes as a body
        json_values.map(lambda v: frame(dumps(v))),  # JSON of every type
        st.integers(500, 20_000).map(lambda n: frame(deep(n))),
        st.tuples(headers, json_values).map(lambda hv: hv[0] + frame(dumps(hv[1]))),  # odd headers before a frame
        st.sampled_from([b"Content-Length: 99999999999\r\n\r\n", b"Content-Length: -4\r\n\r\n",
                         b"Content-Length: ten\r\n\r\n", b"Content-Length: 0\r\n\r\n"]),
        st.binary(max_size=200).filter(lambda b: b"ength" not in b.lower()).map(lambda b: b + b"\r\n"),
    )
    methods = [r.method for r in wire.REQUESTS] + ["initialize", "initialized", "$/cancelRequest",
                                                  "textDocument/didOpen", "textDocument/didChange",
                                                  "workspace/didChangeConfiguration", "$/setTrace"]
    cfg = write_config(tmp_path / "config.yaml", llm)
    with open(tmp_path / "daemon.log", "wb") as log:
        peer = Peer(["--config", str(cfg), "--log-level", "INFO"], workspace, log, framed=True)
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {}}}
        peer.write(frame(dumps(init)) + frame(dumps({"jsonrpc": "2.0", "method": "initialized", "params": {}})))
        peer.wait_answered([0])
        rss = peer.rss()
        frames, tracked = fuzz(peer, pieces, methods, {"jsonrpc": "2.0", "method": wire.SESSION_LIST, "params": {}},
                               frame)
        check(peer, frames, tracked, rss)
