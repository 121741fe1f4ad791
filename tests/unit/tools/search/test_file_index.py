"""FileIndex (tools/search/file_index.py): what `@` completion and attaching see of the workspace;
over the wire in unit/faces/test_custom_commands_faces.py, timed on 20k files by bench/mentions.py.
A first completion does not wait for the whole listing: it answers from the listing the last daemon
kept, else from what rg has listed so far."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from pathlib import Path
from typing import Any

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


@pytest.mark.parametrize("spoil", ["garbage", "torn", "a byte changed", "open to others", "of another user",
                                   "a symlink"])
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
    elif spoil == "a byte changed":  # the same length: only the recorded sha256 tells
        kept.write_bytes(kept.read_bytes().replace(b"\ncalc.py", b"\ncalx.py"))
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


# ---- what the review of the kept listing found ----------------------------------------------------

async def test_an_empty_workspace_is_kept_and_answered_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    kept = await kept_by_a_first_app(ws)
    assert kept.is_file(), "an empty listing is a listing: kept"
    GatedRg(monkeypatch)  # never opened: this App's rg does not run
    app = App(ws, Config())
    try:
        await app.start()
        # the kept listing is the answer: no waiting for rg as if nothing were kept
        assert await asyncio.wait_for(app.files.complete("x", 10, wait=3600), 5) == []
        assert app.files.from_kept
    finally:
        await app.shutdown()


async def test_a_name_with_a_newline_is_one_file_and_never_a_completion_row(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text("x\n")
    (tmp_path / "evil\nb.py").write_text("x\n")
    (tmp_path / "sub\ndir").mkdir()
    (tmp_path / "sub\ndir" / "deep.py").write_text("x\n")
    index = FileIndex(tmp_path)
    try:
        files = await index.files()
        assert "evil\nb.py" in files and "sub\ndir/deep.py" in files and "b.py" not in files
        assert await index.visible("evil\nb.py")
        rows = await index.complete("", 100)
        assert rows == [("calc.py", "file")]  # no 'evil', 'b.py', 'sub', 'dir/' pieces
        assert await index.complete("b.py", 10) == [] and await index.complete("dir", 10) == []
    finally:
        await index.aclose()


async def test_kept_rows_outside_the_workspace_are_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text("x\n")
    (tmp_path / "outside.txt").write_text("x\n")
    app = App(ws, Config())
    try:
        await app.start()
        await app.files.files()
    finally:
        await app.shutdown()
    keeper = app.files.kept
    assert keeper is not None
    # a kept file tampered with (right header, rows naming paths outside the workspace)
    rows = ["../outside.txt", "/etc/passwd", "a/../../outside.txt", "calc.py", "x\0/etc/passwd",
            "y\0../outside.txt", "z\0z/../../outside.txt", "..", "w\0w\0/etc/passwd", "v\0"]
    keeper.write("\n".join(sorted(rows)))
    GatedRg(monkeypatch)
    app = App(ws, Config())
    try:
        await app.start()
        got = await app.complete_mentions(None, "", 50)
        assert app.files.from_kept
        assert labels(got) == ["calc.py"]
        assert all(uri.startswith(ws.as_uri() + "/") for _, _, uri in got)
    finally:
        await app.shutdown()


async def test_the_lstat_check_of_many_kept_rows_runs_off_the_event_loop(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from toycoder_daemon.tools.search import file_index

    ws = tmp_path / "ws"
    ws.mkdir()
    make_tree(ws, 4)
    await kept_by_a_first_app(ws)
    (ws / "pkg1" / "mod_3.py").unlink()
    threads: list[tuple[int, int]] = []
    real = file_index.existing

    def existing(root: str, rows: list[tuple[str, str]]) -> list[tuple[str, str]]:
        threads.append((threading.get_ident(), len(rows)))
        return real(root, rows)

    monkeypatch.setattr(file_index, "existing", existing)
    GatedRg(monkeypatch)
    app = App(ws, Config())
    try:
        await app.start()
        many = labels(await app.complete_mentions(None, "pkg1/", 20))
        few = labels(await app.complete_mentions(None, "calc.py", 5))
        assert "pkg1/mod_3.py" not in many and "pkg1/mod_4.py" in many and few == ["calc.py"]
        loop = threading.get_ident()
        assert [(t != loop, n > 8) for t, n in threads] == [(True, True), (False, False)]
    finally:
        await app.shutdown()


async def test_a_failing_listing_is_logged_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                caplog: pytest.LogCaptureFixture) -> None:
    from toycoder_daemon.tools.base import ToolError
    from toycoder_daemon.tools.search import rg

    async def failing(*args: Any, **kwargs: Any) -> tuple[int, str]:
        raise ToolError("ripgrep (rg) is not installed")

    monkeypatch.setattr(rg, "run_rg", failing)
    app = App(tmp_path, Config())
    try:
        with caplog.at_level(logging.DEBUG, logger="toycoder_daemon"):
            await app.start()
            for _ in range(3):
                assert await app.complete_mentions(None, "calc", 10) == []
        said = [r for r in caplog.records if "not installed" in r.getMessage() and r.levelno >= logging.INFO]
        assert len(said) == 1 and said[0].levelno == logging.WARNING, said
    finally:
        await app.shutdown()


async def test_rg_killed_by_a_signal_fails_the_listing_and_keeps_nothing(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from toycoder_daemon.tools.base import ToolError
    from toycoder_daemon.tools.search import rg

    ws = tmp_path / "ws"
    ws.mkdir()
    make_tree(ws, 4)

    async def killed(args: list[str], cwd: Path, on_lines: Any, *rest: Any, **kwargs: Any) -> tuple[int, str]:
        on_lines([b"calc.py"])  # a part of the listing, then SIGKILL
        return -9, ""

    monkeypatch.setattr(rg, "run_rg", killed)
    index = FileIndex(ws, tmp_path / "kept")
    try:
        with pytest.raises(ToolError, match="signal"):
            await index.files()
        assert not index.complete_at
        await index.aclose()
        assert not (tmp_path / "kept").exists() or not any((tmp_path / "kept").iterdir())
    finally:
        await index.aclose()


async def test_an_unchanged_listing_is_touched_not_rewritten(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    make_tree(ws, 4)
    kept = await kept_by_a_first_app(ws)
    os.utime(kept, (1, 1))
    inode = kept.stat().st_ino
    await kept_by_a_first_app(ws)  # the same files: the same listing
    assert kept.stat().st_ino == inode, "not rewritten"
    assert kept.stat().st_mtime > 1, "touched: pruning goes by the last use"


async def test_a_failed_write_is_tried_again_by_the_next_listing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from toycoder_daemon.tools.search import file_index

    keeper = file_index.KeptListing(tmp_path / "kept", tmp_path, ["--files"])
    real = file_index.atomic_write

    def full_disk(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(file_index, "atomic_write", full_disk)
    keeper.write("calc.py")
    assert not keeper.path.exists()
    monkeypatch.setattr(file_index, "atomic_write", real)
    keeper.write("calc.py")
    assert keeper.path.exists(), "what failed to be written is not taken as kept"
    assert labels_of(keeper.read()) == ["calc.py"]


def labels_of(listed: Any) -> list[str]:
    assert listed is not None
    return [shown for shown, _ in map(listed.entry, range(len(listed.rows)))]


def test_pruning_keeps_the_newest_and_removes_stale_temp_files(tmp_path: Path) -> None:
    from toycoder_daemon.tools.search import file_index

    folder = tmp_path / "kept"
    folder.mkdir(mode=0o700)
    for i in range(file_index.KEPT_MAX_WORKSPACES + 5):
        f = folder / f"{i:032x}"
        f.write_bytes(b"x")
        os.utime(f, (1000 + i, 1000 + i))
    (folder / "a-folder").mkdir()
    (folder / "dangling").symlink_to(folder / "gone")
    stale, fresh = folder / ".abc.1234.tmp", folder / ".abd.5678.tmp"
    stale.write_bytes(b"half")
    os.utime(stale, (1000, 1000))  # a writer that crashed long ago
    fresh.write_bytes(b"half")  # a writer at work now
    keeper = file_index.KeptListing(folder, tmp_path, ["--files"])
    keeper.write("calc.py")
    names = {p.name for p in folder.iterdir()}
    assert keeper.path.name in names and fresh.name in names and stale.name not in names
    assert f"{0:032x}" not in names and f"{file_index.KEPT_MAX_WORKSPACES + 4:032x}" in names
    assert len([n for n in names if not n.startswith(".") and (folder / n).is_file()
                and not (folder / n).is_symlink()]) == file_index.KEPT_MAX_WORKSPACES
    os.rmdir(folder / "a-folder")
    keeper.write("calc.py\nnew.py")  # the folder changing under it (entries gone) is no error


async def test_the_file_set_of_a_big_listing_is_made_off_the_event_loop(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from toycoder_daemon.tools.search import file_index

    make_tree(tmp_path, 60)  # 3,000 files
    made: list[int] = []
    real = file_index.Listing.file_set.func  # type: ignore[attr-defined]

    def file_set(self: Any) -> frozenset[str]:
        made.append(threading.get_ident())
        return real(self)

    monkeypatch.setattr(file_index.Listing, "file_set", property(file_set))
    index = FileIndex(tmp_path)
    try:
        assert await index.visible("calc.py")
        assert made and threading.get_ident() not in made
    finally:
        await index.aclose()


def test_pruning_skips_listings_another_daemon_removed_meanwhile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    from contextlib import contextmanager

    from toycoder_daemon.tools.search import file_index

    folder = tmp_path / "kept"
    folder.mkdir(mode=0o700)
    for i in range(file_index.KEPT_MAX_WORKSPACES + 5):
        (folder / f"{i:032x}").write_bytes(b"x")
    real = os.scandir

    @contextmanager
    def racing(path: Any) -> Any:
        # every third entry is removed (by another daemon's pruning) once listed, before its stat
        with real(path) as it:
            def entries() -> Any:
                for n, e in enumerate(it):
                    if n % 3 == 0 and e.name != keeper.path.name:
                        os.unlink(e.path)
                    yield e
            yield entries()

    keeper = file_index.KeptListing(folder, tmp_path, ["--files"])
    monkeypatch.setattr(os, "scandir", racing)  # only this synchronous call runs meanwhile
    with caplog.at_level(logging.WARNING, logger="toycoder_daemon"):
        keeper.write("calc.py")
    monkeypatch.undo()
    assert not caplog.records, [r.getMessage() for r in caplog.records]
    assert labels_of(keeper.read()) == ["calc.py"]
