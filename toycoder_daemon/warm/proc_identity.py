"""A forked child's argv and environment as the kernel shows them (/proc/<pid>/cmdline and environ).

A child of the fork server did not exec, so the kernel still shows the server's argv and (scrubbed
of nothing: it holds no keys) environment for it. What `ps`, a process finder by environment marker
(the bench, the tests' clean-up) and `environ_scrub` read is that block, so the child points the
kernel at copies of the launcher's: prctl(PR_SET_MM, PR_SET_MM_MAP) with every other field as it
is. That needs no privilege (the kernel checks the addresses and RLIMIT_DATA) but does need
CONFIG_CHECKPOINT_RESTORE; without it the child keeps the server's block, which holds no launch's
data at all, and `publish` says so.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import struct
import sys

PR_SET_MM, PR_SET_MM_MAP = 35, 14
_MAP = struct.Struct("11QQII")
"""struct prctl_mm_map: start_code .. env_end (11 u64), auxv pointer, auxv_size, exe_fd."""
_kept: list[object] = []
"""The new blocks: they must stay mapped as long as the process lives."""


@functools.cache
def _libc() -> ctypes.CDLL:
    """sbrk and prctl, typed: made once in the fork server (proc_identity.prepare), not in each child."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.sbrk.restype = ctypes.c_void_p
    libc.sbrk.argtypes = [ctypes.c_ssize_t]
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    return libc


def prepare() -> None:
    """For the fork server, before it forks (server.PREPARE)."""
    if sys.platform.startswith("linux"):
        _libc()


def _stat_field(fields: list[bytes], number: int) -> int:
    return int(fields[number - 3])  # proc(5) numbers fields from 1; these start at field 3


def publish(cmdline: bytes, environ: bytes) -> str | None:
    """Make `cmdline` and `environ` (NUL-terminated entries) this process's; None, or why not."""
    if not sys.platform.startswith("linux"):
        return "not Linux"
    if not cmdline.endswith(b"\0") or not environ:
        return "empty argv or environment"
    block = cmdline + environ
    mem = mmap.mmap(-1, len(block), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # private: /proc reads anon only
    mem.write(block)
    anchor = ctypes.c_char.from_buffer(mem)
    start = ctypes.addressof(anchor)
    with open("/proc/self/stat", "rb") as f:
        stat = f.read()
    fields = stat[stat.rindex(b")") + 2:].split()
    libc = _libc()
    brk = libc.sbrk(0) or 0
    packed = _MAP.pack(_stat_field(fields, 26), _stat_field(fields, 27),  # start_code, end_code
                       _stat_field(fields, 45), _stat_field(fields, 46),  # start_data, end_data
                       _stat_field(fields, 47), brk, _stat_field(fields, 28),  # start_brk, brk, start_stack
                       start, start + len(cmdline), start + len(cmdline), start + len(block),
                       0, 0, 0xFFFFFFFF)  # auxv and exe as they are
    buf = ctypes.create_string_buffer(packed, len(packed))
    if libc.prctl(PR_SET_MM, PR_SET_MM_MAP, buf, len(packed), 0) != 0:
        import os

        return f"prctl(PR_SET_MM_MAP): {os.strerror(ctypes.get_errno())}"
    _kept.extend((mem, anchor))
    return None
