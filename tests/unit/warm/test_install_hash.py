"""The socket's name (launcher.install_hash) changes with every change of the package's files that
could make a fork server run other code than a cold start would: an edit written in place (the
file's mtime changes, its directory's does not), a new file, a size change with the mtime put
back. Bytecode written beside the sources does not change it (a child compiling a module must not
retire its own server). The server through real launches: e2e/test_warm.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from toycoder_daemon.warm import launcher

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the warm start is Linux's by default")


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A package tree of its own that install_hash walks (as if the launcher lived there), with an
    import path that nothing else touches meanwhile."""
    root = tmp_path / "toycoder_daemon"
    for name, text in {"__init__.py": "__version__ = '0'\n", "warm/__init__.py": "", "warm/launcher.py": "x = 1\n",
                       "faces/__init__.py": "", "faces/main.py": "def main():\n    return 1\n"}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
        os.utime(root / name, ns=(1_000_000_000, 1_000_000_000))  # an old install: any write is newer
    lib = tmp_path / "lib"
    lib.mkdir()
    os.utime(lib, ns=(1_000_000_000, 1_000_000_000))  # so an install into it moves its mtime, however coarse
    monkeypatch.setattr(launcher, "__file__", str(root / "warm" / "launcher.py"))
    monkeypatch.setattr(sys, "path", [str(lib)])
    monkeypatch.setattr(sys, "argv", ["toycoder-daemon"])
    return root


def test_the_same_files_give_the_same_name(package: Path) -> None:
    assert launcher.install_hash() == launcher.install_hash()


def test_an_edit_in_place_changes_the_name(package: Path) -> None:
    before, folder = launcher.install_hash(), os.stat(package / "faces").st_mtime_ns
    with open(package / "faces" / "main.py", "r+b") as f:  # same inode, same size: only the file's mtime moves
        f.write(b"def main():\n    return 2\n")
    assert os.stat(package / "faces").st_mtime_ns == folder  # what a cache keyed by folders would miss
    assert launcher.install_hash() != before


def test_a_size_change_with_the_old_mtime_changes_the_name(package: Path) -> None:
    before = launcher.install_hash()
    (package / "faces" / "main.py").write_text("def main():\n    return 10\n")
    os.utime(package / "faces" / "main.py", ns=(1_000_000_000, 1_000_000_000))
    assert launcher.install_hash() != before


def test_a_new_module_changes_the_name(package: Path) -> None:
    before = launcher.install_hash()
    (package / "faces" / "extra.py").write_text("")
    os.utime(package / "faces" / "extra.py", ns=(1_000_000_000, 1_000_000_000))
    assert launcher.install_hash() != before


def test_an_install_into_the_import_path_changes_the_name(package: Path) -> None:
    before = launcher.install_hash()
    (Path(sys.path[0]) / "newdep").mkdir()
    assert launcher.install_hash() != before


def test_bytecode_does_not_change_the_name(package: Path) -> None:
    before = launcher.install_hash()
    cache = package / "faces" / "__pycache__"
    cache.mkdir()
    (cache / "main.cpython-311.pyc").write_bytes(b"\0" * 16)
    (package / "faces" / "stray.pyc").write_bytes(b"\0" * 16)
    assert launcher.install_hash() == before
