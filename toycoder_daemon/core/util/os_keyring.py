"""The OS keyring through libsecret's `secret-tool` (the Secret Service: GNOME Keyring, KWallet), without
a Python dependency: `toycoder setup` stores a provider's key there when one answers, and the config
names it (`providers.<name>.api_key_keyring: toycoder/<name>`), read as the config loads.

An entry is found by the attributes `service` and `username` (those python-keyring uses, so
`keyring get toycoder local` reads it too). The key never goes on a command line: `store` reads it
from stdin, `lookup` writes it to stdout; neither is ever logged. secret-tool gets the environment
every child gets (secrets.child_env: it reaches the session bus, and no key is in it).
"""

from __future__ import annotations

import shutil
import subprocess

from toycoder_daemon.core.util import secrets

TIMEOUT = 10.0
"""Seconds secret-tool may take (a locked keyring may ask to be unlocked first)."""


class KeyringError(Exception):
    """secret-tool is missing, or failed; the message never holds the key."""


def parse(reference: str) -> tuple[str, str]:
    """`service/username` -> its two attributes; ValueError for another shape."""
    service, slash, username = reference.partition("/")
    if not slash or not service.strip() or not username.strip():
        raise ValueError(f"{reference!r} is not `service/username` (e.g. toycoder/local)")
    return service.strip(), username.strip()


def _run(args: list[str], stdin: str | None) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("secret-tool")
    if tool is None:
        raise KeyringError("secret-tool (libsecret) is not on PATH")
    try:
        return subprocess.run([tool, *args], input=stdin if stdin is not None else "", capture_output=True,
                              text=True, timeout=TIMEOUT, env=secrets.child_env())
    except subprocess.TimeoutExpired:
        raise KeyringError(f"secret-tool did not answer in {TIMEOUT:g}s (a locked keyring?)") from None
    except OSError as e:
        raise KeyringError(f"cannot run secret-tool: {e.strerror or e}") from None


def _failed(what: str, p: subprocess.CompletedProcess[str], key: str = "") -> KeyringError:
    said = " ".join(p.stderr.split())  # secret-tool's own message; the key went to its stdin, never echoed here
    said = (said.replace(key, "***") if key else said)[:200]
    return KeyringError(f"secret-tool {what} failed (exit {p.returncode}{': ' + said if said else ''})")


def lookup(reference: str) -> str:
    """The key stored under `reference`; KeyringError when there is none or secret-tool fails."""
    service, username = parse(reference)
    p = _run(["lookup", "service", service, "username", username], None)
    key = p.stdout.rstrip("\r\n")
    if p.returncode != 0 or not key:
        if p.returncode != 0 and p.stderr.strip():
            raise _failed("lookup", p)
        raise KeyringError(f"the keyring has no entry service={service} username={username}")
    return key


def store(reference: str, key: str, label: str) -> None:
    """Store `key` under `reference` (replacing an entry with the same attributes), then read it back: a
    store that a Secret Service did not keep raises KeyringError."""
    service, username = parse(reference)
    p = _run(["store", f"--label={label}", "service", service, "username", username], key)
    if p.returncode != 0:
        raise _failed("store", p, key)
    if lookup(reference) != key:
        raise KeyringError("the keyring did not keep the key (reading it back gave another value)")
