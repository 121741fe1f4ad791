"""Starting a chat: the daemon command, the connect sequence, and the message shown when no model
provider is configured. Both the CLI and the scripted demo use these (neither imports the other's
module for them)."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from toycoder_daemon.cli.client import ChatClient
from toycoder_daemon.cli.rpc import Connection, DaemonExited, RpcError, default_daemon_command, initialize

NO_PROVIDER = """\
toycoder: no model provider is configured.

Use OpenAI:
    export OPENAI_API_KEY=sk-...
    toycoder

Or any OpenAI-compatible server (Ollama, vLLM, llama.cpp's llama-server, LM Studio, ...): point
OPENAI_BASE_URL at it, give any key it accepts, and name the model:
    export OPENAI_BASE_URL=http://127.0.0.1:11434/v1    # Ollama; vLLM :8000/v1, llama-server :8080/v1
    export OPENAI_API_KEY=local                         # local servers take any non-empty key
    toycoder --model qwen2.5-coder

Or write a config file (several providers, keys, permissions...): ~/.config/toycoder/config.yaml,
$TOYCODER_CONFIG or --config PATH. `toycoder --init-config` writes a commented example there.

No key at hand? Watch the scripted demo (real daemon, tools and protocol; scripted model):
    toycoder --demo
"""


def daemon_command(args: argparse.Namespace) -> list[str]:
    cmd = shlex.split(args.daemon) if args.daemon else default_daemon_command()
    return cmd + (["--config", args.config] if args.config else [])


def connect(args: argparse.Namespace, client_factory: Any, *, env: dict[str, str] | None = None
            ) -> tuple[Connection, ChatClient, dict[str, Any] | None]:
    """Start the daemon, initialize, open (or resume) the session, set the model."""
    conn = Connection(daemon_command(args), env=env)
    client: ChatClient = client_factory(conn)
    try:
        initialize(conn, args.workspace, on_notification=client.notification)
        loaded = client.load_session(args.session) if args.session else None
        if loaded is None:
            client.new_session()
        if args.model:
            client.set_model(args.model)
    except (RpcError, DaemonExited):
        conn.close()
        raise
    return conn, client, loaded


def user_config_path() -> Path:
    """The config file the daemon reads when neither --config nor $TOYCODER_CONFIG names one."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "toycoder" / "config.yaml"


def example_config() -> str:
    """The commented example config shipped in the package."""
    return resources.files(__package__).joinpath("example_config.yaml").read_text(encoding="utf-8")


def init_config() -> int:
    """`toycoder --init-config`: write the example to the user config path, never over an existing file."""
    path = user_config_path()
    if path.exists():
        sys.stderr.write(f"toycoder: {path} exists already; left as it is\n")
        return 1
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(example_config(), encoding="utf-8")
    sys.stderr.write(f"toycoder: wrote a commented example config to {path}; it reads OPENAI_API_KEY, "
                     "OPENAI_BASE_URL and TOYCODER_MODEL from the environment (edit it to change more)\n")
    return 0


def path_advice() -> str:
    """How to put `toycoder` on PATH, when this installation's is not there (empty when it is)."""
    bin_dir = Path(sys.executable).parent
    found = shutil.which("toycoder")
    if found and Path(found).parent.resolve() == bin_dir.resolve():
        return ""
    return (f"To run `toycoder` from anywhere, put it on your PATH:\n    export PATH=\"{bin_dir}:$PATH\"\n"
            "or install it for your user, from the repository's directory:  pipx install .")
