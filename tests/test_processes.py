"""No subprocess outlives its owner: process-lifetime workers are reaped when the interpreter exits
(tests/conftest.py checks everything else at the end of the session)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import os, warnings
    warnings.simplefilter("always", ResourceWarning)
    from verigym.verifiers import BoundedWorker
    spawned = BoundedWorker(start_method="spawn", environment={"PYTHONHASHSEED": "0"})
    forked = BoundedWorker(start_method="fork")
    print(spawned.call(os.getpid, (), timeout=60), forked.call(os.getpid, (), timeout=60), flush=True)
    """
)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_module_level_workers_are_reaped_at_exit_without_a_resource_warning():
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "always"},
    )
    assert done.returncode == 0, done.stderr
    pids = [int(p) for p in done.stdout.split()]
    assert len(pids) == 2
    assert "ResourceWarning" not in done.stderr and "still running" not in done.stderr, done.stderr
    assert not [pid for pid in pids if _running(pid)]
