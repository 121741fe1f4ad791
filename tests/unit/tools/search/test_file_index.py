"""FileIndex (tools/search/file_index.py): what `@` completion and attaching see of the workspace;
over the wire in unit/faces/test_custom_commands_faces.py, timed on 20k files by bench/mentions.py."""

from __future__ import annotations

from pathlib import Path

from toycoder_daemon.tools.search.file_index import FileIndex


async def test_prefixes_then_substrings_folders_and_ignored_files(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("out/\n")
    for rel in ("calc.py", "src/calc_util.py", "src/deep/x/calc.py", "docs/Calculus.md", "out/calc_gen.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x\n")
    index = FileIndex(tmp_path)
    assert await index.complete("cal", 10) == [("calc.py", "file"), ("docs/Calculus.md", "file"),
                                                ("src/calc_util.py", "file"), ("src/deep/x/calc.py", "file")]
    assert await index.complete("src/", 3) == [("src/", "folder"), ("src/deep/", "folder"),
                                               ("src/calc_util.py", "file")]
    assert await index.complete("CALC.P", 10) == [("calc.py", "file"), ("src/deep/x/calc.py", "file")]
    assert await index.complete("nothing", 10) == []
    assert not await index.visible("out/calc_gen.py")
    (tmp_path / "new.py").write_text("x\n")
    assert await index.visible("new.py")  # missing from the kept list: listed again before answering
    index.close()
