"""The daemon's keys out of its initial environment block (`/proc/<pid>/environ`).

The kernel serves `/proc/<pid>/environ` from the block the process was started with, whatever the
process changed since, and (Linux 6.18, checked here) lets any process of the same uid read it
without CAP_SYS_PTRACE, even when the target is not dumpable: a root daemon's sandboxed commands
(root too) could read the keys the daemon was started with. Python keeps its own copy of the
environment (`os.environ`), which is all the daemon reads, so each secret value in the block is
overwritten with NULs in place, through `/proc/self/mem` (a bad address is an error there, not a
crash). A C-level `getenv` of such a variable then sees an empty value; children get
`secrets.child_env()` either way.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable

from toycoder_daemon.core.util import secrets

log = logging.getLogger(__name__)

blanked: Callable[[list[str]], None] | None = None
"""Told the names of the variables `scrub` has just blanked. A warm daemon's launcher holds the same
environment in its own block (warm/child.py sets this so that it blanks them there too)."""

_ENV_START = 50
"""/proc/<pid>/stat's field number of env_start (env_end is the next): proc(5)."""


def scrub() -> int:
    """Blank the value of every variable `secrets.child_env()` keeps from children (by name or by a
    registered value). Returns how many were blanked; 0 where there is no such block (not Linux)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        start, block = _block()
    except (OSError, ValueError, IndexError) as e:
        log.warning("could not read this process's environment block: %s", e)
        return 0
    spans = list(secret_spans(block))
    if not spans:
        return 0
    try:
        fd = os.open("/proc/self/mem", os.O_RDWR | os.O_CLOEXEC)
        try:
            for offset, size in spans:
                os.pwrite(fd, bytes(size), start + offset)
        finally:
            os.close(fd)
    except OSError as e:  # e.g. a kernel that refuses /proc/self/mem writes: reported, not fatal
        log.warning("could not blank the keys in this process's environment block: %s", e)
        return 0
    if blanked is not None:
        blanked([os.fsdecode(block[block.rfind(b"\0", 0, offset) + 1: offset - 1]) for offset, _ in spans])
    return len(spans)


def _block() -> tuple[int, bytes]:
    """(address, bytes) of this process's initial environment block."""
    with open("/proc/self/stat", "rb") as f:
        stat = f.read()
    fields = stat[stat.rindex(b")") + 2:].split()  # after the command name, from field 3 on
    start, end = int(fields[_ENV_START - 3]), int(fields[_ENV_START - 2])
    with open("/proc/self/environ", "rb") as f:
        block = f.read()
    if len(block) != end - start:
        raise ValueError(f"environ is {len(block)} bytes, stat says {end - start}")
    return start, block


def secret_spans(block: bytes) -> list[tuple[int, int]]:
    """(offset, length) of each secret value in a NUL-separated NAME=VALUE block, blank ones left out."""
    spans, offset = [], 0
    for entry in block.split(b"\0"):
        name, eq, value = entry.partition(b"=")
        if eq and value.strip(b"\0"):
            text_name, text_value = os.fsdecode(name), os.fsdecode(value)
            if secrets.is_secret(text_name, text_value):
                spans.append((offset + len(name) + 1, len(value)))
        offset += len(entry) + 1
    return spans
