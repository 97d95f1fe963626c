"""Per-sandbox cgroups: a ``pids.max`` that holds even for root, and a memory limit.

cgroup v1 (``/sys/fs/cgroup/<controller>``) and v2 (``/sys/fs/cgroup`` unified) are both handled;
where the cgroup filesystem is not writable (an unprivileged user, a locked-down container) the
sandbox falls back to rlimits only and :func:`available` says so.

Each directory is named ``verigym-sandbox-<owner pid>-<8 hex digits>``. A host process that is
killed (``SIGKILL``, the OOM killer) cannot remove its directories; its sandboxes die with it
(``--die-with-parent``), so they are mostly left empty. Every :meth:`CgroupSet.create` first
removes such stale directories beside the ones it makes: those whose owner pid is gone (or a
zombie) in this pid namespace. A sandbox's worker can clear its death signal (``prctl``) and so
outlive a killed owner: what such a group still holds is killed first (``cgroup.kill``, or each
process), unless it holds a ``bwrap`` (a sandbox whose owner this pid namespace does not see) or a
process of another pid namespace; those groups are left untouched.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import signal
import time
import uuid
from dataclasses import dataclass, field

__all__ = ["CgroupSet", "available", "parent_directories", "remove_stale"]

logger = logging.getLogger(__name__)

_ROOT = "/sys/fs/cgroup"


def _own_paths() -> dict[str, str]:
    """controller ('pids', 'memory' or '' for v2) -> this process's cgroup path in that hierarchy."""
    paths: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup") as handle:
            for line in handle:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for controller in controllers.split(","):
                    paths[controller] = path
    except OSError:
        pass
    return paths


_NAME_PREFIX = "verigym-sandbox-"
_STALE_NAME = re.compile(r"verigym-sandbox-([1-9][0-9]{0,9})-[0-9a-f]{8}")
_PID_MAX = 1 << 22  # the kernel's largest pid_max


def parent_directories() -> list[str]:
    """The directories this process's sandboxes make their cgroups in (empty: no cgroup here).

    One per controller (``pids``, ``memory``) under cgroup v1, one under v2: this process's own
    group in each hierarchy. The directories may still be read-only (see :func:`available`).
    """
    own = _own_paths()
    if "pids" in own and os.path.isdir(f"{_ROOT}/pids"):  # cgroup v1
        return [
            f"{_ROOT}/{controller}{own.get(controller, '/')}".rstrip("/")
            for controller in ("pids", "memory")
        ]
    if "" in own and os.path.exists(f"{_ROOT}/cgroup.controllers"):  # cgroup v2
        return [f"{_ROOT}{own['']}".rstrip("/")]
    return []


def _owner_gone(pid: int) -> bool:
    """Whether process ``pid`` no longer runs in this pid namespace (gone or a zombie)."""
    if not 1 < pid < _PID_MAX:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # EPERM: it runs, as another user
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in (b"Z", b"X")


def remove_stale(directory: str) -> list[str]:
    """Remove the sandbox cgroups in ``directory`` whose owner process is gone.

    Args:
        directory: a parent directory (one of :func:`parent_directories`).

    Returns:
        The removed paths. A directory that cannot be removed (it still holds a process, or this
        user may not remove it) is left, logged at debug level; nothing is raised.
    """
    removed: list[str] = []
    try:
        entries = [entry for entry in os.listdir(directory) if entry.startswith(_NAME_PREFIX)]
    except OSError:
        return removed
    for entry in entries:
        match = _STALE_NAME.fullmatch(entry)
        if match is None or not _owner_gone(int(match.group(1))):
            continue
        path = f"{directory}/{entry}"
        if not _kill_orphans(path):
            continue
        for attempt in range(100):
            try:
                os.rmdir(path)
            except OSError as exc:
                if attempt == 99 or exc.errno != errno.EBUSY:
                    logger.debug("stale cgroup %s not removed: %s", path, exc)
                    break
                time.sleep(0.01)  # killed processes leave the group as they are reaped
            else:
                removed.append(path)
                break
    if removed:
        logger.info("removed %d stale sandbox cgroup(s) in %s", len(removed), directory)
    return removed


