"""PromptManager: the YAML agent templates (built in, then a user file overriding roles by name),
rendered with the workspace facts and the project's AGENTS.md.

Templates use str.format fields: {workspace}, {platform}, {date}, {git_branch}, {agents_md}.
Every template is rendered once when the manager is built, so an unknown field or a broken file
is a ConfigError at start, never a failure in the middle of a turn.
"""

from __future__ import annotations

import datetime
import functools
import logging
import os
import platform
import stat
from pathlib import Path
from typing import Any

from toycoder_daemon.core.errors import ConfigError
from toycoder_daemon.core.util import secrets
from toycoder_daemon.core.util.atomic import open_nofollow
from toycoder_daemon.tools.workspace import OutsideWorkspace, Workspace

log = logging.getLogger(__name__)
TEMPLATES = Path(__file__).with_name("templates") / "agents.yaml"
AGENTS_MD_MAX = 20_000
PROMPT_INPUT_MAX = 1 << 20
"""Most bytes read of a prompt input (AGENTS.md is cut at AGENTS_MD_MAX characters anyway)."""
FIELDS = ("workspace", "platform", "date", "git_branch", "agents_md")


def _load_roles(path: Path, *, ours: bool = False) -> dict[str, dict[str, Any]]:
    import yaml

    # our own file with libyaml when present (~2 ms less per process); a person's file with the
    # pure-Python loader, whose messages and depth limit the config's errors are written for
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader) if ours else yaml.SafeLoader
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=loader) or {}
    except (OSError, ValueError, yaml.YAMLError) as e:  # ValueError: not UTF-8
        raise ConfigError(f"prompts file {path}: cannot load it: {e}") from None
    except RecursionError:
        raise ConfigError(f"prompts file {path}: cannot load it: nested too deep") from None
    if not isinstance(data, dict):
        raise ConfigError(f"prompts file {path}: the top level must map role names to templates")
    for role, entry in data.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("system"), str):
            raise ConfigError(f"prompts file {path}: role '{role}' needs a 'system' text (and a 'description')")
    return data


def _read_text(root: Path, rel: str) -> str | None:
    """A prompt input of the workspace `root` (`rel` inside it) as text; bytes that are not UTF-8
    become U+FFFD with a warning (the prompt degrades, the session still starts). None when it
    cannot be read.

    The repository is untrusted: it is opened as the file tools open files (Workspace.resolve, then
    no symlink followed on the way), so an `AGENTS.md -> ~/.aws/credentials` of a cloned repository
    is refused, never sent to the provider. A symlink to a file inside the workspace is read."""
    try:
        path = Workspace(root).resolve(rel)
    except OutsideWorkspace as e:
        log.warning("%s: not read (%s)", rel, e)
        return None
    try:
        # O_NONBLOCK + fstat: a FIFO or device named AGENTS.md (or .git/HEAD) is skipped, never
        # waited on (that would stall session start-up on the event loop)
        fd = open_nofollow(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:  # absent, or raced into a symlink after the check (SymlinkInPath)
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            log.warning("%s is not a regular file: not read", path)
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(PROMPT_INPUT_MAX)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        log.warning("%s is not UTF-8 (byte 0x%02x at offset %d): bad bytes shown as U+FFFD",
                    path, data[e.start], e.start)
        return data.decode("utf-8", "replace")


def git_branch(root: Path) -> str:
    """The checked-out branch, read from .git/HEAD (no git process)."""
    head = (_read_text(root, ".git/HEAD") or "").strip()
    if not head:
        return ""
    return head.removeprefix("ref: refs/heads/") if head.startswith("ref: ") else f"detached at {head[:12]}"


@functools.cache
def _shipped_roles() -> dict[str, dict[str, Any]]:
    """Our own templates, parsed once per process (a file of the package: nothing of a launch)."""
    return _load_roles(TEMPLATES, ours=True)


def prepare() -> None:
    """For the fork server (warm/server.py's PREPARE): our templates parsed before the forks (~0.4 ms
    of each warm child's App)."""
    _shipped_roles()


class PromptManager:
    def __init__(self, workspace: Path, user_file: str | None = None):
        self.workspace = workspace
        self.roles = {role: dict(entry) for role, entry in _shipped_roles().items()}  # a person's file edits its copy
        source = {role: TEMPLATES for role in self.roles}
        if user_file:
            path = Path(user_file).expanduser()
            for role, entry in _load_roles(path).items():
                self.roles[role] = {**self.roles.get(role, {}), **entry}
                source[role] = path
        for role in ("main", "planner", "summarizer"):
            if role not in self.roles:
                raise ConfigError(f"prompts: the role '{role}' is missing")
        for role, entry in self.roles.items():  # fail now, not mid-turn
            try:
                entry["system"].format_map(dict.fromkeys(FIELDS, ""))
            except (KeyError, IndexError, ValueError) as e:
                raise ConfigError(
                    f"prompts file {source[role]}: role '{role}': bad template field {e} "
                    f"(available: {', '.join('{' + f + '}' for f in FIELDS)}; write {{{{ and }}}} for braces)"
                ) from None

    def description(self, role: str) -> str:
        return " ".join(str(self.roles[role].get("description", "")).split())

    def system(self, role: str) -> str:
        branch = git_branch(self.workspace)
        facts = {
            "workspace": str(self.workspace),
            "platform": f"{platform.system()} {platform.machine()}",
            "date": datetime.date.today().isoformat(),
            "git_branch": f"Git branch: {branch}." if branch else "",
            "agents_md": self._agents_md(),
        }
        # registered secrets never reach the provider, whatever a template or AGENTS.md holds
        return secrets.redact(str(self.roles[role]["system"].format_map(facts)).strip())

    def _agents_md(self) -> str:
        text = _read_text(self.workspace, "AGENTS.md")
        if text is None:
            return ""
        if len(text) > AGENTS_MD_MAX:
            text = text[:AGENTS_MD_MAX] + f"\n[... AGENTS.md cut at {AGENTS_MD_MAX} characters]"
        return f"\nProject instructions from AGENTS.md (follow them):\n{text}"
