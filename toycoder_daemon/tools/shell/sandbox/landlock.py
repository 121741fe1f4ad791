"""Landlock through ctypes: write access only beneath given roots, optionally no TCP connect/bind.

Only write-type rights are *handled*, so reads and execution stay unrestricted. Making device nodes
(MAKE_CHAR, MAKE_BLOCK) is handled but granted nowhere: a node made in the workspace would open the
device it names (a disk, another terminal) past every rule here. Each right is used
only from the ABI that introduced it (REFER from 2, TRUNCATE from 3, TCP from 4, scopes from 6): on
an older kernel the rule degrades to what it can express instead of failing.

Scopes (ABI 6) confine the command to its own domain: it cannot signal a process outside it (its
supervisor, the daemon, the editor) and, with the network off, cannot connect to an abstract unix
socket bound outside it (a session bus, an X server, other daemons). They restrict the confined
side only: the command still signals its own children, and processes outside still signal it. Linux only; the syscall numbers
are the same on every architecture (they were added after the tables were unified).
"""

from __future__ import annotations

import ctypes
import os
import sys

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1
SCOPE_ABI = 6

_WRITE_ABI1 = (FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_CHAR | FS_MAKE_DIR | FS_MAKE_REG
               | FS_MAKE_SOCK | FS_MAKE_FIFO | FS_MAKE_BLOCK | FS_MAKE_SYM)
_NEVER = FS_MAKE_CHAR | FS_MAKE_BLOCK
"""Handled (so refused everywhere) but never granted beneath a writable root."""
_FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE
"""The only rights a rule on a non-directory may carry."""

SIMULATE_ENV = "TOYCODER_SANDBOX_SIMULATE_NO_LANDLOCK"
"""For tests only: when set to 1, the daemon behaves as on a kernel without Landlock."""


class LandlockError(OSError):
    pass


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI, 0 when it has none (or the test switch says so)."""
    if os.environ.get(SIMULATE_ENV) == "1" or not sys.platform.startswith("linux"):
        return 0
    try:
        libc = _libc()
        libc.syscall.restype = ctypes.c_long
        v = libc.syscall(ctypes.c_long(SYS_CREATE_RULESET), None, ctypes.c_size_t(0),
                         ctypes.c_uint32(CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(v), 0)


def write_rights(abi: int) -> int:
    """The write-type rights this ABI can control."""
    rights = _WRITE_ABI1
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    return rights


def granted_rights(abi: int) -> int:
    """What a writable root grants: every handled right but making device nodes."""
    return write_rights(abi) & ~_NEVER


def scopes(abi: int, *, network: bool) -> int:
    """What this ABI can scope: signals always, abstract unix sockets only with the network off (a
    fresh network namespace already has none of the host's; where there is none, reaching a session
    bus or another daemon is the kind of talking to the outside that `network: false` denies)."""
    if abi < SCOPE_ABI:
        return 0
    return SCOPE_SIGNAL | (0 if network else SCOPE_ABSTRACT_UNIX_SOCKET)


def restrict(writable: list[str], *, abi: int, block_tcp: bool, network: bool) -> None:
    """Confine this process (and what it execs) to writing beneath `writable`; with block_tcp and
    ABI >= 4, also forbid every TCP connect and bind; from ABI 6 also scope signals and (without
    `network`) abstract unix sockets to its own domain. Raises LandlockError when it cannot."""
    if abi < 1:
        raise LandlockError(0, "the kernel has no Landlock")
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    handled_fs = write_rights(abi)
    net = block_tcp and abi >= 4
    attr = _RulesetAttr(handled_fs, NET_BIND_TCP | NET_CONNECT_TCP if net else 0, scopes(abi, network=network))
    # The struct grew with the ABI: pass only what this kernel knows.
    size = 8 if abi < 4 else 16 if abi < SCOPE_ABI else 24
    ruleset = libc.syscall(ctypes.c_long(SYS_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size),
                           ctypes.c_uint32(0))
    if ruleset < 0:
        err = ctypes.get_errno()
        raise LandlockError(err, f"landlock_create_ruleset: {os.strerror(err)}")
    try:
        for path in writable:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a root that does not exist cannot be written to anyway
            try:
                is_dir = os.path.isdir(path)
                granted = granted_rights(abi)
                rule = _PathBeneath(granted if is_dir else granted & _FILE_RIGHTS, fd)
                if libc.syscall(ctypes.c_long(SYS_ADD_RULE), ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH),
                                ctypes.byref(rule), ctypes.c_uint32(0)) < 0:
                    err = ctypes.get_errno()
                    raise LandlockError(err, f"landlock_add_rule {path}: {os.strerror(err)}")
            finally:
                os.close(fd)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise LandlockError(err, f"prctl(NO_NEW_PRIVS): {os.strerror(err)}")
        if libc.syscall(ctypes.c_long(SYS_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            err = ctypes.get_errno()
            raise LandlockError(err, f"landlock_restrict_self: {os.strerror(err)}")
    finally:
        os.close(ruleset)
