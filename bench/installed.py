"""The daemon launched as a user's install launches it, for the start-up benches.

A user runs pip's console script `toycoder-daemon` from a venv that holds the package and its
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

# pip's console-script template (pip/_internal/operations/install/wheel.py), for `toycoder-daemon`
SCRIPT = """#!{python}
# -*- coding: utf-8 -*-
import re
import sys
from toycoder_daemon.warm.launcher import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""


def installed_launcher(tmp: Path) -> list[str]:
    """argv (without the daemon's own arguments) of a console script in a fresh venv under `tmp`."""
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
    script.write_text(SCRIPT.format(python=python))
    script.chmod(0o755)
    return [str(script)]
