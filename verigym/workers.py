"""Process supervision: the one place verigym starts, bounds, watches and kills child processes.

Everything that runs work in another process uses these pieces: the verifier workers
(:func:`verigym.verifiers.symbolic_equal`, the SQL and reasoning-gym envs), the sandbox
(:mod:`verigym.sandbox`), the evaluation pool (:mod:`verigym.leaderboards.backends`) and the
shared Chromium (:mod:`verigym.envs.gui.browser`).

* **Reading** ``/proc`` (Linux): :func:`descendants`, :func:`cpu_seconds`, :func:`memory_sizes`,
  :func:`process_state`, :func:`count_processes`, :func:`wait_stopped`. Where ``/proc`` is missing
  they answer "nothing" (``[]``, ``None``, ``0``) instead of raising.
* **Ending** processes: :func:`kill_tree` (SIGKILL every descendant), :func:`reap` (kill one child,
  optionally its whole tree first, and wait for it, so no zombie is left; a :mod:`subprocess`, a
  :mod:`multiprocessing` or a :class:`ChildProcess` child), :func:`set_parent_death_signal` (a child
  that ends when its parent dies, even by SIGKILL).
* **Starting** processes: :class:`ChildProcess` starts a program with :class:`ProcessLimits`
  (rlimits: CPU, address space, file size, open files, processes, no core dump), optionally in a
  new session, a cgroup, under another uid and with a parent-death signal; :meth:`ChildProcess.kill`
  ends its tree and reaps it, :meth:`ChildProcess.cpu_seconds` reads its CPU time. :class:`Deadline`
  is a call's time limit (wall clock, optionally a process's CPU time). Both the sandbox's worker
  (:mod:`verigym.sandbox.supervisor`: its bubblewrap command line, seccomp filter, pipe protocol
  and pause/resume stay there) and the spawned verifier workers below are ``ChildProcess`` es; it
  is the only place verigym calls :class:`subprocess.Popen` for a long-lived child.
* **Bounded calls** (:class:`BoundedWorker`, :func:`call_bounded`): a function runs in a long-lived
  worker process; a call that overruns its limit in CPU seconds (with a wall-clock backstop of
  :data:`WALL_CLOCK_FACTOR` times it) gets the worker's whole tree killed and a new worker started.
  The limit covers the call, not the start: a new worker first answers an empty call, untimed (at
  most :data:`WORKER_START_SECONDS`). Each call may grow the worker's address space by a set number
  of bytes (``RLIMIT_AS``, renewed per call; :data:`MEMORY_CAP_BYTES` for :func:`call_bounded`). The
  limit is enforced by killing the process, never by signals, so it holds off the main thread too.
  :func:`verifier_cpu_seconds` adds up what these workers used (:mod:`verigym.verifier_bounds`
  measures verifiers in that unit).

This module imports only the standard library.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import multiprocessing
import os
import signal
import stat
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from multiprocessing.connection import Connection
from typing import Any

try:
    import resource
except ImportError:  # pragma: no cover - not Unix
    resource = None  # type: ignore[assignment]

__all__ = [
    "MEMORY_CAP_BYTES",
    "COMPUTING_CPU_SHARE",
    "MAX_WALL_CLOCK_FACTOR",
    "WALL_CLOCK_FACTOR",
    "WORKER_START_SECONDS",
    "BoundedWorker",
    "ChildProcess",
    "Deadline",
    "ProcessLimits",
    "VerifierTimeout",
    "call_bounded",
    "count_processes",
    "cpu_seconds",
    "descendants",
    "kill_tree",
    "memory_sizes",
    "ProcessInfo",
    "process_command",
    "process_executable",
    "process_info",
    "process_state",
    "reap",
    "set_parent_death_signal",
    "verifier_cpu_seconds",
    "wait_stopped",
]

logger = logging.getLogger(__name__)


class VerifierTimeout(TimeoutError):
    """A bounded call (:func:`call_bounded`, :meth:`BoundedWorker.call`) did not finish within its
    time limit, or its worker process died."""


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


@dataclass(frozen=True)
class ProcessInfo:
    """What ``/proc/<pid>/stat`` says of a process (see :func:`process_info`)."""

    state: str
    """state letter: ``"R"``, ``"S"``, ``"T"``, ``"Z"`` (exited, not reaped), ..."""
    parent: int
    """parent pid"""
    start_ticks: int
    """start time after boot, in clock ticks: with the pid, it tells a process from a later one
    that reuses its pid"""


def process_info(pid: int) -> ProcessInfo | None:
    """State, parent and start time of process ``pid``; ``None`` when it is gone or ``/proc`` is
    unreadable."""
    fields = _stat_fields(f"/proc/{pid}/stat")
    try:
        return ProcessInfo(fields[0], int(fields[1]), int(fields[19])) if fields else None
    except (ValueError, IndexError):
        return None


def process_command(pid: int) -> bytes | None:
    """The command line of process ``pid`` (arguments separated by NUL bytes), ``None`` when gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read()
    except OSError:
        return None


