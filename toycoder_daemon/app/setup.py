"""`toycoder setup` and `toycoder-daemon --setup` (issue 31; ACP's terminal auth method runs the latter):
pick a provider (OpenAI, a local Ollama / llama-server / LM Studio / vLLM found on its usual port, or any
OpenAI-compatible URL), read the key hidden, test it by listing the models, offer the served ones, and
write $XDG_CONFIG_HOME/toycoder/config.yaml. The key goes to the OS keyring when one answers (libsecret's
secret-tool: core/util/os_keyring.py; the config names it in providers.<name>.api_key_keyring), else to
credentials.yaml beside the config (mode 0600; providers.<name>.api_keys_file); config.yaml never holds
it. With --api-key-env the config reads the key from that variable at run time instead.

Only the standard library speaks HTTP here: one GET of /v1/models per server, before any daemon runs.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # every daemon start parses the setup flags: nothing slow to import at the top
    from typing import Any, TextIO

OPENAI_URL = "https://api.openai.com/v1"
USUAL_PORTS = (("Ollama", "http://127.0.0.1:11434/v1"), ("llama-server", "http://127.0.0.1:8080/v1"),
               ("LM Studio", "http://127.0.0.1:1234/v1"), ("vLLM", "http://127.0.0.1:8000/v1"))
LOCAL_KEY = "local"
"""What a local server gets as the key: they take any non-empty one, and the daemon's client needs
one to send (a provider without a key is a config error). A placeholder, never a secret: too short
and in secrets.PLACEHOLDERS, so it is neither redacted nor kept from children (PATH=/usr/local/bin)."""


log = logging.getLogger(__name__)


class SetupError(Exception):
    pass


class Written(NamedTuple):
    config: Path
    credentials: Path | None
    """credentials.yaml, when the key went there."""
    backup: Path | None
    """The config.yaml that was there before (config.yaml.bak)."""
    keyring: str | None
    """`service/username` of the keyring entry, when the key went there."""


def config_dir() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "toycoder"


def is_local(url: str) -> bool:
    host = urllib.parse.urlparse(url).hostname or ""
    return host in ("localhost", "127.0.0.1", "::1") or host.startswith("127.")


def list_models(base_url: str, key: str | None, timeout: float = 10.0) -> list[str]:
    """The model ids the server lists at /models; SetupError says why not (never the key, nor the
    URL's userinfo: `http://user:KEY@host/v1` is sent without it, as Basic auth, and shown as
    `http://host/v1`)."""
    import base64
    import http.client
    import json  # here: every daemon start parses the setup flags, and these imports are not light
    import urllib.error
    import urllib.request

    from toycoder_daemon.core.util.secrets import shown_url, url_secrets

    shown = shown_url(base_url)
    userinfo = url_secrets(base_url)[:1]
    headers = ({"Authorization": "Basic " + base64.b64encode(urllib.parse.unquote(userinfo[0]).encode()).decode()}
               if userinfo else {"Authorization": f"Bearer {key}"} if key else {})
    request = urllib.request.Request(shown.rstrip("/") + "/models", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (the URL is the person's)
            body = json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as e:
        if e.code in (401, 403):
            raise SetupError(f"the key was refused (HTTP {e.code}) by {shown}") from None
        raise SetupError(f"{shown}/models answered HTTP {e.code}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:  # InvalidURL: a bad port
        reason = getattr(e, "reason", e)
        raise SetupError(f"cannot reach {shown} ({shown_url(str(reason))})") from None
    except ValueError:
        raise SetupError(f"{shown}/models did not answer JSON: is it an OpenAI-compatible server?") from None
    data = body.get("data") if isinstance(body, dict) else None
    return [str(m["id"]) for m in data or [] if isinstance(m, dict) and isinstance(m.get("id"), str)]


def find_local(ports: tuple[tuple[str, str], ...] = USUAL_PORTS, timeout: float = 0.5) -> list[tuple[str, str, list[str]]]:
    """The local servers answering on their usual ports: (name, base URL, models)."""
    found = []
    for name, url in ports:
        try:
            found.append((name, url, list_models(url, LOCAL_KEY, timeout)))
        except SetupError:
            continue
    return found


class Choice:
    """What to write: the endpoint, the models, and the key (kept in the OS keyring or credentials.yaml,
    0600) or the variable to read it from at run time."""

    def __init__(self, base_url: str, model: str, fast_model: str, key: str | None = None,
                 key_env: str | None = None):
        self.base_url, self.model, self.fast_model, self.key, self.key_env = base_url, model, fast_model, key, key_env


def provider_name(base_url: str) -> str:
    return "openai" if base_url.rstrip("/") == OPENAI_URL else "local" if is_local(base_url) else "custom"


def _in_keyring(name: str, key: str) -> str | None:
    """Store the key in the OS keyring: its reference, or None when no keyring answers."""
    from toycoder_daemon.core.util import os_keyring

    reference = f"toycoder/{name}"
    try:
        os_keyring.store(reference, key, f"ToyCoder API key ({name})")
    except os_keyring.KeyringError as e:
        log.info("no OS keyring (%s): the key goes to credentials.yaml", e)
        return None
    return reference


def write_config(choice: Choice, directory: Path | None = None) -> Written:
    """Write config.yaml, and keep the key in the OS keyring, else in credentials.yaml beside it."""
    import yaml

    directory = directory or config_dir()
    directory.mkdir(parents=True, exist_ok=True)
    name = provider_name(choice.base_url)
    provider: dict[str, Any] = {"base_url": choice.base_url}
    credentials: Path | None = None
    keyring = _in_keyring(name, choice.key) if choice.key and not choice.key_env else None
    if choice.key_env:
        provider["api_keys"] = [f"${{{choice.key_env}}}"]
    elif keyring:
        provider["api_key_keyring"] = keyring
    elif choice.key:
        credentials = directory / "credentials.yaml"
        fd = os.open(credentials, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # an older file keeps its mode through O_CREAT: make it owner-only now
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("# written by `toycoder setup`; keep it owner-only (chmod 600)\n")
            yaml.safe_dump({"api_keys": [choice.key]}, f)
        provider["api_keys_file"] = credentials.name
    else:  # a local server that takes any key: a placeholder, not a secret (the client must send one)
        provider["api_keys"] = [LOCAL_KEY]
    provider["models"] = {"default": choice.model, "fast": choice.fast_model}
    path = directory / "config.yaml"
    backup = None
    if path.exists():
        backup = path.with_name("config.yaml.bak")
        path.replace(backup)
    text = (f"# written by `toycoder setup` on {time.strftime('%Y-%m-%d')}; `toycoder doctor` checks it.\n"
            "# The key is not here: " + (f"it is read from ${choice.key_env}.\n" if choice.key_env else
                                         f"it is in the OS keyring ({keyring}).\n" if keyring else
                                         "it is in credentials.yaml (mode 0600).\n" if credentials else
                                         f"a local server takes any; '{LOCAL_KEY}' is sent.\n")
            + yaml.safe_dump({"providers": {name: provider}, "default_provider": name}, sort_keys=False))
    path.write_text(text, encoding="utf-8")
    return Written(path, credentials, backup, keyring)


def check(choice: Choice) -> list[str]:
    """Test the choice by listing the models: the served ones. SetupError when the test fails."""
    key = os.environ.get(choice.key_env, "") if choice.key_env else choice.key
    if choice.key_env and not key:
        raise SetupError(f"${choice.key_env} is not set here, so the key cannot be tested; set it, or use --api-key")
    models = list_models(choice.base_url, key or LOCAL_KEY)
    for m in {choice.model, choice.fast_model}:
        if models and m not in models:
            raise SetupError(f"{choice.base_url} does not serve the model {m!r}; it serves: {', '.join(models[:20])}")
    return models


def non_interactive(args: argparse.Namespace, out: TextIO) -> int:
    base_url = (args.base_url or OPENAI_URL).rstrip("/")
    if not args.model:
        out.write("toycoder setup: --model is needed with --non-interactive\n")
        return 2
    if not (args.api_key or args.api_key_env or is_local(base_url)):
        out.write("toycoder setup: give --api-key KEY or --api-key-env VAR (a local server needs neither)\n")
        return 2
    choice = Choice(base_url, args.model, args.fast_model or args.model, args.api_key, args.api_key_env)
    try:
        models = check(choice)
    except SetupError as e:
        out.write(f"toycoder setup: {e}\n")
        return 1
    return _written(choice, models, out)


def _written(choice: Choice, models: list[str], out: TextIO) -> int:
    w = write_config(choice)
    served = f"{len(models)} model(s) served" if models else "the server lists no models"
    out.write(f"toycoder setup: {choice.base_url} answered ({served}); wrote {w.config}"
              + (f" and {w.credentials} (mode 0600)" if w.credentials else "")
              + (f"; the key is in the OS keyring ({w.keyring}, read with secret-tool)" if w.keyring else "")
              + (f"; the previous config is {w.backup}" if w.backup else "") + ".\nCheck it with: toycoder doctor\n")
    return 0


def _pick(ask: Callable[[str], str], out: TextIO, title: str, options: list[str], default: int = 1) -> int:
    out.write(title + "\n" + "".join(f"  {i}. {o}\n" for i, o in enumerate(options, 1)))
    while True:
        answer = ask(f"choose 1-{len(options)} [{default}]: ").strip() or str(default)
        if answer.isdigit() and 1 <= int(answer) <= len(options):
            return int(answer) - 1
        out.write(f"  a number from 1 to {len(options)}, please\n")


def interactive(out: TextIO, ask: Callable[[str], str] = input, secret: Callable[[str], str] | None = None,
                ports: tuple[tuple[str, str], ...] = USUAL_PORTS) -> int:
    """`secret` reads the key without echo (getpass)."""
    if secret is None:
        import getpass

        secret = getpass.getpass
    out.write("ToyCoder setup: where does the model run?\nLooking for a local server on the usual ports…\n")
    local = find_local(ports)
    options = ["OpenAI (api.openai.com; needs an API key)"]
    options += [f"{name} at {url} ({len(models)} model(s))" for name, url, models in local]
    options.append("another OpenAI-compatible server (a URL)")
    n = _pick(ask, out, "Providers:", options, 2 if local else 1)
    if n == 0:
        base_url = OPENAI_URL
    elif n <= len(local):
        base_url = local[n - 1][1]
    else:
        base_url = ask("base URL (e.g. http://host:8000/v1): ").strip().rstrip("/")
    for _ in range(3):
        if is_local(base_url):  # llama-server --api-key wants one; most local servers none
            key = secret("API key (hidden; empty: none): ").strip() or None
        else:
            key = secret("API key (hidden; empty: read $OPENAI_API_KEY at run time): ").strip() or None
        env = None if key or is_local(base_url) else "OPENAI_API_KEY"
        try:
            models = list_models(base_url, key or (os.environ.get(env, "") if env else LOCAL_KEY))
            break
        except SetupError as e:
            out.write(f"  {e}\n")
    else:
        out.write("toycoder setup: gave up after three tries; nothing was written\n")
        return 1
    out.write(f"  {base_url} answered: {len(models)} model(s) served\n")
    if models:
        shown = models[:30]
        model = shown[_pick(ask, out, "Model for the agent:", shown)]
        fast = shown[_pick(ask, out, "Model for summaries and titles (a cheaper one):", shown, shown.index(model) + 1)]
    else:
        model = ask("model name: ").strip()
        fast = ask(f"fast model name [{model}]: ").strip() or model
    return _written(Choice(base_url, model, fast, key, env), models, out)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of the setup flow (toycoder setup, toycoder-daemon --setup)."""
    parser.add_argument("--non-interactive", action="store_true", help="setup: take everything from the flags")
    parser.add_argument("--base-url", metavar="URL", help=f"setup: the OpenAI-compatible endpoint (default {OPENAI_URL})")
    key = parser.add_mutually_exclusive_group()
    key.add_argument("--api-key", metavar="KEY", help="setup: the key, kept in the OS keyring (secret-tool) when "
                     "one answers, else in credentials.yaml (0600)")
    key.add_argument("--api-key-env", metavar="VAR", help="setup: read the key from $VAR at run time instead")
    parser.add_argument("--model", metavar="NAME", help="setup: the agent's model")
    parser.add_argument("--fast-model", metavar="NAME", help="setup: the model for summaries and titles")


FLAGS = ("non_interactive", "base_url", "api_key", "api_key_env", "model", "fast_model")


def flags_given(args: argparse.Namespace) -> list[str]:
    """The setup flags given (they mean nothing without --setup)."""
    return ["--" + f.replace("_", "-") for f in FLAGS if getattr(args, f, None)]


def run(args: argparse.Namespace) -> int:
    if args.non_interactive:
        return non_interactive(args, sys.stdout)
    if not sys.stdin.isatty():
        sys.stdout.write("toycoder setup: no terminal to ask on; use --non-interactive with the flags "
                         "(--base-url, --api-key|--api-key-env, --model)\n")
        return 2
    try:
        return interactive(sys.stdout)
    except (KeyboardInterrupt, EOFError):
        sys.stdout.write("\ntoycoder setup: cancelled; nothing was written\n")
        return 130
