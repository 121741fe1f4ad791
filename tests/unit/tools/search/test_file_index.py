"""FileIndex (tools/search/file_index.py): what `@` completion and attaching see of the workspace;
over the wire in unit/faces/test_custom_commands_faces.py, timed on 20k files by bench/mentions.py.
A first completion does not wait for the whole listing: it answers from the listing the last daemon
kept, else from what rg has listed so far."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest
from helpers import GatedRg

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


# ---- the kept listing: a new daemon's first `@` answers from the last one's listing -------------

async def kept_by_a_first_app(ws: Path) -> Path:
    """A first App lists `ws` whole and keeps the listing; the kept file's path."""
    app = App(ws, Config())
    try:
        await app.start()
        await app.files.files()
    finally:
        await app.shutdown()  # a listing being written is awaited
    assert app.files.kept is not None
    return app.files.kept.path


def labels(rows: list[tuple[str, str, str]]) -> list[str]:
    return [label for label, _, _ in rows]


async def test_a_second_app_answers_its_first_call_from_the_kept_listing(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    make_tree(ws, 40)
    kept = await kept_by_a_first_app(ws)
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
    (ws / "pkg3" / "calculus.py").unlink()  # deleted since: not offered as existing
    (ws / "calc_new.py").write_text("x\n")  # made since: offered once rg has listed again
    gate = GatedRg(monkeypatch)
    app = App(ws, Config())
    try:
        await app.start()
        first = await app.complete_mentions(None, "calc", 50)
        assert app.files.from_kept and not app.files.complete_at, "answered before this App's rg ran"
        assert labels(first) == ["calc.py"]
        assert "build/calc_gen.py" not in labels(await app.complete_mentions(None, "build", 50))  # rg's rules held
        assert ("pkg1/", "folder") in [(label, kind) for label, kind, _ in await app.complete_mentions(None, "pkg1", 5)]
        gate.open.set()
        assert await app.files.visible("calc_new.py")
        assert labels(await app.complete_mentions(None, "calc", 50)) == ["calc.py", "calc_new.py"]
        assert not app.files.from_kept
    finally:
        await app.shutdown()
    assert b"calc_new.py" in kept.read_bytes(), "the refreshed listing is kept for the next daemon"


@pytest.mark.parametrize("spoil", ["garbage", "torn", "open to others", "of another user", "a symlink"])
async def test_a_kept_listing_that_cannot_be_trusted_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 spoil: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    make_tree(ws, 4)
    kept = await kept_by_a_first_app(ws)
    if spoil == "garbage":
        kept.write_bytes(b"\x00\xff not a listing\n" * 100)
    elif spoil == "torn":
        kept.write_bytes(kept.read_bytes()[:-20])
    elif spoil == "open to others":
        kept.chmod(0o666)
    elif spoil == "of another user":
        if os.geteuid() != 0:
            pytest.skip("only root can give a file to another user")
        os.chown(kept, 12345, 12345)
    else:
        other = tmp_path / "other"
        other.write_bytes(kept.read_bytes())
        kept.unlink()
        kept.symlink_to(other)
    gate = GatedRg(monkeypatch)
    app = App(ws, Config())
    try:
        await app.start()
        assert await app.complete_mentions(None, "calc", 50) == []  # nothing trusted, rg not run yet
        assert not app.files.from_kept
        gate.open.set()
        await app.files.files()
        assert labels(await app.complete_mentions(None, "calc", 50)) == ["calc.py", "pkg3/calculus.py"]
    finally:
        await app.shutdown()
    assert not kept.is_symlink() and stat.S_IMODE(kept.stat().st_mode) == 0o600 and kept.stat().st_uid == os.geteuid()


async def test_a_changed_gitignore_is_followed_by_the_refresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    make_tree(ws, 4)
    await kept_by_a_first_app(ws)
    (ws / ".gitignore").write_text("build/\npkg3/\n")
    gate = GatedRg(monkeypatch)
    app = App(ws, Config())
    try:
        await app.start()
        # the kept listing is the last daemon's rg, with the rules of then, until this one's rg lists
        assert "pkg3/calculus.py" in labels(await app.complete_mentions(None, "calc", 50))
        # but what a prompt may attach is never decided from it: asked now, the answer waits for rg
        attach = asyncio.ensure_future(app.files.visible("pkg3/calculus.py"))
        gate.open.set()
        assert not await attach
        assert labels(await app.complete_mentions(None, "calc", 50)) == ["calc.py"]
    finally:
        await app.shutdown()
