"""Read a sandboxed command's output for writes and connections the sandbox refused, so the model
is told why (and how to ask for more) instead of retrying blindly."""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from toycoder_daemon.tools.shell.sandbox.policy import Plan

_DENIED = re.compile(r"Permission denied|Operation not permitted|Read-only file system|EACCES|EPERM|EROFS")
_NET = re.compile(r"Network is unreachable|ENETUNREACH|Temporary failure in name resolution|"
                  r"Name or service not known|Could not resolve host")
_QUOTED = re.compile(r"""['"‘`]([^'"’`\n]+)['"’`]""")
_BARE = re.compile(r"(?:^|[\s=(])([^\s:'\"(),]*/[^\s:'\"),]*)")
_PROGRAM = re.compile(r"^\s*([^\s:]+):")
"""`/bin/sh: 1: cannot create x: ...`: the program that reports is not the path refused."""


def _candidates(line: str) -> list[str]:
    program = _PROGRAM.match(line)
    found = _QUOTED.findall(line) + _BARE.findall(line)
    return [c for c in found if not (program and c == program.group(1))]


def _inside(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def daemon_could_write(path: str) -> bool:
    """Could this path be written without the sandbox? If not (say a user reading /root), the
    refusal was the system's, not the sandbox's, and blaming the sandbox would mislead."""
    probe = path
    while not os.path.lexists(probe) and probe != os.path.dirname(probe):
        probe = os.path.dirname(probe)
    return os.access(probe, os.W_OK)


def blocked_paths(output: str, plan: Plan, cwd: str,
                  could_write: Callable[[str], bool] = daemon_could_write) -> list[tuple[str, str]]:
    """(path, why) for each refused path named in the output, first mention only."""
    found: dict[str, str] = {}
    for line in output.splitlines():
        if not _DENIED.search(line):
            continue
        for raw in _candidates(line):
            if "/" not in raw and not raw.startswith("."):
                continue
            path = os.path.normpath(os.path.join(cwd, os.path.expanduser(raw)))
            if path in found:
                continue
            if not could_write(path):
                continue
            git = next((r for r in plan.readonly if _inside(path, [r])), None)
            if git is not None:
                whose = "the workspace's .git" if plan.writable and git == os.path.join(plan.writable[0], ".git") else git
                found[path] = f"is in {whose}, which the sandbox keeps read-only"
            elif not _inside(path, plan.writable):
                found[path] = "is outside the writable roots"
    return list(found.items())


def explain(output: str, plan: Plan, cwd: str, could_write: Callable[[str], bool] = daemon_could_write) -> str:
    """Lines to append to the observation, or ''."""
    if not plan.sandboxed:
        return ""
    blocked = blocked_paths(output, plan, cwd, could_write)
    lines = [f"blocked by the sandbox: {path} {why}" for path, why in blocked[:5]]
    if lines:
        lines.append("If the write is needed, call run_command again with sandbox: false; the person will be "
                     "asked. Or write inside the workspace or $TMPDIR.")
    if not plan.network and _NET.search(output):
        lines.append("the sandbox has the network off: if this command needs it, call run_command again with "
                     "network: true; the person will be asked.")
    return "\n".join(lines)
