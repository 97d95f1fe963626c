"""The supervisor: starts, talks to, pauses and kills the sandboxed Python worker.

Each :class:`PythonSandbox` owns the worker of the current episode and, once it has been renewed
with :meth:`PythonSandbox.fresh`, a spare started in advance for the next episode::

    parent (this process)
      └─ bwrap  (host uid 65534 when started as root; its own cgroup with pids.max / memory limit)
           └─ [pid namespace] python -I -S -c <worker>: the notebook, pid 1 (rlimits; seccomp; empty
                              environment; no network; read-only root; size-capped /tmp, /dev/shm)

No process outlives its episode: the next episode gets a new sandbox (new namespaces, new tmpfs
mounts), so nothing an episode writes or runs (files anywhere, the memory of a long-lived parent,
a daemon) can reach a later one. Within an episode the worker keeps its namespace between calls (a
notebook), so a warm call costs a pipe round trip; between calls the worker is stopped (``SIGSTOP``)
and every other process of the sandbox is killed. A call that passes its wall-clock deadline or the
output cap gets the whole tree killed: the worker, the namespace's init, is SIGKILLed through a
pidfd (``--die-with-parent`` alone is a death signal its code may clear) and with it every process
of the pid namespace, then the outer ``bwrap``; the cgroup is swept as well.

Starting the process with its limits (rlimits, the cgroup join, the uid drop, a new session),
killing and reaping it and the call's deadline are :mod:`verigym.workers`' (:class:`ChildProcess`,
:class:`ProcessLimits`, :class:`Deadline`), shared with the verifier workers; this module keeps what
is the sandbox's own: the bubblewrap command line and seccomp filter, the length-prefixed JSON
protocol on raw pipes with its output cap, stopping the worker between calls and its ``/proc``.
"""

from __future__ import annotations

import atexit
import functools
import json
import logging
import os
import secrets
import select
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from verigym.sandbox import seccomp
from verigym.sandbox.cgroups import CgroupSet
from verigym.workers import (
    ChildProcess,
    Deadline,
    ProcessLimits,
    count_processes,
    process_state,
    wait_stopped,
)

__all__ = [
    "ExecResult",
    "Limits",
    "PythonSandbox",
    "SandboxError",
    "bwrap_features",
    "check_available",
    "run_code",
]

logger = logging.getLogger(__name__)

_HEADER = struct.Struct("!Q")
_WORKER_SOURCE = (Path(__file__).with_name("_worker.py")).read_text()
UNPRIVILEGED_UID = 65534
"""Host uid/gid the sandbox drops to when the library runs as root (``nobody``)."""
INSTALL_HINT = "apt-get update && apt-get install -y bubblewrap"


class SandboxError(RuntimeError):
    """The sandbox cannot be set up here, so agent code is not run (fail closed).

    The message names the fix (install bubblewrap, allow user namespaces) and the explicit opt-out
    ``unsafe=True``.
    """


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandbox worker.

    Attributes:
        timeout_s: wall-clock deadline of one call, seconds; past it the process tree is killed.
        cpu_s: CPU seconds over the worker's life (``RLIMIT_CPU``).
        memory_mb: address space of each process (``RLIMIT_AS``), MiB; also the cgroup memory cap.
        output_bytes: bytes a call may print (stdout + stderr) before the tree is killed.
        max_processes: processes and threads in the sandbox (cgroup ``pids.max``; without a
            writable cgroup filesystem ``RLIMIT_NPROC`` of the sandbox uid, shared by all sandboxes).
        file_size_mb: largest file the code may write (``RLIMIT_FSIZE``), MiB.
        open_files: open file descriptors per process (``RLIMIT_NOFILE``).
        tmp_mb: size of each writable mount (the private ``/tmp`` and ``/dev/shm`` tmpfs), MiB;
            everything else in the sandbox is read-only.
    """

    timeout_s: float = 10.0
    cpu_s: int = 60
    memory_mb: int = 1024
    output_bytes: int = 1 << 16
    max_processes: int = 32
    file_size_mb: int = 16
    open_files: int = 64
    tmp_mb: int = 64

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"Limits.{name} must be a positive number, got {value!r}")


@dataclass
class ExecResult:
    """The outcome of one sandbox call, as seen by the parent.

    Attributes:
        ok: the code ran to its end without an exception.
        output: what it printed (stdout and stderr interleaved), decoded with replacement, capped.
        error: ``"<ExceptionType>: message"``, or why the worker was killed or died; ``None`` if ok.
        value: for :meth:`PythonSandbox.call`, the return value as JSON primitives.
        killed: ``"timeout"``, ``"output_limit"`` or ``"died"`` when the worker did not survive the
            call (the next call starts a fresh one); ``None`` otherwise.
        duration_s: wall-clock seconds of the call.
    """

    ok: bool
    output: str = ""
    error: str | None = None
    value: Any = None
    killed: str | None = None
    duration_s: float = 0.0

    def text(self, limit: int = 2000) -> str:
        """Output and error as one string for an agent, at most ``limit`` characters."""
        parts = [self.output.rstrip("\n")] if self.output.strip() else []
        if self.error and (not self.output or self.error.split(":")[0] not in self.output):
            parts.append(self.error)
        text = "\n".join(parts) if parts else "(no output)"
        return text if len(text) <= limit else text[: limit - 20] + "\n...[truncated]"


def _escaped(text: str) -> str:
    """``text`` with every lone surrogate written as ``\\udXXX``: an error message of agent code
    (``ValueError("\\ud800")``) becomes text an env may show (no env text holds a lone one)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@functools.lru_cache(maxsize=1)
