"""`toycoder-daemon --check-config` as a process: the report of a good config (no key in it) and the
exit code of a bad one. Loading itself is tested in-process: unit/config/test_config.py."""

from __future__ import annotations

from pathlib import Path


def test_check_config_flag(tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    good = tmp_path / "good.yaml"
    good.write_text("providers:\n  openai:\n    api_keys: ['${SECRET_FOR_TEST}']\n")
    env = {**os.environ, "SECRET_FOR_TEST": "sk-check-config-123"}
    p = subprocess.run([sys.executable, "-m", "toycoder_daemon", "--check-config", "--config", str(good)],
                       capture_output=True, text=True, env=env, timeout=30)
    assert p.returncode == 0 and "sk-check-config-123" not in p.stdout
    out = json.loads(p.stdout)
    assert out["valid"] is True and out["path"] == str(good) and out["providers"][0]["keyCount"] == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text("agent: {max_steps: -1}\n")
    p = subprocess.run([sys.executable, "-m", "toycoder_daemon", "--check-config", "--config", str(bad)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "agent.max_steps" in json.loads(p.stdout)["error"]
