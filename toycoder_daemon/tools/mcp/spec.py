"""What the MCP adapter needs to know about one configured server, as a structural type: the
config model (config.model.McpServerConfig) satisfies it as is, so tools/ never imports config."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from toycoder_daemon.core.ports import Level
from toycoder_daemon.core.util import secrets


@runtime_checkable
class McpServerSpec(Protocol):
    """One server: a stdio `command` (with args, env, cwd) or a streamable-HTTP `url` (with headers).

    Read-only properties, so a model with plain fields (list, dict, Literal) satisfies it."""

    @property
    def command(self) -> str | None: ...
    @property
    def args(self) -> Sequence[str]: ...
    @property
    def env(self) -> Mapping[str, str]: ...
    @property
    def cwd(self) -> str | None: ...
    @property
    def url(self) -> str | None: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def transport(self) -> str:
        """For a `url`: "http" (streamable HTTP) or "sse" (the older HTTP+SSE transport)."""
    @property
    def permission(self) -> Level: ...
    @property
    def enabled(self) -> bool: ...
    @property
    def start_timeout(self) -> float: ...
    @property
    def call_timeout(self) -> float: ...


def transport_of(spec: McpServerSpec) -> str:
    return ("sse" if spec.transport == "sse" else "http") if spec.url and not spec.command else "stdio"


def server_cwd(spec: McpServerSpec, workspace_root: Path) -> Path:
    """The stdio server's working directory: `cwd` (relative to the workspace root), else the root."""
    if not spec.cwd:
        return workspace_root
    cwd = Path(spec.cwd).expanduser()
    return cwd if cwd.is_absolute() else workspace_root / cwd


def server_env(spec: McpServerSpec) -> dict[str, str]:
    """The daemon's environment without secrets, plus the configured `env`: configured entries win,
    even secret-looking ones (that is how a server is given its token)."""
    env = secrets.child_env()
    env.update(spec.env)
    return env


def register_secrets(spec: McpServerSpec) -> None:
    """Tokens given to a server stay out of logs and out of other children's environments; a path
    (GOOGLE_APPLICATION_CREDENTIALS=/home/alice/...) is no token: it names where one is."""
    secrets.register([v for k, v in {**spec.headers, **spec.env}.items()
                      if (secrets.SECRET_NAME.search(k) or k.lower() in ("authorization", "cookie"))
                      and not secrets.looks_like_path(v)])
