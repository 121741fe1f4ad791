"""The daemon launched as a user's install launches it, for the start-up benches.

A user runs the installed script `toycoder-daemon` (bin/toycoder-daemon, its `#!python` line made
this venv's interpreter, as installers do) from a venv that holds the package and its
dependencies. The project's venv also holds the package's editable install, whose `.pth` imports a
finder at every interpreter start (~10 ms: pathlib, importlib.util and more, before anything of ours
runs), and `python -m` adds runpy. Here a venv made in the bench's temp dir sees this interpreter's
site-packages through one `.pth` line, with the other `.pth` files there copied (setuptools' shim,
which a pip-made venv on Python 3.11 has too) except the editable finder's; the daemon's code still
comes from the tree on PYTHONPATH, so two trees (`--against`) launch the same way.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "bin" / "toycoder-daemon"
"""The wheel's script, as installers write it: their interpreter's path over `#!python`."""


def installed_launcher(tmp: Path) -> list[str]:
    """argv (without the daemon's own arguments) of the installed script in a fresh venv under `tmp`."""
    venv = tmp / "user-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    deps = Path(sysconfig.get_paths()["purelib"])
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    # sorts before the copied .pth files, so their imports find the dependencies' folder
    (site / "_bench_deps.pth").write_text(f"{deps}\n")
    for pth in deps.glob("*.pth"):
        if not pth.name.startswith("__editable__.toycoder_daemon"):
            (site / pth.name).write_bytes(pth.read_bytes())
    script = venv / "bin" / "toycoder-daemon"
    first, rest = SCRIPT.read_text().split("\n", 1)
    assert first == "#!python", first
    script.write_text(f"#!{python}\n{rest}")
    script.chmod(0o755)
    return [str(script)]