def process_executable(pid: int) -> str | None:
    """The resolved path of the program process ``pid`` runs, ``None`` when gone or unreadable."""
    try:
        return os.path.realpath(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
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


def memory_sizes(*fields: str) -> tuple[int, ...]:
    """Memory sizes of this process from ``/proc/self/status``, in bytes.

    Args:
        *fields: the sizes to read: ``"VmSize"`` (virtual memory), ``"VmRSS"`` (resident set),
            ``"VmHWM"`` (peak resident set), ...

    Returns:
        One size per field, in order; 0 for a field that is missing, all 0 without ``/proc``.
    """
    found = dict.fromkeys(fields, 0)
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                name, _, value = line.partition(":")
                if name in found:
                    found[name] = int(value.split()[0]) * 1024
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        pass
    return tuple(found[field] for field in fields)


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


def reap(process: Any, *, timeout: float = 5.0, tree: bool = False) -> int | None:
    """SIGKILL a child if it still runs (with ``tree``, its descendants first) and wait for it.

    Args:
        process: the child: a :class:`subprocess.Popen`, a :class:`multiprocessing.Process` or a
            :class:`ChildProcess`. One never started is left alone.
        timeout: seconds to wait for it to exit after the kill.
        tree: SIGKILL every descendant first (:func:`kill_tree`): what it started, which would
            otherwise be reparented and live on.

    Returns:
        Its exit status (negative: the signal that ended it), or ``None`` when it did not exit in
        time (logged as a warning) or was never started.
    """
    if isinstance(process, ChildProcess):
        process = process.popen
    pid = process.pid
    if pid is None:
        return None
    if isinstance(process, subprocess.Popen):
        if tree and process.returncode is None:  # not reaped yet: the pid is still this child's
            kill_tree(pid)
        if process.poll() is None:
            try:
                process.kill()
            except OSError:  # pragma: no cover - exited in between
                pass
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:  # pragma: no cover - a killed process exits at once
            logger.warning("process %d did not exit after SIGKILL", pid)
            return None
    if tree:  # multiprocessing.Process
        kill_tree(pid)
    process.kill()  # a no-op once it exited
    process.join(timeout)
    if process.exitcode is None:  # pragma: no cover - a killed process exits at once
        logger.warning("process %d did not exit after SIGKILL", pid)
    return process.exitcode


_PR_SET_PDEATHSIG = 1


@functools.lru_cache(maxsize=1)
def _libc() -> Any:
    """This process's C library (loaded once, in the parent: a child between ``fork`` and ``exec``
    must not load libraries)."""
    return ctypes.CDLL(None, use_errno=True)


def _arm_parent_death_signal(sig: int) -> None:
    """``prctl(PR_SET_PDEATHSIG, sig)``; raises ``OSError`` (or ``AttributeError``: no prctl)."""
    if _libc().prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


def set_parent_death_signal(sig: int = signal.SIGTERM) -> None:
    """Have the kernel send ``sig`` to this process when its parent dies (even by SIGKILL).

    Linux only (``prctl(PR_SET_PDEATHSIG)``); a no-op elsewhere. Call it in the child; a child
    forked from it does not inherit the setting, so each process that must die with its parent sets
    its own (:class:`ChildProcess` sets it between ``fork`` and ``exec`` with
    ``parent_death_signal``). A change of uid or gid clears it. A failure is logged as a warning
    (the process may then outlive its parent).

    Args:
        sig: the signal to receive (install a handler for it to end the process's own children).
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        _arm_parent_death_signal(sig)
    except (OSError, AttributeError) as exc:
        logger.warning(
            "could not set the parent-death signal (%s); this process may outlive its parent", exc
        )


# ---------------------------------------------------------------------------------------------
# Starting processes: a child with limits, a deadline
# ---------------------------------------------------------------------------------------------


def _set_rlimit(kind: int, value: int) -> None:
    """Set soft and hard limit ``kind`` to ``value``, never above the current hard limit."""
    _, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value))


@dataclass(frozen=True)
class ProcessLimits:
    """Resource limits a :class:`ChildProcess` gets between ``fork`` and ``exec``.

    Each is a ``setrlimit`` with soft = hard (the child cannot raise it again), never above this
    process's own hard limit; ``None`` leaves that limit as the child inherits it. The limits hold
    per process (each process the child starts inherits them), except ``processes``.

    Attributes:
        cpu_seconds: CPU seconds over the process's life (``RLIMIT_CPU``: ``SIGXCPU``, then
            ``SIGKILL``).
        memory_bytes: address space, bytes (``RLIMIT_AS``).
        file_size_bytes: largest file it may write, bytes (``RLIMIT_FSIZE``: ``SIGXFSZ``).
        open_files: open file descriptors (``RLIMIT_NOFILE``).
        processes: processes and threads of its (real) uid on this machine, the caller's included
            (``RLIMIT_NPROC``).
        core_dumps: False sets ``RLIMIT_CORE`` to 0 (no core file when it crashes).

    Raises:
        ValueError: a limit is not ``None`` or an int >= 0.
    """

    cpu_seconds: int | None = None
    memory_bytes: int | None = None
    file_size_bytes: int | None = None
    open_files: int | None = None
    processes: int | None = None
    core_dumps: bool = True

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name == "core_dumps":
                if not isinstance(value, bool):
                    raise ValueError(f"ProcessLimits.core_dumps must be a bool, got {value!r}")
            elif value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise ValueError(
                    f"ProcessLimits.{item.name} must be None or an int >= 0, got {value!r}"
                )

    def apply(self) -> None:
        """Set the limits on the calling process (a child calls it before ``exec``).

        Raises:
            OSError: a limit cannot be set (``setrlimit`` failed).
        """
        if resource is None:  # pragma: no cover - not Unix
            return
        for kind, value in (
            (resource.RLIMIT_CPU, self.cpu_seconds),
            (resource.RLIMIT_AS, self.memory_bytes),
            (resource.RLIMIT_FSIZE, self.file_size_bytes),
            (resource.RLIMIT_NOFILE, self.open_files),
            (resource.RLIMIT_NPROC, self.processes),
            (resource.RLIMIT_CORE, None if self.core_dumps else 0),
        ):
            if value is not None:
                _set_rlimit(kind, value)


def _setup_child(
    cgroup: Any,
    limits: ProcessLimits | None,
    before_exec: Callable[[], None] | None,
    user: int | None,
    death_signal: int | None,
    parent_pid: int,
) -> None:
    """What a :class:`ChildProcess` does between ``fork`` and ``exec``, in this order: join the
    cgroup (while still privileged), set the rlimits, the caller's extra setup, drop to ``user``,
    arm the parent-death signal (after the drop, which would clear it)."""
    if cgroup is not None:
        cgroup.join()
    if limits is not None:
        limits.apply()
    if before_exec is not None:
        before_exec()
    if user is not None:
        os.setgroups([])
        os.setresgid(user, user, user)
        os.setresuid(user, user, user)
    if death_signal is not None:
        _arm_parent_death_signal(death_signal)
        if os.getppid() != parent_pid:  # the parent died before the signal was armed
            os.kill(os.getpid(), death_signal)


class ChildProcess:
    """One child process (a program, ``exec``'d), started with limits and owned by this object.

    The only process starter of verigym's long-lived children: the sandbox's ``bwrap`` worker
    (:mod:`verigym.sandbox.supervisor`) and the spawned verifier workers (:class:`BoundedWorker`).
    Its standard input is ``/dev/null``. The object owns the process: :meth:`kill` ends it (and its
    tree) and reaps it; one dropped or left at interpreter exit is killed and reaped then, by the
    process that started it only (never by a forked copy).

    Args:
        command: the program and its arguments (``argv``; a bare name is looked up on ``PATH``).
        limits: rlimits set in the child before ``exec`` (:class:`ProcessLimits`); None: inherited.
        env: the child's whole environment (``{}``: empty); None: this process's.
        cwd: its working directory; None: this process's.
        pass_fds: descriptors it inherits at the same numbers. They are handed over: closed here
            once the child started, or failed to start.
        stdout, stderr: as for :class:`subprocess.Popen` (None: inherited); a descriptor (an int
            >= 0) is handed over like ``pass_fds``.
        new_session: start it in a new session (``setsid``): no controlling terminal, its own
            process group.
        user: uid (also used as gid) it drops to, with no supplementary groups (needs root).
        cgroup: an object whose ``join()`` moves the calling process into a cgroup
            (:class:`verigym.sandbox.cgroups.CgroupSet`); joined first, while still privileged.
        parent_death_signal: the signal the kernel sends the child when the *thread* that started
            it ends (:func:`set_parent_death_signal`; Linux), so start it from a thread that lives
            as long as the child should.
        before_exec: more setup in the child, after the rlimits and before the uid drop. It runs
            between ``fork`` and ``exec`` of a possibly threaded process: no locks, no imports.

    Raises:
        OSError: the program could not be started.
        subprocess.SubprocessError: the setup in the child failed (a limit, the uid drop).

    Attributes:
        pid: the child's pid on this machine.
        popen: the :class:`subprocess.Popen` behind it.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        limits: ProcessLimits | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        pass_fds: Sequence[int] = (),
        stdout: int | None = None,
        stderr: int | None = None,
        new_session: bool = False,
        user: int | None = None,
        cgroup: Any = None,
        parent_death_signal: int | None = None,
        before_exec: Callable[[], None] | None = None,
    ) -> None:
        handed = {fd for fd in (*pass_fds, stdout, stderr) if isinstance(fd, int) and fd >= 0}
        setup = None
        if any(x is not None for x in (cgroup, limits, before_exec, user, parent_death_signal)):
            if parent_death_signal is not None and not sys.platform.startswith("linux"):
                parent_death_signal = None  # pragma: no cover - not Linux
            if parent_death_signal is not None:
                _libc()  # loaded here, not in the child
            setup = functools.partial(
                _setup_child, cgroup, limits, before_exec, user, parent_death_signal, os.getpid()
            )
        try:
            self.popen = subprocess.Popen(
                list(command),
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                pass_fds=tuple(pass_fds),
                env=env,
                cwd=cwd,
                start_new_session=new_session,
                preexec_fn=setup,
            )
        finally:
            for fd in handed:
                try:
                    os.close(fd)
                except OSError:  # pragma: no cover - closed by the caller already
                    pass
        self.pid: int = self.popen.pid
        # a child still running at interpreter exit (a module-level BoundedWorker) is stopped and
        # reaped then, not left running ("ResourceWarning: subprocess ... is still running")
        weakref.finalize(self, _reap_owned, self.popen, os.getpid())

    @property
    def alive(self) -> bool:
        """Whether the child still runs (it is reaped once it has exited)."""
        return self.popen.poll() is None

    def poll(self) -> int | None:
        """Its exit status (negative: the signal that ended it), or None while it runs."""
        return self.popen.poll()

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait up to ``timeout`` seconds (None: no limit) for it to exit.

        Returns:
            Its exit status, or None when it still ran at the timeout.
        """
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def cpu_seconds(self) -> float | None:
        """User + system CPU seconds the child itself has used (not its children), from ``/proc``;
        None once it has exited or without ``/proc``."""
        return cpu_seconds(self.pid)

    def signal_kill(self) -> None:
        """SIGKILL the child now without waiting (safe from another thread); :meth:`kill` reaps."""
        if self.popen.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:  # pragma: no cover - exited in between
                pass

    def kill(self, timeout: float = 5.0, *, tree: bool = True) -> int | None:
        """SIGKILL the child (with ``tree``, every descendant first) and reap it (idempotent).

        Returns:
            Its exit status, or None when it did not exit within ``timeout`` seconds.
        """
        return reap(self.popen, timeout=timeout, tree=tree)


def _reap_owned(popen: subprocess.Popen, owner: int) -> None:
    """:func:`reap` a child (no zombie, no ResourceWarning), only in the process that started it
    (``owner`` pid), never in a forked copy of it."""
    if os.getpid() == owner:
        reap(popen)


class Deadline:
    """A time limit that starts now: wall-clock seconds and, optionally, a process's CPU seconds.

    A CPU limit measures the work of the process itself, not the time other processes take the
    CPU from it (a loaded machine); the wall-clock limit is then its backstop for a process that
    blocks without computing.

    Args:
        wall_s: wall-clock seconds from now.
        cpu_s: CPU seconds (user + system) process ``pid`` may use from now; None: wall clock only.
            Not measured where ``/proc`` is missing (:attr:`measures_cpu` is then False).
        pid: the process whose CPU time counts (with ``cpu_s``).
    """

    def __init__(self, wall_s: float, *, cpu_s: float | None = None, pid: int | None = None):
        self.started = time.monotonic()
        self.ends = self.started + wall_s
        self.cpu_s, self.pid = cpu_s, pid
        self._cpu_start = cpu_seconds(pid) if cpu_s is not None and pid is not None else None

    @property
    def measures_cpu(self) -> bool:
        """Whether the CPU limit is measured (it was given, and the process's CPU time read)."""
        return self._cpu_start is not None

    def elapsed(self) -> float:
        """Wall-clock seconds since the start."""
        return time.monotonic() - self.started

    def remaining(self) -> float:
        """Wall-clock seconds left (0 once passed)."""
        return max(0.0, self.ends - time.monotonic())

    def cpu_used(self) -> float | None:
        """CPU seconds process ``pid`` used since the start; None where that is not measured or
        the process is gone."""
        if self._cpu_start is None or self.pid is None:
            return None
        used = cpu_seconds(self.pid)
        return None if used is None else used - self._cpu_start

    def passed(self) -> bool:
        """Whether the wall-clock limit is reached, or the process used its CPU seconds (or is
        gone)."""
        if time.monotonic() >= self.ends:
            return True
        if self._cpu_start is None or self.cpu_s is None:
            return False
        used = self.cpu_used()
        return used is None or used > self.cpu_s


# ---------------------------------------------------------------------------------------------
# A bounded worker: calls in a process that is killed at a CPU-time limit
# ---------------------------------------------------------------------------------------------


MEMORY_CAP_BYTES = 512 << 20
"""Address space one call in a verifier worker may add to the worker's size (``RLIMIT_AS``, renewed
before each call)."""


def _cap_memory(extra_bytes: int | None) -> None:
    """Cap this process's address space at its current size plus ``extra_bytes`` (no-op for None).

    Allocations beyond the cap fail (``MemoryError`` in Python, ``SQLITE_NOMEM`` in SQLite), so a
    check that tries to build a huge value fails fast instead of swapping the machine.
    """
    if extra_bytes is None:
        return
    import resource

    (current,) = memory_sizes("VmSize")
    if not current:  # pragma: no cover - not Linux
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = current + extra_bytes
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


OWNER_CHECK_SECONDS = 1.0
"""How often an idle verifier worker checks that the process that started it still runs."""


def _release_inherited_sockets(keep: int) -> None:
    """In a forked worker: point every inherited socket but ``keep`` at ``/dev/null``.

    A forked child holds copies of every descriptor of its parent: the parent's end of the
    worker's own connection (a socket pair), a server's client and listening sockets. While it
    holds them, the peer of a connection the parent closes never sees it closed and a port stays
    bound. The numbers stay taken (``dup2``), so the parent's objects still in this process close a
    ``/dev/null`` copy, never a descriptor opened here later. Pipes are left: multiprocessing
    watches the worker's end of one to see it exit."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:  # pragma: no cover - not Linux
        return
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for name in names:
            fd = int(name)
            if fd in (keep, null):
                continue
            try:
                mode = os.fstat(fd).st_mode
            except OSError:  # the listing's own descriptor, already closed
                continue
            if stat.S_ISSOCK(mode):
                os.dup2(null, fd, inheritable=False)
    finally:
        os.close(null)


def _forked_main(connection: Connection, owner: int, memory_bytes: int | None = None) -> None:
    """Entry of a forked worker: let go of the inherited sockets, then serve calls."""
    _release_inherited_sockets(connection.fileno())
    _worker_loop(connection, owner, memory_bytes)


def _worker_loop(connection: Any, owner: int, memory_bytes: int | None = None) -> None:
    """Serve ``(function, args)`` calls until the connection closes or ``owner`` (the pid of the
    process that started this worker) is gone: a worker whose owner was killed (SIGKILL runs no
    cleanup) ends within :data:`OWNER_CHECK_SECONDS` instead of waiting for a call forever."""
    while True:
        try:
            while not connection.poll(OWNER_CHECK_SECONDS):
                if os.getppid() != owner:
                    return
            function, args = connection.recv()
        except (EOFError, OSError):
            return
        try:
            # the cap is renewed per call over the worker's size at that moment: a long-lived
            # worker grows (imports, caches) and must not run into a cap set at its start
            _cap_memory(memory_bytes)
            connection.send(("ok", function(*args)))
        except MemoryError:  # the cap was hit; what was allocated is freed with the frame
            connection.send(
                ("error", f"MemoryError: the check needed more than {memory_bytes or 0:d} bytes")
            )
        except Exception as exc:  # the caller sees the failure as a value
            connection.send(("error", f"{type(exc).__name__}: {exc}"[:500]))


class _Duplex:
    """Two one-way connections used as one (the spawned worker talks over two pipes)."""

    def __init__(self, incoming: Connection, outgoing: Connection) -> None:
        self.incoming, self.outgoing = incoming, outgoing

    def send(self, value: Any) -> None:
        self.outgoing.send(value)

    def recv(self) -> Any:
        return self.incoming.recv()

    def poll(self, timeout: float) -> bool:
        return self.incoming.poll(timeout)

    def close(self) -> None:
        self.incoming.close()
        self.outgoing.close()


def _spawned_main(read_fd: int, write_fd: int, owner: int, memory_bytes: int | None = None) -> None:
    """Entry of a spawned worker (``python -c``): serve calls over the two inherited pipes."""
    _worker_loop(
        _Duplex(Connection(read_fd, writable=False), Connection(write_fd, readable=False)),
        owner,
        memory_bytes,
    )


def _spawn_worker(
    environment: dict[str, str], memory_bytes: int | None = None
) -> tuple[ChildProcess, _Duplex]:
    """A worker in a new interpreter (a :class:`ChildProcess`; no ``__main__`` re-import, unlike
    multiprocessing's spawn), so it can get its own environment variables; and its connection."""
    to_child_read, to_child_write = os.pipe()
    from_child_read, from_child_write = os.pipe()
    entry = f"_spawned_main({to_child_read}, {from_child_write}, {os.getpid()}, {memory_bytes!r})"
    command = [sys.executable, "-c", f"from verigym.workers import _spawned_main; {entry}"]
    try:
        child = ChildProcess(
            command,
            env={**os.environ, **environment},
            pass_fds=(to_child_read, from_child_write),
            stdout=subprocess.DEVNULL,
        )
    except BaseException:
        os.close(to_child_write)
        os.close(from_child_read)
        raise
    connection = _Duplex(
        Connection(from_child_read, writable=False), Connection(to_child_write, readable=False)
    )
    return child, connection


WORKER_START_SECONDS = 120.0
"""How long a new verifier worker may take to start and answer its first (empty) call; its start
is trusted work and never counts against a check's time limit."""


WALL_CLOCK_FACTOR = 4.0
"""A check is stopped at ``timeout`` seconds of the worker's CPU time, or at this many times
``timeout`` of wall-clock time in which it did not compute (a check that blocks): see
:data:`COMPUTING_CPU_SHARE`."""

COMPUTING_CPU_SHARE = 0.01
"""A worker that used at least this share of a wall-clock backstop window (:data:`WALL_CLOCK_FACTOR`
times the limit) in CPU time was computing, only slowly (other processes had the CPU): its backstop
moves on by another window, up to :data:`MAX_WALL_CLOCK_FACTOR`. A check that blocks uses none.
Without it the verdict of a check that needs a good part of its CPU limit depended on the machine's
load: at load 20 on 2 cores a worker gets ~10% of a core, 0.4 CPU-s in a 1-s limit's 4-s backstop."""

MAX_WALL_CLOCK_FACTOR = 40.0
"""The most wall-clock time (this many times the limit) a computing check may take on a loaded
machine before it is stopped anyway."""


def _ready() -> bool:
    """The empty call a new worker answers before its first timed call."""
    return True


_HAS_PROC = os.path.exists("/proc/self/stat")
"""Whether workers' CPU times can be read (Linux ``/proc``)."""
_WORKERS: weakref.WeakSet[BoundedWorker] = weakref.WeakSet()
"""Every :class:`BoundedWorker` of this process (for :func:`verifier_cpu_seconds`)."""
_retired = {"cpu_seconds": 0.0}
"""CPU seconds of the worker processes that were stopped (at a limit, or by ``close``)."""


def verifier_cpu_seconds() -> float | None:
    """CPU seconds (user + system) the verifier worker processes of this process have used so far,
    those stopped and replaced included; ``None`` where ``/proc`` is missing.

    :mod:`verigym.verifier_bounds` adds it to this process's own CPU time to measure a verifier in
    the unit of the workers' limits. Only :class:`BoundedWorker` processes count, not other children
    (a test runner's, a trainer's), which may be busy at the same time.
    """
    if not _HAS_PROC:
        return None
    total = _retired["cpu_seconds"]
    for worker in list(_WORKERS):
        pid = worker._pid() if worker._process is not None else None
        used = cpu_seconds(pid) if pid is not None else None
        total += used or 0.0
    return total


class BoundedWorker:
    """One worker process; a call that overruns its time limit kills and replaces it.

    The time limit of a check is the worker's CPU time (with a wall-clock backstop of
    :data:`WALL_CLOCK_FACTOR` times the limit; wall-clock alone where ``/proc`` is missing), and a
    new worker first answers an empty call (within :data:`WORKER_START_SECONDS`): the limit covers
    the check alone, not forking or starting an interpreter, and not the time other processes
    take the CPU. On a loaded machine a wall-clock limit stopped checks that finish in a few
    milliseconds of CPU, so the same reply got another observation (the verdict depended on load).

    Args:
        start_method: ``"fork"`` (fast, shares the parent's imports; the default where available)
            or ``"spawn"`` (a new interpreter started with :mod:`subprocess`).
        environment: environment variables of a spawned worker (``{"PYTHONHASHSEED": "0"}``
            makes hash-order-dependent code give the same result in every process).
        memory_bytes: address space (bytes) one call may add to the worker's size when it starts
            (``RLIMIT_AS``, renewed per call); ``None`` for no cap. A call that hits the cap raises
            ``RuntimeError`` (``MemoryError: ...``) and the worker is replaced.
    """

    def __init__(
        self,
        *,
        start_method: str | None = None,
        environment: dict[str, str] | None = None,
        memory_bytes: int | None = None,
    ) -> None:
        if memory_bytes is not None and (not isinstance(memory_bytes, int) or memory_bytes <= 0):
            raise ValueError(f"memory_bytes must be None or a positive int, got {memory_bytes!r}")
        if start_method is None:
            start_method = (
                "fork"
                if "fork" in multiprocessing.get_all_start_methods() and not environment
                else "spawn"
            )
        if start_method not in ("fork", "spawn"):
            raise ValueError(f"start_method must be 'fork' or 'spawn', got {start_method!r}")
        if environment and start_method != "spawn":
            raise ValueError("environment needs start_method='spawn'")
        self.start_method = start_method
        self.environment = dict(environment or {})
        self.memory_bytes = memory_bytes
        self._lock = threading.Lock()
        self._process: Any = None
        self._connection: Any = None
        _WORKERS.add(self)

    def __getstate__(self) -> dict[str, Any]:
        return {
            "start_method": self.start_method,
            "environment": self.environment,
            "memory_bytes": self.memory_bytes,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def _start(self) -> None:
        if self.start_method == "spawn":
            self._process, self._connection = _spawn_worker(self.environment, self.memory_bytes)
            return
        context = multiprocessing.get_context("fork")
        parent, child = context.Pipe()
        process = context.Process(
            target=_forked_main,
            args=(child, os.getpid(), self.memory_bytes),
            daemon=True,
            name="verigym-verifier",
        )
        process.start()
        child.close()
        self._process, self._connection = process, parent

    @property
    def running(self) -> bool:
        """Whether the worker process is running now (calls start it when it is not)."""
        process = self._process
        if process is None:
            return False
        return process.alive if isinstance(process, ChildProcess) else process.is_alive()

    def _kill(self) -> None:
        if self._process is not None:
            pid = self._pid()
            used = cpu_seconds(pid) if pid is not None else None
            # read just before the kill: it stops computing
            _retired["cpu_seconds"] += used or 0.0
            reap(self._process, timeout=5, tree=True)  # what the check started, then the worker
            self._connection.close()
        self._process = self._connection = None

    def _wait_ready(self) -> None:
        """Have the new worker answer :func:`_ready` (untimed by the caller's limit).

        Raises:
            VerifierTimeout: it did not answer within :data:`WORKER_START_SECONDS` or died.
        """
        try:
            self._connection.send((_ready, ()))
            if self._connection.poll(WORKER_START_SECONDS):
                status, _ = self._connection.recv()
                if status == "ok":
                    return
        except (OSError, EOFError, BrokenPipeError):
            pass
        self._kill()
        raise VerifierTimeout(
            f"the verifier worker did not start within {WORKER_START_SECONDS:g} s"
        )

    def _pid(self) -> int | None:
        return getattr(self._process, "pid", None)

    def _wait_answer(self, timeout: float) -> bool:
        """Whether the worker answered within ``timeout`` CPU seconds and the wall-clock backstop:
        :data:`WALL_CLOCK_FACTOR` times ``timeout``, moved on by that much again while the worker
        computes (:data:`COMPUTING_CPU_SHARE`), to at most :data:`MAX_WALL_CLOCK_FACTOR` times."""
        window = WALL_CLOCK_FACTOR * timeout
        deadline = Deadline(window, cpu_s=timeout, pid=self._pid())
        if not deadline.measures_cpu:  # no /proc: wall clock only
            return self._connection.poll(timeout)
        cap = time.monotonic() + MAX_WALL_CLOCK_FACTOR * timeout
        used_before = 0.0  # CPU seconds at the start of this backstop window
        while True:
            if self._connection.poll(min(0.05, deadline.remaining())):
                return True
            if not deadline.passed():
                continue
            used = deadline.cpu_used()
            if (
                used is None  # the worker is gone
                or used > timeout
                or used - used_before < COMPUTING_CPU_SHARE * window  # blocked, not computing
                or time.monotonic() >= cap
            ):
                return self._connection.poll(0)
            # a loaded machine, not a blocked check: the backstop moves on by one window
            deadline.ends = min(time.monotonic() + window, cap)
            used_before = used

    def call(self, function: Callable[..., Any], args: tuple, timeout: float) -> Any:
        """``function(*args)`` in the worker (see :func:`call_bounded`)."""
        with self._lock:
            if not self.running:
                self._kill()
                self._start()
                self._wait_ready()
            try:
                self._connection.send((function, args))
                ready = self._wait_answer(timeout)
            except (OSError, EOFError, BrokenPipeError) as exc:
                self._kill()
                raise VerifierTimeout(f"the verifier worker died: {exc}") from None
            if not ready:
                self._kill()
                raise VerifierTimeout(f"the check did not finish within {timeout:g} s of CPU time")
            try:
                status, value = self._connection.recv()
            except (OSError, EOFError) as exc:
                self._kill()
                raise VerifierTimeout(f"the verifier worker died: {exc}") from None
        if status != "ok":
            raise RuntimeError(value)
        return value


_WORKER = BoundedWorker(memory_bytes=MEMORY_CAP_BYTES)


def call_bounded(function: Callable[..., Any], *args: Any, timeout: float = 2.0) -> Any:
    """Run ``function(*args)`` in the verifier worker process and return its result.

    Works from any thread: the time limit is enforced by killing the worker process, never by
    signals; the worker's address space may grow by at most :data:`MEMORY_CAP_BYTES`.
    ``function`` and ``args`` must pickle (a module-level function). Calls are serialized.

    Args:
        function: a module-level callable.
        *args: its arguments.
        timeout: CPU seconds of the worker before it is killed (and at most
            :data:`WALL_CLOCK_FACTOR` times that of wall-clock time).

    Raises:
        VerifierTimeout: the call overran ``timeout`` or the worker died.
        RuntimeError: ``function`` raised (or hit the memory cap); the message names the exception.
    """
    if timeout <= 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
    return _WORKER.call(function, args, timeout)
