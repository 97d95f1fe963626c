"""Per-sandbox cgroups: a ``pids.max`` that holds even for root, and a memory limit.

cgroup v1 (``/sys/fs/cgroup/<controller>``) and v2 (``/sys/fs/cgroup`` unified) are both handled;
where the cgroup filesystem is not writable (an unprivileged user, a locked-down container) the
sandbox falls back to rlimits only and :func:`available` says so.
"""

from __future__ import annotations

import logging
import os
import signal
import time
import uuid
from dataclasses import dataclass, field

__all__ = ["CgroupSet", "available"]

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
        """Make the cgroups; failures are logged at debug level and leave the set partial."""
        own = _own_paths()
        name = f"verigym-sandbox-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        made = cls()
        if "pids" in own and os.path.isdir(f"{_ROOT}/pids"):  # cgroup v1
            for controller, files in (
                ("pids", {"pids.max": str(max_processes)}),
                ("memory", {"memory.limit_in_bytes": str(memory_bytes)}),
            ):
                base = f"{_ROOT}/{controller}{own.get(controller, '/')}".rstrip("/")
                made._make(f"{base}/{name}", files)
        elif "" in own and os.path.exists(f"{_ROOT}/cgroup.controllers"):  # cgroup v2
            base = f"{_ROOT}{own['']}".rstrip("/")
            made._make(
                f"{base}/{name}", {"pids.max": str(max_processes), "memory.max": str(memory_bytes)}
            )
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