def bwrap_features() -> tuple[str | None, bool]:
    """Where bubblewrap is and whether it has ``--disable-userns`` (cached for the process).

    Returns:
        ``(path, disable_userns)``: the ``bwrap`` binary's path (``None`` when it is not on PATH)
        and whether its ``--help`` lists ``--disable-userns``.
    """
    binary = shutil.which("bwrap")
    if binary is None:
        return None, False
    try:
        helptext = subprocess.run(
            [binary, "--help"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return binary, False
    return binary, "--disable-userns" in helptext


def _traversable_by_others(path: str) -> bool:
    """Whether every directory on the way to ``path`` can be entered by any uid."""
    current = "/"
    for part in Path(path).parts[1:]:
        current = os.path.join(current, part)
        try:
            mode = os.stat(current).st_mode
        except OSError:
            return False
        if os.path.isdir(current) and not mode & 0o001:
            return False
    return True


@functools.lru_cache(maxsize=4)
def _interpreter(for_other_uid: bool) -> tuple[str, str]:
    """(real path of the worker's Python executable, its installation prefix).

    The running interpreter when the sandbox's uid can reach it; otherwise (the library runs as
    root from a private prefix such as ``/root/.pyenv``) the system ``python3``: the worker needs
    only the standard library.

    Raises:
        SandboxError: no Python interpreter is reachable by the unprivileged uid.
    """
    candidates = [sys.executable]
    if for_other_uid:
        candidates += [
            p for p in (shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin"),) if p
        ]
    for candidate in candidates:
        executable = os.path.realpath(candidate)
        prefix = (
            os.path.realpath(sys.base_prefix)
            if candidate == sys.executable
            else os.path.dirname(os.path.dirname(executable))
        )
        if not for_other_uid or (
            _traversable_by_others(executable) and _traversable_by_others(prefix)
        ):
            return executable, prefix
    raise SandboxError(
        f"the Python at {sys.executable} is not readable by uid {UNPRIVILEGED_UID} and there is no system python3; "
        "install one (apt-get install -y python3-minimal) or run verigym from a world-readable Python"
    )


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = f"/{name}"
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


class _Worker:
    """One sandbox process tree: ``bwrap`` + the Python worker, its cgroup and pipes.

    The process is a :class:`verigym.workers.ChildProcess` (rlimits, the cgroup, the uid drop, a
    new session, killing and reaping); what is the sandbox's own is here: the bubblewrap command
    line and seccomp filter (:func:`_command`), the JSON protocol on raw pipes with its deadline
    and output cap (:meth:`exchange`), stopping the worker between calls (:meth:`pause`,
    :meth:`resume`) and its ``/proc``. Spawned at construction (nothing is waited for);
    :meth:`wait_ready` completes the start. A worker never serves two episodes:
    :meth:`PythonSandbox.fresh` replaces it.
    """

    def __init__(self, limits: Limits, unsafe: bool):
        self.limits = limits
        self.unsafe = unsafe
        self.process: ChildProcess | None = None
        self.cgroup: CgroupSet | None = None
        self.request_fd = self.answer_fd = self.output_fd = self.info_fd = -1
        self.proc_fd = -1  # the sandbox's own /proc (its pid namespace), opened when it is ready
        self.host_pid: int | None = None  # the worker (pid 1 of the sandbox) as seen from here
        self.pid_fd = -1  # a pidfd of the worker, opened when it is ready (see signal_kill)
        self._pid_fd_lock = threading.Lock()  # signal_kill may run in another thread than kill
        self.ready = False
        self.used = False
        self.stopped = False
        self._spawn()

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.alive

    def _spawn(self) -> None:
        limits = self.limits
        as_root = os.geteuid() == 0
        request_read, request_write = os.pipe()
        answer_read, answer_write = os.pipe()
        output_read, output_write = os.pipe()
        info_read, info_write = os.pipe()
        # this process keeps these ends; the child's ends are handed over to it (closed here)
        ours = (request_write, answer_read, output_read, info_read)
        cgroup = CgroupSet.create(
            max_processes=limits.max_processes, memory_bytes=limits.memory_mb << 20
        )
        if not as_root:  # RLIMIT_NPROC counts all processes of the user
            nproc = count_processes(os.getuid()) + limits.max_processes
        elif (
            cgroup.limits_processes
        ):  # pids.max bounds this sandbox; the uid is shared by all sandboxes
            nproc = 4096
        else:
            nproc = limits.max_processes + 8
        drop = as_root and not self.unsafe
        process_limits = ProcessLimits(
            cpu_seconds=int(limits.cpu_s),
            memory_bytes=int(limits.memory_mb) << 20,
            file_size_bytes=int(limits.file_size_mb) << 20,
            open_files=int(limits.open_files) + 16,
            processes=int(nproc) if drop or not as_root else None,
            core_dumps=False,
        )
        seccomp_fd = None
        try:
            filter_program = seccomp.program()
            if filter_program is not None and not self.unsafe:
                seccomp_fd = os.memfd_create("verigym-seccomp", os.MFD_CLOEXEC)
                os.write(seccomp_fd, filter_program)
                os.lseek(seccomp_fd, 0, os.SEEK_SET)
            command = _command(
                limits, self.unsafe, answer_write, request_read, info_write, drop, seccomp_fd
            )
        except BaseException:
            cgroup.remove()
            theirs = (request_read, answer_write, output_write, info_write)
            for fd in ours + theirs + ((seccomp_fd,) if seccomp_fd is not None else ()):
                os.close(fd)
            raise
        pass_fds = [request_read, answer_write, info_write]
        if seccomp_fd is not None:
            pass_fds.append(seccomp_fd)
        try:
            self.process = ChildProcess(
                command,
                limits=process_limits,
                env={},
                cwd="/",
                pass_fds=pass_fds,
                stdout=output_write,
                stderr=output_write,
                new_session=True,
                user=UNPRIVILEGED_UID if drop else None,
                cgroup=cgroup,
            )
        except BaseException:
            cgroup.remove()
            for fd in ours:
                os.close(fd)
            raise
        self.cgroup = cgroup
        self.request_fd, self.answer_fd, self.output_fd = request_write, answer_read, output_read
        if self.unsafe:
            os.close(info_read)
            self.host_pid = self.process.pid
        else:
            self.info_fd = info_read
        os.set_blocking(answer_read, False)
        os.set_blocking(output_read, False)

    def wait_ready(self) -> ExecResult:
        """Wait for bwrap's child pid and the worker's "ready" (at most 30 s in all)."""
        deadline = Deadline(30.0)
        if self.info_fd >= 0:
            info = bytearray()
            while True:
                remaining = deadline.remaining()
                if remaining <= 0 or not select.select([self.info_fd], [], [], remaining)[0]:
                    break
                chunk = os.read(self.info_fd, 4096)
                if not chunk:
                    break
                info += chunk
                try:
                    self.host_pid = int(json.loads(info)["child-pid"])
                    break
                except (ValueError, KeyError, TypeError):
                    continue
            os.close(self.info_fd)
            self.info_fd = -1
        result = self.exchange(None, timeout=deadline.remaining())
        if self.host_pid is None and not result.killed:
            result = ExecResult(
                False,
                result.output,
                "ProtocolError: bubblewrap did not report the sandbox's pid",
                killed="died",
            )
        self.ready = not result.killed
        if self.ready and not self.unsafe:
            # The sandbox's own /proc, opened before any agent code runs: later listings need no
            # access to the worker's root, which agent code could revoke (a non-dumpable worker).
            try:
                self.proc_fd = os.open(
                    f"/proc/{self.host_pid}/root/proc", os.O_RDONLY | os.O_DIRECTORY
                )
                self.pid_fd = os.pidfd_open(self.host_pid)
            except OSError as exc:
                self.ready = False
                result = ExecResult(
                    False,
                    result.output,
                    f"ProtocolError: cannot open the sandbox's /proc ({exc})",
                    killed="died",
                )
        return result

    def resume(self) -> None:
        """Let the worker run again (it is stopped between calls)."""
        if self.stopped and self.host_pid is not None:
            try:
                os.kill(self.host_pid, signal.SIGCONT)
            except OSError:
                pass
            self.stopped = False

    def pause(self) -> bool:
        """Stop the worker (all its threads) and kill every other process of the sandbox.

        The worker already killed them at the end of the call; this catches a process forked by a
        thread of the cell after that sweep. Processes are found in the sandbox's own ``/proc`` (its
        pid namespace, reached through the worker's root) and signalled through pidfds, so no pid of
        this machine can be hit by mistake.

        Returns:
            False when the sandbox could not be inspected or emptied (the caller then kills it).
        """
        if self.unsafe:
            return True
        if self.host_pid is None or self.proc_fd < 0:
            return False
        try:
            os.kill(self.host_pid, signal.SIGSTOP)
        except OSError:
            return False
        self.stopped = True
        if not wait_stopped(self.host_pid):
            return False
        for _ in range(200):
            try:
                others = [
                    entry for entry in os.listdir(self.proc_fd) if entry.isdigit() and entry != "1"
                ]
            except OSError:
                return False
            living = [
                pid
                for pid in others
                if process_state(int(pid), proc_fd=self.proc_fd) not in ("Z", "X", None)
            ]
            if not living:
                return True
            for pid in living:
                try:
                    fd = os.open(pid, os.O_RDONLY | os.O_DIRECTORY, dir_fd=self.proc_fd)
                except OSError:
                    continue
                try:
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                except OSError:
                    pass
                finally:
                    os.close(fd)
            time.sleep(0.001)
        return False

    def exchange(self, message: dict[str, Any] | None, *, timeout: float) -> ExecResult:
        """Send ``message`` (None: wait for the first ready message) and collect answer and output.

        Every request carries a random id and only an answer with that id counts, so a message
        forged by agent code cannot answer a request it did not see.
        """
        deadline = Deadline(timeout)
        output = bytearray()
        buffer = bytearray()
        cap = self.limits.output_bytes
        pending = b""
        expected = "start"
        if message is not None:
            expected = secrets.token_hex(8)
            body = json.dumps({**message, "id": expected}).encode("utf-8", "surrogatepass")
            pending = _HEADER.pack(len(body)) + body
            os.set_blocking(self.request_fd, False)
        killed: str | None = None
        error: str | None = None
        reply: Any = None
        eof = False
        with selectors.DefaultSelector() as selector:
            selector.register(self.answer_fd, selectors.EVENT_READ, "answer")
            selector.register(self.output_fd, selectors.EVENT_READ, "output")
            if pending:
                selector.register(self.request_fd, selectors.EVENT_WRITE, "request")
            while reply is None:
                while len(buffer) >= _HEADER.size:  # complete messages received so far
                    (size,) = _HEADER.unpack(buffer[: _HEADER.size])
                    if size > 1 << 26:
                        killed, error = (
                            "died",
                            "ProtocolError: an oversized message came from the sandbox",
                        )
                        break
                    if len(buffer) < _HEADER.size + size:
                        break
                    raw = bytes(buffer[_HEADER.size : _HEADER.size + size])
                    del buffer[: _HEADER.size + size]
                    try:
                        candidate = json.loads(raw.decode("utf-8", "surrogatepass"))
                    except (ValueError, RecursionError):  # forged (an answer nests 20 levels)
                        continue
                    if isinstance(candidate, dict) and candidate.get("id") == expected:
                        reply = candidate
                        break
                if reply is not None or killed:
                    break
                if eof:
                    output += self._drain()
                    status = None if self.process is None else self.process.wait(timeout=5)
                    killed, error = (
                        "died",
                        f"WorkerDied: the Python process exited (status {status})",
                    )
                    if status == 128 + signal.SIGKILL and self.cgroup is not None:
                        oom = self.cgroup.oom_kills()
                        if oom:
                            error += f"; the sandbox's memory cgroup reports {oom} OOM kill(s)"
                    break
                if deadline.passed():
                    killed, error = (
                        "timeout",
                        f"TimeoutError: the code ran longer than {timeout:g} s and was killed",
                    )
                    break
                for key, _ in selector.select(min(deadline.remaining(), 1.0)):
                    if key.data == "request":
                        try:
                            pending = pending[os.write(self.request_fd, pending) :]
                        except BlockingIOError:
                            continue
                        except BrokenPipeError:
                            pending = b""
                        if not pending:
                            selector.unregister(self.request_fd)
                        continue
                    try:
                        chunk = os.read(key.fd, 1 << 16)
                    except BlockingIOError:
                        continue
                    if key.data == "answer":
                        eof = eof or not chunk
                        buffer += chunk
                    elif chunk:
                        output += chunk
                        if len(output) > cap:
                            killed = "output_limit"
                            error = f"OutputLimitError: the code printed more than {cap} bytes and was killed"
                    else:
                        selector.unregister(self.output_fd)
                if killed:
                    break
        if killed is None:
            output += self._drain()
        duration = deadline.elapsed()
        text = bytes(output[:cap]).decode("utf-8", "replace")
        if killed:
            return ExecResult(False, text, error, killed=killed, duration_s=duration)
        if message is None or reply.get("ready") is True:
            return ExecResult(True, text, duration_s=duration, value=reply)
        error = reply.get("error")
        return ExecResult(
            ok=reply.get("ok") is True,
            output=text,
            error=_escaped(error) if isinstance(error, str) else None,
            value=reply.get("value"),
            duration_s=duration,
        )

    def _drain(self) -> bytes:
        data = bytearray()
        while len(data) <= self.limits.output_bytes:
            try:
                chunk = os.read(self.output_fd, 1 << 16)
            except (BlockingIOError, OSError):
                break
            if not chunk:
                break
            data += chunk
        return bytes(data)

    def signal_kill(self) -> None:
        """SIGKILL the worker and the outer ``bwrap`` now; :meth:`kill` reaps.

        The worker is killed through its pidfd, not only by ``bwrap``'s death: that reaches it
        through ``PR_SET_PDEATHSIG``, which the worker's own code may clear (``prctl``), and
        without a cgroup to sweep (a read-only cgroup filesystem, a non-root user) it then ran on.
        As pid 1 of its namespace, its death ends every other process of the sandbox.
        """
        self._kill_notebook()
        process = self.process
        if process is not None:
            process.signal_kill()

    def _kill_notebook(self) -> None:
        with self._pid_fd_lock:
            if self.pid_fd >= 0:
                try:
                    signal.pidfd_send_signal(self.pid_fd, signal.SIGKILL)
                except OSError:
                    pass

    def kill(self) -> None:
        """Kill the whole tree and release the cgroup and pipes (idempotent)."""
        self._kill_notebook()  # see signal_kill
        with self._pid_fd_lock:
            pid_fd, self.pid_fd = self.pid_fd, -1
        if pid_fd >= 0:
            os.close(pid_fd)
        process, self.process = self.process, None
        if process is not None:
            # bwrap's death ends the pid namespace and the cgroup is swept below; without the
            # sandbox (unsafe) what the worker started is found through /proc instead
            process.kill(timeout=10, tree=self.unsafe)
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        for name in ("request_fd", "answer_fd", "output_fd", "info_fd", "proc_fd"):
            fd = getattr(self, name)
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
                setattr(self, name, -1)


def _command(
    limits: Limits,
    unsafe: bool,
    answer_fd: int,
    request_fd: int,
    info_fd: int,
    drop: bool,
    seccomp_fd: int | None = None,
) -> list[str]:
    """The command line of one worker: ``bwrap ... -- python -I -S -c <worker>`` (or the bare worker)."""
    executable, prefix = _interpreter(drop)
    python = [
        executable,
        "-I",
        "-S",
        "-c",
        _WORKER_SOURCE,
        str(request_fd),
        str(answer_fd),
        "0" if unsafe else "1",
    ]
    if unsafe:
        return python
    binary, disable_userns = bwrap_features()
    if binary is None:
        raise SandboxError(
            "bubblewrap (bwrap) is not installed, so agent code will not run. Install it: "
            f"{INSTALL_HINT} (or pass unsafe=True to run code without a sandbox, at your own risk)"
        )
    args = [
        binary,
        "--unshare-all",
        "--unshare-user",
        "--as-pid-1",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--uid",
        str(UNPRIVILEGED_UID),
        "--gid",
        str(UNPRIVILEGED_UID),
        "--info-fd",
        str(info_fd),
    ]
    if disable_userns:
        args.append("--disable-userns")
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    args += _system_binds()
    if not prefix.startswith("/usr/"):
        args += ["--ro-bind", prefix, prefix]
        for site in Path(prefix).glob("lib/python3*/site-packages"):
            args += [
                "--tmpfs",
                str(site),
                "--remount-ro",
                str(site),
            ]  # installed packages stay outside
    size = str(limits.tmp_mb << 20)
    # Writable: only /tmp and /dev/shm, each a size-capped tmpfs; the root and /dev are read-only.
    args += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        size,
        "--tmpfs",
        "/dev/shm",
        "--remount-ro",
        "/dev",
        "--size",
        size,
        "--tmpfs",
        "/tmp",
        "--remount-ro",
        "/",
        "--chdir",
        "/tmp",
        "--",
    ]
    return args + python


_LIVE: weakref.WeakSet = weakref.WeakSet()

_START_RETRY_WAITS = (0.0, 1.0, 3.0)
"""Seconds to wait before each new try of a cold start whose worker died before it was ready."""
"""Sandboxes with a running worker, closed at interpreter exit (no stray processes or cgroups)."""


@atexit.register
def _close_all() -> None:
    for sandbox in list(_LIVE):
        sandbox.close()


class PythonSandbox:
    """A persistent, sandboxed Python worker (one notebook per episode).

    Args:
        limits: resource limits (:class:`Limits`).
        unsafe: run the worker without bubblewrap (rlimits and the deadline only). Never for code
            you do not trust; the default refuses to run when bubblewrap is unusable.

    Raises:
        SandboxError: (on the first call) bubblewrap is missing or cannot create namespaces.

    The worker starts lazily on the first call. Between calls the worker is stopped (``SIGSTOP``,
    threads included) and every other process the code started has been killed: a cell cannot leave
    a server or a CPU burner running for the next cell. :meth:`fresh` gives each episode a new
    sandbox (new namespaces, new ``/tmp`` and ``/dev/shm``), started in advance so an episode starts
    in milliseconds.

    Pickling keeps the cells run so far and replays them into a fresh worker when the copy is used,
    so a copied episode continues identically for deterministic code.
    """

    def __init__(self, limits: Limits | None = None, *, unsafe: bool = False):
        if limits is not None and not isinstance(limits, Limits):
            raise TypeError(f"limits must be a verigym.sandbox.Limits, got {type(limits).__name__}")
        self.limits = limits or Limits()
        self.unsafe = bool(unsafe)
        self.history: list[str] = []
        self._worker: _Worker | None = None
        self._spare: _Worker | None = None
        self._renewal: threading.Thread | None = (
            None  # kills the last episode's sandbox, starts a spare
        )
        self._replay: list[str] = []
        self._restarted: str | None = None
        self.calls = 0
        self._caller: threading.Thread | None = None  # the thread inside a call, if any
        self._aborted = False  # closed from another thread during a call: no call runs again

    # -- pickling: drop the process, keep the notebook ------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        return {
            "limits": self.limits,
            "unsafe": self.unsafe,
            "history": list(self.history),
            "calls": self.calls,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["limits"], unsafe=state["unsafe"])
        self.history = list(state["history"])
        self._replay = list(state["history"])
        self.calls = state["calls"]

    def __deepcopy__(self, memo: dict) -> PythonSandbox:
        clone = PythonSandbox.__new__(PythonSandbox)
        clone.__setstate__(self.__getstate__())
        return clone

    def __enter__(self) -> PythonSandbox:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 -- interpreter shutdown
            pass

    # -- public API --------------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        """Whether a worker process is running."""
        return self._worker is not None and self._worker.alive

    @property
    def worker_pid(self) -> int | None:
        """Host pid of the outer process of the worker tree (``bwrap``), if running."""
        worker = self._worker
        return worker.process.pid if worker is not None and worker.process is not None else None

    @property
    def notebook_pid(self) -> int | None:
        """Host pid of the Python worker itself (pid 1 of the sandbox), once started."""
        return self._worker.host_pid if self._worker is not None else None

    def run(self, code: str, *, timeout: float | None = None) -> ExecResult:
        """Run a cell of Python in the persistent namespace.

        Args:
            code: Python source; if the last statement is an expression its repr is printed.
            timeout: wall-clock seconds for this call (default ``limits.timeout_s``).

        Raises:
            TypeError: ``code`` is not a ``str``.
            SandboxError: the sandbox cannot be started here.
        """
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, got {type(code).__name__}")
        result = self._request({"op": "exec", "code": code}, timeout)
        if not result.killed:
            self.history.append(code)
        return result

    def call(
        self, name: str, args: list[Any] | tuple[Any, ...] = (), *, timeout: float | None = None
    ) -> ExecResult:
        """Call ``name(*args)`` defined in the namespace; ``value`` holds the JSON-primitive result.

        The value is converted inside the worker with exact type checks (no subclasses, no custom
        ``__eq__``) and arrives as JSON, so the parent compares only primitives.

        Raises:
            TypeError: ``args`` is not JSON-serializable.
            SandboxError: the sandbox cannot be started here.
        """
        try:
            json.dumps(list(args))
        except (TypeError, ValueError) as exc:
            raise TypeError(f"args must be JSON-serializable: {exc}") from None
        return self._request({"op": "call", "name": str(name), "args": list(args)}, timeout)

    def call_many(
        self, name: str, args_list: list[list[Any]], *, timeout: float | None = None
    ) -> list[ExecResult]:
        """``call`` for many argument lists in one round trip, under one deadline.

        Returns one :class:`ExecResult` per argument list; when the batch is killed (deadline,
        output cap, the process died) every entry carries that error.

        Raises:
            TypeError: an argument list is not JSON-serializable.
            SandboxError: the sandbox cannot be started here.
        """
        try:
            json.dumps(args_list)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"args_list must be JSON-serializable: {exc}") from None
        batch = self._request(
            {"op": "call_many", "name": str(name), "args_list": [list(a) for a in args_list]},
            timeout,
        )
        values = (
            batch.value
            if isinstance(batch.value, list) and len(batch.value) == len(args_list)
            else None
        )
        if not batch.ok or values is None:
            error = batch.error or "ProtocolError: the batch answer does not match the request"
            return [
                ExecResult(
                    False, batch.output, error, killed=batch.killed, duration_s=batch.duration_s
                )
                for _ in args_list
            ]
        results = []
        for item in values:
            item = item if isinstance(item, dict) else {}
            error = item.get("error")
            results.append(
                ExecResult(
                    item.get("ok") is True,
                    "",
                    _escaped(error) if isinstance(error, str) else None,
                    value=item.get("value"),
                )
            )
        return results

    def fresh(self) -> None:
        """Start the next episode on a new machine: a new sandbox, nothing of the last one left.

        The used sandbox is killed (every process, its ``/tmp`` and ``/dev/shm``, its namespaces);
        the next call runs in a sandbox that no agent code has touched. That sandbox was started in
        advance (a spare): this starts the process of the next spare, and a background thread reaps
        the old sandbox and waits for the spare to be ready, so an episode costs a process start
        here and nothing at its first call when there was time since the last one. Without a
        running sandbox this only clears the history (the next call starts one).
        """
        self.history.clear()
        self._replay.clear()
        worker = self._worker
        if worker is None or not worker.used:
            return
        worker.signal_kill()  # at once: nothing of this episode runs on
        self._join_renewal()
        spare, self._spare = self._spare, None
        if spare is None or not spare.alive:
            if spare is not None:
                spare.kill()
            spare = _Worker(self.limits, self.unsafe)
        self._worker = spare
        try:  # started from this thread: bwrap's --die-with-parent follows the thread that started it
            successor = _Worker(self.limits, self.unsafe)
        except (OSError, SandboxError) as exc:  # the next fresh() starts one itself
            logger.warning("could not start a spare sandbox: %s", exc)
            successor = None
        self._renewal = threading.Thread(
            target=self._renew,
            args=(worker, successor),
            name="verigym-sandbox-renewal",
            daemon=True,
        )
        self._renewal.start()

    def _renew(self, old: _Worker, successor: _Worker | None) -> None:
        """Background: finish killing ``old`` (reap, remove its cgroup); make ``successor`` the spare.

        The successor's start is completed and its code paths warmed with an empty cell (no agent
        code: ``used`` stays False), so the next episode's first call costs a warm call.
        """
        old.kill()
        if successor is None:
            return
        if (
            successor.wait_ready().killed
            or successor.exchange({"op": "exec", "code": "pass"}, timeout=30.0).killed
            or not successor.pause()
        ):
            successor.kill()  # fresh() starts one itself; a failure to start is reported there
            return
        self._spare = successor

    def _join_renewal(self) -> None:
        renewal, self._renewal = self._renewal, None
        if renewal is not None and renewal is not threading.current_thread():
            renewal.join()

    def restart(self) -> None:
        """Kill the worker and forget the notebook; the next call starts fresh."""
        self.close()
        self.history.clear()
        self._replay.clear()

    def close(self) -> None:
        """Kill every worker tree of this sandbox and release its cgroups (idempotent).

        Safe from another thread while a call runs (a server ending a session that overran its
        step timeout): the running tree is killed at once, the call returns ``killed="died"`` and
        reaps it, and every later call raises :class:`SandboxError`.
        """
        caller = self._caller
        if caller is not None and caller is not threading.current_thread():
            self._aborted = True
            worker = self._worker
            if worker is not None:
                worker.signal_kill()  # the calling thread sees the tree die, then reaps it
            self._join_renewal()
            spare, self._spare = self._spare, None
            if spare is not None:
                spare.kill()
            return
        self._join_renewal()
        for name in ("_worker", "_spare"):
            worker = getattr(self, name, None)
            setattr(self, name, None)
            if worker is not None:
                worker.kill()

    # -- internals ----------------------------------------------------------------------------------
    def _ready_worker(self) -> _Worker:
        """The current worker, started and ready (cold start or replay when needed).

        Raises:
            SandboxError: the sandbox cannot be started here.
        """
        worker = self._worker
        if worker is not None and worker.ready and worker.alive:
            return worker
        if worker is not None and not worker.alive:
            worker.kill()
            worker = self._worker = None
        if worker is None:
            worker = self._worker = _Worker(self.limits, self.unsafe)
        _LIVE.add(self)
        ready = worker.wait_ready()
        for pause in _START_RETRY_WAITS:
            if ready.killed != "died" or worker.used:
                break
            # a cold start that died before running anything (seen twice in full CI runs, under
            # load, after many sandboxes in the same process: SIGKILL before "ready", no OOM kill
            # recorded by its cgroup) is tried again after a pause, and logged
            logger.warning(
                "the sandbox died while starting (%s); starting it again in %g s",
                ready.error,
                pause,
            )
            worker.kill()
            time.sleep(pause)
            worker = self._worker = _Worker(self.limits, self.unsafe)
            ready = worker.wait_ready()
        if ready.killed:
            worker.kill()
            self._worker = None
            hint = (
                ""
                if self.unsafe or "bwrap" not in ready.output  # bwrap's own errors name it
                else (
                    " bubblewrap could not create the sandbox's namespaces: allow unprivileged user namespaces "
                    "(sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces > 0) or run where they "
                    "are permitted, or pass unsafe=True at your own risk."
                )
            )
            raise SandboxError(
                f"the sandbox did not start ({ready.error}): {ready.output.strip()[-500:]}.{hint}"
            )
        replay, self._replay = self._replay, []
        for code in replay:
            worker.used = True
            worker.resume()  # stopped after the previous cell
            result = worker.exchange({"op": "exec", "code": code}, timeout=self.limits.timeout_s)
            if result.killed or not worker.pause():
                logger.warning("replaying the sandbox notebook failed: %s", result.error)
                break
        return worker

    def _request(self, message: dict[str, Any], timeout: float | None) -> ExecResult:
        if self._aborted:
            raise SandboxError(
                "this sandbox was closed while a call ran (its owner gave up on it); make a new one"
            )
        self.calls += 1
        self._caller = threading.current_thread()
        try:
            worker = self._ready_worker()
            if self._aborted:
                raise SandboxError("this sandbox was closed while it started; make a new one")
            worker.used = True
            worker.resume()
            result = worker.exchange(
                message, timeout=self.limits.timeout_s if timeout is None else float(timeout)
            )
        except BaseException:
            if self._aborted:
                self._kill_current()
            raise
        finally:
            self._caller = None
        if self._aborted:  # closed meanwhile: its tree was killed; reap it, start nothing
            self._kill_current()
            return result
        if result.killed:
            worker.kill()
            self._worker = None
            result.error = (
                f"{result.error}; the Python session was restarted, so earlier definitions are gone"
            )
        elif not worker.pause():
            logger.warning(
                "the sandbox's leftover processes could not be stopped; it restarts cold"
            )
            worker.kill()
            self._worker = None
        return result

    def _kill_current(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.kill()


def check_available() -> None:
    """Start a sandbox, run one line and check it runs isolated.

    Raises:
        SandboxError: bubblewrap is missing or cannot create its namespaces; the message names the fix.
    """
    with PythonSandbox(Limits(timeout_s=30.0)) as sandbox:
        result = sandbox.run("import os; print(os.getuid())")
        if not result.ok:
            raise SandboxError(f"the sandbox started but could not run code: {result.text()}")


def run_code(code: str, *, limits: Limits | None = None, unsafe: bool = False) -> ExecResult:
    """Run ``code`` once in a fresh sandbox (cold start) and tear it down.

    Raises:
        SandboxError: the sandbox cannot be started here.
    """
    with PythonSandbox(limits, unsafe=unsafe) as sandbox:
        return sandbox.run(code)
