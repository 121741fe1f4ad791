"""A root daemon's sandboxed command: it runs as root without a user namespace (so it keeps root's
rights over the workspace whoever owns it), and the launcher drops the capabilities that reach
furthest outside the sandbox (CAP_SYS_PTRACE, CAP_SYS_MODULE, CAP_SYS_RAWIO, CAP_SYS_BOOT), keeping
the file ones root's own admin commands need. What it still can do: docs/security.md."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from sandbox_helpers import Box, Runner, run, spec_for

from toycoder_daemon.tools.shell.sandbox import caps, landlock

ABI = landlock.abi_version() if sys.platform.startswith("linux") else 0
pytestmark = [
    pytest.mark.skipif(ABI < 1, reason="the sandbox needs Linux with Landlock"),
    pytest.mark.skipif(os.geteuid() != 0, reason="only a root daemon's commands run as root; NOT a pass"),
]
MODES = pytest.mark.parametrize("namespaces", [True, False], ids=["pid-namespace", "subreaper"])


@pytest.fixture
def box() -> Iterator[Box]:
    b = Box.make(None)
    yield b
    b.remove()


@MODES
def test_a_root_command_writes_a_workspace_another_user_owns(box: Box, namespaces: bool) -> None:
    """The usual container: a root daemon in a checkout owned by the host's user. Its commands must
    write there (a user namespace mapping root alone made those files "others": a review finding)."""
    owned = box.ws / "user_file"
    owned.write_text("before\n")
    os.chown(box.ws, 1000, 1000)
    os.chown(owned, 1000, 1000)
    command = f"echo after > {owned} && touch {box.ws / 'new'} && chown 1000:1000 {box.ws / 'new'}"
    spec, _ = spec_for(command, box, Runner("root").support(), namespaces=namespaces)
    done = run(Runner("root"), box, spec)
    assert done.returncode == 0, done.stderr
    assert owned.read_text() == "after\n" and (box.ws / "new").stat().st_uid == 1000


@MODES
def test_a_root_command_keeps_root_over_its_files_and_loses_the_dropped_capabilities(box: Box,
                                                                                    namespaces: bool) -> None:
    locked = box.ws / "locked"
    locked.write_text("before\n")
    locked.chmod(0)
    command = f"echo after > {locked} && grep -E '^Cap(Eff|Bnd)' /proc/self/status"
    spec, _ = spec_for(command, box, Runner("root").support(), namespaces=namespaces)
    done = run(Runner("root"), box, spec)
    assert done.returncode == 0, done.stderr
    assert locked.read_text() == "after\n"  # CAP_DAC_OVERRIDE still works on root's own files
    sets = dict(line.split(":\t") for line in done.stdout.splitlines())
    for name in ("CapEff", "CapBnd"):
        value = int(sets[name], 16)
        assert not any(value & (1 << cap) for cap in caps.DROPPED), f"{name} kept a dropped capability: {value:x}"
