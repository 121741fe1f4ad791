"""FileIndex (tools/search/file_index.py): what `@` completion and attaching see of the workspace;
over the wire in unit/faces/test_custom_commands_faces.py, timed on 20k files by bench/mentions.py.
A first completion does not wait for the whole listing: it answers from what rg has listed so far."""

from __future__ import annotations

from pathlib import Path

from toycoder_daemon.app.application import App
from toycoder_daemon.config.model import Config
from toycoder_daemon.tools.search.file_index import FileIndex


def make_tree(root: Path, packages: int) -> None:
    """`packages` folders of 50 files, calc.py at the top and an ignored build/ folder."""
    (root / ".gitignore").write_text("build/\n")
    for i in range(packages):
        d = root / f"pkg{i}"
        d.mkdir()
        for j in range(50):
            (d / f"mod_{j}.py").write_text("x\n")
    (root / "calc.py").write_text("x\n")
    (root / "pkg3" / "calculus.py").write_text("x\n")
    (root / "build").mkdir()
    (root / "build" / "calc_gen.py").write_text("x\n")


async def test_prefixes_then_substrings_folders_and_ignored_files(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("out/\n")
    for rel in ("calc.py", "src/calc_util.py", "src/deep/x/calc.py", "docs/Calculus.md", "out/calc_gen.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x\n")
    index = FileIndex(tmp_path)
    await index.files()  # the whole listing: before it, completion answers from what is listed so far
    assert await index.complete("cal", 10) == [("calc.py", "file"), ("docs/Calculus.md", "file"),
                                                ("src/calc_util.py", "file"), ("src/deep/x/calc.py", "file")]
    assert await index.complete("src/", 3) == [("src/", "folder"), ("src/deep/", "folder"),
                                               ("src/calc_util.py", "file")]
    assert await index.complete("CALC.P", 10) == [("calc.py", "file"), ("src/deep/x/calc.py", "file")]
    assert await index.complete("nothing", 10) == []
    assert not await index.visible("out/calc_gen.py")
    (tmp_path / "new.py").write_text("x\n")
    assert await index.visible("new.py")  # missing from the kept list: listed again before answering
    await index.aclose()


async def test_the_listing_starts_with_the_daemon_and_a_first_call_answers_from_it(tmp_path: Path) -> None:
    make_tree(tmp_path, 200)  # 10,000 files
    app = App(tmp_path, Config())
    try:
        await app.start()  # what the faces run after initialize
        assert app.files.listing or app.files.complete_at, "the listing started before any completion"
        first = await app.complete_mentions(None, "calc", 50)
        whole = await app.files.files()
        assert "calc.py" in whole and "build/calc_gen.py" not in whole
        after = await app.complete_mentions(None, "calc", 50)
        assert [label for label, _, _ in after] == ["calc.py", "pkg3/calculus.py"]
        # what the first call named is right, whether rg had finished or not: a subset of the whole
        assert {label for label, _, _ in first} <= {label for label, _, _ in after}
        assert all(uri == (tmp_path / label).as_uri() for label, _, uri in first)
    finally:
        await app.shutdown()


async def test_a_call_before_the_listing_finished_answers_without_waiting_for_it(tmp_path: Path) -> None:
    make_tree(tmp_path, 40)
    index = FileIndex(tmp_path)
    try:
        partial = await index.complete("pkg1", 500, wait=0)  # no time for rg to even start printing
        assert index.listing and not index.complete_at, "it answered while rg was still listing"
        await index.files()
        whole = await index.complete("pkg1", 500)
        assert ("pkg1/", "folder") in whole and ("pkg1/mod_0.py", "file") in whole
        assert set(partial) <= set(whole)
    finally:
        await index.aclose()
