"""ACP authentication (issue 31; the ACP registry lists only agents with an auth method): one terminal
method, "setup", which the client runs as `toycoder-daemon --setup` in a terminal (app/setup.py writes the
user config). Without a usable model provider session/new answers ACP's auth_required (-32000) naming it;
after the setup (authenticate, or simply session/new again) a workspace with no session open yet is
opened anew, so it reads the config just written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp import RequestError
from acp.schema import TerminalAuthMethod

from toycoder_daemon.app.application import App
from toycoder_daemon.core.errors import ConfigError, ProviderError

METHOD_ID = "setup"
METHODS = [TerminalAuthMethod(id=METHOD_ID, name="Set up a model provider", type="terminal", args=["--setup"],
                              description="Pick OpenAI or an OpenAI-compatible server (a local Ollama or "
                              "llama-server is found), test the key, choose the models.")]
AUTH_REQUIRED = RequestError.auth_required().code


def unusable(app: App) -> str | None:
    """Why the workspace has no usable model provider (no key, a broken config); None when it has one."""
    try:
        app.model_for(None)
    except (ProviderError, ConfigError) as e:
        return str(e)
    return None


def required(why: str) -> RequestError:
    return RequestError(AUTH_REQUIRED, f"Authentication required: no usable model provider ({why}). Run "
                        "`toycoder-daemon --setup` (the \"setup\" auth method) or `toycoder setup`, then try again.",
                        {"authMethods": [METHOD_ID], "command": ["toycoder-daemon", "--setup"]})


async def reopen_idle(apps: dict[Path, App], owner: dict[str, Any], key: Path | None = None) -> None:
    """Close the workspaces (or the one at `key`) that have no session on this connection, so that the
    next use opens them with the config as it is now."""
    busy = {id(app) for app in owner.values()}
    for path, app in list(apps.items()):
        if (key is None or path == key) and id(app) not in busy:
            del apps[path]
            await app.shutdown()
