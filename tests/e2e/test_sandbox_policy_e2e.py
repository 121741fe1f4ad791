"""`toycoder-daemon --check-config` reports the sandbox: its mode, whether this machine can give it, the
Landlock ABI. The policy as data: unit/tools/shell/sandbox/test_sandbox_policy.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from toycoder_daemon.tools.shell.sandbox import landlock, probe


def test_check_config_reports_the_sandbox(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("tools: {run_command: {sandbox: required}}\n")
    done = subprocess.run([sys.executable, "-m", "toycoder_daemon", "--check-config", "--config", str(cfg)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["sandbox"]
    assert report["mode"] == "required"
    assert report["available"] == (probe.support().missing() is None)
    assert report["landlockAbi"] == landlock.abi_version() and report["summary"].startswith("sandbox: ")
