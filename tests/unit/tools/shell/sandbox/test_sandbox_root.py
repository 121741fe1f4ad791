"""A root daemon's sandboxed command: it runs as root without a user namespace, and the launcher
cuts its capability bounding set to what a build needs (issue 28): no CAP_SYS_ADMIN, CAP_MKNOD,
CAP_CHOWN, CAP_FOWNER, CAP_FSETID, CAP_SETFCAP, CAP_DAC_OVERRIDE, CAP_LINUX_IMMUTABLE, nor the
earlier CAP_SYS_PTRACE, CAP_SYS_MODULE, CAP_SYS_RAWIO and CAP_SYS_BOOT; it now keeps only caps.KEPT.
So it is root as an owner only: what it may do beyond that is in docs/security.md."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from helpers import status_hex
from sandbox_helpers import METADATA_OPS, Box, Runner, metadata_changes, run, spec_for

from toycoder_daemon.tools.shell.sandbox import caps, landlock

ABI = landlock.abi_version() if sys.platform.startswith("linux") else 0
pytestmark = [
    pytest.mark.skipif(ABI < 1, reason="the sandbox needs Linux with Landlock"),
    pytest.mark.skipif(os.geteuid() != 0, reason="only a root daemon's commands run as root; NOT a pass"),
]
MODES = pytest.mark.parametrize("namespaces", [True, False], ids=["pid-namespace", "subreaper"])
CUT = {"CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_FOWNER": 3, "CAP_FSETID": 4, "CAP_LINUX_IMMUTABLE": 9,
       "CAP_SYS_MODULE": 16, "CAP_SYS_RAWIO": 17, "CAP_SYS_PTRACE": 19, "CAP_SYS_ADMIN": 21, "CAP_SYS_BOOT": 22,
       "CAP_MKNOD": 27, "CAP_SETFCAP": 31}
"""What the issue lists, by number (linux/capability.h), kept apart from caps.py on purpose."""


@pytest.fixture
def box() -> Iterator[Box]:
    b = Box.make(None)
    yield b
    b.remove()


@MODES
def test_a_root_command_loses_the_cut_capabilities(box: Box, namespaces: bool) -> None:
    spec, _ = spec_for("grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status", box, Runner("root").support(),
                       namespaces=namespaces)
    done = run(Runner("root"), box, spec)
    assert done.returncode == 0, done.stderr
    sets = dict(line.split(":\t") for line in done.stdout.splitlines())
    for name in ("CapEff", "CapPrm", "CapBnd"):
        value = int(sets[name], 16)
        kept = [cap for cap, bit in CUT.items() if value & (1 << bit)]
        assert not kept, f"{name} kept {kept}: {value:x}"
    assert int(sets["CapBnd"], 16) & (1 << 7), "CAP_SETUID stays (root's su/runuser in a build)"


@MODES
def test_a_root_command_writes_and_chmods_its_own_workspace(box: Box, namespaces: bool) -> None:
    target = box.ws / "run.sh"
    spec, _ = spec_for(f"echo 'echo hi' > {target} && chmod 755 {target} && {target} && touch -d 2001-01-01 {target}",
                       box, Runner("root").support(), namespaces=namespaces)
    done = run(Runner("root"), box, spec)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hi\n" and target.stat().st_mode & 0o777 == 0o755


@MODES
def test_a_root_command_in_another_users_checkout_writes_only_where_the_modes_let_root(box: Box,
                                                                                       namespaces: bool) -> None:
    """The usual container (a root daemon in a checkout owned by the host's user): without
    CAP_DAC_OVERRIDE root's command writes a file of that user only where its mode lets others (or
    root's group) write; it no longer overrides modes (docs/security.md: run the daemon as the
    checkout's owner)."""
    closed, opened = box.ws / "closed", box.ws / "opened"
    for path, mode in ((closed, 0o644), (opened, 0o666)):
        path.write_text("before\n")
        path.chmod(mode)
        os.chown(path, 1000, 1000)
    os.chown(box.ws, 1000, 1000)
    spec, _ = spec_for(f"echo after > {closed}; echo after > {opened}; touch {box.ws / 'new'}; echo ran", box,
                       Runner("root").support(), namespaces=namespaces)
    done = run(Runner("root"), box, spec)
    assert done.stdout == "ran\n", done.stderr
    assert closed.read_text() == "before\n" and opened.read_text() == "after\n"
    assert not (box.ws / "new").exists()


def test_without_namespaces_a_root_command_cannot_change_another_users_files_outside(box: Box) -> None:
    """Without a mount namespace nothing makes `/` read-only, and Landlock has no right for
    metadata: the cut capabilities are what refuses root's chmod, chown, utimes, setxattr and
    setcap on a file it does not own (on root's own files it is their owner: docs/security.md)."""
    victim = box.outside / "theirs"
    victim.write_text("keep\n")
    os.chown(victim, 1000, 1000)
    before = os.stat(victim)
    spec, _ = spec_for(metadata_changes(victim, 0, 0), box, Runner("root").support(), namespaces=False)
    done = run(Runner("root"), box, spec)
    assert done.returncode == 0, done.stderr
    assert [line.split()[:2] for line in done.stdout.splitlines()] == [[op, "refused"] for op in METADATA_OPS]
    after = os.stat(victim)
    assert (after.st_mode, after.st_uid, after.st_mtime_ns) == (before.st_mode, before.st_uid, before.st_mtime_ns)
    assert os.listxattr(victim) == []
    assert not set(CUT.values()) & set(caps.KEPT)


MACHINE = {"CAP_NET_ADMIN": 12, "CAP_IPC_OWNER": 15, "CAP_SYS_TIME": 25, "CAP_SETPCAP": 8, "CAP_SYS_NICE": 23,
           "CAP_PERFMON": 38, "CAP_BPF": 39}
"""Capabilities no build needs that the first cut (CUT) left: gone now that caps.py keeps a list."""


@MODES
def test_a_root_command_keeps_only_what_a_build_needs(box: Box, namespaces: bool) -> None:
    spec, _ = spec_for("grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status", box, Runner("root").support(),
                       namespaces=namespaces)
    done = run(Runner("root"), box, spec)
    assert done.returncode == 0, done.stderr
    sets = dict(line.split(":\t") for line in done.stdout.splitlines())
    allowed = sum(1 << cap for cap in caps.KEPT)
    for name in ("CapEff", "CapPrm", "CapBnd"):
        value = int(sets[name], 16)
        assert not [cap for cap, bit in MACHINE.items() if value & (1 << bit)], f"{name}: {value:x}"
        assert value & ~allowed == 0, f"{name} has {value & ~allowed:x} beyond caps.KEPT"
    ours = status_hex("self", "CapBnd")
    assert int(sets["CapBnd"], 16) == allowed & ours  # all of KEPT this test's root has stays
