"""python -m toycoder_daemon.terminal: the same as the `toycoder` command."""

import sys

from .cli import main

sys.exit(main())
