"""What sandboxing this machine offers, found once per daemon, for run_command and for reports
(`--check-config`, `/tools`)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import toycoder_daemon
from toycoder_daemon.core.util import secrets
from toycoder_daemon.tools.shell.sandbox import cgroups, landlock

log = logging.getLogger(__name__)

PACKAGE_PARENT = str(Path(toycoder_daemon.__file__).resolve().parents[1])  # where `import toycoder_daemon` finds us
BOOT = (f"import sys; sys.path.append({PACKAGE_PARENT!r}); "
        "from toycoder_daemon.tools.shell.sandbox.boot import restart_if_asked; restart_if_asked(sys.argv[1:]); "
        "from toycoder_daemon.tools.shell.sandbox.launch import main; sys.exit(main(sys.argv[1:]))")
"""The launcher's entry. It runs before the command is confined, so nothing of the workspace may
reach its imports: -I keeps the current directory and PYTHON* variables off sys.path (with a bare
-c, '' is on it and a workspace json.py would be imported unconfined), -S skips site-packages (the
launcher needs only the stdlib, which also keeps its start-up cost per command low), and our
package comes after the stdlib. boot.py comes first: it restarts the launcher in a client's
terminal with only the variables we passed, before anything else is imported."""

LAUNCH_CWD = "/"
"""Where the launcher is started (never the workspace); it changes to the workspace (spec "cwd")
just before it execs the shell, after the command is confined."""


def launcher_argv(*args: str) -> list[str]:
    return [sys.executable, "-I", "-S", "-c", BOOT, *args]


@dataclass(frozen=True)
class Support:
    platform: str
    landlock: int
    """Landlock ABI, 0 without it."""
    namespaces: bool
    """Fresh PID, mount and network namespaces can be created for a command."""
    readonly_mounts: bool
    """The command can get a mount table of its own (contain.confine_mounts): `/` read-only but the
    writable roots, the workspace's .git read-only, its own /dev/pts and /proc."""
    cgroup: bool = False
    """Each command gets a cgroup v2 of its own, ended with cgroup.kill (cgroups.py)."""

    @property
    def linux(self) -> bool:
        return self.platform.startswith("linux")

    @property
    def network_isolation(self) -> str | None:
        if self.namespaces:
            return "network namespace"
        if self.landlock >= 4:
            return "Landlock TCP rules"
        return None

    @property
    def supervisor_exposed(self) -> str | None:
        """Why a hostile command could escape what supervises it (and then outlive the daemon), or
        None. A PID namespace ends everything in it with its init. Without one the command may
        signal any process of its user below Landlock ABI 6; from ABI 6 it cannot, and its cgroup,
        killed whole, ends it; without a cgroup the subreaper finds its processes by walking them,
        which a process forking faster than the walk outruns (docs/security.md)."""
        if self.namespaces:
            return None
        if self.landlock < landlock.SCOPE_ABI:
            return f"no PID namespace and Landlock ABI {self.landlock} < {landlock.SCOPE_ABI} cannot scope signals"
        if self.cgroup:
            return None
        return "no PID namespace nor cgroup: a process that forks faster than the subreaper kills can outlive it"

    @property
    def processes(self) -> str:
        """What contains a command's processes, for reports."""
        by = "a PID namespace" if self.namespaces else "a subreaper"
        return f"{by} and a cgroup (cgroup.kill)" if self.cgroup else by

    def missing(self) -> str | None:
        """Why commands cannot be sandboxed here, or None."""
        if not self.linux:
            return f"no sandbox is implemented for {self.platform}"
        if self.landlock < 1:
            return "this kernel has no Landlock"
        return None

    def report(self) -> dict[str, object]:
        return {
            "available": self.missing() is None, "platform": self.platform, "landlockAbi": self.landlock,
            "network": self.network_isolation, "processes": "PID namespace" if self.namespaces else "subreaper",
            "cgroupKill": self.cgroup,
            "gitReadOnly": self.readonly_mounts, "rootReadOnly": self.readonly_mounts,
            "signalsScoped": self.landlock >= landlock.SCOPE_ABI,
            "supervisorExposed": self.supervisor_exposed, "problem": self.missing(),
        }

    def summary(self) -> str:
        problem = self.missing()
        if problem:
            return f"sandbox: unavailable ({problem}); commands run unsandboxed under `auto`, refused under `required`"
        network = self.network_isolation or "nothing (unsupported)"
        exposed = self.supervisor_exposed
        guard = f" (NOT against a hostile command: {exposed})" if exposed else ""
        return (f"sandbox: Landlock ABI {self.landlock}, network off via {network}, "
                f"processes contained by {self.processes}{guard}, "
                f"/ and .git read-only {'yes' if self.readonly_mounts else 'no (no mount namespace)'}")


_cached: Support | None = None


def cached() -> Support | None:
    return _cached


def support() -> Support:
    global _cached
    if _cached is None:
        _cached = _detect()
    return _cached


def _detect() -> Support:
    abi = landlock.abi_version()
    if not sys.platform.startswith("linux"):
        return Support(sys.platform, 0, False, False)
    found: dict[str, object] = {}
    try:
        done = subprocess.run(launcher_argv("--probe"), capture_output=True, text=True, timeout=20,
                              stdin=subprocess.DEVNULL, cwd=LAUNCH_CWD, env={**secrets.child_env(), landlock.SIMULATE_ENV: "0"})
        found = json.loads(done.stdout or "{}")
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        log.warning("sandbox probe failed: %s", e)
    no_cgroup = cgroups.unusable()
    if no_cgroup:
        log.info("sandboxed commands get no cgroup of their own: %s", no_cgroup)
    return Support(sys.platform, abi, bool(found.get("namespaces")), bool(found.get("readonlyMounts")),
                   cgroup=no_cgroup is None)


def status(mode: str) -> dict[str, object]:
    """For `--check-config` and editors' health checks: the configured mode and what it gets here."""
    found = support()
    return {"mode": mode, **found.report(), "summary": found.summary()}


def status_line(mode: str) -> str:
    """For `/tools`."""
    if mode == "off":
        return "sandbox: off (tools.run_command.sandbox); commands run unconfined"
    return f"{support().summary()} [mode: {mode}]"
