"""The setup flow's parts in-process (issue 31): local servers found on their ports through /v1/models,
the files written (the key only in a 0600 credentials.yaml, an older config kept as .bak, an older
credentials file made owner-only), and doctor's editor plugins. The flow as the person runs it:
e2e/test_setup_doctor_e2e.py."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest
import yaml

from toycoder_daemon.app import doctor
from toycoder_daemon.app.setup import Choice, SetupError, find_local, list_models, write_config
from toycoder_daemon.config.model import load_config
from toycoder_daemon.testing.fake_llm import FakeLLM


def test_local_servers_are_found_on_their_ports_and_silent_ones_skipped(llm: FakeLLM) -> None:
    found = find_local((("Ollama", "http://127.0.0.1:9/v1"), ("llama-server", llm.base_url)))
    assert found == [("llama-server", llm.base_url, ["fake-model"])]
    with pytest.raises(SetupError, match="cannot reach"):
        list_models("http://127.0.0.1:9/v1", "k", timeout=1)


def test_a_server_error_is_said_with_its_status_and_without_the_key(llm: FakeLLM) -> None:
    with pytest.raises(SetupError) as e:
        list_models(llm.base_url.replace("/v1", "/nope"), "sk-secret-key")
    assert "sk-secret-key" not in str(e.value) and "HTTP 404" in str(e.value)


def test_the_files_keep_the_key_apart_owner_only_and_the_old_config_as_bak(tmp_path: Path) -> None:
    folder = tmp_path / "toycoder"
    folder.mkdir()
    (folder / "config.yaml").write_text("default_provider: openai\n")
    old = folder / "credentials.yaml"
    old.write_text("api_keys: [old]\n")
    old.chmod(0o644)
    path, credentials, backup, keyring = write_config(Choice("http://10.0.0.5:8000/v1", "m", "f", key="sk-new"), folder)
    assert keyring is None  # no secret-tool here (test_setup_keyring.py has one)
    assert backup is not None and backup.read_text() == "default_provider: openai\n"
    assert credentials is not None and stat.S_IMODE(credentials.stat().st_mode) == 0o600
    assert yaml.safe_load(credentials.read_text()) == {"api_keys": ["sk-new"]}
    assert "sk-new" not in path.read_text()
    config, _ = load_config(str(path))
    assert config.default_provider == "custom" and config.providers["custom"].api_keys == ["sk-new"]
    assert config.providers["custom"].models.default == "m" and config.providers["custom"].models.fast == "f"


def test_doctor_lists_the_editor_plugins_it_finds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ext = tmp_path / ".vscode" / "extensions" / "toycoder.toycoder-vscode-0.3.0"
    ext.mkdir(parents=True)
    (ext / "package.json").write_text(json.dumps({"version": "0.3.0"}))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    (tmp_path / "data" / "nvim" / "lazy" / "toycoder.nvim").mkdir(parents=True)
    lines = [line.render() for line in doctor.editor_plugins(tmp_path)]
    assert lines == ["✓ VS Code: toycoder.toycoder-vscode-0.3.0 0.3.0",
                     f"✓ Neovim: {tmp_path / 'data' / 'nvim' / 'lazy' / 'toycoder.nvim'}"]
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "none"))
    assert [line.ok for line in doctor.editor_plugins(tmp_path / "nobody")] == [None]


def test_a_local_server_without_a_key_gets_a_placeholder_the_daemon_can_send(tmp_path: Path) -> None:
    path, credentials, _, _ = write_config(Choice("http://127.0.0.1:11434/v1", "qwen", "qwen"), tmp_path)
    assert credentials is None
    config, _ = load_config(str(path))
    assert config.default_provider == "local" and config.providers["local"].api_keys == ["local"]


def test_a_url_with_a_key_in_its_userinfo_is_listed_with_basic_auth_and_never_shown(llm: FakeLLM) -> None:
    """`http://user:KEY@127.0.0.1/v1` crashed with http.client.InvalidURL (its port read from
    `KEY@127.0.0.1`) and printed the key; now the userinfo goes as Basic auth and messages show
    the URL without it."""
    url = llm.base_url.replace("http://", "http://alice:sk-userinfo-key-0123456789@")
    assert list_models(url, "local") == ["fake-model"]
    assert llm.gets[-1]["headers"]["authorization"] == "Basic " + base64.b64encode(
        b"alice:sk-userinfo-key-0123456789").decode()
    with pytest.raises(SetupError) as e:
        list_models(url.replace("/v1", "/nope"), "local")
    assert "sk-userinfo-key" not in str(e.value) and "HTTP 404" in str(e.value)
    with pytest.raises(SetupError) as e:
        list_models("http://alice:sk-userinfo-key-0123456789@127.0.0.1:99999999/v1", None, timeout=1)
    assert "sk-userinfo-key" not in str(e.value) and "cannot reach http://127.0.0.1:99999999/v1" in str(e.value)


def test_doctor_shows_the_provider_url_without_its_userinfo(llm: FakeLLM, tmp_path: Path) -> None:
    url = llm.base_url.replace("http://", "http://alice:sk-userinfo-key-0123456789@")
    path = tmp_path / "config.yaml"
    path.write_text(f"providers:\n  local:\n    api_keys: [local]\n    base_url: {url}\n"
                    "    models: {default: fake-model, fast: fake-model}\ndefault_provider: local\n")
    config, _ = load_config(str(path))
    for p in (None, "none"):
        if p:
            config.providers["local"].api_keys = []
        text = "\n".join(line.render() for line in doctor.check_provider(config))
        assert "sk-userinfo-key" not in text and llm.base_url in text, text
