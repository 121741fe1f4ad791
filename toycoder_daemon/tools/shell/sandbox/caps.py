"""Capabilities a root daemon's command must not have (Linux, via ctypes).

A root daemon's command runs as root without a user namespace, so it would keep every capability.
With CAP_SYS_PTRACE it reads `/proc/<pid>/environ` and memory of any process, the daemon's (and its
keys) included; without it the kernel lets a process read another of the same uid only when it has
every capability that one has, which the daemon does. The rest would undo the sandbox from the
kernel's side: CAP_SYS_ADMIN (mounts, TIOCSTI into any terminal), CAP_MKNOD (device nodes that open
a disk), and the file ones (CAP_CHOWN, CAP_FOWNER, CAP_FSETID, CAP_SETFCAP, CAP_DAC_OVERRIDE,
CAP_LINUX_IMMUTABLE), which change metadata of files root does not own or plant setuid and
capability binaries. They are cut from the bounding set, so no exec (setuid-root or not) gets them
back. The command is then root only as an owner: it writes files whose modes let root's uid and
gid write them (its own, and the workspace root created), not every file.
"""

from __future__ import annotations

import ctypes

CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID = 0, 1, 3, 4
CAP_LINUX_IMMUTABLE, CAP_SYS_MODULE, CAP_SYS_RAWIO, CAP_SYS_PTRACE = 9, 16, 17, 19
CAP_SYS_ADMIN, CAP_SYS_BOOT, CAP_MKNOD, CAP_SETFCAP = 21, 22, 27, 31
DROPPED = (CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID, CAP_LINUX_IMMUTABLE, CAP_SYS_MODULE,
           CAP_SYS_RAWIO, CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_SYS_BOOT, CAP_MKNOD, CAP_SETFCAP)
PR_CAPBSET_READ, PR_CAPBSET_DROP = 23, 24
_VERSION_3 = 0x20080522  # _LINUX_CAPABILITY_VERSION_3: two 32-bit words per set


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop() -> None:
    """Remove DROPPED from this process's bounding set (so no exec, setuid-root or not, gets them
    back) and from its effective, permitted and inheritable sets. Raises OSError when refused."""
    import os

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in DROPPED:
        if libc.prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 0:
            continue  # already gone (a container that never had it, which may also lack CAP_SETPCAP)
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"drop capability {cap} from the bounding set: {os.strerror(err)}")
    header, data = _Header(_VERSION_3, 0), (_Data * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capget: {os.strerror(err)}")
    mask = ~sum(1 << cap for cap in DROPPED) & 0xFFFFFFFF  # every dropped cap is below 32: word 0
    for field in ("effective", "permitted", "inheritable"):
        setattr(data[0], field, getattr(data[0], field) & mask)
    if libc.capset(ctypes.byref(header), data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset: {os.strerror(err)}")
