"""`toycoder setup` and `toycoder doctor` (issue 31), as the person runs them (subprocesses, the scripted
model server as the provider): setup writes the config with the key kept apart in the OS keyring (a fake
secret-tool) or a 0600 credentials.yaml (never in config.yaml), tests it by listing the models, refuses a model that is not
served; interactive, the key is read hidden; `toycoder-daemon --setup` is the same flow. doctor prints one
line per check with the fix, and exits 0 only when everything works; its tools line for llama.cpp, Ollama
and the probe request any other server gets."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest
from helpers import fake_secret_tool, write_config
from waiting import scaled

from toycoder_daemon.testing.dialects import Dialect
from toycoder_daemon.testing.fake_llm import FakeLLM

TOYCODER = [sys.executable, "-m", "toycoder_daemon.cli"]
KEY = "sk-test-setup-0123456789"


def run(args: list[str], cwd: Path, env: dict[str, str], program: list[str] = TOYCODER) -> subprocess.CompletedProcess:
    return subprocess.run(program + args, capture_output=True, text=True, timeout=scaled(60), cwd=str(cwd),
                          stdin=subprocess.DEVNULL, env=env)


def user_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "TOYCODER_CONFIG", "OPENAI_BASE_URL")}
    return {**env, "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "TOYCODER_WARM": "0"}


def test_setup_non_interactive_keeps_the_key_apart_and_the_config_works(tmp_path: Path, llm: FakeLLM,
                                                                       workspace: Path) -> None:
    env = user_env(tmp_path)
    p = run(["setup", "--non-interactive", "--base-url", llm.base_url, "--api-key", KEY, "--model", "fake-model",
             "--fast-model", "fake-model"], workspace, env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "toycoder doctor" in p.stdout and KEY not in p.stdout
    folder = tmp_path / "xdg" / "toycoder"
    config, credentials = (folder / "config.yaml").read_text(), folder / "credentials.yaml"
    assert KEY not in config and "api_keys_file: credentials.yaml" in config
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600 and KEY in credentials.read_text()
    assert llm.gets[-1]["path"] == "/v1/models"  # the key was tested by listing the models
    assert llm.gets[-1]["headers"]["authorization"] == f"Bearer {KEY}"
    # the daemon reads the key through the reference, and a turn reaches the server with it
    llm.add({"text": "Set up."})
    turn = run(["-p", "hello"], workspace, env)
    assert turn.returncode == 0 and turn.stdout == "Set up.\n", turn.stderr
    assert llm.requests[-1]["headers"]["authorization"] == f"Bearer {KEY}"
    # a credentials file others can read is refused, with the fix
    credentials.chmod(0o644)
    check = run(["--check-config"], workspace, env, [sys.executable, "-m", "toycoder_daemon"])
    assert check.returncode == 2 and f"chmod 600 {credentials}" in json.loads(check.stdout)["error"]


def test_setup_keeps_the_key_in_the_os_keyring_when_one_answers(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    """secret-tool (a fake first on PATH: it stands in for the OS) stores the key, given on its stdin;
    the config names the entry; the daemon of a later turn reads it with secret-tool lookup. In-process,
    with the fallbacks: unit/app/test_setup_keyring.py."""
    bin_dir = tmp_path / "bin"
    fake_secret_tool(bin_dir)
    env = {**user_env(tmp_path), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    p = run(["setup", "--non-interactive", "--base-url", llm.base_url, "--api-key", KEY, "--model", "fake-model"],
            workspace, env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "the key is in the OS keyring (toycoder/local" in p.stdout and KEY not in p.stdout
    folder = tmp_path / "xdg" / "toycoder"
    config = (folder / "config.yaml").read_text()
    assert "api_key_keyring: toycoder/local" in config and KEY not in config
    assert not (folder / "credentials.yaml").exists()
    assert json.loads((bin_dir / "keyring.json").read_text())[0]["secret"] == KEY
    llm.add({"text": "From the keyring."})
    turn = run(["-p", "hello"], workspace, env)
    assert turn.returncode == 0 and turn.stdout == "From the keyring.\n", turn.stderr
    assert llm.requests[-1]["headers"]["authorization"] == f"Bearer {KEY}"
    calls = [json.loads(line) for line in (bin_dir / "calls.jsonl").read_text().splitlines()]
    assert [c["argv"][0] for c in calls] == ["store", "lookup", "lookup"]  # stored, read back; the daemon's start
    assert all(KEY not in " ".join(c["argv"]) and KEY not in json.dumps(c["env"]) for c in calls)
    # without secret-tool the daemon cannot read it: the config error names the field and the fix
    check = run(["--check-config"], workspace, {**env, "PATH": os.path.dirname(sys.executable)},
                [sys.executable, "-m", "toycoder_daemon"])
    error = json.loads(check.stdout)["error"]
    assert check.returncode == 2 and "api_key_keyring" in error and "secret-tool (libsecret) is not on PATH" in error


def test_setup_refuses_a_model_the_server_does_not_serve_and_writes_nothing(tmp_path: Path, llm: FakeLLM,
                                                                          workspace: Path) -> None:
    env = user_env(tmp_path)
    p = run(["setup", "--non-interactive", "--base-url", llm.base_url, "--api-key", KEY, "--model", "gpt-9"],
            workspace, env)
    assert p.returncode == 1
    assert "does not serve the model 'gpt-9'" in p.stdout and "fake-model" in p.stdout
    assert not (tmp_path / "xdg" / "toycoder").exists()


def test_daemon_setup_with_a_key_variable_writes_no_credentials(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    env = {**user_env(tmp_path), "MY_LLM_KEY": KEY}
    p = run(["--setup", "--non-interactive", "--base-url", llm.base_url, "--api-key-env", "MY_LLM_KEY", "--model",
             "fake-model"], workspace, env, [sys.executable, "-m", "toycoder_daemon"])  # toycoder-daemon --setup
    assert p.returncode == 0, p.stdout + p.stderr
    folder = tmp_path / "xdg" / "toycoder"
    assert "${MY_LLM_KEY}" in (folder / "config.yaml").read_text()
    assert not (folder / "credentials.yaml").exists()


def test_setup_interactive_reads_the_key_hidden_and_offers_the_served_models(tmp_path: Path, llm: FakeLLM,
                                                                            workspace: Path) -> None:
    env = user_env(tmp_path)
    child = pexpect.spawn(TOYCODER[0], [*TOYCODER[1:], "setup"], cwd=str(workspace), env=env, encoding="utf-8",
                          timeout=scaled(30))
    try:
        child.expect(r"another OpenAI-compatible server")
        options = child.before + child.after
        n = options.count("\n  ")  # the numbered options
        child.expect(r"choose 1-(\d+)")
        child.sendline(child.match.group(1))  # the last option: a URL
        child.expect("base URL")
        child.sendline(llm.base_url)
        child.expect(r"API key \(hidden")
        child.sendline(KEY)
        child.expect("Model for the agent:")
        child.expect("choose")
        child.sendline("1")
        child.expect("choose")
        child.sendline("")
        child.expect("wrote")
        child.expect(pexpect.EOF)
        shown = child.before
    finally:
        child.close(force=True)
    assert n >= 2
    assert child.exitstatus == 0, shown
    assert KEY not in (options + shown)  # never echoed
    assert KEY in (tmp_path / "xdg" / "toycoder" / "credentials.yaml").read_text()


def test_doctor_says_each_check_with_its_fix_and_exits_0_only_when_all_work(tmp_path: Path, llm: FakeLLM,
                                                                           workspace: Path) -> None:
    env = user_env(tmp_path)
    empty = run(["doctor"], workspace, env)
    assert empty.returncode == 1
    assert "· config: no config file" in empty.stdout  # a note: the environment's key may be all it needs
    assert "✗ provider: 'openai' at https://api.openai.com/v1 has no API key — fix: run: toycoder setup" in empty.stdout

    cfg = write_config(tmp_path / "c.yaml", llm)
    llm.dialect = Dialect(server="llama.cpp", n_ctx=32768)
    good = run(["doctor", "--config", str(cfg)], workspace, env)
    lines = good.stdout.splitlines()
    assert lines[0] == f"✓ config: {cfg} (valid)"
    for expected in ("✓ provider: 'openai' at", "✓ model: fake-model", "✓ tools: /props says its chat template takes tools",
                     "✓ context: 32768 tokens", " sandbox: ", "✓ rg: ", " fork server: ", " editors: "):
        assert any(expected in line for line in lines), (expected, good.stdout)
    broken = [line for line in lines if line.startswith("✗")]
    assert good.returncode == (1 if broken else 0), good.stdout  # 0 exactly when nothing is broken here
    assert all(" — fix: " in line for line in broken)

    llm.dialect = Dialect(server="llama.cpp", n_ctx=2048, supports_tools=False)
    bad = run(["doctor", "--config", str(cfg)], workspace, env)
    assert bad.returncode == 1
    assert "✗ tools: /props says its chat template takes no tools — fix: start llama-server with --jinja" in bad.stdout
    assert "✗ context: 2048 tokens" in bad.stdout and "llama-server -c" in bad.stdout


@pytest.mark.parametrize(("dialect", "script", "expected"), [
    (Dialect(ollama_capabilities=["completion", "tools"]), [], "✓ tools: Ollama's /api/show says fake-model takes tools"),
    (Dialect(ollama_capabilities=["completion"]), [],
     "✗ tools: Ollama's /api/show says fake-model takes no tools — fix: use a model with tool support"),
    (Dialect(), [{"tool_calls": [{"name": "ping", "arguments": {}}]}], "✓ tools: taken: the model called the test tool"),
    (Dialect(owned_by="vllm", tools_refused='"auto" tool choice requires --enable-auto-tool-choice'), [],
     "✗ tools: the test request offering a tool: it refused a request with tools (HTTP 400: \"auto\" tool choice"),
    (Dialect(), [{"status": 503, "error": "loading the model"}],
     "· tools: not known (server kind unknown): the test request failed (HTTP 503: loading the model)"),
], ids=["ollama-tools", "ollama-none", "probe-called", "probe-refused", "probe-unknown"])
def test_doctor_tells_tools_for_each_kind_of_server(tmp_path: Path, llm: FakeLLM, workspace: Path, dialect: Dialect,
                                                    script: list[dict], expected: str) -> None:
    """Ollama is asked /api/show; a server that says nothing gets one tiny request offering a tool
    (unit/app/test_doctor_tools.py has each case in-process)."""
    llm.dialect = dialect
    llm.add(*script)
    p = run(["doctor", "--config", str(write_config(tmp_path / "c.yaml", llm))], workspace, user_env(tmp_path))
    [line] = [line for line in p.stdout.splitlines() if " tools: " in line]
    assert line.startswith(expected), p.stdout
    probes = [r for r in llm.requests if r["path"] == "/v1/chat/completions"]
    assert len(probes) == (0 if dialect.ollama_capabilities is not None else 1)
