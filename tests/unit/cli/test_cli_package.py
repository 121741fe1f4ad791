"""The terminal client as a package: it imports the wire contract and nothing of the agent's core, its
demo files ship as package data, and `toycoder` is a console script. The client in a real terminal:
editors/terminal/test_terminal_cli.py."""

from __future__ import annotations

import re
import subprocess
import sys

from helpers import ROOT


def test_the_terminal_client_never_imports_the_agent_core() -> None:
    code = ("import toycoder_daemon.cli.main, toycoder_daemon.cli.client, toycoder_daemon.cli.render, "
            "toycoder_daemon.cli.prompt, toycoder_daemon.cli.demo, toycoder_daemon.cli.rpc, sys; "
            "print(sorted(sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    modules = eval(p.stdout)
    assert "toycoder_daemon.cli.render" in modules and "toycoder_daemon.wire.protocol" in modules
    core = [m for m in modules if re.match(r"toycoder_daemon\.(agent|tools|llm|sessions|app|server|commands|"
                                           r"testing|editor_frontend|config)\b", m)]
    assert core == []


def test_the_demo_files_are_package_data_and_toycoder_is_a_console_script() -> None:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: pip vendors the same parser
        from pip._vendor import tomli as tomllib  # type: ignore[no-redef]
    from fnmatch import fnmatch

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["toycoder"] == "toycoder_daemon.cli.entry:run"
    globs = project["tool"]["setuptools"]["package-data"]["toycoder_daemon"]
    pkg = ROOT / "toycoder_daemon"
    files = [f.relative_to(pkg).as_posix() for f in (pkg / "cli" / "demo").rglob("*")
             if f.is_file() and "__pycache__" not in f.parts]
    assert "cli/demo/script.json" in files and "cli/demo/sample_project/calc.py" in files
    # setuptools globs: '*' does not cross '/'
    unshipped = [f for f in files if not any(fnmatch(f, g) and f.count("/") == g.count("/") for g in globs)]
    assert unshipped == []


def test_attach_reads_an_image_into_a_context_item(tmp_path) -> None:
    import base64

    import pytest

    from toycoder_daemon.cli.attach import image_item

    png = tmp_path / "shot.PNG"
    png.write_bytes(b"\x89PNG\r\n\x1a\nrest")
    assert image_item(f" {png} ") == {"type": "image", "mimeType": "image/png",
                                      "data": base64.b64encode(b"\x89PNG\r\n\x1a\nrest").decode()}
    with pytest.raises(ValueError, match="attach a png, jpeg, gif or webp image"):
        image_item(str(tmp_path / "notes.txt"))
    with pytest.raises(ValueError, match="cannot read"):
        image_item(str(tmp_path / "missing.png"))
    with pytest.raises(ValueError, match="usage"):
        image_item("  ")
