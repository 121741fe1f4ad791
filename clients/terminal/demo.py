#!/usr/bin/env python3
"""The ToyCoder demo: the same as `toycoder --demo [--approve ask|allow|deny]`.

The demo lives in the package (toycoder_daemon/terminal/demo.py, with its script and sample
project as package data) so that it works from an installed `toycoder` too.
"""

import sys

from toycoder_daemon.terminal.cli import main

if __name__ == "__main__":
    sys.exit(main(["--demo", *sys.argv[1:]]))
