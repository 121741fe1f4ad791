"""`python -P -m toycoder_daemon`: the launcher (warm/launcher.py), as the `toycoder-daemon` script runs it."""

import os
import sys

# `python -m toycoder_daemon` puts the current directory (an editor's workspace) first on sys.path,
# so a json.py or argparse.py there would run inside the daemon, keys and all. Our package is in
# already (its modules come from its own __path__); nothing else may come from there.
if sys.path and not getattr(sys.flags, "safe_path", False) and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from toycoder_daemon.warm.launcher import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
