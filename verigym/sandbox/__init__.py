"""``verigym.sandbox``: run agent-written Python escape-proof (DESIGN.md section 6).

Agent code never runs in the library's process or with its rights. :class:`PythonSandbox` starts
``python -I -S`` with an empty environment inside bubblewrap (all namespaces unshared, no network,
no nested user namespaces, a new session, killed with its parent) as an unprivileged uid, with a seccomp deny-list,
rlimits (CPU, address space, file size, open files, no core dump), a process limit that holds even
for root (a cgroup ``pids.max`` where the cgroup filesystem is writable, ``RLIMIT_NPROC`` under the
unprivileged uid), a memory limit, a cap on printed bytes and a wall-clock deadline after which the
whole process tree is killed. The worker persists between calls of an episode (a notebook).

Fail closed: without a usable bubblewrap, running code raises :class:`SandboxError` naming the fix;
``unsafe=True`` runs without the sandbox only when asked for explicitly.

Verdicts are computed by the parent from type-checked primitive values (:meth:`PythonSandbox.call`)
or exit statuses, never from what the code printed.

Example::

    from verigym.sandbox import PythonSandbox
    with PythonSandbox() as box:
        box.run("x = 21")
        print(box.run("x * 2").output)      # "42\n"
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["ExecResult", "Limits", "PythonSandbox", "SandboxError", "check_available", "doctor_probe", "run_code"]

if TYPE_CHECKING:
    from verigym.doctor import Probe
    from verigym.sandbox.supervisor import (
        ExecResult,
        Limits,
        PythonSandbox,
        SandboxError,
        check_available,
        run_code,
    )


def __getattr__(name: str) -> Any:
    if name in {"ExecResult", "Limits", "PythonSandbox", "SandboxError", "check_available", "run_code"}:
        from verigym.sandbox import supervisor

        return getattr(supervisor, name)
    raise AttributeError(f"module 'verigym.sandbox' has no attribute {name!r}")


def doctor_probe() -> Probe:
    """``verigym doctor``'s line for the code sandbox: bubblewrap, namespaces, uid, cgroup limits."""
    from verigym.doctor import Probe
    from verigym.sandbox import cgroups, seccomp, supervisor

    part = "code sandbox (bubblewrap)"
    binary, disable_userns = supervisor._bwrap_features()
    if binary is None:
        return Probe(part, False, "bwrap not found; code execution refuses to run", supervisor.INSTALL_HINT)
    try:
        with supervisor.PythonSandbox(supervisor.Limits(timeout_s=30.0)) as box:
            result = box.run("import os; print(os.getuid(), len(os.listdir('/')))")
    except supervisor.SandboxError as exc:
        return Probe(part, False, str(exc)[:300], "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1) or run where namespaces are permitted")
    if not result.ok:
        return Probe(part, False, f"the sandbox started but failed: {result.text(300)}", supervisor.INSTALL_HINT)
    has_cgroup, cgroup_detail = cgroups.available()
    detail = (
        f"{binary}; code runs as uid {result.output.split()[0]} in its own namespaces; "
        f"{cgroup_detail}; nested user namespaces {'disabled' if disable_userns else 'NOT disabled (bwrap < 0.8)'}; "
        f"seccomp filter {'on' if seccomp.program() is not None else 'off (no table for this machine)'}"
    )
    return Probe(part, True, detail)
