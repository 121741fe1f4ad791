"""File tools through the registry: confinement, paging, binary refusal, exact edits."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import AllowAll

from toycoder_daemon.tools.base import ToolContext
from toycoder_daemon.tools.files.edit import edit_file, write_file
from toycoder_daemon.tools.files.read import list_directory, read_file
from toycoder_daemon.tools.registry import ToolRegistry
from toycoder_daemon.tools.workspace import Workspace


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "pkg").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    (root / "bin.dat").write_bytes(b"\x00\x01\x02abc")
    (tmp_path / "outside.txt").write_text("secret")
    return root


async def call(ws: Path, name: str, **args):
    reg = ToolRegistry()
    for t in (read_file, list_directory, write_file, edit_file):
        reg.register(t)
    return await reg.dispatch(name, json.dumps(args), ToolContext(Workspace(ws), AllowAll(), "c1"))


async def test_read_paging_header(ws: Path) -> None:
    out = await call(ws, "read_file", path="big.txt", offset=10, limit=5)
    assert out.status == "completed"
    lines = out.output.splitlines()
    assert lines[0] == "big.txt: lines 10-14 of 100 (more: call read_file with offset=15)"
    assert lines[1] == "    10\tline 10" and len(lines) == 6


async def test_read_refuses_binary_missing_and_outside(ws: Path) -> None:
    assert "binary" in (await call(ws, "read_file", path="bin.dat")).output
    assert "not found" in (await call(ws, "read_file", path="nope.txt")).output
    for bad in ("../outside.txt", str(ws.parent / "outside.txt"), "/etc/passwd"):
        out = await call(ws, "read_file", path=bad)
        assert out.status == "failed" and "outside the workspace" in out.output, bad


async def test_symlink_pointing_outside_is_refused(ws: Path) -> None:
    os.symlink(ws.parent / "outside.txt", ws / "link.txt")
    os.symlink(ws.parent, ws / "escape")
    assert "outside the workspace" in (await call(ws, "read_file", path="link.txt")).output
    out = await call(ws, "write_file", path="escape/new.txt", content="x")
    assert out.status == "failed" and "outside the workspace" in out.output
    assert not (ws.parent / "new.txt").exists()


async def test_git_dir_is_not_writable(ws: Path) -> None:
    out = await call(ws, "write_file", path=".git/config", content="x")
    assert out.status == "failed" and ".git" in out.output
    assert not (ws / ".git" / "config").exists()


async def test_list_directory(ws: Path) -> None:
    out = (await call(ws, "list_directory")).output
    lines = out.splitlines()
    assert lines[0].startswith("./ (")
    assert lines[1] == "dir   pkg/"
    assert any(line.startswith("file  big.txt  (") for line in lines)
    assert ".git" not in out


async def test_edit_exact_once(ws: Path) -> None:
    p = ws / "pkg" / "m.py"
    p.write_text("a = 1\nb = 1\n")
    out = await call(ws, "edit_file", path="pkg/m.py", old_string="= 1", new_string="= 2")
    assert out.status == "failed" and "matches 2 places" in out.output
    assert p.read_text() == "a = 1\nb = 1\n"
    out = await call(ws, "edit_file", path="pkg/m.py", old_string="= 1", new_string="= 2", replace_all=True)
    assert out.output == "edited pkg/m.py: replaced 2 occurrences"
    assert p.read_text() == "a = 2\nb = 2\n"


async def test_edit_miss_shows_closest_lines(ws: Path) -> None:
    (ws / "f.py").write_text("def main():\n    print('hello')\n    return 0\n")
    out = await call(ws, "edit_file", path="f.py", old_string="  print('hello')\n  return 0", new_string="x")
    assert out.status == "failed" and "not found" in out.output
    assert "     2\t    print('hello')" in out.output


async def test_edit_keeps_crlf_and_bom(ws: Path) -> None:
    p = ws / "win.txt"
    p.write_bytes("\ufeffone\r\ntwo\r\n".encode("utf-8"))
    out = await call(ws, "edit_file", path="win.txt", old_string="one\ntwo", new_string="uno\ndos")
    assert out.status == "completed", out.output
    assert p.read_bytes() == "\ufeffuno\r\ndos\r\n".encode("utf-8")


async def test_write_creates_parents_and_keeps_mode(ws: Path) -> None:
    out = await call(ws, "write_file", path="deep/er/x.sh", content="echo hi\n")
    assert out.output == "created deep/er/x.sh (1 lines)"
    p = ws / "deep" / "er" / "x.sh"
    p.chmod(0o755)
    await call(ws, "write_file", path="deep/er/x.sh", content="echo bye\n")
    assert p.read_text() == "echo bye\n" and p.stat().st_mode & 0o777 == 0o755
    assert not [f for f in p.parent.iterdir() if f.name.endswith(".tmp")]


async def test_unsaved_editor_buffer_is_read(ws: Path) -> None:
    reg = ToolRegistry()
    reg.register(read_file)
    w = Workspace(ws)
    w.open_documents[(ws / "big.txt").resolve()] = "unsaved\ntext\n"
    out = await reg.dispatch("read_file", '{"path": "big.txt"}', ToolContext(w, AllowAll(), "c"))
    assert "unsaved text" in out.output and "     1\tunsaved" in out.output


async def test_nested_git_dirs_are_not_writable_in_any_case(ws: Path) -> None:
    (ws / "vendor" / "lib" / ".git" / "hooks").mkdir(parents=True)
    for path in ("vendor/lib/.git/hooks/pre-commit", ".GIT/config", "vendor/lib/.Git/x"):
        out = await call(ws, "write_file", path=path, content="evil")
        assert out.status == "failed" and ".git directory" in out.output, path
    assert not (ws / "vendor" / "lib" / ".git" / "hooks" / "pre-commit").exists()


async def test_new_files_get_the_usual_mode_and_preview_errors_are_observations(ws: Path) -> None:
    await call(ws, "write_file", path="new.sh", content="x")
    assert (ws / "new.sh").stat().st_mode & 0o777 == 0o666 & ~_umask()
    out = await call(ws, "write_file", path="x" * 300 + ".txt", content="x")  # ENAMETOOLONG while planning
    assert out.status == "failed" and "error" in out.output


async def test_edits_refuse_files_with_unsaved_editor_changes(ws: Path) -> None:
    p = ws / "dirty.txt"
    p.write_text("saved\r\n")
    reg = ToolRegistry()
    reg.register(edit_file)
    w = Workspace(ws)
    ctx = ToolContext(w, AllowAll(), "c")
    w.open_documents[p.resolve()] = "saved\n"  # same text, other line endings: not a change
    out = await reg.dispatch("edit_file", json.dumps({"path": "dirty.txt", "old_string": "saved", "new_string": "x"}), ctx)
    assert out.status == "completed"
    w.open_documents[p.resolve()] = "typed but not saved\n"
    out = await reg.dispatch("edit_file", json.dumps({"path": "dirty.txt", "old_string": "x", "new_string": "y"}), ctx)
    assert out.status == "failed" and "unsaved changes" in out.output
    assert p.read_bytes() == b"x\r\n"


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


async def test_big_files_are_paged_without_reading_them_whole(ws: Path) -> None:
    with open(ws / "huge.log", "w") as f:
        for i in range(1, 200_001):
            f.write(f"entry {i}\n")
        f.write("x" * 10_000 + "\n")
    out = (await call(ws, "read_file", path="huge.log", offset=199_999, limit=5)).output.splitlines()
    assert out[0] == "huge.log: lines 199999-200001 of 200001"
    assert out[1] == "199999\tentry 199999"
    assert out[3].endswith("[... 6000 more characters on this line]") and len(out[3]) < 4100
