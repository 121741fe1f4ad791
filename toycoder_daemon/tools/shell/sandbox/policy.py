"""Sandbox policy as data (from `tools.run_command` in the config) and the plan for one command."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toycoder_daemon.tools.settings import ToolSettings
from toycoder_daemon.tools.shell.sandbox.probe import Support

DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/shm")
"""Always writable: discarding output (`> /dev/null`) and POSIX shared memory must keep working.
Not /dev/pts: the machine's other terminals are there. The launcher adds it once the command has a
devpts instance of its own (contain.confine_mounts); /dev/tty stays its own controlling terminal."""


@dataclass(frozen=True)
class Policy:
    mode: str = "auto"
    """auto | required | off"""
    writable: tuple[str, ...] = ()
    """Extra writable paths as configured (`~` and workspace-relative allowed)."""
    network: bool = False

    @classmethod
    def from_settings(cls, settings: ToolSettings) -> Policy:
        """From the tools settings (filled from `tools.run_command` in the config)."""
        section = settings.run_command
        return cls(section.sandbox, tuple(section.writable), bool(section.network))


def escalation(policy: Policy, args: dict[str, Any]) -> str | None:
    """Why this call needs the person even under allow rules and "always", or None."""
    if args.get("sandbox") is False and policy.mode != "off":
        return "it asks to run outside the sandbox (it may write anywhere and use the network)"
    if args.get("network") is True and not policy.network:
        return "it asks for network access"
    return None


@dataclass
class Plan:
    sandboxed: bool
    network: bool
    """The command may use the network."""
    writable: list[str] = field(default_factory=list)
    readonly: list[str] = field(default_factory=list)
    """Paths inside the writable roots made read-only (their .git: _git_dirs)."""
    hidden: list[str] = field(default_factory=list)
    """Sockets and socket directories the command must not connect to (HIDDEN)."""
    escalated: str | None = None
    refusal: str | None = None
    """Set when the command must not run (sandbox required but unavailable)."""
    unavailable: str | None = None
    """Why `auto` runs this command unsandboxed (said once)."""
    git_writable_reason: str | None = None
    network_reason: str | None = None
    """Why the network stays on although the policy wants it off."""

    def describe(self) -> str:
        net = f"network {'on' if self.network else 'off'}"
        if self.network_reason:
            net += f" ({self.network_reason})"
        if self.sandboxed:
            extra = f", .git writable ({self.git_writable_reason})" if self.git_writable_reason else ""
            return f"sandbox: workspace-write, {net}{extra}"
        if self.refusal:
            return f"sandbox: required but unavailable ({self.refusal}); the command will not run"
        if self.escalated:
            return f"sandbox: OFF because {self.escalated}, {net}"
        if self.unavailable:
            return f"sandbox: unavailable ({self.unavailable}), runs unsandboxed, {net}"
        return f"sandbox: off (tools.run_command.sandbox), {net}"

    def spec(self, command: str, support: Support, *, required: bool) -> dict[str, Any]:
        """What the launcher needs (passed as JSON on its command line)."""
        return {"command": command, "writable": self.writable, "readonly": self.readonly, "network": self.network,
                "hidden": self.hidden,
                "landlock": support.landlock, "namespaces": support.namespaces, "mounts": support.readonly_mounts,
                "required": required,
                "daemon": os.getpid()}


HIDDEN = ("/run/user", "/run/docker.sock", "/var/run/docker.sock", "/run/containerd/containerd.sock",
          "/run/podman/podman.sock", "/run/dbus/system_bus_socket", "/var/run/dbus/system_bus_socket",
          "/run/systemd/private")
"""Unix sockets that start processes outside the sandbox (the session bus and systemd-run, container
engines, the system bus and systemd as root), and /run/user, which holds the session's: hidden from
the command (contain.confine_mounts) unless at or below a writable root. Other file sockets stay
reachable: docs/security.md."""
SESSION_VARIABLES = ("DBUS_SESSION_BUS_ADDRESS", "SSH_AUTH_SOCK", "XDG_RUNTIME_DIR")
"""Where the session's sockets are: not given to a sandboxed command."""


def _resolve(path: str, root: Path) -> str:
    p = Path(os.path.expanduser(path))
    return str((p if p.is_absolute() else root / p).resolve())


def plan(policy: Policy, root: Path, tmpdir: str | None, support: Support, args: dict[str, Any]) -> Plan:
    wants_network = policy.network or args.get("network") is True
    reason = escalation(policy, args)
    if policy.mode == "off" or args.get("sandbox") is False:
        return Plan(False, True, escalated=reason if args.get("sandbox") is False else None)
    missing = support.missing()
    no_net_off = not wants_network and support.network_isolation is None
    if missing is None and no_net_off and policy.mode == "required":
        missing = "the network cannot be turned off on this kernel"
    if missing:
        if policy.mode == "required":
            return Plan(False, wants_network, refusal=missing)
        return Plan(False, True, unavailable=missing)
    root = root.resolve()
    extra = [_resolve(w, root) for w in policy.writable]
    writable = [str(root), *([tmpdir] if tmpdir else []), *extra, *DEVICES]
    result = Plan(True, wants_network or no_net_off, writable,
                  escalated=reason if args.get("network") is True else None,
                  hidden=[h for h in HIDDEN if not any(_within(w, h) for w in writable)])
    if no_net_off:  # under auto: confine writes and processes all the same
        result.network_reason = "it cannot be turned off on this kernel"
    gits = [g for g in _git_dirs([str(root), *extra]) if str(Path(g).resolve()) not in extra]
    if gits:
        if support.readonly_mounts:
            result.readonly = gits
        else:
            result.git_writable_reason = "no mount namespace here"
    return result


def _within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _git_dirs(roots: list[str]) -> list[str]:
    """The `.git` (directory, or a worktree's file) of each writable root and of each repository
    directly below one. Written there, hooks or `core.fsmonitor` run unsandboxed at the person's
    next git command. Deeper repositories, and a .git the command creates, are docs/security.md's
    remainder; one listing per root keeps this cheap (it runs for every command)."""
    found: list[str] = []
    for root in roots:
        candidates = [os.path.join(root, ".git")]
        try:
            with os.scandir(root) as entries:
                candidates += [os.path.join(e.path, ".git") for e in entries
                               if e.name != ".git" and e.is_dir(follow_symlinks=False)]
        except OSError:
            pass  # a root that is not a directory (or is gone) has nothing below it
        found += [c for c in candidates if os.path.exists(c) and c not in found]
    return found
