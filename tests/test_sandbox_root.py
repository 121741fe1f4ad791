"""A root daemon's sandboxed command: it runs as root without a user namespace, so the launcher
drops the capabilities that would reach outside the sandbox (CAP_SYS_PTRACE above all: with it the
command read any process's environment, the daemon's keys included), and keeps the file ones root's
own admin commands need."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from sandbox_helpers import Box, Runner, run, spec_for, unique_sleep

from toycoder_daemon.tools.sandbox import caps, landlock

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


def test_a_root_command_in_namespaces_cannot_read_another_processes_environment(box: Box) -> None:
    """In namespaces root's command is in a user namespace of its own: root inside, no capability
    over the processes outside (same uid or not). Without namespaces it still can: docs/security.md."""
    outsider = subprocess.Popen(["sleep", unique_sleep()], env={"OPENAI_API_KEY": "sk-outsider-secret"},
                                start_new_session=True)
    try:
        command = f"cat /proc/{outsider.pid}/environ; echo; cat /proc/{os.getpid()}/environ"
        support = Runner("root").support()
        if not support.namespaces:
            pytest.skip("no namespaces here for root: its command can read them (docs/security.md); NOT a pass")
        spec, _ = spec_for(command, box, support, namespaces=True)
        done = run(Runner("root"), box, spec)
    finally:
        outsider.kill()
        outsider.wait()
    assert "sk-outsider-secret" not in done.stdout and "PATH=" not in done.stdout, done.stdout
    assert done.stderr.count("Permission denied") == 2, done.stderr


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
