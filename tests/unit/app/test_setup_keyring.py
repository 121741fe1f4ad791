"""Setup keeps the key in the OS keyring when one answers (issue 31): stored through `secret-tool store`
(the key on stdin, never on a command line), named in the config as `api_key_keyring`, read back with
`secret-tool lookup` as the config loads; with no secret-tool, or one that fails, credentials.yaml as
before. A fake secret-tool first on PATH stands in for the OS (helpers.fake_secret_tool). As the person
runs it (setup, then a turn): e2e/test_setup_doctor_e2e.py."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from helpers import fake_secret_tool

from toycoder_daemon.app.application import App
from toycoder_daemon.app.setup import Choice, write_config
from toycoder_daemon.config.model import load_config
from toycoder_daemon.core.errors import ConfigError
from toycoder_daemon.core.util import secrets

KEY = "sk-keyring-key-0123456789"
OTHER = "sk-env-held-key-9876543210"


def calls(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines()]


@pytest.fixture
def keyring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake secret-tool first on PATH; its folder (keyring.json, calls.jsonl)."""
    folder = tmp_path / "bin"
    fake_secret_tool(folder)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return folder


def test_the_key_goes_to_the_keyring_and_is_read_back_as_the_config_loads(
        keyring: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OTHER)  # a key in the environment: secret-tool never gets it
    written = write_config(Choice("http://10.0.0.5:8000/v1", "m", "f", key=KEY), tmp_path / "cfg")
    assert written.keyring == "toycoder/custom" and written.credentials is None
    assert not (tmp_path / "cfg" / "credentials.yaml").exists()
    text = written.config.read_text()
    assert "api_key_keyring: toycoder/custom" in text and KEY not in text
    [item] = json.loads((keyring / "keyring.json").read_text())
    assert item == {"label": "ToyCoder API key (custom)", "attrs": {"service": "toycoder", "username": "custom"},
                    "secret": KEY}
    config, _ = load_config(str(written.config))  # a daemon's start: secret-tool lookup
    assert config.providers["custom"].api_keys == [KEY]
    seen = calls(keyring)
    assert [c["argv"][0] for c in seen] == ["store", "lookup", "lookup"]  # stored, read back, read at load
    assert seen[-1]["argv"] == ["lookup", "service", "toycoder", "username", "custom"]
    assert all(KEY not in " ".join(c["argv"]) for c in seen)  # never on a command line
    assert all(KEY not in v and OTHER not in v for c in seen for v in c["env"].values())  # nor in its environment


def test_the_daemon_keeps_the_keyrings_key_from_its_children(keyring: Path, tmp_path: Path) -> None:
    written = write_config(Choice("http://10.0.0.5:8000/v1", "m", "f", key=KEY), tmp_path / "cfg")
    App.open(tmp_path, str(written.config))  # registers the config's keys, the keyring's included
    assert secrets.child_env({"PATH": "/usr/bin", "HEADER": f"Authorization: Bearer {KEY}"}) == {"PATH": "/usr/bin"}
    assert secrets.redact(f"the key {KEY}") != f"the key {KEY}"


@pytest.mark.parametrize("tool", ["absent", "failing"])
def test_without_a_keyring_the_key_goes_to_credentials_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            tool: str) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    if tool == "failing":
        fake_secret_tool(folder, fail=True)
    monkeypatch.setenv("PATH", str(folder))  # nothing else: no secret-tool of the machine either
    written = write_config(Choice("http://10.0.0.5:8000/v1", "m", "f", key=KEY), tmp_path / "cfg")
    assert written.keyring is None and written.credentials is not None
    assert stat.S_IMODE(written.credentials.stat().st_mode) == 0o600 and KEY in written.credentials.read_text()
    assert "api_key_keyring" not in written.config.read_text() and KEY not in written.config.read_text()
    config, _ = load_config(str(written.config))
    assert config.providers["custom"].api_keys == [KEY]
    if tool == "failing":
        assert [c["argv"][0] for c in calls(folder)] == ["store"]


def test_a_keyring_reference_that_cannot_be_read_is_a_config_error_with_the_fix(
        keyring: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("providers:\n  local:\n    base_url: http://127.0.0.1:8080/v1\n"
                    "    api_key_keyring: toycoder/local\ndefault_provider: local\n")
    with pytest.raises(ConfigError, match=r"providers\.local\.api_key_keyring'?: the keyring has no entry "
                                          r"service=toycoder username=local; run: toycoder setup"):
        load_config(str(path))
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match="secret-tool \\(libsecret\\) is not on PATH"):
        load_config(str(path))
    path.write_text(path.read_text().replace("toycoder/local", "toycoder"))
    with pytest.raises(ConfigError, match="is not `service/username`"):
        load_config(str(path))
