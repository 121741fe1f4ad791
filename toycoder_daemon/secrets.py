"""Secret values (API keys) known to this process: redacted from logs, kept from child processes."""

from __future__ import annotations

import os
import re

_values: set[str] = set()

SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSW|CREDENTIAL", re.IGNORECASE)


def register(values: list[str]) -> None:
    _values.update(v for v in values if v and len(v) >= 4)


def values() -> frozenset[str]:
    return frozenset(_values)


def redact(text: str) -> str:
    for v in _values:
        if v in text:
            text = text.replace(v, "***")
    return text


def child_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a child process: no variable that names or holds a secret."""
    env = dict(os.environ if base is None else base)
    return {k: v for k, v in env.items() if not SECRET_NAME.search(k) and v not in _values}
