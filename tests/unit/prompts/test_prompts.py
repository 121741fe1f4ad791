"""Prompt templates: workspace facts, AGENTS.md, user overrides, errors. The daemon process reporting a
broken prompts file at start: e2e/test_prompts_e2e.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from toycoder_daemon.core.errors import ConfigError
from toycoder_daemon.core.util import secrets
from toycoder_daemon.prompts.manager import AGENTS_MD_MAX, PromptManager


def test_main_prompt_has_workspace_facts_branch_and_agents_md(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/feature/x\n")
    (tmp_path / "AGENTS.md").write_text("Always run `make lint` {literally}.\n")
    text = PromptManager(tmp_path).system("main")
    assert str(tmp_path) in text and "Git branch: feature/x." in text
    assert "Always run `make lint` {literally}." in text


def test_agents_md_is_bounded(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("x" * (AGENTS_MD_MAX + 500))
    text = PromptManager(tmp_path).system("main")
    assert "cut at" in text and text.count("x") <= AGENTS_MD_MAX + 10


def test_user_file_overrides_roles_by_name(tmp_path: Path) -> None:
    f = tmp_path / "mine.yaml"
    f.write_text("planner:\n  system: 'Plan in {workspace}, tersely.'\n")
    pm = PromptManager(tmp_path, str(f))
    assert pm.system("planner") == f"Plan in {tmp_path}, tersely."
    assert pm.description("planner").startswith("Break a complex task")  # kept from the built-in role
    assert "ToyCoder" in pm.system("main")


@pytest.mark.parametrize("body, expected", [
    ("main:\n  system: 'Hello {nonexistent}'\n", "bad template field 'nonexistent'"),
    ("main:\n  system: 'unbalanced {'\n", "role 'main'"),
    ("main: [1, 2]\n", "needs a 'system' text"),
    ("main: {system: [\n", "cannot load it"),
])
def test_broken_templates_fail_at_start(tmp_path: Path, body: str, expected: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(body)
    with pytest.raises(ConfigError) as e:
        PromptManager(tmp_path, str(f))
    assert expected in str(e.value) and str(f) in str(e.value)


# ---- repository content never reaches outside the workspace (issue 28) ---------------------------

def test_agents_md_and_git_head_symlinked_outside_the_workspace_are_not_read(tmp_path: Path) -> None:
    """A cloned repository's `AGENTS.md -> ~/.aws/credentials` (or `.git/HEAD ->` a file outside) is
    refused like a file tool's path: nothing of the target reaches the system prompt."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "credentials").write_text("aws_secret_access_key = OUTSIDE-SECRET-1\n")
    (outside / "HEAD").write_text("ref: refs/heads/OUTSIDE-SECRET-2\n")
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / "AGENTS.md").symlink_to(outside / "credentials")
    (ws / ".git" / "HEAD").symlink_to(outside / "HEAD")
    text = PromptManager(ws).system("main")
    assert "OUTSIDE-SECRET" not in text and "Git branch" not in text


def test_agents_md_symlinked_inside_the_workspace_is_read(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "agents.md").write_text("Use tabs.\n")
    (tmp_path / "AGENTS.md").symlink_to("docs/agents.md")
    assert "Use tabs." in PromptManager(tmp_path).system("main")


def test_registered_secrets_are_redacted_from_the_system_prompt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-proj-Prompt0123456789abcdefXYZ"
    monkeypatch.setattr(secrets, "_values", {key})
    (tmp_path / "AGENTS.md").write_text(f"Deploy with {key}, or its start {key[:14]}.\n")
    text = PromptManager(tmp_path).system("main")
    assert "Deploy with ***" in text and key[:12] not in text
