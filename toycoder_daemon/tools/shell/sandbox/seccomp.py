"""A seccomp filter (classic BPF, via ctypes) that refuses the ioctls that type into a terminal.

TIOCSTI pushes bytes into a terminal's input queue, as if typed: a command holding an fd of the
person's terminal (an ACP client's pty, its own controlling terminal) would have them run by the
shell reading it, outside the sandbox. TIOCLINUX does the same on a Linux console (its paste
selection). Both answer EPERM; every other syscall and ioctl is allowed. This is the second layer
behind the private /dev/pts (contain.confine_mounts), which keeps other terminals out of reach.

The filter judges the low 32 bits of the request, as the kernel does (`unsigned int cmd`), so high
bits set by the caller do not slip past it. It covers the native ABI and the compat ones a process
on this machine can switch to (i386 and x32 on x86_64, arm on aarch64); elsewhere `install` refuses
(UnsupportedMachine) rather than install a filter with a hole.
"""

from __future__ import annotations

import ctypes
import os

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
TIOCSTI, TIOCLINUX = 0x5412, 0x541C  # the same on every architecture this filter supports
REFUSED = (TIOCSTI, TIOCLINUX)
_EPERM = 1

# BPF: ld [k] (word, absolute), jeq #k, ret #k
_LD_W_ABS, _JEQ_K, _RET_K = 0x20, 0x15, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6] (little-endian here)
_NR, _ARCH, _ARG1_LOW = 0, 4, 24
_X32 = 0x40000000

_ARCHES: dict[str, list[tuple[int, tuple[int, ...]]]] = {
    # audit arch -> the ioctl syscall numbers under it
    "x86_64": [(0xC000003E, (16, _X32 | 514)), (0x40000003, (54,))],
    "aarch64": [(0xC00000B7, (29,)), (0x40000028, (54,))],
}


class UnsupportedMachine(OSError):
    pass


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions; raises UnsupportedMachine."""
    arches = _ARCHES.get(machine)
    if arches is None:
        raise UnsupportedMachine(0, f"no seccomp filter is written for {machine}")
    # Layout: [ld arch] + per arch [jeq arch; ld nr; jeq nr...; ret allow] + check.
    # Jumps are relative (to the next instruction), so each block is laid out before it is patched.
    check = [(_LD_W_ABS, 0, 0, _ARG1_LOW)]
    for i, cmd in enumerate(REFUSED):
        left = len(REFUSED) - i - 1  # instructions between this jeq and the deny
        check.append((_JEQ_K, left + 1, 0, cmd))
    check += [(_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, _RET_ERRNO | _EPERM)]
    blocks: list[list[tuple[int, int, int, int]]] = []
    for arch, numbers in arches:
        blocks.append([(_JEQ_K, 0, 0, arch), (_LD_W_ABS, 0, 0, _NR)]
                      + [(_JEQ_K, 0, 0, nr) for nr in numbers] + [(_RET_K, 0, 0, _RET_ALLOW)])
    prog = [(_LD_W_ABS, 0, 0, _ARCH)]
    # A foreign arch (one not listed) cannot be judged: KILL would break nothing real (the kernel
    # offers only the listed ones here), and it is safer than allowing.
    tail = [(_RET_K, 0, 0, 0)]  # SECCOMP_RET_KILL_THREAD
    starts = []
    pos = 1
    for block in blocks:
        starts.append(pos)
        pos += len(block)
    tail_at = pos
    check_at = tail_at + len(tail)
    for block, start in zip(blocks, starts, strict=True):
        end = start + len(block)
        code, _, _, k = block[0]  # jeq arch: on a miss, go to the next block (or the tail)
        block[0] = (code, 0, end - (start + 1), k)
        for j in range(2, len(block) - 1):  # jeq nr: on a match, go to the check
            code, _, _, k = block[j]
            block[j] = (code, check_at - (start + j + 1), 0, k)
        prog += block
    return prog + tail + check


def install() -> None:
    """Install the filter on this thread (inherited across fork and exec). Sets no_new_privs,
    which an unprivileged process needs for it. Raises OSError (UnsupportedMachine) when refused."""
    instructions = program(os.uname().machine)
    array = (_Filter * len(instructions))(*(_Filter(*ins) for ins in instructions))
    prog = _Prog(len(instructions), array)
    libc = ctypes.CDLL(None, use_errno=True)
    for args in ((PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0),
                 (PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0)):
        if libc.prctl(*(ctypes.c_ulong(a) for a in args)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"prctl({args[0]}): {os.strerror(err)}")
