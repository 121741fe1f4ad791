"""The ACP face under generated input: lines, bodies, and session requests with random sessions and
cwds (fuzzing.py says what is generated and what must hold)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fuzzing import Peer, check, deep, dumps, edge_text, fuzz, json_values
from helpers import write_config
from hypothesis import strategies as st

from toycoder_daemon.testing.fake_llm import FakeLLM


def test_fuzz_acp_face(tmp_path: Path, llm: FakeLLM, workspace: Path,
                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # hypothesis keeps nothing (database=None), but stay out of the repo anyway
    def line(body: bytes) -> bytes:
        return body.replace(b"\n", b" ") + b"\n"

    pieces = st.one_of(
        st.binary(max_size=300).map(line),
        json_values.map(lambda v: line(dumps(v))),
        st.integers(500, 20_000).map(lambda n: line(deep(n))),
        st.sampled_from([b"\n", b"\r\n", b"  \n", b"\xff\xfe\n", b"{\n", b"}\n"]),
    )
    cwds = st.one_of(st.just(str(workspace)), edge_text.filter(lambda c: not os.path.isdir(c)))
    methods = ["initialize", "session/list", "session/prompt", "session/load", "session/cancel",
               "session/set_mode", "authenticate", "fs/read_text_file"]
    sessions = st.builds(  # well-formed session requests with a random session or cwd
        lambda m, cwd, sid: {"method": m, "params": {"cwd": cwd, "sessionId": sid, "prompt": []}},
        st.sampled_from(["session/load", "session/prompt", "session/list"]), cwds, edge_text)
    cfg = write_config(tmp_path / "config.yaml", llm)
    with open(tmp_path / "daemon.log", "wb") as log:
        peer = Peer(["--acp", "--config", str(cfg), "--log-level", "INFO"], workspace, log, framed=False)
        peer.write(line(dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})))
        peer.wait_answered([0])
        rss = peer.rss()
        frames, tracked = fuzz(peer, pieces, methods,
                               {"jsonrpc": "2.0", "method": "session/list", "params": {"cwd": str(workspace)}}, line,
                               sessions)
        check(peer, frames, tracked, rss)
