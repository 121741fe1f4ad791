"""Issue 13 item 11: config validation names every problem with its file and field, at start-up and
in --check-config: a default_provider that does not exist, a ${VAR} without default that is unset."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from inproc import start_lsp
from rpc import RpcError

from toycoder_daemon.config.model import load_config
from toycoder_daemon.core.errors import ConfigError

BROKEN = (
    "providers:\n"
    "  work:\n"
    "    api_keys: ['${TOYCODER_TEST_UNSET_KEY}']\n"
    "    base_url: '${TOYCODER_TEST_UNSET_URL:-http://127.0.0.1:9/v1}'\n"  # has a default: fine
    "default_provider: openai\n"
    "agent:\n  max_steps: lots\n"
    "session:\n  max_messages: 1\n"
)
EXPECTED = [
    "field 'providers.work.api_keys.0'", "${TOYCODER_TEST_UNSET_KEY} is not set",
    "field 'default_provider'", "no provider named 'openai'",
    "field 'agent.max_steps'", "field 'session.max_messages'",
]


@pytest.fixture(autouse=True)
def _unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOYCODER_TEST_UNSET_KEY", raising=False)
    monkeypatch.delenv("TOYCODER_TEST_UNSET_URL", raising=False)


def test_every_problem_is_named_with_file_and_field(tmp_path: Path) -> None:
    p = tmp_path / "config.yaml"
    p.write_text(BROKEN)
    with pytest.raises(ConfigError) as e:
        load_config(str(p))
    message = str(e.value)
    assert str(p) in message and "4 problems" in message
    for part in EXPECTED:
        assert part in message, part
    assert len(e.value.problems) == 4


def test_default_provider_must_exist(tmp_path: Path) -> None:
    p = tmp_path / "config.yaml"
    p.write_text("providers:\n  local:\n    api_keys: [x]\ndefault_provider: lokal\n")
    with pytest.raises(ConfigError, match="field 'default_provider': no provider named 'lokal' .configured: local"):
        load_config(str(p))


def test_unset_variable_is_named_where_it_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "config.yaml"
    p.write_text("providers:\n  openai:\n    api_keys: ['${TOYCODER_TEST_UNSET_KEY}', '${OPENAI_API_KEY:-}']\n")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-set-but-not-used-here")
    with pytest.raises(ConfigError) as e:
        load_config(str(p))
    assert e.value.problems == [
        "field 'providers.openai.api_keys.0': ${TOYCODER_TEST_UNSET_KEY} is not set "
        "(set it, or give a default: ${TOYCODER_TEST_UNSET_KEY:-value})"]
    monkeypatch.setenv("TOYCODER_TEST_UNSET_KEY", "sk-now-set")
    assert load_config(str(p))[0].providers["openai"].api_keys == ["sk-now-set", "sk-set-but-not-used-here"]


def test_check_config_lists_every_problem(tmp_path: Path) -> None:
    p = tmp_path / "config.yaml"
    p.write_text(BROKEN)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOYCODER_TEST_UNSET")}
    done = subprocess.run([sys.executable, "-m", "toycoder_daemon", "--check-config", "--config", str(p)],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2
    out = json.loads(done.stdout)
    assert out["valid"] is False and len(out["problems"]) == 4
    for part in EXPECTED:
        assert part in out["error"], part


async def test_start_up_shows_every_problem(tmp_path: Path, workspace: Path) -> None:
    p = tmp_path / "config.yaml"
    p.write_text(BROKEN)
    d = await start_lsp(p)
    try:
        await d.initialize(workspace)
        shown = await d.wait_for(lambda: [n for n in d.notifications if n["method"] == "window/showMessage"])
        message = shown[0]["params"]["message"]
        assert str(p) in message
        for part in EXPECTED:
            assert part in message, part
    finally:
        assert await d.close() == 0


async def test_missing_key_message_names_the_provider_field(tmp_path: Path, workspace: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-set-but-this-provider-does-not-read-it")
    p = tmp_path / "config.yaml"
    p.write_text("providers:\n  work:\n    api_keys: []\n    base_url: http://127.0.0.1:9/v1\ndefault_provider: work\n")
    d = await start_lsp(p)
    try:
        await d.initialize(workspace)
        sid = (await d.call("toycoder/session/new", {}))["sessionId"]
        with pytest.raises(RpcError) as e:
            await d.call("toycoder/prompt", {"sessionId": sid, "text": "hi"})
        assert e.value.code == -32012 and "providers.work.api_keys" in e.value.message
    finally:
        assert await d.close() == 0
