"""The terminal front's raw examples (rpc_chat.py, oneshot.sh), the demo, and the README's run command."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from helpers import ROOT, write_config

from toycoder_daemon.testing.fake_llm import FakeLLM

DAEMON = f"{sys.executable} -m toycoder_daemon"


def run(args: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, **kw)


def test_rpc_chat_one_shot_streams_and_applies_policy(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    cfg = write_config(tmp_path / "c.yaml", llm)
    llm.add({"text": "Let me change it.", "tool_calls": [{"name": "write_file", "arguments": {"path": "README.md", "content": "gone"}}]},
            {"text": "Which one?", "tool_calls": [{"name": "ask_user", "arguments": {"question": "Pick", "options": ["red", "blue"]}}]},
            {"text": "You said no, so I left it."})
    p = run([sys.executable, str(ROOT / "clients/terminal/rpc_chat.py"), "--daemon", DAEMON, "--config", str(cfg),
             "--workspace", str(workspace), "--approve", "deny", "replace the readme"])
    assert p.returncode == 0, p.stderr
    assert p.stdout == "Let me change it.Which one?You said no, so I left it."
    assert "[permission] write_file README.md (sensitive)" in p.stderr and "+gone" in p.stderr
    assert "<- denied" in p.stderr
    assert "[question] Pick\n  1. red\n  2. blue" in p.stderr
    assert (workspace / "README.md").read_text().startswith("# Demo")
    assert llm.requests[0]["body"]["messages"][-1]["content"] == "replace the readme"
    assert llm.requests[2]["body"]["messages"][-1]["content"] == "The user answered: red"  # non-interactive: option 1


def test_rpc_chat_reports_provider_errors(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    cfg = write_config(tmp_path / "c.yaml", llm)
    llm.add({"status": 401, "error": "bad key"})
    p = run([sys.executable, str(ROOT / "clients/terminal/rpc_chat.py"), "--daemon", DAEMON, "--config", str(cfg),
             "--workspace", str(workspace), "hello"])
    assert p.returncode == 1
    assert "[error] provider 'openai' failed: authentication failed" in p.stderr


def test_oneshot_sh_frames_by_hand_with_printf_and_head(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    """Bytes, not characters, in Content-Length; JSON escapes both ways; permission answered by policy."""
    cfg = write_config(tmp_path / "c.yaml", llm)
    llm.add({"text": "Reading — “café” \"quoted\" \\ done.\n", "tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
            {"text": "Now writing.", "tool_calls": [{"name": "write_file", "arguments": {"path": "README.md", "content": "gone"}}]},
            {"text": "Left it:\n\t100% as it was."})
    env = {**os.environ, "TOYCODER_CONFIG": str(cfg), "TOYCODER_DAEMON": DAEMON}
    p = run(["bash", str(ROOT / "clients/terminal/oneshot.sh"), 'say "hi" — ünïcode\nplease'], env=env, cwd=str(workspace))
    assert p.returncode == 0, p.stderr
    assert p.stdout == "Reading — “café” \"quoted\" \\ done.\nNow writing.Left it:\n\t100% as it was.\n"
    assert "-> read_file README.md\n<- completed" in p.stderr
    assert "[permission] write_file README.md: deny" in p.stderr and "<- denied" in p.stderr
    assert (workspace / "README.md").read_text().startswith("# Demo")
    assert llm.requests[0]["body"]["messages"][-1]["content"] == 'say "hi" — ünïcode\nplease'
    assert llm.violations == []


def test_oneshot_sh_reports_errors(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    cfg = write_config(tmp_path / "c.yaml", llm)
    llm.add({"status": 401, "error": "bad key"})
    env = {**os.environ, "TOYCODER_CONFIG": str(cfg), "TOYCODER_DAEMON": DAEMON}
    p = run(["bash", str(ROOT / "clients/terminal/oneshot.sh"), "hello"], env=env, cwd=str(workspace))
    assert p.returncode == 1
    assert "oneshot: provider 'openai' failed: authentication failed" in p.stderr


def test_demo_runs_a_real_session_with_the_scripted_model() -> None:
    """`toycoder --demo --approve allow` (here through the clients/terminal/demo.py wrapper)."""
    p = run([sys.executable, str(ROOT / "clients/terminal/demo.py"), "--approve", "allow"])
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert "SCRIPTED" in out
    assert "Let me get a plan from the **planner** sub-agent first." in out  # streamed (plain: not a terminal)
    assert re.search(r"▸ planner: .*\n +│ 1\. Read calc\.py", out)  # the sub-agent's reply, indented
    assert re.search(r"✓ planner +ok", out) and re.search(r"✓ read_file calc\.py +ok", out)
    assert re.search(r"✓ grep_search .*ok", out)
    assert "-    return sum(numbers) / (len(numbers) - 1)" in out  # the diff was shown
    assert "→ allowed once (--approve allow)" in out and re.search(r"✓ edit_file calc\.py +ok", out)
    assert "? average([]) raises ZeroDivisionError. Keep it that way?" in out
    assert "`average` now divides by `len(numbers)`" in out
    after = out.split("calc.py after the session:")[1]
    assert "    return sum(numbers) / len(numbers)\n" in after


def test_readme_run_command_without_a_key_runs_the_demo(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "TOYCODER_CONFIG")}
    p = run([str(ROOT / "scripts/run")], env=env, cwd=str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SCRIPTED" in p.stdout and "now divides by" in p.stdout
    assert "    return sum(numbers) / len(numbers)\n" in p.stdout.split("calc.py after the session:")[1]
