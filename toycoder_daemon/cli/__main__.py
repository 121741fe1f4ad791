"""python -m toycoder_daemon.cli: the same as the `toycoder` command."""

import sys

from toycoder_daemon.cli.entry import run

sys.exit(run())
