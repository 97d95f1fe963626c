"""No subprocess outlives its owner: process-lifetime workers are reaped when the interpreter exits
(tests/conftest.py checks everything else at the end of the session)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from verigym.workers import cpu_seconds, descendants, kill_tree, process_state, reap

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


def _sleeper_tree(tmp_path) -> tuple[subprocess.Popen, int]:
    """A child that starts a grandchild (both sleep); returns the child and the grandchild's pid."""
    pid_file = tmp_path / "grandchild"
    script = textwrap.dedent(
        f"""
        import subprocess, sys, time
        grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open({str(pid_file)!r}, "w").write(str(grandchild.pid))
        time.sleep(60)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script])
    for _ in range(600):
        if pid_file.exists() and pid_file.read_text():
            return child, int(pid_file.read_text())
        time.sleep(0.05)
    reap(child)
    raise AssertionError("the grandchild did not start")


def test_descendants_lists_the_tree_and_kill_tree_ends_it(tmp_path):
    child, grandchild = _sleeper_tree(tmp_path)
    try:
        tree = descendants(child.pid)
        assert tree == [grandchild]
        assert child.pid in descendants(os.getpid())
        kill_tree(child.pid)
        for _ in range(200):
            if not _running(grandchild):
                break
            time.sleep(0.01)
        assert not _running(grandchild)
        assert child.poll() is None  # the root is left to its owner
    finally:
        assert reap(child) == -signal.SIGKILL
    assert not _running(child.pid)


def test_cpu_seconds_and_process_state_read_proc():
    used = cpu_seconds(os.getpid())
    assert used is not None and used > 0
    assert process_state(os.getpid()) == "R"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    reap(child)
    assert cpu_seconds(child.pid) is None and process_state(child.pid) is None


def test_parent_death_signal_ends_an_orphan(tmp_path):
    pid_file = tmp_path / "orphan"
    script = textwrap.dedent(
        f"""
        import os, subprocess, sys, time
        orphan = subprocess.Popen([sys.executable, "-c", '''
        import time
        from verigym.workers import set_parent_death_signal
        set_parent_death_signal()
        open({str(pid_file)!r}, "w").write("armed")
        time.sleep(60)
        '''])
        while not os.path.exists({str(pid_file)!r}):
            time.sleep(0.01)
        print(orphan.pid, flush=True)
        os._exit(0)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    orphan = int(done.stdout.split()[0])
    for _ in range(500):
        if not _running(orphan):
            break
        time.sleep(0.01)
    assert not _running(orphan)
