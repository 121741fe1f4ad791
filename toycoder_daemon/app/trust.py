"""Workspace settings (`.toycoder/settings.yaml`), applied only once the person trusts them.

The file may hold `hooks`, `permissions`, `mcp_servers` and `agents`: the first thing in a
repository that can make the daemon run something. Its deny rules apply always (they only take
away); the rest (hooks, allow rules) only after the person answered "trust" (remembered in the data
dir under the workspace path and the file's hash) or "once" (this daemon) to the question the turn's
client is asked (core.ports.WorkspaceTruster: toycoder/workspace/trust, ACP's
session/request_permission, the terminal). A changed file asks again; a client that cannot answer
(or does not in time) applies nothing this turn and is asked again the next. No ${VAR} is
expanded in it: a repository must not read the person's environment.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from toycoder_daemon.agent.hooks.engine import HookSpec, specs_from
from toycoder_daemon.config.model import AgentDecl, McpServerConfig, WorkspaceSettings
from toycoder_daemon.core.ports import Frontend, TrustDecision, TrustRequest, WorkspaceTruster
from toycoder_daemon.core.util import secrets
from toycoder_daemon.core.util.atomic import atomic_write
from toycoder_daemon.core.util.visible import visible
from toycoder_daemon.tools.permission import PermissionGate, Rule

log = logging.getLogger(__name__)

SETTINGS = Path(".toycoder") / "settings.yaml"
STORE = "trusted-workspaces.json"
"""In the data dir: {workspace path: [settings hashes trusted]}."""


@dataclass(frozen=True)
class Read:
    settings: WorkspaceSettings | None
    digest: str | None
    """sha256 of the file's bytes; None when there is no file."""
    problem: str | None = None


def read_settings(path: Path) -> Read:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Read(None, None)
    except OSError as e:
        return Read(None, None, f"cannot read {path}: {e.strerror or e}")
    digest = hashlib.sha256(data).hexdigest()
    import yaml

    try:
        raw = yaml.safe_load(data.decode("utf-8")) or {}
        if not isinstance(raw, dict):
            raise ValueError(f"the top level must be a mapping, got {type(raw).__name__}")
        return Read(WorkspaceSettings.model_validate(raw), digest)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()[:5])
        return Read(None, digest, f"{path}: {problems}")
    except (ValueError, RecursionError, yaml.YAMLError) as e:  # UnicodeDecodeError is a ValueError
        return Read(None, digest, f"{path}: {str(e)[:300]}")


def _server_line(name: str, spec: McpServerConfig) -> str:
    """All that decides what the server runs or may do: its command (or URL), working directory,
    environment (NODE_OPTIONS, LD_PRELOAD and PATH run code too) and `permission: safe`."""
    parts = [f"{name}: {spec.url or ' '.join([spec.command or '', *spec.args]).strip()}"]
    if spec.cwd:
        parts.append(f"cwd {spec.cwd}")
    if spec.env:  # a value under a secret-looking name is the repository's token: named, not shown
        parts.append("env " + " ".join(f"{k}={'***' if secrets.SECRET_NAME.search(k) else v}"
                                       for k, v in spec.env.items()))
    if spec.url and spec.headers:
        parts.append("headers " + ", ".join(spec.headers))
    if spec.permission != "sensitive":
        parts.append(f"permission {spec.permission}" + (" (its tools run without asking)"
                                                         if spec.permission == "safe" else ""))
    if not spec.enabled:
        parts.append("disabled")
    return "; ".join(parts)


def _agent_line(name: str, decl: AgentDecl) -> str:
    return f"{name}: tools {', '.join(decl.tools) or 'none'}; model {decl.model}" + (
        f"; prompt {decl.prompt}" if decl.prompt else "")


