"""What the tests that start sandboxes share: whether one can start here, and the check that none is
left behind (an autouse fixture a test module imports)."""

from __future__ import annotations

import gc
import os
import shutil
import time

import pytest

from tests.processes import descendants

# Skipped only where bubblewrap is not installed (CI installs it): where it is installed but cannot
# start, the tests run and fail with the sandbox's error.
SANDBOX_ERROR = (
    "" if shutil.which("bwrap") else "bubblewrap is not installed (apt-get install -y bubblewrap)"
)

needs_sandbox = pytest.mark.skipif(
    bool(SANDBOX_ERROR), reason=f"sandbox unavailable: {SANDBOX_ERROR[:200]}"
)


def descendant_pids(pid: int) -> set[int]:
    """Host pids of every living descendant of ``pid``."""
    return set(descendants(pid))


def alive(pids: set[int]) -> set[int]:
    living = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] != "Z":
                    living.add(pid)
        except OSError:
            pass
    return living


def _sandbox_processes() -> list[tuple[int, str]]:
    """Living bwrap / sandbox-worker processes among this process's descendants."""
    found = []
    for pid in alive(descendant_pids(os.getpid())):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                command = handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if "bwrap" in command or "-I -S -c" in command:
            found.append((pid, command[:80]))
    return found


@pytest.fixture(scope="module", autouse=True)
def no_sandbox_left_behind():
    """After the module: no bwrap or sandbox worker is left among this process's descendants."""
    yield
    gc.collect()
    deadline = time.monotonic() + 5.0
    while _sandbox_processes() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _sandbox_processes(), f"sandbox processes left behind: {_sandbox_processes()}"