def _kill_orphans(path: str) -> bool:
    """SIGKILL what a stale group still holds: sandbox processes that outlived their owner.

    Returns:
        False (nothing done) when the group holds a ``bwrap`` or a process outside this pid
        namespace (listed as pid 0): a live sandbox of an owner this namespace cannot see.
    """
    try:
        with open(f"{path}/cgroup.procs") as handle:
            pids = [int(line) for line in handle if line.strip()]
    except (OSError, ValueError):
        return True  # not a cgroup (or unreadable): rmdir decides
    if not pids:
        return True
    for pid in pids:
        if pid <= 0:
            return False
        try:
            with open(f"/proc/{pid}/comm") as handle:
                if handle.read().strip() == "bwrap":
                    return False
        except OSError:
            pass  # gone meanwhile
    try:
        _write(f"{path}/cgroup.kill", "1")  # cgroup v2 (Linux 5.14+): every member, atomically
        return True
    except OSError:
        pass
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return True


def _write(path: str, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


@dataclass
class CgroupSet:
    """The cgroup directories of one sandbox (one per v1 controller, or one v2 directory).

    Attributes:
        directories: the created directories; empty when no cgroup could be made.
        limits: what was enforced, e.g. ``{"pids.max": "32", "memory": "1073741824"}``.
    """

    directories: list[str] = field(default_factory=list)
    limits: dict[str, str] = field(default_factory=dict)

    @classmethod
    def create(cls, *, max_processes: int, memory_bytes: int) -> CgroupSet:
        """Make the cgroups; failures are logged at debug level and leave the set partial.

        Stale directories of dead owners beside them are removed first (:func:`remove_stale`).
        """
        bases = parent_directories()
        name = f"{_NAME_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        made = cls()
        if len(bases) == 2:  # cgroup v1: pids, memory
            files = (
                {"pids.max": str(max_processes)},
                {"memory.limit_in_bytes": str(memory_bytes)},
            )
        else:  # cgroup v2
            files = ({"pids.max": str(max_processes), "memory.max": str(memory_bytes)},)
        for base, settings in zip(bases, files, strict=False):
            remove_stale(base)
            made._make(f"{base}/{name}", settings)
        return made

    def _make(self, directory: str, files: dict[str, str]) -> None:
        try:
            os.mkdir(directory)
        except OSError as exc:
            logger.debug("no cgroup %s: %s", directory, exc)
            return
        self.directories.append(directory)
        for key, value in files.items():
            try:
                _write(f"{directory}/{key}", value)
                self.limits[key] = value
            except OSError as exc:
                logger.debug("cannot set %s/%s: %s", directory, key, exc)

    @property
    def limits_processes(self) -> bool:
        return "pids.max" in self.limits

    def join(self) -> None:
        """Move the calling process into every directory (called in the child before ``exec``)."""
        for directory in self.directories:
            try:
                _write(f"{directory}/cgroup.procs", "0")
            except OSError:  # best effort: RLIMIT_NPROC and RLIMIT_AS still hold
                pass

    def pids(self) -> set[int]:
        found: set[int] = set()
        for directory in self.directories:
            try:
                with open(f"{directory}/cgroup.procs") as handle:
                    found.update(int(line) for line in handle if line.strip())
            except OSError:
                pass
        return found

    def oom_kills(self) -> int | None:
        """How many processes the kernel's OOM killer ended in this set's memory cgroup (None:
        not readable here). Read from ``memory.events`` (v2) or ``memory.oom_control`` (v1)."""
        for directory in self.directories:
            for name in ("memory.events", "memory.oom_control"):
                try:
                    with open(f"{directory}/{name}") as handle:
                        for line in handle:
                            key, _, value = line.partition(" ")
                            if key == "oom_kill":
                                return int(value)
                except (OSError, ValueError):
                    continue
        return None

    def kill_all(self, timeout: float = 5.0) -> bool:
        """SIGKILL every process in the cgroups until they are empty; True when empty."""
        deadline = time.monotonic() + timeout
        while True:
            pids = self.pids()
            if not pids:
                return True
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if time.monotonic() > deadline:
                logger.warning("sandbox processes %s survive SIGKILL", sorted(pids))
                return False
            time.sleep(0.005)

    def remove(self) -> None:
        """Kill what is left and remove the directories (idempotent)."""
        self.kill_all()
        for directory in self.directories:
            for _ in range(200):
                try:
                    os.rmdir(directory)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.005)
        self.directories.clear()


def available() -> tuple[bool, str]:
    """Whether a per-sandbox ``pids.max`` can be set here, and what was seen."""
    group = CgroupSet.create(max_processes=8, memory_bytes=1 << 30)
    try:
        if group.limits_processes:
            return True, "cgroup pids.max and " + (
                "memory limit" if len(group.limits) > 1 else "no memory limit"
            )
        return False, "cgroup filesystem not writable; the process limit relies on RLIMIT_NPROC"
    finally:
        group.remove()