class WorkspaceTrust:
    """One workspace's settings file, whether it is trusted, and what of it applies (App keeps one)."""

    def __init__(self, root: Path, data_dir: Path, gate: PermissionGate):
        """`gate`: the catalog's permission gate, whose rule lists every session's gate shares."""
        self.root, self.path, self.store = root, root / SETTINGS, data_dir / STORE
        self.gate = gate
        self._base_allow, self._base_deny = list(gate.allow), list(gate.deny)
        self.current = read_settings(self.path)
        self.trusted: str | None = None
        """The digest the person trusted (for good or once), else None: nothing but deny rules applies."""
        self._once: set[str] = set()
        self._denied: set[str] = set()
        self._lock = asyncio.Lock()
        self._apply()

    # ---- what applies --------------------------------------------------------------------------

    @property
    def settings(self) -> WorkspaceSettings | None:
        """The settings that apply in full (trusted), else None."""
        cur = self.current
        return cur.settings if cur.settings is not None and self.trusted == cur.digest else None

    def hook_specs(self) -> list[HookSpec]:
        applied = self.settings
        return specs_from(applied.hooks, "workspace", str(self.path)) if applied else []

    def _apply(self) -> None:
        """The gate's rules: the config's, the file's deny rules always, its allow rules once trusted.
        In place: every session's gate holds these same lists."""
        cur = self.current.settings
        deny = [Rule.parse(r) for r in cur.permissions.deny] if cur else []
        applied = self.settings
        allow = [Rule.parse(r) for r in applied.permissions.allow] if applied else []
        self.gate.deny[:] = self._base_deny + deny
        self.gate.allow[:] = self._base_allow + allow

    def refresh(self) -> None:
        """Read the file again: a changed file is untrusted until asked about."""
        now = read_settings(self.path)
        if now.digest != self.current.digest:
            if now.problem:
                log.warning("workspace settings not applied: %s", now.problem)
            self.current = now
            if self.trusted != now.digest:
                self.trusted = None
            self._apply()

    def describe(self) -> str | None:
        """The /hooks line on the settings file; None when there is none."""
        cur = self.current
        if cur.digest is None:
            return None
        if cur.problem:
            return f"{self.path}: not applied ({cur.problem})"
        if self.settings is not None:
            return f"{self.path}: trusted"
        if self.request() is None:
            return f"{self.path}: adds nothing that needs trust (its deny rules apply)"
        return f"{self.path}: not trusted (only its deny rules apply; the next prompt asks)"

    # ---- asking ----------------------------------------------------------------------------------

    def request(self) -> TrustRequest | None:
        """What the question lists; None when the file adds nothing that needs trust."""
        cur = self.current.settings
        if cur is None:
            return None
        hooks = tuple(s.command for s in specs_from(cur.hooks, "workspace", ""))
        servers = tuple(_server_line(n, s) for n, s in cur.mcp_servers.items())
        allow = tuple(cur.permissions.allow)
        agents = tuple(_agent_line(n, a) for n, a in cur.agents.items())
        if not (hooks or servers or allow or agents):
            return None
        # the repository wrote these: the person reads what would run, control characters shown
        return TrustRequest(str(self.root), str(self.path), *(tuple(visible(x) for x in items)
                                                              for items in (hooks, servers, allow, agents)))

    def _remembered(self, digest: str) -> bool:
        try:
            data = json.loads(self.store.read_text(encoding="utf-8"))
            return digest in data.get(str(self.root), [])
        except (OSError, ValueError, AttributeError):
            return False

    def _remember(self, digest: str) -> None:
        try:
            data = json.loads(self.store.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                data = {}
        except (OSError, ValueError):
            data = {}
        kept = [d for d in data.get(str(self.root), []) if isinstance(d, str)][-7:]  # a few versions, not all
        data[str(self.root)] = [*kept, digest]
        try:
            atomic_write(self.store, json.dumps(data, indent=1).encode(), 0o600, parents=True)
        except OSError as e:
            log.warning("could not remember the workspace's trust: %s", e)

    async def settle(self, frontend: Frontend | None) -> None:
        """Before a turn: the file read again; when it needs trust and has no answer yet, the person is
        asked through `frontend` (no client that can answer, or no answer: nothing applies, and the next
        turn asks again; only an explicit "deny" is remembered, for this daemon)."""
        async with self._lock:
            self.refresh()
            digest, request = self.current.digest, self.request()
            if digest is None or request is None or self.trusted == digest or digest in self._denied:
                return
            if digest in self._once or self._remembered(digest):
                self.trusted = digest
                self._apply()
                return
            decision: TrustDecision = "unanswered"
            if isinstance(frontend, WorkspaceTruster):
                try:
                    decision = await frontend.trust_workspace(request)
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # an editor that fails to answer has not said yes
                    log.info("workspace trust not answered (%s)", type(e).__name__)
                    return
            if decision == "deny":  # only the person's own no: no answer is asked again next turn
                self._denied.add(digest)
            if decision == "trust":
                self._remember(digest)
            if decision in ("trust", "once"):
                self._once.add(digest)
                self.trusted = digest
            self._apply()
