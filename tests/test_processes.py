"""verigym.workers: reading /proc, killing trees, the parent-death signal, starting a child with
limits (ChildProcess), deadlines, bounded calls (CPU-time and memory limits, a limit that covers the call and not the start), and no subprocess outliving its
owner: process-lifetime workers are reaped when the interpreter exits (tests/conftest.py checks
everything else at the end of the session)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from tests.processes import starved
from verigym.workers import (
    MAX_WALL_CLOCK_FACTOR,
    WALL_CLOCK_FACTOR,
    BoundedWorker,
    ChildProcess,
    Deadline,
    ProcessLimits,
    VerifierTimeout,
    call_bounded,
    cpu_seconds,
    descendants,
    kill_tree,
    memory_sizes,
    process_state,
    reap,
)

CHILD = textwrap.dedent(
    """
    import os, warnings
    warnings.simplefilter("always", ResourceWarning)
    from verigym.workers import BoundedWorker
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


def test_workers_end_when_their_owner_is_killed(tmp_path):
    """An owner killed with SIGKILL (no atexit, no finalizer) leaves no verifier worker behind.

    Before: the forked worker held both ends of its own pipe and a copy of the spawned worker's,
    so neither ever read EOF; both waited in ``recv`` for good with PPID 1."""
    script = CHILD + "os.kill(os.getpid(), 9)\n"
    out = tmp_path / "pids"
    with out.open("w") as handle:  # a file, not a pipe: a leaked worker would hold a pipe open
        done = subprocess.run([sys.executable, "-c", script], stdout=handle, timeout=120)
    assert done.returncode == -signal.SIGKILL
    pids = [int(p) for p in out.read_text().split()]
    assert len(pids) == 2
    for _ in range(200):  # a worker looks for its owner at least once a second while it waits
        if not [pid for pid in pids if _running(pid)]:
            break
        time.sleep(0.05)
    left = [pid for pid in pids if _running(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left


def test_a_forked_worker_holds_no_socket_of_its_owner():
    """A connection the owner closes is closed for its peer even while a forked verifier worker
    (which inherited every descriptor) runs: the worker let go of its copies."""
    import socket

    ours, peer = socket.socketpair()
    worker = BoundedWorker(start_method="fork")
    try:
        assert worker.call(os.getpid, (), timeout=60) != os.getpid()
        ours.close()
        peer.settimeout(10)
        assert peer.recv(1) == b""  # EOF; before, a timeout: the worker held a copy of ours
    finally:
        worker._kill()
        peer.close()


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


def _sleep(seconds: float) -> str:
    time.sleep(seconds)
    return "done"


def _boom() -> None:
    raise KeyError("boom")


def test_call_bounded_kills_overruns_and_recovers():
    start = time.perf_counter()
    with pytest.raises(VerifierTimeout):
        call_bounded(_sleep, 30.0, timeout=0.5)
    assert time.perf_counter() - start < 10.0
    assert call_bounded(_sleep, 0.0, timeout=30.0) == "done"
    with pytest.raises(RuntimeError, match="KeyError"):
        call_bounded(_boom, timeout=30.0)


def test_call_bounded_works_off_the_main_thread():
    results: list[object] = []

    def run() -> None:
        try:
            call_bounded(_sleep, 30.0, timeout=0.5)
        except VerifierTimeout as exc:
            results.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30.0)
    assert len(results) == 1 and isinstance(results[0], VerifierTimeout)


def _allocate(megabytes: int) -> int:
    return len(bytearray(megabytes << 20))


def test_bounded_worker_caps_memory_and_recovers():
    worker = BoundedWorker(start_method="fork", memory_bytes=256 << 20)
    try:
        with pytest.raises(RuntimeError, match="MemoryError"):
            worker.call(_allocate, (2048,), 30.0)
        assert worker.call(_allocate, (16,), 30.0) == 16 << 20
    finally:
        worker._kill()
    with pytest.raises(ValueError, match="memory_bytes"):
        BoundedWorker(memory_bytes=0)


def _slow_start_loop(connection, owner, memory_bytes=None):
    import time as _time

    from verigym import workers as _workers

    _time.sleep(1.5)  # a fork or interpreter start on a loaded machine
    _workers._REAL_WORKER_LOOP(connection, owner, memory_bytes)


def test_a_slow_worker_start_does_not_count_against_the_check_time_limit(monkeypatch):
    """The check's limit covers the check: a worker that needs 1.5 s to start still answers a
    0.5 s check (the start is awaited first), and an overrun after the start is still stopped."""
    import operator
    import time as _time

    from verigym import workers

    monkeypatch.setattr(workers, "_REAL_WORKER_LOOP", workers._worker_loop, raising=False)
    monkeypatch.setattr(workers, "_worker_loop", _slow_start_loop)
    worker = workers.BoundedWorker(start_method="fork")
    try:
        assert worker.call(operator.add, (2, 3), timeout=0.5) == 5
        with pytest.raises(workers.VerifierTimeout):
            worker.call(_time.sleep, (3,), timeout=0.5)
    finally:
        worker._kill()


def _spin(seconds: float) -> str:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return "spun"


def test_the_limit_is_the_worker_cpu_time_not_the_machine_load():
    """A check of 0.2 s CPU whose worker is descheduled for 1 s (SIGSTOP, as on a loaded machine)
    still finishes under a 0.5 s limit; 5 s of CPU is stopped at the limit."""
    import os
    import signal

    worker = BoundedWorker(start_method="fork")
    try:
        assert worker.call(_spin, (0.0,), 5.0) == "spun"  # started outside the measured call
        pid = worker._pid()

        def pause() -> None:
            time.sleep(0.05)
            os.kill(pid, signal.SIGSTOP)
            time.sleep(1.0)
            os.kill(pid, signal.SIGCONT)

        thread = threading.Thread(target=pause)
        thread.start()
        assert worker.call(_spin, (0.2,), 0.5) == "spun"
        thread.join()
        start = time.perf_counter()
        with pytest.raises(VerifierTimeout, match="CPU time"):
            worker.call(_spin, (5.0,), 0.5)
        # stopped at 0.5 s of CPU (on a machine that starves it, at most the backstop's cap)
        assert time.perf_counter() - start < 0.5 * MAX_WALL_CLOCK_FACTOR + 0.5
    finally:
        worker._kill()


def test_a_check_starved_of_cpu_is_not_stopped_by_the_backstop_but_a_blocked_one_is():
    """On a loaded machine a worker gets a small share of a core: a check of 0.15 s CPU under a
    0.25 s limit whose worker runs 10% of the time (SIGSTOP/SIGCONT) needs ~1.5 s, past the 1 s
    wall-clock backstop (4x), and still answers, since the worker was computing (the verdict
    does not depend on load); a check that blocks without computing is stopped at the backstop."""
    worker = BoundedWorker(start_method="fork")
    try:
        assert worker.call(_spin, (0.0,), 5.0) == "spun"
        start = time.perf_counter()
        with starved(worker._pid()):
            assert worker.call(_spin, (0.15,), 0.25) == "spun"
        assert time.perf_counter() - start > 0.25 * WALL_CLOCK_FACTOR  # past the first window
        start = time.perf_counter()
        with pytest.raises(VerifierTimeout, match="CPU time"):
            worker.call(time.sleep, (10,), 0.25)
        assert time.perf_counter() - start < 0.25 * WALL_CLOCK_FACTOR + 0.5
    finally:
        worker._kill()


def test_memory_sizes_reads_this_process_status():
    size, resident, peak, missing = memory_sizes("VmSize", "VmRSS", "VmHWM", "NotAField")
    assert size >= resident > 0 and peak >= resident and missing == 0


def _read_all(fd: int) -> str:
    data = b""
    while chunk := os.read(fd, 4096):
        data += chunk
    os.close(fd)
    return data.decode()


def test_child_process_sets_limits_and_hands_over_its_descriptors():
    import resource

    read_fd, write_fd = os.pipe()
    code = (
        "import os, resource as r\n"
        "print(*(r.getrlimit(k)[1] for k in (r.RLIMIT_CPU, r.RLIMIT_FSIZE, r.RLIMIT_NOFILE,"
        " r.RLIMIT_CORE)), os.getsid(0) == os.getpid(), os.environ.get('ONLY'), 'PATH' in os.environ)"
    )
    hard_cpu = resource.getrlimit(resource.RLIMIT_CPU)[1]
    child = ChildProcess(
        [sys.executable, "-c", code],
        limits=ProcessLimits(
            cpu_seconds=30, file_size_bytes=1 << 20, open_files=50, core_dumps=False
        ),
        env={"ONLY": "1"},
        stdout=write_fd,
        new_session=True,
    )
    with pytest.raises(OSError):
        os.fstat(write_fd)  # handed over: closed here once the child started
    assert child.wait(timeout=60) == 0 and not child.alive
    expected_cpu = 30 if hard_cpu == resource.RLIM_INFINITY else min(30, hard_cpu)
    assert _read_all(read_fd).split() == [
        str(expected_cpu),
        str(1 << 20),
        "50",
        "0",
        "True",
        "1",
        "False",
    ]
    assert child.kill() == 0  # reaped already: the status again, nothing killed


def test_child_process_closes_handed_descriptors_when_the_start_fails():
    read_fd, write_fd = os.pipe()
    with pytest.raises(OSError):
        ChildProcess(["/nonexistent/program"], pass_fds=(write_fd,))
    with pytest.raises(OSError):
        os.fstat(write_fd)
    os.close(read_fd)
    with pytest.raises(ValueError, match="open_files"):
        ProcessLimits(open_files=-1)
    with pytest.raises(ValueError, match="cpu_seconds"):
        ProcessLimits(cpu_seconds=True)


def test_child_process_kill_ends_its_tree_and_reaps_it(tmp_path):
    pid_file = tmp_path / "grandchild"
    script = textwrap.dedent(
        f"""
        import subprocess, sys, time
        grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open({str(pid_file)!r}, "w").write(str(grandchild.pid))
        time.sleep(60)
        """
    )
    child = ChildProcess([sys.executable, "-c", script])
    try:
        for _ in range(600):
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.05)
        grandchild = int(pid_file.read_text())
        assert child.alive and child.cpu_seconds() is not None
    finally:
        status = child.kill()
    assert status == -signal.SIGKILL and not child.alive and child.cpu_seconds() is None
    for _ in range(200):
        if not _running(grandchild):
            break
        time.sleep(0.01)
    assert not _running(grandchild) and not _running(child.pid)


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another uid needs root")
def test_child_process_drops_to_another_uid():
    read_fd, write_fd = os.pipe()
    command = ["/bin/sh", "-c", "id -u; id -g; id -G"]
    child = ChildProcess(command, user=65534, stdout=write_fd, cwd="/")
    assert child.wait(timeout=60) == 0
    assert _read_all(read_fd).split() == ["65534", "65534", "65534"]  # no supplementary groups


def test_child_process_with_a_parent_death_signal_ends_with_its_parent():
    script = textwrap.dedent(
        """
        import os, signal, sys
        from verigym.workers import ChildProcess
        child = ChildProcess(
            [sys.executable, "-c", "import time; time.sleep(60)"],
            parent_death_signal=signal.SIGKILL,
        )
        print(child.pid, flush=True)
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


def test_deadline_counts_wall_clock_and_a_process_cpu_time():
    wall = Deadline(0.05)
    assert not wall.measures_cpu and not wall.passed() and 0 < wall.remaining() <= 0.05
    time.sleep(0.06)
    assert wall.passed() and wall.remaining() == 0.0 and wall.elapsed() >= 0.05
    cpu = Deadline(120.0, cpu_s=0.05, pid=os.getpid())
    assert cpu.measures_cpu and not cpu.passed()
    _spin(0.2)  # 0.2 s of this process's CPU, well within the wall-clock limit
    assert cpu.passed()
