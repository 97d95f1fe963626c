"""``verigym.sandbox``: run agent-written Python escape-proof (docs/design.md section 7).

Agent code never runs in the library's process or with its rights. :class:`PythonSandbox` starts
``python -I -S`` with an empty environment inside bubblewrap (all namespaces unshared, no network,
no nested user namespaces, a new session, killed with its parent) as an unprivileged uid, with a seccomp deny-list,
rlimits (CPU, address space, file size, open files, no core dump), a process limit that holds even
for root (a cgroup ``pids.max`` where the cgroup filesystem is writable, ``RLIMIT_NPROC`` under the
unprivileged uid), a memory limit, a cap on printed bytes and a wall-clock deadline after which the
whole process tree is killed. The root and ``/dev`` are read-only; ``/tmp`` and ``/dev/shm`` are
size-capped tmpfs mounts. The worker persists between calls of an episode (a notebook); between
calls it is stopped and every other process it started is killed. Each episode
(:meth:`PythonSandbox.fresh`) runs in a new sandbox, so nothing of an earlier episode is left.

Fail closed: without a usable bubblewrap, running code raises :class:`SandboxError` naming the fix;
``unsafe=True`` runs without the sandbox only when asked for explicitly.

The worker process is started, bounded and killed with :mod:`verigym.workers`
(:class:`~verigym.workers.ChildProcess`), the one process supervisor of verigym;
:mod:`verigym.sandbox.supervisor` adds bubblewrap, seccomp, the pipe protocol and pause/resume.

Verdicts are computed by the parent from type-checked primitive values (:meth:`PythonSandbox.call`)
or exit statuses, never from what the code printed.

Example::

    from verigym.sandbox import PythonSandbox
    with PythonSandbox() as box:
        box.run("x = 21")
        print(box.run("x * 2").output)      # "42\n"
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

__all__ = [
    "ExecResult",
    "Limits",
    "PythonSandbox",
    "SandboxError",
    "check_available",
    "doctor_probe",
    "run_code",
]

if TYPE_CHECKING:
    from verigym.probe import Probe
    from verigym.sandbox.supervisor import (
        ExecResult,
        Limits,
        PythonSandbox,
        SandboxError,
        check_available,
        run_code,
    )


def __getattr__(name: str) -> Any:
    if name in {
        "ExecResult",
        "Limits",
        "PythonSandbox",
        "SandboxError",
        "check_available",
        "run_code",
    }:
        from verigym.sandbox import supervisor

        return getattr(supervisor, name)
    raise AttributeError(f"module 'verigym.sandbox' has no attribute {name!r}")


def doctor_probe() -> Probe:
    """``verigym doctor``'s line for the code sandbox: which of its limits hold on this machine.

    Starts a sandbox, runs one cell and reports what was seen: the uid agent code runs as, the
    process and memory limits (cgroup or rlimit fallback), the seccomp filter, nested user
    namespaces, the read-only root, the size of the writable mounts, and whether the notebook is
    stopped between calls.
    """
    from verigym.probe import Probe
    from verigym.sandbox import cgroups, seccomp, supervisor
    from verigym.workers import process_state

    part = "code sandbox (bubblewrap)"
    binary, disable_userns = supervisor.bwrap_features()
    if binary is None:
        return Probe(
            part, False, "bwrap not found; code execution refuses to run", supervisor.INSTALL_HINT
        )
    cell = Path(__file__).with_name("_probe_cell.py").read_text(encoding="utf-8")
    try:
        with supervisor.PythonSandbox(supervisor.Limits(timeout_s=30.0)) as box:
            result = box.run(cell + "\nprint(probe_line())")
            stopped = process_state(box.notebook_pid) in ("T", "t")
    except supervisor.SandboxError as exc:
        return Probe(
            part,
            False,
            str(exc)[:300],
            "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1) or run where namespaces are permitted",
        )
    if not result.ok:
        return Probe(
            part,
            False,
            f"the sandbox started but failed: {result.text(300)}",
            supervisor.INSTALL_HINT,
        )
    uid, root_writable, dev_writable, tmp_mb, shm_mb = result.output.split()
    has_cgroup, cgroup_detail = cgroups.available()
    as_root = os.geteuid() == 0
    holds = [
        f"code runs as uid {uid}"
        + (" (host uid nobody)" if as_root else f" (host uid {os.geteuid()}: the caller's own)"),
        "own namespaces, no network",
        cgroup_detail
        if has_cgroup
        else "process limit RLIMIT_NPROC (no writable cgroup); memory limit RLIMIT_AS per process only",
        "seccomp filter on"
        if seccomp.program() is not None
        else "seccomp filter OFF (no table for this machine)",
        "nested user namespaces disabled"
        if disable_userns
        else "nested user namespaces NOT disabled (bwrap < 0.8)",
        "read-only root and /dev"
        if root_writable == dev_writable == "0"
        else "root or /dev WRITABLE",
        f"writable only /tmp ({tmp_mb} MiB) and /dev/shm ({shm_mb} MiB), new each episode",
        "notebook stopped and other processes killed between calls"
        if stopped
        else "the notebook is NOT stopped between calls",
    ]
    return Probe(part, True, f"{binary}; " + "; ".join(holds))
