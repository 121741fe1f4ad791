"""Capabilities a root daemon's command keeps (Linux, via ctypes): only those a build needs.

A root daemon's command runs as root without a user namespace, so it would keep every capability.
With CAP_SYS_PTRACE it reads `/proc/<pid>/environ` and memory of any process, the daemon's (and its
keys) included; without it the kernel lets a process read another of the same uid only when it has
every capability that one has, which the daemon does. Others would undo the sandbox from the
kernel's side: CAP_SYS_ADMIN (mounts, TIOCSTI into any terminal), CAP_MKNOD (device nodes that open
a disk), the file ones (CAP_CHOWN, CAP_FOWNER, CAP_FSETID, CAP_SETFCAP, CAP_DAC_OVERRIDE,
CAP_LINUX_IMMUTABLE), which change metadata of files root does not own or plant setuid and
capability binaries, and the machine's (CAP_NET_ADMIN, CAP_SYS_TIME, CAP_IPC_OWNER, CAP_BPF,
CAP_PERFMON, CAP_SYS_MODULE...). So the launcher keeps a list rather than cutting one: every
capability not in KEPT, including those a newer kernel adds, is cut from the bounding set, so no
exec (setuid-root or not) gets it back. The command is then root only as an owner: it writes files
whose modes let root's uid and gid write them (its own, and the workspace root created), not every
file.
"""

from __future__ import annotations

import ctypes

CAP_DAC_READ_SEARCH, CAP_KILL, CAP_SETGID, CAP_SETUID = 2, 5, 6, 7
CAP_NET_BIND_SERVICE, CAP_NET_RAW, CAP_IPC_LOCK, CAP_SYS_CHROOT = 10, 13, 14, 18
CAP_SYS_RESOURCE, CAP_AUDIT_WRITE = 24, 29
KEPT = (CAP_DAC_READ_SEARCH, CAP_KILL, CAP_SETGID, CAP_SETUID, CAP_NET_BIND_SERVICE, CAP_NET_RAW, CAP_IPC_LOCK,
        CAP_SYS_CHROOT, CAP_SYS_RESOURCE, CAP_AUDIT_WRITE)
"""What a build run as root uses: reading its tree whatever the modes, su/runuser and setpriv to
drop to another user (which then needs CAP_KILL to be stopped), low ports and ping with the network
on, mlock (gpg), chroot builds, raising its own rlimits, and the audit record su writes."""
PR_CAPBSET_READ, PR_CAPBSET_DROP = 23, 24
_VERSION_3 = 0x20080522  # _LINUX_CAPABILITY_VERSION_3: two 32-bit words per set
_LAST_CAP = "/proc/sys/kernel/cap_last_cap"


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _last_cap() -> int:
    try:
        with open(_LAST_CAP) as f:
            return int(f.read())
    except (OSError, ValueError):
        return 63  # the most a 64-bit set holds; PR_CAPBSET_READ says which exist


def drop() -> None:
    """Remove every capability but KEPT from this process's bounding set (so no exec, setuid-root or
    not, gets them back) and from its effective, permitted and inheritable sets. Raises OSError when
    refused."""
    import os

    libc = ctypes.CDLL(None, use_errno=True)
    # CAP_SETPCAP (8), needed for each drop, leaves only the bounding set here, not the effective one.
    for cap in range(_last_cap() + 1):
        if cap in KEPT or libc.prctl(PR_CAPBSET_READ, cap, 0, 0, 0) != 1:
            continue  # kept, already gone (a container that never had it), or unknown to this kernel
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"drop capability {cap} from the bounding set: {os.strerror(err)}")
    header, data = _Header(_VERSION_3, 0), (_Data * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capget: {os.strerror(err)}")
    keep = sum(1 << cap for cap in KEPT)
    for word in (0, 1):
        mask = (keep >> (32 * word)) & 0xFFFFFFFF
        for field in ("effective", "permitted", "inheritable"):
            setattr(data[word], field, getattr(data[word], field) & mask)
    if libc.capset(ctypes.byref(header), data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset: {os.strerror(err)}")
