"""The documented editor command never runs the workspace's own package (issue 28): an editor starts
the daemon in the workspace, and a bare `python -m toycoder_daemon` there would run a
`toycoder_daemon/` of the workspace (the daemon's own guard in __main__.py is never reached). The
installed script and `python -P -m` do not; the docs and the clients' defaults name only those."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

SCRIPT = Path(sys.executable).with_name("toycoder-daemon")


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    (ws / "toycoder_daemon").mkdir(parents=True)
    marker = tmp_path / "ran"
    for name in ("__init__.py", "__main__.py"):
        (ws / "toycoder_daemon" / name).write_text(f"open({str(marker)!r}, 'w').write('the workspace ran')\n")
    return ws, marker


@pytest.mark.parametrize("argv", [[str(SCRIPT)], [sys.executable, "-P", "-m", "toycoder_daemon"]],
                         ids=["installed-script", "python-P-m"])
def test_the_documented_commands_run_our_package_not_the_workspaces(hostile: tuple[Path, Path],
                                                                    argv: list[str]) -> None:
    ws, marker = hostile
    done = subprocess.run([*argv, "--version"], cwd=ws, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("toycoder-daemon "), done.stderr
    assert not marker.exists()


def test_a_bare_python_m_in_the_workspace_runs_the_workspaces_package(hostile: tuple[Path, Path]) -> None:
    """Why the bare form is not supported (and that the fixture above is a real trap)."""
    ws, marker = hostile
    subprocess.run([sys.executable, "-m", "toycoder_daemon", "--version"], cwd=ws, capture_output=True, timeout=60)
    assert marker.read_text() == "the workspace ran"


BARE = re.compile(r"""python3?\s+-m\s+toycoder_daemon(?![.\w])|(?<!-P['"], )(?<!-I['"], )['"]-m['"],\s*['"]toycoder_daemon['"]""")


def test_no_doc_or_client_default_presents_a_bare_python_m() -> None:
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    for sub in ("neovim", "vscode"):
        files += [p for p in (ROOT / "clients" / sub).rglob("*") if p.suffix in (".lua", ".ts", ".json", ".md")
                  and "node_modules" not in p.parts and ".cache" not in p.parts and p.is_file()]
    found = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in files
             for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
             if BARE.search(line.replace("a bare `python -m", ""))]  # naming the bare form to warn of it
    assert found == []
