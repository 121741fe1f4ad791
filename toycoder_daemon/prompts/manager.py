"""PromptManager: loads the YAML agent templates and renders system prompts."""

from __future__ import annotations

import datetime
import platform
from pathlib import Path
from typing import Any

TEMPLATES = Path(__file__).with_name("templates") / "agents.yaml"
AGENTS_MD_MAX = 20_000


class _Blank(dict):
    def __missing__(self, key: str) -> str:  # unknown fields render empty instead of failing
        return ""


class PromptManager:
    def __init__(self, path: Path = TEMPLATES):
        import yaml

        self.roles: dict[str, dict[str, Any]] = yaml.safe_load(path.read_text(encoding="utf-8"))

    def description(self, role: str) -> str:
        return str(self.roles[role].get("description", "")).strip()

    def system(self, role: str, workspace: Path | None = None) -> str:
        facts = _Blank(
            workspace=str(workspace or Path.cwd()),
            platform=f"{platform.system()} {platform.machine()}",
            date=datetime.date.today().isoformat(),
            agents_md=self._agents_md(workspace),
        )
        return self.roles[role]["system"].format_map(facts).strip()

    @staticmethod
    def _agents_md(workspace: Path | None) -> str:
        if workspace is None:
            return ""
        p = workspace / "AGENTS.md"
        if not p.is_file():
            return ""
        text = p.read_text(encoding="utf-8", errors="replace")[:AGENTS_MD_MAX]
        return f"\nProject instructions from AGENTS.md (follow them):\n{text}"
