"""Issue 13 item 7: start-up inputs that do not decode. A broken config is reported as the docs
promise (window/showMessage naming the file and the cause, -32013 on requests that need the
config); prompt inputs (the git branch, AGENTS.md) degrade with a logged warning."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from inproc import start_lsp
from rpc import RpcError

from toycoder_daemon.testing.fake_llm import FakeLLM
from toycoder_daemon.wire import protocol as wire

CONFIGS = {
    "latin-1 byte": (b"agent:\n  max_steps: 4  # caf\xe9\n", ["not UTF-8", "byte 0xe9", "line 2"]),
    "nested 10,000 deep": (b"agent: " + b"[" * 10_000 + b"]" * 10_000 + b"\n", ["nested too deep"]),
}


@pytest.mark.parametrize("case", list(CONFIGS))
async def test_undecodable_config_is_reported_not_fatal(tmp_path: Path, workspace: Path, case: str) -> None:
    data, causes = CONFIGS[case]
    cfg = tmp_path / "config.yaml"
    cfg.write_bytes(data)
    d = await start_lsp(cfg)
    try:
        await d.initialize(workspace)
        shown = await d.wait_for(lambda: [n for n in d.notifications if n["method"] == "window/showMessage"])
        message = shown[0]["params"]["message"]
        assert str(cfg) in message and all(c in message for c in causes), message
        sid = (await d.call(wire.SESSION_NEW, {}))["sessionId"]  # the daemon serves
        with pytest.raises(RpcError) as e:
            await d.call(wire.PROMPT, {"sessionId": sid, "text": "hi"})
        assert e.value.code == wire.CONFIG_ERROR and str(cfg) in e.value.message
    finally:
        assert await d.close() == 0


async def test_undecodable_branch_and_agents_md_degrade_with_a_warning(
        tmp_path: Path, workspace: Path, llm: FakeLLM, caplog: pytest.LogCaptureFixture) -> None:
    from helpers import write_config

    (workspace / ".git").mkdir(exist_ok=True)
    (workspace / ".git" / "HEAD").write_bytes(b"ref: refs/heads/caf\xe9\n")
    (workspace / "AGENTS.md").write_bytes(b"Use tabs. Caf\xe9 rules.\n")
    llm.add({"text": "hello"})
    d = await start_lsp(write_config(tmp_path / "config.yaml", llm))
    try:
        with caplog.at_level(logging.WARNING):
            await d.initialize(workspace)
            sid = (await d.call(wire.SESSION_NEW, {}))["sessionId"]
            result = await d.call(wire.PROMPT, {"sessionId": sid, "text": "hi"})
        assert result["stopReason"] == "end_turn"
        system = llm.requests[-1]["body"]["messages"][0]["content"]
        assert "Git branch: caf\ufffd." in system and "Use tabs. Caf\ufffd rules." in system
        warned = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
        assert ".git/HEAD" in warned and "AGENTS.md" in warned
    finally:
        assert await d.close() == 0


async def test_undecodable_config_through_the_daemon_process(tmp_path: Path, workspace: Path) -> None:
    # The subprocess answers initialize before the config is read (the fast path): the config
    # problem must still arrive as a message and -32013, not as -32002 on every request.
    from rpc import Daemon

    cfg = tmp_path / "config.yaml"
    cfg.write_bytes(CONFIGS["latin-1 byte"][0])
    d = await Daemon.start("--config", str(cfg))
    try:
        await d.initialize(workspace)
        shown = await d.wait_for(lambda: [n for n in d.notifications if n["method"] == "window/showMessage"])
        assert str(cfg) in shown[0]["params"]["message"] and "not UTF-8" in shown[0]["params"]["message"]
        sid = (await d.call(wire.SESSION_NEW, {}))["sessionId"]
        with pytest.raises(RpcError) as e:
            await d.call(wire.PROMPT, {"sessionId": sid, "text": "hi"})
        assert e.value.code == wire.CONFIG_ERROR
    finally:
        assert await d.close() == 0
