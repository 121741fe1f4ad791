"""The terminal-ioctl filter's program, run by a small classic-BPF interpreter for every machine it
is written for (the real kernel runs it in test_sandbox_no_write_outside.py on this one)."""

from __future__ import annotations

import struct

import pytest

from toycoder_daemon.tools.shell.sandbox import seccomp

ALLOW, EPERM, KILL = 0x7FFF0000, 0x00050001, 0
X86_64, I386, AARCH64, ARM = 0xC000003E, 0x40000003, 0xC00000B7, 0x40000028


def run(program: list[tuple[int, int, int, int]], nr: int, arch: int, arg1: int) -> int:
    """What the filter returns for a syscall (only the instructions the filter uses)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, 0, arg1, 0, 0, 0, 0)
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        if code == 0x20:  # ld [k]
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code == 0x15:  # jeq #k
            pc += 1 + (jt if acc == k else jf)
        elif code == 0x06:  # ret #k
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")


CASES = {
    "x86_64": [(X86_64, 16), (X86_64, 0x40000000 | 514), (I386, 54)],
    "aarch64": [(AARCH64, 29), (ARM, 54)],
}


@pytest.mark.parametrize("machine", sorted(CASES))
def test_terminal_typing_is_refused_under_every_abi_of_the_machine(machine: str) -> None:
    program = seccomp.program(machine)
    for arch, ioctl in CASES[machine]:
        for request in seccomp.REFUSED:
            assert run(program, ioctl, arch, request) == EPERM, (arch, ioctl, request)
            assert run(program, ioctl, arch, request | 7 << 32) == EPERM  # the kernel keeps the low 32 bits
        assert run(program, ioctl, arch, 0x5413) == ALLOW  # TIOCGWINSZ: other ioctls go through
        assert run(program, ioctl + 1, arch, seccomp.TIOCSTI) == ALLOW  # another syscall, same argument
    assert run(program, 16, 0x12345678, seccomp.TIOCSTI) == KILL  # an ABI it cannot judge


def test_a_machine_without_a_filter_is_refused_not_left_open() -> None:
    with pytest.raises(seccomp.UnsupportedMachine):
        seccomp.program("riscv64")
