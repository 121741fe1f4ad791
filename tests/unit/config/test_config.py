"""Config loading: expansion, search order, clear errors, the shipped config.yaml. --check-config as a
process: e2e/test_config_e2e.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import ROOT

from toycoder_daemon.config.model import Config, data_dir, expand_env, find_config, load_config
from toycoder_daemon.core.errors import ConfigError


def test_env_expansion_with_defaults() -> None:
    env = {"KEY": "sk-1", "EMPTY": ""}
    raw = {"a": "${KEY}", "b": "${MISSING:-fallback}", "c": ["x-${KEY}-y", 3], "d": "${EMPTY:-dflt}", "e": "${MISSING}"}
    assert expand_env(raw, env) == {"a": "sk-1", "b": "fallback", "c": ["x-sk-1-y", 3], "d": "dflt", "e": ""}


def test_shipped_config_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    cfg, path = load_config(str(ROOT / "config.yaml"))
    assert path == ROOT / "config.yaml"
    name, provider = cfg.provider()
    assert name == "openai" and provider.api_keys == ["sk-from-env"]
    assert provider.base_url == "http://127.0.0.1:9/v1"
    assert (cfg.agent.max_steps, cfg.agent.max_retries, cfg.agent.retry_interval) == (16, 2, 1.0)
    assert (cfg.session.max_messages, cfg.session.compress_keep_recent) == (50, 8)
    assert cfg.mcp_servers == {}


def test_shipped_config_without_key_has_no_empty_key(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, _ = load_config(str(ROOT / "config.yaml"))
    assert cfg.provider()[1].api_keys == []
    assert cfg.provider()[1].base_url == "https://api.openai.com/v1"
    assert "sk-" not in (ROOT / "config.yaml").read_text()


def test_search_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_env: Path) -> None:
    assert find_config() is None  # nothing anywhere: built-in defaults
    user = isolated_env / ".config" / "toycoder" / "config.yaml"
    user.parent.mkdir(parents=True)
    user.write_text("default_provider: openai\n")
    assert find_config() == user
    env_cfg = tmp_path / "env.yaml"
    monkeypatch.setenv("TOYCODER_CONFIG", str(env_cfg))
    assert find_config() == env_cfg
    assert find_config(str(tmp_path / "explicit.yaml")) == tmp_path / "explicit.yaml"


def test_defaults_when_no_file() -> None:
    cfg, path = load_config()
    assert path is None and isinstance(cfg, Config) and cfg.agent.max_steps == 16


def test_default_lists_and_sections_are_not_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    # the defaults are values pydantic copies per instance (not factories: cheaper at import)
    a, b = Config(), Config()
    a.tools.enabled.append("run_command")
    a.providers["openai"].model_max_tokens["m"] = 1
    a.permissions.allow.append("read_file")
    assert b.tools.enabled == [] and b.providers["openai"].model_max_tokens == {} and b.permissions.allow == []
    assert a.tools.run_command is not b.tools.run_command and a.mcp_servers is not b.mcp_servers
    monkeypatch.setenv("TOYCODER_MODEL", "read-at-load")  # a section default is built per config, not at import
    assert Config().providers["openai"].models.default == "read-at-load"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("agent:\n  max_steps: many\n", ["agent.max_steps", "integer"]),
        ("agent:\n  max_stepz: 3\n", ["agent.max_stepz", "Extra inputs"]),
        ("providers:\n  openai:\n    base_url: [1, 2]\n", ["providers.openai.base_url"]),
        ("agent: [\n", ["line", "invalid YAML"]),
        ("- just\n- a list\n", ["top level must be a mapping"]),
    ],
)
def test_broken_config_names_file_field_and_problem(tmp_path: Path, text: str, expected: list[str]) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(str(p))
    message = str(e.value)
    assert str(p) in message
    for part in expected:
        assert part in message


def test_bad_key_value_is_not_echoed(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("providers:\n  openai:\n    api_keys: {sk-very-secret: 1}\n")
    with pytest.raises(ConfigError) as e:
        load_config(str(p))
    assert "sk-very-secret" not in str(e.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(str(tmp_path / "nope.yaml"))
    assert "nope.yaml" in str(e.value)


def test_data_dir_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOYCODER_DATA_DIR", str(tmp_path / "d"))
    assert data_dir() == tmp_path / "d"


def test_config_reference_is_current_and_complete() -> None:
    from toycoder_daemon.config.model import reference

    text = reference()
    assert (ROOT / "docs" / "config.md").read_text() == text, "run: python -m toycoder_daemon.config.model > docs/config.md"
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) > 40
    undocumented = [r.split("|")[1] for r in rows if not r.rstrip(" |").split("|")[-1].strip()]
    assert undocumented == []
