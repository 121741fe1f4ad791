"""The terminal front: the raw JSON-RPC script, the demo, and the README's run command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import write_config

from toycoder_daemon.testing.fake_llm import FakeLLM

ROOT = Path(__file__).resolve().parent.parent
DAEMON = f"{sys.executable} -m toycoder_daemon"


def run(args: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, **kw)


def test_rpc_chat_one_shot_streams_and_applies_policy(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    cfg = write_config(tmp_path / "c.yaml", llm)
    llm.add({"text": "Let me change it.", "tool_calls": [{"name": "write_file", "arguments": {"path": "README.md", "content": "gone"}}]},
            {"text": "You said no, so I left it."})
    p = run([sys.executable, str(ROOT / "clients/terminal/rpc_chat.py"), "--daemon", DAEMON, "--config", str(cfg),
             "--workspace", str(workspace), "--approve", "deny", "replace the readme"])
    assert p.returncode == 0, p.stderr
    assert p.stdout == "Let me change it.You said no, so I left it."
    assert "[permission] write_file README.md (sensitive)" in p.stderr and "+gone" in p.stderr
    assert "<- denied" in p.stderr
    assert (workspace / "README.md").read_text().startswith("# Demo")
    assert llm.requests[0]["body"]["messages"][-1]["content"] == "replace the readme"


def test_rpc_chat_reports_provider_errors(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    cfg = write_config(tmp_path / "c.yaml", llm)
    llm.add({"status": 401, "error": "bad key"})
    p = run([sys.executable, str(ROOT / "clients/terminal/rpc_chat.py"), "--daemon", DAEMON, "--config", str(cfg),
             "--workspace", str(workspace), "hello"])
    assert p.returncode == 1
    assert "[error] provider 'openai' failed: authentication failed" in p.stderr


def test_demo_runs_a_real_session_with_the_scripted_model() -> None:
    p = run([sys.executable, str(ROOT / "clients/terminal/demo.py"), "--approve", "allow", "--daemon", DAEMON])
    assert p.returncode == 0, p.stderr
    assert "SCRIPTED" in p.stderr
    assert "-> read_file calc.py" in p.stderr and "<- completed: edited calc.py" in p.stderr
    assert "-    return sum(numbers) / (len(numbers) - 1)" in p.stderr  # the diff was shown
    assert "    return sum(numbers) / len(numbers)\n" in p.stderr.split("calc.py after the session:")[1]
    assert p.stdout.startswith("I'll start by looking") and "now divides by" in p.stdout


def test_readme_run_command_without_a_key_runs_the_demo() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "TOYCODER_CONFIG")}
    p = run([str(ROOT / "scripts/run")], env=env, cwd=str(ROOT))
    assert p.returncode == 0, p.stderr
    assert "scripted" in p.stderr.lower() and "now divides by" in p.stdout
