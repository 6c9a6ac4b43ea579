"""The seccomp filter a sandbox without network gets: no unix sockets, no io_uring.

A network namespace cuts TCP and abstract unix sockets, but a socket *file* (the D-Bus
session bus under /run/user/UID, docker.sock, an ssh-agent socket in /tmp) is reached
through the filesystem, read-only mounts included: `connect()` needs no write access. Such
a socket is a door out of the sandbox (`systemd-run --user`, `docker run -v /:/host`,
signing with the user's keys). seccomp cannot read the address `connect()` is given, so
the filter refuses what comes before it: `socket(AF_UNIX, ...)` fails with EAFNOSUPPORT
("Address family not supported by protocol", a message `find_denial` recognises).
`socketpair()` stays allowed: it makes a connected pair inside the process (asyncio's
self-pipe, libuv's child pipes) and reaches nothing outside. io_uring is refused because
its operations (IORING_OP_SOCKET, connect) bypass the syscall filter. A system call of
another ABI (i386 `int 0x80`, x32), where `socket` hides behind `socketcall`, is refused
whole.

The filter is classic BPF, written here as bytes (no libseccomp): bwrap loads it from a file
descriptor (`--seccomp FD`), and `trampoline` hands it that descriptor from the command
line alone, so every spawn path (the shell's, a stdio server's, the prestart) takes the
same argv.
"""

from __future__ import annotations

import errno
import platform
import struct

# struct sock_filter {u16 code; u8 jt; u8 jf; u32 k}, native byte order.
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (arg0's low word: little-endian)
_AF_UNIX = 1
_X32_BIT = 0x40000000

# machine -> (AUDIT_ARCH_*, socket, io_uring_setup, whether the x32 bit must be refused)
_ARCHES: dict[str, tuple[int, int, int, bool]] = {
    "x86_64": (0xC000003E, 41, 425, True),
    "aarch64": (0xC00000B7, 198, 425, False),
}
SEEN_AS = "Address family not supported by protocol"  # strerror(EAFNOSUPPORT)


def supported(machine: str | None = None) -> bool:
    """Whether a filter can be built for this machine's system calls."""
    return (machine or platform.machine()) in _ARCHES


def no_unix_sockets(machine: str | None = None) -> bytes:
    """The filter's program: `socket(AF_UNIX)` and io_uring refused, the rest allowed."""
    arch, socket_nr, uring_nr, x32 = _ARCHES[machine or platform.machine()]
    # Jump offsets count instructions after the jump; the three returns close the program.
    prog = [
        (_LD_W_ABS, 0, 0, _ARCH),
        (_JEQ, 1, 0, arch),  # 1
        (_RET, 0, 0, _ERRNO | errno.ENOSYS),  # another ABI: refused whole
        (_LD_W_ABS, 0, 0, _NR),
        (_JGE, 0, 1, _X32_BIT) if x32 else (_JEQ, 0, 1, 0xFFFFFFFF),
        (_RET, 0, 0, _ERRNO | errno.ENOSYS),  # x32's numbers: refused whole
        (_JEQ, 0, 1, uring_nr),
        (_RET, 0, 0, _ERRNO | errno.EPERM),
        (_JEQ, 1, 0, socket_nr),
        (_RET, 0, 0, _ALLOW),
        (_LD_W_ABS, 0, 0, _ARG0),
        (_JEQ, 0, 1, _AF_UNIX),
        (_RET, 0, 0, _ERRNO | errno.EAFNOSUPPORT),
        (_RET, 0, 0, _ALLOW),
    ]
    return b"".join(struct.pack("=HBBI", *ins) for ins in prog)


FD = 9  # the descriptor bwrap reads the filter from


def trampoline(program: bytes, bwrap_line: list[str]) -> list[str]:
    """`bwrap_line` (which names `--seccomp 9`) started by bash with the filter on fd 9.

    bash's printf writes the bytes into a pipe (a process substitution) and `exec` turns
    bash into bwrap, so the spawned process is bwrap itself, as without a filter: its pid
    gets the signals, its group is killed whole. Nothing is written to disk, where a
    sandboxed command (which may write /tmp) could change the filter of the next one."""
    octal = "".join(f"\\{byte:03o}" for byte in program)
    script = f'f=$1; shift; exec "$@" {FD}< <(printf "$f")'
    return ["/bin/bash", "-c", script, "sandbox", octal, *bwrap_line]
