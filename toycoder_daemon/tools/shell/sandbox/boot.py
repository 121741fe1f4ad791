"""The launcher's first step (probe.BOOT), kept light: in a client's terminal the launcher first execs
itself again with only the variables the daemon passed, before it imports anything more (json and
launch.py's ctypes modules are most of its start-up cost).

    python -I -S -c BOOT --keep-env=NAME,NAME SPEC_JSON   the same as BOOT SPEC_JSON, in that environment
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # as in launch.py: no typing import at every command's start-up
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import NoReturn

KEEP_ENV = "--keep-env="
REFUSED_EXIT = 125
"""Exit status when the sandbox was required but could not be applied (the command did not run)."""


def keep_env_arg(names: Iterable[str]) -> str:
    """The first argument that makes the launcher keep only `names` (a name with a comma, which no
    real variable has, is dropped rather than split)."""
    return KEEP_ENV + ",".join(sorted(n for n in names if "," not in n))


def restart_with_only(arg: str) -> NoReturn:
    """Exec this launcher again without `arg` (a keep_env_arg) and with only the variables it names.
    Deleting the others from os.environ would change Python's copy only: the kernel serves
    /proc/<pid>/environ from the block a process was exec'd with, which the init forked from us
    inherits and the command can read (its PID 1). An exec builds a new block."""
    keep = set(arg[len(KEEP_ENV):].split(","))
    env = {name: value for name, value in os.environ.items() if name in keep}
    argv = list(sys.orig_argv)
    argv.remove(arg)
    try:
        os.execve(sys.executable, [sys.executable, *argv[1:]], env)
    except OSError as e:  # never run the command with the client's environment in reach
        os.write(2, f"toycoder sandbox: cannot restart the launcher: {e}; it did not run\n".encode())
        os._exit(REFUSED_EXIT)


def restart_if_asked(argv: list[str]) -> None:
    """probe.BOOT's first step: returns when argv starts with no keep_env_arg."""
    if argv[:1] and argv[0].startswith(KEEP_ENV):
        restart_with_only(argv[0])
