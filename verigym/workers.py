"""Process supervision: the one place verigym starts, bounds, watches and kills child processes.

Everything that runs work in another process uses these pieces: the verifier workers
(:func:`verigym.verifiers.symbolic_equal`, the SQL and reasoning-gym envs), the sandbox
(:mod:`verigym.sandbox`), the evaluation pool (:mod:`verigym.leaderboards.runner`) and the
shared Chromium (:mod:`verigym.envs.gui.browser`).

* **Reading** ``/proc`` (Linux): :func:`descendants`, :func:`cpu_seconds`, :func:`memory_sizes`,
  :func:`process_state`, :func:`count_processes`, :func:`wait_stopped`. Where ``/proc`` is missing
  they answer "nothing" (``[]``, ``None``, ``0``) instead of raising.
* **Ending** processes: :func:`kill_tree` (SIGKILL every descendant), :func:`reap` (kill one child
  and wait for it, so no zombie is left), :func:`set_parent_death_signal` (a child that ends when
  its parent dies, even by SIGKILL).
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
import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

__all__ = [
    "MEMORY_CAP_BYTES",
    "WALL_CLOCK_FACTOR",
    "WORKER_START_SECONDS",
    "BoundedWorker",
    "VerifierTimeout",
    "call_bounded",
    "count_processes",
    "cpu_seconds",
    "descendants",
    "kill_tree",
    "memory_sizes",
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
    its own. A failure is logged as a warning (the process may then outlive its parent).

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


def _worker_loop(connection: Any, memory_bytes: int | None = None) -> None:
    while True:
        try:
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


def _spawned_main(read_fd: int, write_fd: int, memory_bytes: int | None = None) -> None:
    """Entry of a spawned worker (``python -c``): serve calls over the two inherited pipes."""
    _worker_loop(
        _Duplex(Connection(read_fd, writable=False), Connection(write_fd, readable=False)),
        memory_bytes,
    )


class _SpawnedProcess:
    """A worker in a new interpreter started with :mod:`subprocess` (no ``__main__`` re-import,
    unlike multiprocessing's spawn), so it can get its own environment variables."""

    def __init__(self, environment: dict[str, str], memory_bytes: int | None = None) -> None:
        to_child_read, to_child_write = os.pipe()
        from_child_read, from_child_write = os.pipe()
        entry = f"_spawned_main({to_child_read}, {from_child_write}, {memory_bytes!r})"
        command = [sys.executable, "-c", f"from verigym.workers import _spawned_main; {entry}"]
        self.popen = subprocess.Popen(
            command,
            env={**os.environ, **environment},
            pass_fds=(to_child_read, from_child_write),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        os.close(to_child_read)
        os.close(from_child_write)
        self.connection = _Duplex(
            Connection(from_child_read, writable=False), Connection(to_child_write, readable=False)
        )
        # a worker still serving at interpreter exit (a module-level BoundedWorker) is stopped and
        # reaped then, not left running ("ResourceWarning: subprocess ... is still running")
        weakref.finalize(self, _reap_owned, self.popen, os.getpid())

    def is_alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        self.popen.kill()

    def join(self, timeout: float) -> None:
        reap(self.popen, timeout=timeout)


def _reap_owned(popen: subprocess.Popen, owner: int) -> None:
    """:func:`reap` a spawned worker (no zombie, no ResourceWarning), only in the process that
    started it (``owner`` pid), never in a forked copy of it."""
    if os.getpid() == owner:
        reap(popen)


WORKER_START_SECONDS = 120.0
"""How long a new verifier worker may take to start and answer its first (empty) call; its start
is trusted work and never counts against a check's time limit."""


WALL_CLOCK_FACTOR = 4.0
"""A check is stopped at ``timeout`` seconds of the worker's CPU time, or at this many times
``timeout`` of wall-clock time (a check that blocks without computing)."""


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
            process = _SpawnedProcess(self.environment, self.memory_bytes)
            self._process, self._connection = process, process.connection
            return
        context = multiprocessing.get_context("fork")
        parent, child = context.Pipe()
        process = context.Process(
            target=_worker_loop,
            args=(child, self.memory_bytes),
            daemon=True,
            name="verigym-verifier",
        )
        process.start()
        child.close()
        self._process, self._connection = process, parent

    def _kill(self) -> None:
        if self._process is not None:
            pid = self._pid()
            used = cpu_seconds(pid) if pid is not None else None
            _retired["cpu_seconds"] += (
                used or 0.0
            )  # (read just before the kill: it stops computing)
            if pid is not None:
                kill_tree(pid)  # what the check started, then the worker itself
            self._process.kill()
            self._process.join(timeout=5)
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
        process = self._process
        return getattr(getattr(process, "popen", process), "pid", None)

    def _wait_answer(self, timeout: float) -> bool:
        """Whether the worker answered within ``timeout`` CPU seconds (and the wall-clock
        backstop)."""
        pid = self._pid()
        start = cpu_seconds(pid) if pid is not None else None
        if start is None:  # no /proc: wall clock only
            return self._connection.poll(timeout)
        deadline = time.monotonic() + WALL_CLOCK_FACTOR * timeout
        while True:
            if self._connection.poll(min(0.05, max(0.0, deadline - time.monotonic()))):
                return True
            used = cpu_seconds(pid)
            if used is None or used - start > timeout or time.monotonic() >= deadline:
                return self._connection.poll(0)

    def call(self, function: Callable[..., Any], args: tuple, timeout: float) -> Any:
        """``function(*args)`` in the worker (see :func:`call_bounded`)."""
        with self._lock:
            if self._process is None or not self._process.is_alive():
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
