"""Custom commands' files and MCP prompts' arguments (commands/custom.py); both faces run them in
unit/faces/test_custom_commands_faces.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from toycoder_daemon.commands.custom import CustomCommands, McpPrompt, parse


def test_front_matter_placeholders_and_defaults(tmp_path: Path) -> None:
    f = tmp_path / "a.md"
    f.write_text("---\ndescription: Do it\nargument-hint: <x>\nmodel: fast\n---\nFirst $1, then $2, all: $ARGUMENTS $9\n")
    cmd = parse(f, "a", "workspace")
    assert cmd is not None and (cmd.description, cmd.usage, cmd.model) == ("Do it", "/a <x>", "fast")
    assert cmd.expand('one "two words"') == 'First one, then two words, all: one "two words"'
    plain = tmp_path / "b.md"
    plain.write_text("# Explain the code\nBe brief.\n")
    cmd = parse(plain, "b", "user")
    assert cmd is not None and cmd.description == "Explain the code"
    assert cmd.expand("calc.py") == "# Explain the code\nBe brief.\n\ncalc.py"  # no placeholder: appended
    broken = tmp_path / "c.md"
    broken.write_text("---\n: [unclosed\n---\nBody\n")
    cmd = parse(broken, "c", "user")
    assert cmd is not None and cmd.body == "Body" and cmd.description == "Body"
    empty = tmp_path / "d.md"
    empty.write_text("---\ndescription: nothing\n---\n")
    assert parse(empty, "d", "user") is None


def test_workspace_wins_over_user_and_subfolders_and_rescans(tmp_path: Path) -> None:
    ws, user = tmp_path / "ws", tmp_path / "user"
    (ws / ".toycoder" / "commands" / "git").mkdir(parents=True)
    (ws / ".claude" / "commands").mkdir(parents=True)
    user.mkdir()
    (ws / ".toycoder" / "commands" / "x.md").write_text("workspace x\n")
    (ws / ".toycoder" / "commands" / "git" / "commit.md").write_text("commit\n")
    (ws / ".claude" / "commands" / "y.md").write_text("claude y\n")
    (user / "x.md").write_text("user x\n")
    (user / "z.md").write_text("user z\n")
    c = CustomCommands(ws, [".claude/commands"], user)
    got = {n: (cmd.body, cmd.source) for n, cmd in c.all().items()}
    assert got == {"x": ("workspace x", "workspace"), "git:commit": ("commit", "workspace"),
                   "y": ("claude y", ".claude/commands"), "z": ("user z", "user")}
    (ws / ".toycoder" / "commands" / "x.md").unlink()
    (user / "x.md").write_text("user x, edited\n")
    assert c.get("x") is not None and c.get("x").body == "user x, edited"  # type: ignore[union-attr]


def test_mcp_prompt_arguments() -> None:
    p = McpPrompt("toy", "review", "Review", (("path", True), ("focus", False)))
    assert p.bind("a.py") == {"path": "a.py"}
    assert p.bind("focus=speed a.py") == {"focus": "speed", "path": "a.py"}
    assert p.bind("a.py all the things") == {"path": "a.py", "focus": "all the things"}
    with pytest.raises(ValueError, match="missing path"):
        p.bind("focus=x")
    with pytest.raises(ValueError, match="takes no more arguments"):
        McpPrompt("toy", "p", "", ()).bind("extra")
    assert p.row().usage == "/mcp:toy:review <path> [focus]" and p.row().source == "mcp:toy"
