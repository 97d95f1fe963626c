"""A seccomp deny-list for the sandbox (classic BPF, handed to ``bwrap --seccomp FD``).

Agent code gets ``EPERM`` for system calls that only widen the kernel attack surface or inspect
other processes: ``ptrace`` and ``process_vm_*``, the pidfd calls (``pidfd_getfd`` would copy the
worker's control pipes into another process of the sandbox; ``pidfd_open``,
``pidfd_send_signal``, ``process_madvise`` and ``process_mrelease`` are not used by the worker
or the tools it runs; the supervisor's own pidfds are opened outside the sandbox), mounts and
namespaces, kernel keyrings, ``bpf``, ``perf_event_open``, ``userfaultfd``, ``io_uring``, module
loading, ``kexec``, ``reboot``, swap, ``acct``, ``open_by_handle_at``; x32-ABI calls are refused
too, and ``prctl(PR_SET_PDEATHSIG, ...)``: the worker dies with ``bwrap`` by its death signal,
which it must not clear. Everything else is allowed.

Only x86-64 has a table here; on other machines :func:`program` returns ``None`` and the sandbox
runs without the filter (the namespaces, uid and limits still hold).
"""

from __future__ import annotations

import errno
import platform
import struct

__all__ = ["DENIED_X86_64", "program"]

DENIED_X86_64: dict[str, int] = {
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "pidfd_open": 434,
    "pidfd_getfd": 438,
    "pidfd_send_signal": 424,
    "process_madvise": 440,
    "process_mrelease": 448,
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "unshare": 272,
    "setns": 308,
    "keyctl": 250,
    "add_key": 248,
    "request_key": 249,
    "bpf": 321,
    "perf_event_open": 298,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_by_handle_at": 304,
    "init_module": 175,
    "finit_module": 313,
    "delete_module": 176,
    "kexec_load": 246,
    "kexec_file_load": 320,
    "reboot": 169,
    "swapon": 167,
    "swapoff": 168,
    "acct": 163,
    "fsopen": 430,
    "fsmount": 432,
    "move_mount": 429,
    "open_tree": 428,
}
"""System call name -> number on x86-64 (``arch/x86/entry/syscalls/syscall_64.tbl``)."""

_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000
# BPF opcodes (linux/filter.h, linux/seccomp.h)
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_OFFSET_NR, _OFFSET_ARCH, _OFFSET_ARG0 = 0, 4, 16  # struct seccomp_data (args[0]'s low word)
PRCTL_X86_64 = 157
_PR_SET_PDEATHSIG = 1


def _instruction(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program() -> bytes | None:
    """The filter as ``struct sock_filter`` records, or ``None`` on a machine without a table."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    denied = sorted(set(DENIED_X86_64.values()))
    deny = _RET_ERRNO | errno.EPERM
    body = [
        _instruction(_LD_W_ABS, 0, 0, _OFFSET_ARCH),
        _instruction(_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64),
        _instruction(_RET_K, 0, 0, _RET_KILL_PROCESS),  # another ABI (i386 via int 0x80)
        _instruction(_LD_W_ABS, 0, 0, _OFFSET_NR),
        _instruction(_JGE_K, 0, 1, _X32_SYSCALL_BIT),
        _instruction(_RET_K, 0, 0, deny),
    ]
    # prctl: only its option PR_SET_PDEATHSIG (an int: the kernel reads the low word) is refused
    body += [
        _instruction(_JEQ_K, 0, 4, PRCTL_X86_64),
        _instruction(_LD_W_ABS, 0, 0, _OFFSET_ARG0),
        _instruction(_JEQ_K, 0, 1, _PR_SET_PDEATHSIG),
        _instruction(_RET_K, 0, 0, deny),
        _instruction(_RET_K, 0, 0, _RET_ALLOW),
    ]
    for index, number in enumerate(denied):
        remaining = len(denied) - index - 1
        # equal: jump over the remaining comparisons and the ALLOW to the DENY at the end
        body.append(_instruction(_JEQ_K, remaining + 1, 0, number))
    body.append(_instruction(_RET_K, 0, 0, _RET_ALLOW))
    body.append(_instruction(_RET_K, 0, 0, deny))
    return b"".join(body)
