"""The real daemon blanks its keys in its initial environment block (/proc/<pid>/environ) and still uses
them. The scrubbing itself, on a plain child process: unit/core/test_environ_scrub.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import proc_dir

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the environment block is Linux's")


def test_the_daemon_blanks_its_key_and_still_uses_it(tmp_path: Path) -> None:
    """The real daemon, its key given in the environment through the config's ${VAR}."""
    config = tmp_path / "config.yaml"
    # an MCP server's env value is a secret by value only (registered when the servers are read)
    config.write_text('providers:\n  openai:\n    api_keys: ["${MY_PROVIDER_VAR}"]\n'
                      'mcp_servers:\n  gh:\n    command: "true"\n    enabled: false\n'
                      '    env:\n      GITHUB_TOKEN: "${GH_PAT}"\n')
    env = {**os.environ, "MY_PROVIDER_VAR": "sk-daemon-key-4242", "GH_PAT": "ghp-mcp-held-value-77"}
    daemon = subprocess.Popen([sys.executable, "-m", "toycoder_daemon", "--acp", "--config", str(config)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env=env, cwd=tmp_path)
    try:
        assert daemon.stdin is not None and daemon.stdout is not None
        for n, (method, params) in enumerate([("initialize", {"protocolVersion": 1}),
                                              ("session/new", {"cwd": str(tmp_path), "mcpServers": []})]):
            daemon.stdin.write(json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params}).encode()
                               + b"\n")
            daemon.stdin.flush()
            answer = json.loads(daemon.stdout.readline())
            assert "result" in answer, answer
        block = (Path(proc_dir(daemon.pid)) / "environ").read_bytes()
        assert b"MY_PROVIDER_VAR=" in block and b"sk-daemon-key-4242" not in block
        assert b"GH_PAT=" in block and b"ghp-mcp-held-value-77" not in block
        daemon.stdin.close()
        assert daemon.wait(30) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
