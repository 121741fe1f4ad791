"""run_command's side of the sandbox: what to spawn for one command, what the person is shown
before it runs, and what the model is told after."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import tempfile
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toycoder_daemon.core.util import secrets
from toycoder_daemon.tools.shell.sandbox import boot, cgroups, observe, probe
from toycoder_daemon.tools.shell.sandbox.policy import SESSION_VARIABLES, Plan, Policy, escalation, plan

log = logging.getLogger(__name__)

_said_unavailable = False
_said_exposed = False
_recent_blocks: OrderedDict[str, str] = OrderedDict()
"""command -> what the sandbox blocked last time, shown as the "why" of an escalation request."""


class SandboxRefused(Exception):
    """`sandbox: required` and this machine cannot sandbox the command."""


@dataclass
class Prepared:
    argv: list[str]
    env: dict[str, str]
    plan: Plan
    command: str
    tmpdir: str | None = None
    notice: str = ""
    """Said once per daemon when `auto` runs commands unsandboxed."""
    spec: dict[str, Any] | None = None
    """The launcher's spec when sandboxed."""
    cwd: str = ""
    """Where to start `argv`: the workspace for the bare shell, never for the launcher."""
    cgroup: str | None = None
    """The command's own cgroup (cgroups.py), when this machine gives it one."""

    def portable(self) -> list[str]:
        """The argv for a terminal we do not spawn (the ACP client's): always our launcher, which
        drops every variable not in `env` (the client adds its own environment, keys included),
        applies the sandbox when planned (refusing to run under `required` if it cannot, there as
        here), and ends the command's whole tree when it is told to stop."""
        spec = dict(self.spec) if self.spec is not None else {
            "command": self.command, "writable": [], "readonly": [], "network": True, "landlock": 0,
            "namespaces": False, "required": False, "cwd": self.cwd}
        spec.update(daemon=None)  # its parent is the client's process, not us
        return probe.launcher_argv(boot.keep_env_arg(self.env), json.dumps(spec))

    portable_cwd = probe.LAUNCH_CWD
    """Where the client starts portable(): outside the workspace, as locally."""

    def observation(self, output: str, cwd: str) -> str:
        """Notes to append to the command's observation ('' when there is nothing to say)."""
        notes = observe.explain(output, self.plan, cwd)
        if notes:
            _recent_blocks[self.command] = notes.splitlines()[0]
            while len(_recent_blocks) > 32:
                _recent_blocks.popitem(last=False)
        return "\n".join(n for n in (notes, self.notice) if n)

    def kill(self) -> None:
        """KILL every process of the command at once, when it has a cgroup (else a no-op)."""
        if self.cgroup:
            cgroups.kill(self.cgroup)

    async def cleanup(self) -> None:
        """After the command: its temp dir goes, and its cgroup (whatever is left in it is killed),
        which the launcher normally removed already."""
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
        if self.cgroup and os.path.isdir(self.cgroup):
            gone = await asyncio.shield(asyncio.to_thread(cgroups.remove, self.cgroup))
            if not gone:
                log.warning("the command's cgroup %s did not empty; left in place", self.cgroup)


async def _support() -> probe.Support:
    cached = probe.cached()
    return cached if cached is not None else await asyncio.to_thread(probe.support)


async def preview(settings: Any, root: Path, args: dict[str, Any]) -> str:
    """The line the permission request shows, e.g. "sandbox: workspace-write, network off"."""
    policy = Policy.from_settings(settings)
    text = plan(policy, root, None, await _support(), args).describe()
    why = escalation(policy, args)
    if why and (blocked := _recent_blocks.get(str(args.get("command", "")))):
        text += f" (the sandboxed run was {blocked})"
    return text


async def prepare(settings: Any, root: Path, command: str, args: dict[str, Any]) -> Prepared:
    """Raises SandboxRefused when the policy requires a sandbox this machine cannot give."""
    global _said_unavailable, _said_exposed
    policy = Policy.from_settings(settings)
    support = await _support()
    env = secrets.child_env()
    chosen = plan(policy, root, None, support, args)
    if chosen.refusal:
        raise SandboxRefused(f"refused: tools.run_command.sandbox is `required` but {chosen.refusal}; "
                             "the command did not run")
    if not chosen.sandboxed:
        notice = ""
        if chosen.unavailable and not _said_unavailable:
            _said_unavailable = True
            notice = f"note: commands run without a sandbox here ({chosen.unavailable})"
            log.warning("run_command is not sandboxed: %s", chosen.unavailable)
        return Prepared(["/bin/sh", "-c", command], env, chosen, command, notice=notice, cwd=str(root))
    tmpdir = tempfile.mkdtemp(prefix="toycoder-cmd-")
    chosen = plan(policy, root, tmpdir, support, args)
    for name in SESSION_VARIABLES:  # the session's sockets are hidden from it (policy.HIDDEN)
        env.pop(name, None)
    agent = os.environ.get("SSH_AUTH_SOCK", "")
    if os.path.isabs(agent):  # the agent signs as the person; its socket is often in /tmp
        chosen.hidden.append(agent)
    env.update(TMPDIR=tmpdir, TMP=tmpdir, TEMP=tmpdir)
    spec = chosen.spec(command, support, required=policy.mode == "required")
    spec["cwd"] = str(root)
    spec["cgroup"] = cgroups.create() if support.cgroup else None
    notice = ""
    if chosen.network_reason and not _said_unavailable:
        _said_unavailable = True
        notice = f"note: sandboxed commands keep the network here ({chosen.network_reason})"
        log.warning("run_command cannot turn the network off: %s", chosen.network_reason)
    if support.supervisor_exposed and not _said_exposed:
        _said_exposed = True
        log.warning("sandboxed commands can escape their supervisor and outlive the daemon here: %s",
                    support.supervisor_exposed)
    return Prepared(probe.launcher_argv(json.dumps(spec)), env, chosen, command, tmpdir, notice, spec,
                    cwd=probe.LAUNCH_CWD, cgroup=spec["cgroup"])
