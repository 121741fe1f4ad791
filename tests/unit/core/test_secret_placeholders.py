"""What counts as a secret (docs/security.md): setup's placeholder key `local` for a keyless local
server, and the other well-known fake keys, are not registered, so PATH=/usr/local/bin reaches every
child and `http://localhost:8080` is printed as it is; a real key still is both kept and redacted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toycoder_daemon.app.setup import LOCAL_KEY, Choice, write_config
from toycoder_daemon.config.model import McpServerConfig, load_config
from toycoder_daemon.core.util import secrets
from toycoder_daemon.tools.mcp.spec import register_secrets

ENV = {"PATH": "/usr/local/bin:/usr/bin", "XDG_DATA_DIRS": "/usr/local/share:/usr/share", "HOME": "/home/alice"}


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets, "_values", set())


def test_setup_s_local_placeholder_keeps_path_in_children_and_local_in_text(tmp_path: Path, inproc: Any) -> None:
    path, _, _, _ = write_config(Choice("http://127.0.0.1:8080/v1", "m", "m"), tmp_path)
    config, _ = load_config(str(path))
    assert config.providers["local"].api_keys == [LOCAL_KEY]  # the daemon needs one to send
    p = inproc({"providers": {"local": config.providers["local"].model_dump()}, "default_provider": "local"})
    assert p.app.config.providers["local"].api_keys == [LOCAL_KEY]
    assert secrets.values() == frozenset()
    assert secrets.child_env(ENV) == ENV
    assert secrets.redact("http://localhost:8080 /usr/local/bin") == "http://localhost:8080 /usr/local/bin"


@pytest.mark.parametrize("fake", ["local", "ollama", "EMPTY", "none", "sk-no-key-required", "lm-studio", "abc1234"])
def test_placeholders_and_short_values_are_never_secrets(fake: str) -> None:
    secrets.register([fake])
    assert secrets.values() == frozenset()
    assert secrets.child_env({**ENV, "X": f"prefix {fake} suffix"})["X"] == f"prefix {fake} suffix"
    assert secrets.redact(f"say {fake}") == f"say {fake}"


def test_a_real_key_of_eight_characters_is_still_kept_and_redacted() -> None:
    secrets.register(["sk-ab123", "ollama"])
    assert secrets.values() == frozenset({"sk-ab123"})
    assert secrets.redact("key sk-ab123 here") == "key *** here"
    assert "CURL" not in secrets.child_env({**ENV, "CURL": "Bearer sk-ab123"})


def test_an_mcp_server_placeholder_token_is_not_registered() -> None:
    register_secrets(McpServerConfig(command="x", env={"API_KEY": "none", "OTHER_TOKEN": "tok-0123456789abcdef"}))
    assert secrets.values() == frozenset({"tok-0123456789abcdef"})


def test_a_credentials_path_given_to_an_mcp_server_is_no_secret() -> None:
    register_secrets(McpServerConfig(command="x", env={
        "GOOGLE_APPLICATION_CREDENTIALS": "/home/alice/.config/gcloud/application_default_credentials.json",
        "KEYS_DIR": "~/work/keys", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}))
    assert secrets.values() == frozenset({"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"})  # base64 keeps its slashes
    text = "ls /home/alice/.config/gcloud/ and ~/work/keys"
    assert secrets.redact(text) == text
    assert secrets.redact("aws: wJalrXUtnFEMI/K7MDENG/bPxRf...") == "aws: ***..."  # a key's piece still is


def test_pieces_are_redacted_of_key_like_words_only() -> None:
    secrets.register(["correct horse battery staple", "Bearer sk-AbC123dEf456GhI789"])
    assert secrets.redact("the correct horse battery staple") == "the ***"
    assert secrets.redact("a correct horse, a battery") == "a correct horse, a battery"
    assert secrets.redact("echoed sk-AbC123dEf456...") == "echoed ***..."
