"""Process supervision: the one place verigym starts, bounds, watches and kills child processes.

Everything that runs work in another process uses these pieces: the verifier workers
(:func:`verigym.verifiers.symbolic_equal`, the SQL and reasoning-gym envs), the sandbox
(:mod:`verigym.sandbox`), the evaluation pool (:mod:`verigym.leaderboards.runner`) and the
shared Chromium (:mod:`verigym.envs.gui.browser`).

* **Reading** ``/proc`` (Linux): :func:`descendants`, :func:`cpu_seconds`,
  :func:`process_state`, :func:`count_processes`, :func:`wait_stopped`. Where ``/proc`` is missing
  they answer "nothing" (``[]``, ``None``, ``0``) instead of raising.
* **Ending** processes: :func:`kill_tree` (SIGKILL every descendant), :func:`reap` (kill one child
  and wait for it, so no zombie is left), :func:`set_parent_death_signal` (a child that ends when its
  parent dies, even by SIGKILL).

This module imports only the standard library.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import time

__all__ = [
    "count_processes",
    "cpu_seconds",
    "descendants",
    "kill_tree",
    "process_state",
    "reap",
    "set_parent_death_signal",
    "wait_stopped",
]

logger = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# Reading /proc
# ---------------------------------------------------------------------------------------------

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_GONE = ("Z", "X")
"""State letters of a process that has exited (zombie, dead)."""


def _stat_fields(path: str, dir_fd: int | None = None) -> list[str] | None:
    """The fields of a ``stat`` file after the command name (state first), or None if unreadable."""
    try:
        with open(path, "rb", opener=lambda name, flags: os.open(name, flags, dir_fd=dir_fd)) as f:
            return f.read().rsplit(b")", 1)[1].decode("ascii").split()
    except (OSError, IndexError, UnicodeDecodeError):
        return None


def descendants(pid: int) -> list[int]:
    """Every living descendant of process ``pid``, read from ``/proc``.

    Args:
        pid: the process whose tree is listed (it is not itself in the list).

    Returns:
        The pids, each child before its own children; zombies are left out (a zombie has no
        children: they were reparented when it exited). ``[]`` where ``/proc`` is missing.
    """
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    children: dict[int, list[int]] = {}
    for entry in entries:
        if not entry.isdigit():
            continue
        fields = _stat_fields(f"/proc/{entry}/stat")
        if fields is not None and fields[0] not in _GONE:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), ()):
            found.append(child)
            stack.append(child)
    return found


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process ``pid`` (all its threads), in seconds.

    Returns:
        The seconds, or ``None`` where ``/proc`` is missing or the process is gone.
    """
    fields = _stat_fields(f"/proc/{pid}/stat")
    try:
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS if fields else None
    except (ValueError, IndexError):
        return None


def process_state(pid: int, *, task: int | None = None, proc_fd: int | None = None) -> str | None:
    """The state letter of a process (``"R"``, ``"S"``, ``"T"``, ``"Z"``, ...) from ``/proc``.

    Args:
        pid: the process.
        task: one thread of it (its tid), instead of the process as a whole.
        proc_fd: an open ``/proc`` directory to read from instead of this machine's ``/proc`` (a
            sandbox's own, where pids are those of its pid namespace).

    Returns:
        The letter, or ``None`` when the process is gone or ``/proc`` is unreadable.
    """
    path = f"{pid}/stat" if task is None else f"{pid}/task/{task}/stat"
    fields = _stat_fields(path if proc_fd is not None else f"/proc/{path}", proc_fd)
    return fields[0] if fields else None


def count_processes(uid: int) -> int:
    """How many processes of this machine belong to ``uid`` (0 where ``/proc`` is missing)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0
    count = 0
    for entry in entries:
        if entry.isdigit():
            try:
                count += os.stat(f"/proc/{entry}").st_uid == uid
            except OSError:
                pass
    return count


def wait_stopped(pid: int, timeout: float = 2.0) -> bool:
    """Wait until every thread of ``pid`` is stopped (SIGSTOP) or gone.

    Args:
        pid: the process, already sent ``SIGSTOP``.
        timeout: seconds to wait at most.

    Returns:
        False when a thread still ran after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return True
        states = (process_state(pid, task=int(tid)) for tid in tasks)
        if all(state in ("T", "t", *_GONE, None) for state in states):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.00005)  # a stop takes effect within microseconds once the process is scheduled


# ---------------------------------------------------------------------------------------------
# Ending processes
# ---------------------------------------------------------------------------------------------


def kill_tree(pid: int) -> None:
    """SIGKILL every descendant of ``pid``, children before grandchildren.

    The tree is collected first, so no process is reparented away in between; ``pid`` itself is
    left alone (its owner kills and reaps it). Processes already gone are skipped.
    """
    for child in descendants(pid):
        try:
            os.kill(child, signal.SIGKILL)
        except OSError:
            pass


def reap(process: subprocess.Popen, *, timeout: float = 5.0) -> int | None:
    """SIGKILL a child started with :mod:`subprocess` if it still runs, and wait for it.

    Args:
        process: the child.
        timeout: seconds to wait for it to exit after the kill.

    Returns:
        Its exit status (negative: the signal that ended it), or ``None`` when it did not exit in
        time (logged as a warning).
    """
    if process.poll() is None:
        try:
            process.kill()
        except OSError:  # pragma: no cover - exited in between
            pass
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:  # pragma: no cover - a killed process exits at once
        logger.warning("process %d did not exit after SIGKILL", process.pid)
        return None


_PR_SET_PDEATHSIG = 1


def set_parent_death_signal(sig: int = signal.SIGTERM) -> None:
    """Have the kernel send ``sig`` to this process when its parent dies (even by SIGKILL).

    Linux only (``prctl(PR_SET_PDEATHSIG)``); a no-op elsewhere. Call it in the child; a child
    forked from it does not inherit the setting, so each process that must die with its parent sets
    its own.
    A failure is logged as a warning (the process may then outlive its parent).

    Args:
        sig: the signal to receive (install a handler for it to end the process's own children).
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    except (OSError, AttributeError) as exc:
        logger.warning(
            "could not set the parent-death signal (%s); this process may outlive its parent", exc
        )
