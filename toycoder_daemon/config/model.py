"""Configuration: pydantic models, YAML loading with ${ENV} expansion, and the search order.

Search order: --config, then $TOYCODER_CONFIG, then ~/.config/toycoder/config.yaml, then defaults.
Environment values are substituted into parsed string scalars (never into the YAML text), so a
value from the environment can never change the file's structure.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from toycoder_daemon.core.errors import ConfigError


class _Section(BaseModel):
    # The docstring under each field is its documentation (docs/config.md is generated from it, through
    # field_docs.document: not read at class creation, which would cost every new process ~10 ms).
    # Empty lists/dicts are plain defaults (pydantic copies them per instance) and sections are built by
    # lambdas: pydantic reads a default_factory's signature at class creation, and for `list` or a model
    # class that is slow (text signatures, the model's own signature): ~3 ms of every new process.
    model_config = ConfigDict(extra="forbid")


class ModelNames(_Section):
    default: str = "gpt-4o"
    """Model used for the main agent ($TOYCODER_MODEL when set and the config does not name one)."""
    fast: str = "gpt-4o-mini"
    """Cheaper model for summaries and light sub-agents ($TOYCODER_FAST_MODEL likewise)."""

    @model_validator(mode="before")
    @classmethod
    def _from_env(cls, data: Any) -> Any:
        # the README's TOYCODER_MODEL must work with no config file, or one without `models:`
        if isinstance(data, dict):
            for field, var in (("default", "TOYCODER_MODEL"), ("fast", "TOYCODER_FAST_MODEL")):
                if field not in data and os.environ.get(var):
                    data = {**data, field: os.environ[var]}
        return data


class ProviderConfig(_Section):
    api_keys: list[str] = Field(default=[])
    """Keys used round-robin; empty strings (e.g. `${VAR:-}` with VAR unset) are dropped."""
    api_keys_file: str | None = None
    """A YAML file with more keys under `api_keys:` (relative to the config file's folder; owner-only, mode 0600),
    so the config itself holds none: `toycoder setup` writes `credentials.yaml` there."""
    api_key_keyring: str | None = None
    """One more key, kept in the OS keyring: `service/username` (e.g. `toycoder/local`), read with libsecret's
    `secret-tool lookup service SERVICE username USERNAME` as the config loads. `toycoder setup` stores the key
    there (and writes this) when a Secret Service answers, else it writes `api_keys_file`."""
    base_url: str | None = None
    """OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1 for Ollama."""
    models: ModelNames = Field(default_factory=lambda: ModelNames())
    """Model names for the `default` and `fast` roles."""
    max_tokens: int = Field(default=4096, ge=16)
    """Output limit of one reply (tokens), sent with every request; a cut reply is continued twice, then ends max_tokens."""
    model_max_tokens: dict[str, int] = Field(default={})
    """Per-model output limits (model name -> tokens) that override `max_tokens`."""
    token_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    """Request field that carries the output limit (OpenAI's reasoning models accept only `max_completion_tokens`)."""

    quirks: list[Literal["empty_content", "no_tool_choice"]] | None = None
    (
        "Request quirks: `empty_content` sends `content: \"\"` instead of null on assistant messages with tool calls "
        "(llama-cpp-python needs it); `no_tool_choice` leaves out `tool_choice: \"auto\"`. Unset: the known quirks "
        "of the server's kind, found from its Server header and /v1/models."
    )

    vision_models: list[str] = Field(default=[])
    """Models of this provider that take images (a prompt's image context goes to them as `image_url`
    parts); a prompt with an image for any other model is refused before anything is sent."""

    def max_tokens_for(self, model: str) -> int:
        return self.model_max_tokens.get(model, self.max_tokens)

    @field_validator("api_keys", mode="before")
    @classmethod
    def _drop_empty(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = [v]
        if isinstance(v, list):
            return [k for k in v if not (isinstance(k, str) and not k.strip())]
        return v


class AgentConfig(_Section):
    max_steps: int = Field(default=16, ge=1, le=1000)
    """Model calls allowed in one turn before it stops with max_steps."""
    max_retries: int = Field(default=2, ge=0, le=20)
    """Retries of one model call after a retryable failure (408/429/5xx/connection/cut stream)."""
    retry_interval: float = Field(default=1.0, ge=0)
    """Base delay of the exponential backoff, seconds."""
    max_retry_delay: float = Field(default=30.0, ge=0)
    """Cap on one backoff delay (Retry-After included), seconds."""
    max_retry_seconds: float = Field(default=120.0, ge=0)
    """Total time budget for the retries of one model call, seconds."""
    request_timeout: float = Field(default=300.0, gt=0)
    """Timeout of one model request, seconds."""
    auto_title: bool = True
    """After a session's first turn, the fast model writes its title (else: the first prompt's line)."""


class SessionConfig(_Section):
    max_messages: int = Field(default=50, ge=4)
    """Compaction threshold in messages."""
    compress_keep_recent: int = Field(default=8, ge=1)
    """Messages kept verbatim when compacting."""
    max_context_tokens: int = Field(default=100_000, ge=1000)
    """Estimated token budget that also triggers compaction (at least 1000); a smaller context the server reports wins."""


class RunCommandConfig(_Section):
    sandbox: Literal["auto", "required", "off"] = "auto"
    """OS sandbox (docs/security.md): `auto` if the kernel can, `required` refuses without it, `off`."""
    writable: list[str] = Field(default=[])
    """Extra writable paths besides the workspace and a private temp dir; list `.git` to allow commits."""
    network: bool = False
    """Let sandboxed commands use the network (a call may still ask for it with `network: true`)."""


class DiagnosticsConfig(_Section):
    wait_ms: int = Field(default=1500, ge=0, le=30_000)
    """How long the editor may take to report a file's diagnostics after an edit (toycoder/diagnostics)."""
    level: Literal["errors", "warnings", "off"] = "warnings"
    """Which new diagnostics an edit's observation shows: errors only, errors and warnings, or none."""


class ToolsConfig(_Section):
    read_max_bytes: int = Field(default=100_000, ge=1000)
    """Most bytes read_file returns in one call."""
    read_default_lines: int = Field(default=2000, ge=1)
    """Lines read_file returns when no limit is given."""
    list_max_entries: int = Field(default=500, ge=1)
    """Most entries list_directory shows."""
    command_timeout: float = Field(default=120.0, gt=0)
    """Default run_command timeout, seconds."""
    command_max_timeout: float = Field(default=600.0, gt=0)
    """Largest timeout a run_command call may ask for, seconds."""
    output_max_bytes: int = Field(default=30_000, ge=1000)
    """Cap on a tool's output sent to the model."""
    enabled: list[str] = Field(default=[])
    """Dangerous tools (e.g. run_command) enabled from the start of every session."""
    run_command: RunCommandConfig = Field(default_factory=lambda: RunCommandConfig())
    """run_command's sandbox: where commands may write, whether they reach the network."""
    diagnostics: DiagnosticsConfig = Field(default_factory=lambda: DiagnosticsConfig())
    """The editor's diagnostics after edit_file/write_file (clients that answer toycoder/diagnostics)."""


_RULE = re.compile(r"\s*[\w.-]+\s*(\(.*\))?\s*", re.DOTALL)


class PermissionsConfig(_Section):
    allow: list[str] = Field(default=[])
    """Rules for calls that run without asking: `write_file`, `write_file(docs/**)`, `run_command(pytest *)`."""
    deny: list[str] = Field(default=[])
    """Rules for calls that are always refused (checked before allow)."""
    timeout_seconds: float = Field(default=600.0, gt=0)
    """How long a permission prompt or question waits for the person; no answer is a rejection."""

    @field_validator("allow", "deny")
    @classmethod
    def _rule_syntax(cls, rules: list[str]) -> list[str]:
        return _rules(rules)


def _rules(rules: list[str]) -> list[str]:
    for r in rules:
        if not _RULE.fullmatch(r):
            raise ValueError(f"bad rule {r!r}: expected NAME or NAME(pattern)")
    return rules


class AgentDecl(_Section):
    prompt: str | None = None
    """Role key in the prompt templates (default: the agent's name)."""
    tools: list[str] = Field(default=[])
    """Tools it may use, by name (read-only ones for an explorer); empty = none."""
    model: Literal["default", "fast"] = "default"
    """Which of the provider's models it runs on."""
    max_steps: int = Field(default=8, ge=1, le=200)
    """Model calls it may make per task."""
    description: str | None = None
    """What the main agent reads to decide when to call it (default: the template's description)."""


class McpServerConfig(BaseModel):
    model_config = ConfigDict(extra="allow")
    command: str | None = None
    """Program of a stdio server (or give `url`)."""
    args: list[str] = Field(default=[])
    """Its arguments."""
    env: dict[str, str] = Field(default={})
    """Extra environment (the daemon's secrets are never passed on)."""
    cwd: str | None = None
    """Working directory (default: the workspace root)."""
    url: str | None = None
    """Endpoint of a remote server (streamable HTTP, or SSE with `transport: sse`)."""
    transport: Literal["http", "sse"] = "http"
    """For a `url`: streamable HTTP (http) or the older HTTP+SSE transport (sse)."""
    headers: dict[str, str] = Field(default={})
    """HTTP headers for a remote server, e.g. Authorization: "Bearer ${TOKEN}"."""
    permission: Literal["safe", "sensitive", "dangerous"] = "sensitive"
    """Level of all its tools: sensitive asks before each call."""
    enabled: bool = True
    """Set false to keep it configured but not started."""
    start_timeout: float = 30.0
    """Seconds it may take to start and list its tools; a turn waits at most that long for it (shown after 0.5 s)."""
    call_timeout: float = 120.0
    """Seconds one tool call may take."""


HookEvent = Literal["PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SubagentStop", "SessionStart",
                   "SessionEnd", "PreCompact"]
HOOK_EVENTS: tuple[str, ...] = ("PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SubagentStop",
                                "SessionStart", "SessionEnd", "PreCompact")


class HookCommand(_Section):
    type: Literal["command"] = "command"
    """Only `command` hooks exist."""
    command: str = Field(min_length=1)
    """Run with /bin/sh -c in the workspace; the event's JSON comes on stdin (docs/hooks.md)."""
    timeout: float = Field(default=60.0, gt=0, le=3600)
    """Seconds before the hook is killed with everything it started (a timeout is a failure)."""


class HookMatcher(_Section):
    matcher: str = ""
    """Regex on the tool name (tool events; MCP tools are `mcp:<server>:<tool>`); "" or "*" match every tool."""
    hooks: list[HookCommand] = Field(default=[])
    """The commands run when it matches, all at once."""

    @field_validator("matcher")
    @classmethod
    def _regex(cls, v: str) -> str:
        if v not in ("", "*"):
            try:
                re.compile(v)
            except re.error as e:
                raise ValueError(f"matcher {v!r} is not a regex: {e}") from None
        return v


class WorkspacePermissions(_Section):
    allow: list[str] = Field(default=[])
    """Allow rules (applied only once the workspace is trusted)."""
    deny: list[str] = Field(default=[])
    """Deny rules (always applied: they only take away)."""

    @field_validator("allow", "deny")
    @classmethod
    def _rule_syntax(cls, rules: list[str]) -> list[str]:
        return _rules(rules)


class WorkspaceSettings(_Section):
    """`.toycoder/settings.yaml` in a workspace (docs/hooks.md, docs/security.md "Workspace trust")."""

    hooks: dict[HookEvent, list[HookMatcher]] = Field(default={})
    """Hooks (run only once the workspace is trusted, sandboxed unless `hooks_workspace_sandbox: false`)."""
    permissions: WorkspacePermissions = Field(default_factory=lambda: WorkspacePermissions())
    """Allow rules after trust; deny rules always."""
    mcp_servers: dict[str, McpServerConfig] = Field(default={})
    """MCP servers (started only once the workspace is trusted)."""
    agents: dict[str, AgentDecl] = Field(default={})
    """Sub-agents (only once the workspace is trusted)."""

OPENAI_VISION_MODELS = ("gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "gpt-4-turbo",
                        "gpt-5", "gpt-5-mini", "gpt-5-nano", "o1", "o3", "o4-mini")
"""OpenAI's models that take images (the built-in provider's and the shipped config's vision_models)."""

MAX_WARM_IDLE_MINUTES = 10080.0
"""A week: the fork server refuses more too (its poll() would overflow at ~24 days)."""


class CommandsConfig(_Section):
    paths: list[str] = Field(default=[])
    """More folders of Markdown slash commands (e.g. `.claude/commands`; relative to the workspace), after
    `.toycoder/commands` and the user's `$XDG_CONFIG_HOME/toycoder/commands`."""


class DaemonConfig(_Section):
    warm_idle_minutes: float = Field(default=30.0, ge=0, le=MAX_WARM_IDLE_MINUTES)
    """Minutes the fork server (warm starts) waits with no daemon running before it exits; set by the latest warm daemon."""


class Config(_Section):
    providers: dict[str, ProviderConfig] = Field(
        default_factory=lambda: {
            "openai": ProviderConfig(
                api_keys=[os.environ.get("OPENAI_API_KEY", "")],
                base_url=os.environ.get("OPENAI_BASE_URL") or None,
                vision_models=list(OPENAI_VISION_MODELS),
            )
        }
    )
    """Named OpenAI-compatible providers."""
    default_provider: str = "openai"
    """Provider used when a session does not pick one."""
    agent: AgentConfig = Field(default_factory=lambda: AgentConfig())
    """The ReAct loop and the model calls."""
    session: SessionConfig = Field(default_factory=lambda: SessionConfig())
    """Context management."""
    tools: ToolsConfig = Field(default_factory=lambda: ToolsConfig())
    """Tool limits and defaults."""
    permissions: PermissionsConfig = Field(default_factory=lambda: PermissionsConfig())
    """Rules that answer permission questions before the person is asked."""
    mcp_servers: dict[str, McpServerConfig] = Field(default={})
    """External MCP tool servers."""
    agents: dict[str, AgentDecl] = Field(default={})
    """Sub-agents exposed as tools, besides the built-in planner."""
    prompts_file: str | None = None
    """A YAML file whose roles override the built-in prompt templates by name."""
    commands: CommandsConfig = Field(default_factory=lambda: CommandsConfig())
    """Custom slash commands from Markdown files."""
    daemon: DaemonConfig = Field(default_factory=lambda: DaemonConfig())
    """The daemon process: its warm start (docs/architecture.md, "Launcher and fork server")."""
    hooks: dict[HookEvent, list[HookMatcher]] = Field(default={})
    """Commands run on agent events, in Claude Code's shape (docs/hooks.md)."""
    hooks_on_error: Literal["block", "continue"] = "block"
    """A hook that crashes, times out or prints bad JSON: `block` refuses what it guards; `continue` only warns."""
    hooks_max_continuations: int = Field(default=3, ge=0, le=50)
    """Times per turn a Stop (or SubagentStop) hook may make the agent go on."""
    hooks_workspace_sandbox: bool = True
    """Run a trusted workspace's hooks inside run_command's sandbox (false: as the user, unconfined)."""

    def provider(self, name: str | None = None) -> tuple[str, ProviderConfig]:
        name = name or self.default_provider
        if name not in self.providers:
            raise ConfigError(f"unknown provider {name!r}; configured: {', '.join(self.providers) or 'none'}")
        return name, self.providers[name]


_ENV_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(value: Any, env: Mapping[str, str] | None = None,
               unset: list[tuple[str, str]] | None = None, where: str = "") -> Any:
    """Expand ${VAR} and ${VAR:-default} in every string of a parsed YAML tree. A ${VAR} without a
    default whose VAR is not set expands to "" and, when `unset` is given, is recorded there as
    (field, VAR) so the caller can name it where it is used."""
    names: Mapping[str, str] = os.environ if env is None else env
    if isinstance(value, str):
        def sub(m: re.Match[str]) -> str:
            if m.group(2) is None and m.group(1) not in names and unset is not None:
                unset.append((where or "(top level)", m.group(1)))
            return names.get(m.group(1)) or (m.group(2) or "")

        return _ENV_RE.sub(sub, value)
    if isinstance(value, list):
        return [expand_env(v, names, unset, f"{where}.{i}") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: expand_env(v, names, unset, f"{where}.{k}" if where else str(k)) for k, v in value.items()}
    return value


def decode_utf8(data: bytes, what: str) -> str:
    """`data` as UTF-8, or a ConfigError naming `what`, the line and the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ConfigError(f"{what}: line {line}: not UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start}); "
                          "save it as UTF-8") from None


MAX_CONFIG_BYTES = 1 << 20
"""A config file is a few KiB; a larger one is refused before it is read whole."""


def read_config_file(path: Path) -> bytes:
    """A config file's bytes: a regular file only (/dev/zero would be read without end, a FIFO
    would block the start), at most MAX_CONFIG_BYTES. Else a ConfigError that says why."""
    try:
        # O_NONBLOCK: opening a FIFO with no writer must not hang; it is refused below
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"config file {path}: not a regular file; give the path of a YAML file")
        if st.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"config file {path}: {st.st_size} bytes, over the limit of {MAX_CONFIG_BYTES}")
        chunks, size = [], 0
        while size <= MAX_CONFIG_BYTES and (chunk := os.read(fd, MAX_CONFIG_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_CONFIG_BYTES:  # it grew since the fstat
        raise ConfigError(f"config file {path}: over the limit of {MAX_CONFIG_BYTES} bytes")
    return data


def find_config(explicit: str | None = None) -> Path | None:
    """The first config file in the search order, or None for the built-in defaults."""
    if explicit:
        return Path(explicit).expanduser()
    if env_path := os.environ.get("TOYCODER_CONFIG"):
        return Path(env_path).expanduser()
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    user = base / "toycoder" / "config.yaml"
    return user if user.is_file() else None


on_loaded: Callable[[Config], None] | None = None
"""Told each config `load_config` returns: a warm daemon passes its `daemon.warm_idle_minutes` on
to its fork server (warm/child.py sets it), which reads no config itself."""


def load_config(explicit: str | None = None) -> tuple[Config, Path | None]:
    """Load and validate the config; raises ConfigError naming file, field and problem."""
    config, path = _load(explicit)
    if on_loaded is not None:
        on_loaded(config)
    return config, path


def _load(explicit: str | None) -> tuple[Config, Path | None]:
    path = find_config(explicit)
    if path is None:
        return Config(), None
    return parse_config(decode_utf8(read_config_file(path), f"config file {path}"), path), path


SAMPLE = """\
providers:
  openai:
    api_keys: ["sample-key"]
    base_url: http://127.0.0.1:1/v1
    models: {default: sample, fast: sample}
default_provider: openai
agent: {max_steps: 4, auto_title: false}
session: {max_messages: 1000}
"""
"""A config of the usual shape that reads nothing: every model name given (no $TOYCODER_MODEL), no
${VAR}, no key file."""


def prepare() -> None:
    """For the fork server (warm/server.py's PREPARE): `parse_config` run once on SAMPLE, so the YAML
    parser's and the validators' code is specialised by the interpreter before the fork, not in
    each warm child at its own config (~1.5 ms of its first load; it reads no file and no variable)."""
    parse_config(SAMPLE, Path("sample.yaml"))


def parse_config(text: str, path: Path) -> Config:
    """The config file `path` holds `text`: parsed, expanded and validated; ConfigError else."""
    import yaml

    try:
        raw = yaml.safe_load(text)
    except RecursionError:  # the composer recurses per level: a deep file must not take start-up down
        raise ConfigError(f"config file {path}: invalid YAML: nested too deep") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"config file {path}: {where}invalid YAML: {problem}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"config file {path}: the top level must be a mapping, got {type(raw).__name__}")
    unset: list[tuple[str, str]] = []
    expanded = expand_env(raw, unset=unset)
    problems = [f"field '{field}': ${{{var}}} is not set (set it, or give a default: ${{{var}:-value}})"
                for field, var in unset]
    config: Config | None = None
    try:
        config = Config.model_validate(expanded)
    except ValidationError as e:
        problems += [_validation_problem(err) for err in e.errors()]
    if config is not None:
        problems += _provider_problems(config.default_provider, list(config.providers))
        for name, provider in config.providers.items():
            problems += _read_key_file(name, provider, path.parent)
            problems += _read_keyring(name, provider)
    else:  # name a wrong default_provider even when other fields are wrong too
        dp, provs = expanded.get("default_provider", "openai"), expanded.get("providers", {"openai": None})
        if isinstance(dp, str) and isinstance(provs, dict):
            problems += _provider_problems(dp, [str(k) for k in provs])
    if problems:
        raise ConfigError(f"config file {path}: " + (problems[0] if len(problems) == 1 else
                          f"{len(problems)} problems: " + "; ".join(problems)), problems)
    assert config is not None
    return config


def _read_key_file(name: str, provider: ProviderConfig, base: Path) -> list[str]:
    """Add the keys of the provider's api_keys_file; the problems with it (never its content)."""
    if not provider.api_keys_file:
        return []
    import yaml

    where = f"field 'providers.{name}.api_keys_file'"
    path = (base / Path(provider.api_keys_file).expanduser()).resolve()
    try:
        mode = path.stat().st_mode
        if mode & 0o077:
            return [f"{where}: {path} can be read by others (mode {mode & 0o777:o}); run: chmod 600 {path}"]
        data = yaml.safe_load(decode_utf8(path.read_bytes(), str(path)))
    except OSError as e:
        return [f"{where}: cannot read {path}: {e.strerror or e}"]
    except yaml.YAMLError:
        return [f"{where}: {path} is not valid YAML"]
    keys = data.get("api_keys") if isinstance(data, dict) else None
    if isinstance(keys, str):
        keys = [keys]
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        return [f"{where}: {path} must hold `api_keys:` with a list of strings"]
    provider.api_keys = [*provider.api_keys, *(k for k in keys if k.strip())]
    return []


def _read_keyring(name: str, provider: ProviderConfig) -> list[str]:
    """Add the key the provider's api_key_keyring names; the problems with it (never the key)."""
    if not provider.api_key_keyring:
        return []
    from toycoder_daemon.core.util import os_keyring

    where = f"field 'providers.{name}.api_key_keyring'"
    try:
        key = os_keyring.lookup(provider.api_key_keyring)
    except ValueError as e:
        return [f"{where}: {e}"]
    except os_keyring.KeyringError as e:
        return [f"{where}: {e}; run: toycoder setup (it stores the key again, or in credentials.yaml)"]
    provider.api_keys = [*provider.api_keys, key]
    return []


def _validation_problem(err: Any) -> str:
    field = ".".join(str(p) for p in err["loc"]) or "(top level)"
    # Echo only harmless scalars: a bad value may be a key.
    got = err.get("input")
    shown = f" (got {got!r})" if isinstance(got, (int, float, bool)) else ""
    return f"field '{field}': {err['msg']}{shown}"


def _provider_problems(default_provider: str, providers: list[str]) -> list[str]:
    if default_provider in providers:
        return []
    return [f"field 'default_provider': no provider named {default_provider!r} "
            f"(configured: {', '.join(providers) or 'none'})"]


def reference() -> str:
    """docs/config.md: every key with its type, default and description."""
    import json
    import typing

    rows: list[str] = []

    def kind(annotation: Any) -> str:
        text = str(annotation).replace("typing.", "").replace("<class '", "").replace("'>", "")
        return text.replace("|", "or")

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, f in model.model_fields.items():
            key = f"{prefix}{name}"
            ann = f.annotation
            args = typing.get_args(ann)
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                rows.append(f"| `{key}` | section | | {f.description or ''} |")
                walk(ann, key + ".")
                continue
            section_map = len(args) == 2 and isinstance(args[1], type) and issubclass(args[1], BaseModel)
            if typing.get_origin(ann) is dict and section_map:
                shown = "`openai`, reading $OPENAI_API_KEY and $OPENAI_BASE_URL" if key == "providers" else "`{}`"
                rows.append(f"| `{key}` | map of name -> section | {shown} | {f.description or ''} |")
                walk(args[1], f"{key}.<name>.")
                continue
            default = f.get_default(call_default_factory=True) if not f.is_required() else None
            shown = "" if default is None else f"`{json.dumps(default)}`"
            rows.append(f"| `{key}` | {kind(ann)} | {shown} | {f.description or ''} |")

    from toycoder_daemon.config.field_docs import document

    document([Config])
    walk(Config, "")
    return ("# Configuration reference\n\n"
            "Generated from `toycoder_daemon/config/model.py` (`python -m toycoder_daemon.config.model`); "
            "a test keeps it current.\n"
            "Strings may use `${VAR}` and `${VAR:-default}` from the environment; a `${VAR}` without a "
            "default whose VAR is not set is a config error naming the field.\n\n"
            "| key | type | default | what |\n|---|---|---|---|\n" + "\n".join(rows) + "\n")


def data_dir() -> Path:
    """Where the daemon keeps sessions and logs ($TOYCODER_DATA_DIR overrides)."""
    if d := os.environ.get("TOYCODER_DATA_DIR"):
        return Path(d).expanduser()
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "toycoder"


if __name__ == "__main__":
    import sys

    sys.stdout.write(reference())
