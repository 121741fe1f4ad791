"""python -m toycoder_daemon.cli: the same as the `toycoder` command."""

import sys

from toycoder_daemon.cli.main import main

sys.exit(main())
