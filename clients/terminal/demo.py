#!/usr/bin/env python3
"""The ToyCoder demo: the same as `toycoder --demo [--approve ask|allow|deny]`.

The demo lives in the package (toycoder_daemon/cli/demo.py, with its script and sample
project as package data) so that it works from an installed `toycoder` too.
"""

import sys
from pathlib import Path

# Run from a checkout: the package is two directories up, whether or not it is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

if __name__ == "__main__":
    try:
        from toycoder_daemon.cli.main import main
    except ImportError as e:  # this Python lacks ToyCoder's dependencies (rich, ...): say which Python to use
        sys.stderr.write(f"demo.py: this Python ({sys.executable}) cannot run ToyCoder ({e}); run ./scripts/run, "
                         "which sets up .venv, or .venv/bin/python clients/terminal/demo.py\n")
        sys.exit(127)
    sys.exit(main(["--demo", *sys.argv[1:]]))
