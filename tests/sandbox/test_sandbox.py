"""Security and behaviour tests of ``verigym.sandbox`` (issue 4's list, sandbox part).

Each attack must end with reward-0-worthy outcome or a clear error, the harness alive, the deadline
kept, and no process left behind. Needs bubblewrap (CI installs it); skipped only where it is missing.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import pickle
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest

from tests.sandbox.support import (  # noqa: F401 (autouse fixture)
    SANDBOX_ERROR,
    alive,
    descendant_pids,
    needs_sandbox,
    no_sandbox_left_behind,
)
from verigym.sandbox import (
    Limits,
    PythonSandbox,
    SandboxError,
    cgroups,
    run_code,
    seccomp,
    supervisor,
)
from verigym.workers import cpu_seconds

HAS_CGROUP = cgroups.available()[0]

FAST = Limits(timeout_s=2.0, output_bytes=1 << 16)


class Box:
    """A sandbox that records every process it ever had, to prove none is left."""

    def __init__(self, limits: Limits = FAST):
        self.sandbox = PythonSandbox(limits)
        self.seen: set[int] = set()

    def run(self, code: str, **kwargs):
        watcher_stop = threading.Event()

        def watch() -> None:
            while not watcher_stop.is_set():
                pid = self.sandbox.worker_pid
                if pid is not None:
                    self.seen |= {pid} | descendant_pids(pid)
                time.sleep(0.05)

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        try:
            return self.sandbox.run(code, **kwargs)
        finally:
            watcher_stop.set()
            thread.join()

    def close_and_check(self) -> None:
        pid = self.sandbox.worker_pid
        if pid is not None:
            self.seen |= {pid} | descendant_pids(pid)
        self.sandbox.close()
        deadline = (
            time.monotonic() + 5.0
        )  # a killed process may take a moment to exit on a busy machine
        while alive(self.seen) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not alive(self.seen), f"processes left behind: {alive(self.seen)}"


@pytest.fixture
def box():
    b = Box()
    yield b
    b.close_and_check()


@needs_sandbox
def test_notebook_state_persists_and_runs_as_unprivileged_uid(box):
    assert box.run("x = 20").ok
    result = box.run("import os\nx += 22\nprint(os.getuid(), os.getgid())\nx")
    assert result.ok, result
    assert result.output.split() == ["65534", "65534", "42"]


@needs_sandbox
def test_value_of_call_is_type_checked(box):
    box.run(
        "class Liar:\n    def __eq__(self, other): return True\n"
        "def honest(n): return [n, n * 2.5, 'x', None, {'k': (1, 2)}]\ndef liar(): return Liar()\n"
        "def sub(): return type('I', (int,), {})(3)"
    )
    assert box.sandbox.call("honest", [4]).value == [4, 10.0, "x", None, {"k": [1, 2]}]
    for name in ("liar", "sub"):
        result = box.sandbox.call(name)
        assert not result.ok and result.value is None
        assert "not None/bool/int/float/str/list/dict" in result.error
    batch = box.sandbox.call_many("honest", [[1], [2], ["x"]])
    assert [r.value for r in batch] == [
        [1, 2.5, "x", None, {"k": [1, 2]}],
        [2, 5.0, "x", None, {"k": [1, 2]}],
        None,
    ]
    assert [r.ok for r in batch] == [True, True, False] and batch[2].error.startswith("TypeError")
    assert [r.ok for r in box.sandbox.call_many("liar", [[], []])] == [False, False]


@needs_sandbox
@pytest.mark.parametrize(
    "code", ["while True: pass", "import itertools\nsum(itertools.repeat(1, 3 * 10**9))"]
)
def test_infinite_loops_hit_the_deadline(box, code):
    start = time.monotonic()
    result = box.run(code, timeout=1.0)
    elapsed = time.monotonic() - start
    assert result.killed == "timeout" and not result.ok
    assert "TimeoutError" in result.error
    assert elapsed < 4.0
    assert box.run("print('fresh')").output == "fresh\n"  # a new worker after the kill


@needs_sandbox
def test_fork_bomb_is_bounded_and_killed():
    box = Box(Limits(timeout_s=2.0, max_processes=16))
    code = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    peak = 0

    def sample() -> None:
        nonlocal peak
        for _ in range(30):
            pid = box.sandbox.worker_pid
            if pid is not None:
                peak = max(peak, len(descendant_pids(pid)))
            time.sleep(0.03)

    sampler = threading.Thread(target=sample)
    sampler.start()
    start = time.monotonic()
    result = box.run(code)
    sampler.join()
    assert result.killed == "timeout"
    assert time.monotonic() - start < 6.0
    bound = 16 if HAS_CGROUP else 16 + 8  # pids.max, else RLIMIT_NPROC (max_processes + 8)
    assert 0 < peak <= bound + 1, peak  # the outer bwrap is counted here too
    box.close_and_check()


def _cpu_seconds(pids: set[int]) -> float:
    """User + system CPU seconds consumed so far by the living processes among ``pids``."""
    return sum(cpu_seconds(pid) or 0.0 for pid in pids)


@needs_sandbox
def test_no_agent_process_survives_a_call():
    box = Box()
    code = (
        "import os, time\n"
        "started = []\n"
        "if os.fork() == 0:\n"  # a double-forked setsid daemon
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(300)\n"
        "    os._exit(0)\n"
        "burner = os.fork()\n"
        "if burner == 0:\n"  # a CPU burner in its own process group
        "    os.setpgid(0, 0)\n"
        "    while True: pass\n"
        "time.sleep(0.3)\n"
        "print(len([p for p in os.listdir('/proc') if p.isdigit()]))"
    )
    result = box.run(code)
    assert result.ok and int(result.output) >= 3, (
        result
    )  # the notebook, the daemon and the burner ran
    tree = alive(descendant_pids(box.sandbox.worker_pid))
    assert len(tree) == 1, f"processes of the agent outlive the call: {tree}"  # the notebook only
    assert (
        box.run("print(len([p for p in __import__('os').listdir('/proc') if p.isdigit()]))").output
        == "1\n"
    )
    box.close_and_check()


@needs_sandbox
def test_cpu_burnt_in_forked_children_stops_with_the_call():
    box = Box()
    code = "import os\nfor _ in range(2):\n    if os.fork() == 0:\n        while True: pass\n"
    assert box.run(code).ok
    tree = descendant_pids(box.sandbox.worker_pid)
    before = _cpu_seconds(tree)
    time.sleep(0.6)
    assert _cpu_seconds(tree) - before < 0.1  # the burners were killed when the call returned
    box.close_and_check()


@needs_sandbox
def test_a_thread_that_keeps_forking_leaves_nothing_running_after_the_call():
    box = Box()
    code = (
        "import os, threading, time\n"
        "def spawn():\n"
        "    while True:\n"
        "        try:\n"
        "            if os.fork() == 0:\n"
        "                time.sleep(60)\n"
        "        except OSError:\n"
        "            time.sleep(0.001)\n"
        "threading.Thread(target=spawn, daemon=True).start()\n"
        "time.sleep(0.1)"
    )
    assert box.run(code).ok
    tree = alive(descendant_pids(box.sandbox.worker_pid))
    assert len(tree) == 1, tree  # only the (stopped) notebook
    assert box.run("print(7)").output == "7\n"
    box.close_and_check()


@needs_sandbox
def test_threads_of_the_notebook_do_not_run_between_calls():
    box = Box()
    code = (
        "import threading, time\n"
        "ticks = [0]\n"
        "def spin():\n"
        "    while True: ticks[0] += 1\n"
        "threading.Thread(target=spin, daemon=True).start()\n"
        "time.sleep(0.1)"
    )
    assert box.run(code).ok
    tree = descendant_pids(box.sandbox.worker_pid)
    before = _cpu_seconds(tree)
    time.sleep(0.6)
    assert _cpu_seconds(tree) - before < 0.1  # the notebook is stopped between calls
    result = box.run("t = ticks[0]\ntime.sleep(0.2)\nprint(ticks[0] > t)")
    assert result.output == "True\n"  # and runs again, threads included, inside the next call
    box.close_and_check()


@needs_sandbox
def test_memory_limit(box):
    result = box.run("x = bytearray(8 << 30)")
    assert not result.ok and result.error.startswith("MemoryError")
    result = box.run(
        "import mmap\nm = mmap.mmap(-1, 8 << 30)\nfor i in range(0, 8 << 30, 4096): m[i] = 1"
    )
    assert not result.ok and "rror" in result.error
    assert box.run("print(1)").output == "1\n"


@needs_sandbox
def test_rlimits_hold_in_the_sandbox():
    """The worker's rlimits (set by verigym.workers.ChildProcess before exec) as seen inside."""
    limits = Limits(timeout_s=5.0, cpu_s=7, memory_mb=512, file_size_mb=3, open_files=20)
    code = (
        "import resource as r\n"
        "print(*(r.getrlimit(k)[1] for k in "
        "(r.RLIMIT_CPU, r.RLIMIT_AS, r.RLIMIT_FSIZE, r.RLIMIT_NOFILE, r.RLIMIT_CORE)))"
    )
    result = run_code(code, limits=limits)
    assert result.ok, result
    assert result.output.split() == ["7", str(512 << 20), str(3 << 20), "36", "0"]


@needs_sandbox
def test_output_cap_kills_a_flood_and_invalid_utf8_is_replaced(box):
    start = time.monotonic()
    result = box.run("import sys\nfor _ in range(1024):\n    sys.stdout.write('x' * (1 << 20))")
    assert result.killed == "output_limit" and "OutputLimitError" in result.error
    assert len(result.output) <= FAST.output_bytes
    assert time.monotonic() - start < 4.0
    result = box.run("import os\nos.write(1, b'ok \\xff\\xfe\\xc3( end')")
    assert result.ok and result.output.startswith("ok ") and "\ufffd" in result.output


@needs_sandbox
def test_host_files_are_invisible(box, tmp_path):
    secret = tmp_path / "answer.txt"
    secret.write_text("the answer is 1234567")
    code = (
        "import os\n"
        f"paths = ['/etc/passwd', '/etc/shadow', '/root', '/home', {str(secret)!r}, {os.getcwd()!r}]\n"
        "print([os.path.exists(p) for p in paths])\n"
        "print(os.path.expanduser('~'))\n"
        "hits = [r for r, d, f in os.walk('/') if r.startswith('/proc') is False for n in f if 'answer' in n]\n"
        "print(hits)"
    )
    result = box.run(code, timeout=10.0)
    assert result.ok, result
    lines = result.output.splitlines()
    assert lines[0] == "[False, False, False, False, False, False]"
    assert lines[2] == "[]"
    assert "1234567" not in result.output


@needs_sandbox
def test_no_network_to_a_loopback_port_of_the_harness(box):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    try:
        code = (
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'leak')\n"
            "    print('connected')\n"
            "except OSError as e:\n"
            "    print('refused', type(e).__name__)"
        )
        result = box.run(code)
        assert result.ok and result.output.startswith("refused")
        with pytest.raises(socket.timeout):
            server.accept()
    finally:
        server.close()


@needs_sandbox
def test_cannot_kill_the_harness_or_read_its_environment(box, monkeypatch):
    monkeypatch.setenv("VERIGYM_TEST_SECRET", "s3cr3t-token")
    box.sandbox.close()  # the next start sees the secret in this process's environment
    code = (
        "import os, signal\n"
        "out = []\n"
        f"for pid in (os.getppid(), 1, {os.getpid()}, {os.getppid()}):\n"
        "    try:\n"
        "        os.kill(pid, signal.SIGKILL); out.append('sent')\n"
        "    except OSError as e:\n"
        "        out.append(type(e).__name__)\n"
        "for path in ('/proc/%d/environ' % os.getppid(), '/proc/1/environ', '/proc/self/environ'):\n"
        "    try:\n"
        "        out.append(open(path, 'rb').read().decode('latin-1'))\n"
        "    except OSError as e:\n"
        "        out.append(type(e).__name__)\n"
        "print(out, dict(os.environ))"
    )
    result = box.run(code)
    assert result.ok, result
    assert "s3cr3t-token" not in result.output
    assert "ProcessLookupError" in result.output  # the harness's pids do not exist in the sandbox
    assert box.run("print(2)").output == "2\n"  # the worker and harness are alive
    os.kill(os.getpid(), 0)


@needs_sandbox
def test_exit_calls_are_reported(box):
    result = box.run("import sys\nsys.exit(0)")
    assert not result.ok and result.error.startswith("SystemExit")
    assert box.run("print(3)").output == "3\n"
    result = box.run("import os\nos._exit(0)")
    assert not result.ok and result.killed == "died"
    assert box.run("print(4)").output == "4\n"


@needs_sandbox
def test_pickle_and_deepcopy_replay_the_notebook(caplog):
    with caplog.at_level("WARNING", logger=supervisor.__name__), PythonSandbox(FAST) as original:
        original.run("import math\nv = [math.factorial(5)]")
        original.run("v.append(2)")  # two cells: each replayed cell runs (the worker is resumed)
        for clone in (pickle.loads(pickle.dumps(original)), copy.deepcopy(original)):
            with clone:
                clone.run("v.append(1)")
                assert clone.run("v").output == "[120, 2, 1]\n"
        assert original.run("v").output == "[120, 2]\n"
    assert "replaying the sandbox notebook failed" not in caplog.text


@needs_sandbox
def test_run_code_is_a_cold_call():
    result = run_code("print(sum(range(10)))", limits=FAST)
    assert result.ok and result.output == "45\n"


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_fails_closed_without_bubblewrap(monkeypatch):
    monkeypatch.setattr(supervisor, "bwrap_features", lambda: (None, False))
    before = _open_descriptors()
    with pytest.raises(SandboxError, match="apt-get update && apt-get install -y bubblewrap"):
        PythonSandbox(FAST).run("print(1)")
    assert _open_descriptors() == before  # the pipes and the seccomp memfd of the try are closed
    with PythonSandbox(FAST, unsafe=True) as unsafe:
        assert unsafe.run("print(5)").output == "5\n"


def test_limits_are_validated():
    with pytest.raises(ValueError, match="timeout_s"):
        Limits(timeout_s=0)
    with pytest.raises(TypeError):
        PythonSandbox(limits={"timeout_s": 1})
    with pytest.raises(TypeError):
        PythonSandbox(FAST).run(b"print(1)")


def test_doctor_probe_reports():
    from verigym.sandbox import doctor_probe

    probe = doctor_probe()
    assert probe.part == "code sandbox (bubblewrap)"
    assert probe.ok == (not SANDBOX_ERROR), probe
    if probe.ok:  # which limits hold here, seen from inside a running sandbox
        assert "read-only root and /dev" in probe.detail and "/tmp (64 MiB)" in probe.detail, (
            probe.detail
        )
        assert "notebook stopped and other processes killed between calls" in probe.detail
        assert ("cgroup pids.max" in probe.detail) == HAS_CGROUP


@needs_sandbox
def test_fresh_gives_a_new_machine_and_kills_the_old_one():
    box = Box()
    assert box.run("x = 1").ok
    old = descendant_pids(box.sandbox.worker_pid) | {box.sandbox.worker_pid}
    box.sandbox.fresh()
    result = box.run("x")
    assert not result.ok and result.error.startswith("NameError")
    assert not alive(old)  # no process of the last episode is left
    box.sandbox.fresh()  # the next episode's sandbox was started in advance
    assert box.run("print(5)").output == "5\n"
    box.close_and_check()


_WRITABLE_PLACES = (
    "import os\n"
    "def can_create(place):\n"
    "    try:\n"
    "        os.close(os.open(os.path.join(place, '.probe'), os.O_CREAT | os.O_EXCL | os.O_WRONLY))\n"
    "    except OSError:\n"
    "        return False\n"
    "    os.unlink(os.path.join(place, '.probe'))\n"
    "    return True\n"
    "def writable_places():\n"
    "    found = {p for p in ('/usr', os.path.expanduser('~'), os.getcwd()) if can_create(p)}\n"
    "    for root, dirs, _ in os.walk('/'):\n"
    "        dirs[:] = [d for d in dirs if os.path.join(root, d) not in ('/proc', '/sys', '/usr')]\n"
    "        if can_create(root):\n"
    "            found.add(root)\n"
    "    return sorted(found)\n"
)


@needs_sandbox
def test_files_written_anywhere_are_gone_in_the_next_episode():
    with PythonSandbox(FAST) as sandbox:
        setup = sandbox.run(
            _WRITABLE_PLACES + "places = writable_places()\n"
            "for place in places:\n"
            "    with open(os.path.join(place, 'mark-31337'), 'w') as handle: handle.write('episode 1')\n"
            "print(places)"
        )
        assert setup.ok, setup
        assert "'/tmp'" in setup.output and "'/dev/shm'" in setup.output, setup.output
        sandbox.fresh()
        found = sandbox.run(
            "import os\nhits = []\n"
            "for root, dirs, files in os.walk('/'):\n"
            "    dirs[:] = [d for d in dirs if os.path.join(root, d) not in ('/proc', '/sys')]\n"
            "    hits += [os.path.join(root, f) for f in files if f == 'mark-31337']\n"
            "print(hits)",
            timeout=10.0,
        )
        assert found.ok and found.output == "[]\n", found


@needs_sandbox
def test_every_writable_place_is_size_capped():
    limits = Limits(timeout_s=10.0, tmp_mb=4, file_size_mb=16)
    with PythonSandbox(limits) as sandbox:
        result = sandbox.run(
            _WRITABLE_PLACES + "written = {}\n"
            "for place in writable_places():\n"
            "    total = 0\n"
            "    try:\n"
            "        for i in range(12):\n"
            "            with open(os.path.join(place, f'fill{i}'), 'wb') as handle:\n"
            "                handle.write(b'x' * (1 << 20))\n"
            "            total += 1 << 20\n"
            "    except OSError:\n"
            "        pass\n"
            "    written[place] = total\n"
            "print(written)"
        )
        assert result.ok, result
        written = eval(result.output)  # a dict of str -> int printed by the sandbox
        assert "/tmp" in written and "/dev/shm" in written
        assert all(total <= 4 << 20 for total in written.values()), written


@needs_sandbox
def test_no_process_of_the_sandbox_can_be_written_to_by_agent_code(box):
    # /proc/<pid>/mem of any other process (a parent that forks notebooks, an init) would let one
    # episode plant code that a later episode runs with.
    code = (
        "import os\n"
        "others = [int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]\n"
        "writable = []\n"
        "for pid in others + [os.getppid()]:\n"
        "    try:\n"
        "        with open(f'/proc/{pid}/mem', 'r+b'):\n"
        "            writable.append(pid)\n"
        "    except OSError:\n"
        "        pass\n"
        "print(others, writable)"
    )
    result = box.run(code)
    assert result.ok and result.output == "[] []\n", result


@needs_sandbox
@pytest.mark.parametrize(
    "end",
    ["close", pytest.param("timeout", marks=pytest.mark.slow)],  # 2 s: the deadline
)
def test_a_notebook_that_drops_its_death_signal_dies_without_a_cgroup(monkeypatch, end):
    """The notebook dies with bwrap through ``PR_SET_PDEATHSIG``, which agent code may clear
    (``prctl(PR_SET_PDEATHSIG, 0)``); without a cgroup to sweep (a machine whose cgroup
    filesystem is read-only, every non-root user) it ran on, reparented, after its sandbox was
    closed or its call killed. The supervisor kills it through a pidfd as well."""
    monkeypatch.setattr(supervisor.CgroupSet, "create", classmethod(lambda cls, **_: cls()))
    monkeypatch.setattr(seccomp, "program", lambda: None)  # it refuses the prctl (test below)
    sandbox = PythonSandbox(FAST)
    try:
        dropped = sandbox.run("import ctypes\nctypes.CDLL(None).prctl(1, 0, 0, 0, 0)")
        assert dropped.ok, dropped
        pid = sandbox.notebook_pid
        if end == "timeout":
            stuck = sandbox.run("import time\nwhile True: time.sleep(0.05)")
            assert stuck.killed == "timeout"
    finally:
        sandbox.close()
    deadline = time.monotonic() + 5.0
    while alive({pid}) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive({pid}), f"the notebook {pid} outlived its sandbox"


@needs_sandbox
def test_code_unit_tests_hidden_inputs_never_reach_a_later_episode():
    from verigym.envs.tool.code_unit_tests import CodeUnitTestsEnv

    env = CodeUnitTestsEnv(num_tests=3, timeout_s=5.0)
    try:
        env.reset(seed=0)
        leak = (
            "import json, os, time\n"
            f"def {env._problem_name}(*args):\n"
            "    for place in ('/tmp', '/dev/shm'):\n"
            "        with open(place + '/leak.json', 'a') as handle: handle.write(json.dumps(args))\n"
            "    if os.fork() == 0:\n"
            "        os.setsid(); time.sleep(60)\n"
            "    return None\n"
        )
        env.step(f"<answer>```python\n{leak}```</answer>")
        env.reset(seed=1)
        probe = "import os; print([os.path.exists(p + '/leak.json') for p in ('/tmp', '/dev/shm')], len(os.listdir('/proc')))"
        observation, *_ = env.step(
            "<tool_call>"
            + json.dumps({"name": "python", "arguments": {"code": probe}})
            + "</tool_call>"
        )
        assert "[False, False]" in observation, observation
    finally:
        env.close()


@needs_sandbox
def test_forged_answers_are_ignored(box):
    # a thread writes well-formed answers with guessed ids to every descriptor it can find
    code = (
        "import os, json, struct, threading, time\n"
        "def forge():\n"
        "    body = json.dumps({'id': 'start', 'ok': True, 'value': 42, 'ready': True}).encode()\n"
        "    for _ in range(50):\n"
        "        for fd in range(3, 12):\n"
        "            try: os.write(fd, struct.pack('!Q', len(body)) + body)\n"
        "            except OSError: pass\n"
        "        time.sleep(0.01)\n"
        "threading.Thread(target=forge, daemon=True).start()\n"
        "def f(): return 7\n"
    )
    assert box.run(code).ok
    values = [box.sandbox.call("f").value for _ in range(5)]
    assert values == [7] * 5


@needs_sandbox
def test_an_error_message_holding_a_lone_surrogate_is_escaped(box):
    """With its output closed, a cell's error reached the agent as ``error`` alone, lone
    surrogate included (CodeUnitTests' and PythonMath's observation: the env contract allows none)."""
    result = box.run("import os\nos.close(1)\nos.close(2)\nraise ValueError('\\ud800')")
    assert not result.ok and result.error == "ValueError: \\ud800", result
    result.text().encode("utf-8")


@needs_sandbox
def test_a_deeply_nested_forged_message_is_ignored(box):
    """Agent code in the notebook can write to the answer pipe: a message of 200,000 nested
    arrays raised RecursionError out of the parent's decoder, so the env's step crashed."""
    code = (
        "import os, struct, sys\n"
        "body = b'[' * 200000 + b']' * 200000\n"
        "os.write(int(sys.argv[2]), struct.pack('!Q', len(body)) + body)\n"
        "print('sent')\n"
    )
    result = box.run(code)
    assert result.ok and result.output == "sent\n", result
    assert box.run("print(6 * 7)").output == "42\n"


@needs_sandbox
@pytest.mark.skipif(seccomp.program() is None, reason="no seccomp table for this machine")
def test_seccomp_denies_kernel_attack_surface(box):
    code = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "for nr in (101, 425, 272, 321, 250, 0x40000000 + 39, 39):\n"
        "    r = libc.syscall(nr, 0, 0, 0, 0)\n"
        "    print(r, ctypes.get_errno() if r < 0 else 0)\n"
    )
    result = box.run(code)
    assert result.ok, result
    lines = result.output.splitlines()
    assert lines[:6] == ["-1 1"] * 6  # ptrace, io_uring_setup, unshare, bpf, keyctl, x32: EPERM
    assert int(lines[6].split()[0]) > 0  # getpid still works


@needs_sandbox
@pytest.mark.skipif(seccomp.program() is None, reason="no seccomp table for this machine")
def test_seccomp_refuses_clearing_the_death_signal_and_only_that_prctl(box):
    """The notebook dies with bwrap by ``PR_SET_PDEATHSIG``; agent code that cleared it outlived a
    killed host (tests above, without the filter). Other ``prctl`` options still work."""
    code = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.prctl(1, 0, 0, 0, 0), ctypes.get_errno())\n"  # PR_SET_PDEATHSIG
        "signal = ctypes.c_int()\n"
        "print(libc.prctl(2, ctypes.byref(signal), 0, 0, 0), signal.value)\n"  # PR_GET_PDEATHSIG
        "print(libc.prctl(15, b'cell', 0, 0, 0))\n"  # PR_SET_NAME
    )
    result = box.run(code)
    assert result.ok and result.output.splitlines() == ["-1 1", "0 9", "0"], result


@needs_sandbox
@pytest.mark.skipif(seccomp.program() is None, reason="no seccomp table for this machine")
def test_seccomp_denies_the_pidfd_calls(box):
    """``pidfd_getfd`` would copy the worker's control pipes into another process; it and the other
    pidfd calls, unused inside, answer EPERM (without the filter: EBADF/ESRCH for these arguments)."""
    code = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "calls = ((438, -1, 0, 0), (434, os.getpid(), 0, 0), (424, -1, 9, 0), (440, -1, 0, 0),\n"
        "         (448, -1, 0, 0))\n"
        "for nr, *args in calls:  # pidfd_getfd, pidfd_open, pidfd_send_signal, process_madvise,\n"
        "    r = libc.syscall(nr, *args, 0, 0)  # process_mrelease\n"
        "    print(r, ctypes.get_errno() if r < 0 else 0)\n"
        "print(os.getpid())\n"
    )
    result = box.run(code)
    assert result.ok, result
    lines = result.output.splitlines()
    assert lines[:5] == ["-1 1"] * 5, lines  # EPERM from the filter, whatever the arguments
    assert lines[5] == "1"  # the worker is pid 1 of its namespace and still runs


_NON_ROOT_SCENARIO = """
import json, os, sys, time, types
package = types.ModuleType("verigym")
package.__path__ = [sys.argv[1]]  # the sandbox modules only: they need nothing but the standard library
sys.modules["verigym"] = package
from verigym.sandbox import cgroups, supervisor

def tree(pid):
    parents = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(entry)] = int(fields[1])
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        for child, its_parent in parents.items():
            if its_parent == parent and child not in found:
                found.add(child)
                todo.append(child)
    return found

report = {"euid": os.geteuid(), "cgroup": cgroups.available()[0]}
with supervisor.PythonSandbox(supervisor.Limits(timeout_s=10.0)) as box:
    first = box.run("import os\\nopen('/tmp/mark', 'w').write('1')\\nif os.fork() == 0:\\n    os.setsid(); import time; time.sleep(60)\\nprint(os.getuid())")
    report["first"] = [first.ok, first.output]
    # the notebook makes itself non-dumpable and a thread keeps forking after the call returned
    hostile = box.run("import ctypes, os, threading, time\\nctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\\n"
                      "def spawn():\\n    while True:\\n        try:\\n            if os.fork() == 0:\\n                time.sleep(60)\\n"
                      "        except OSError:\\n            time.sleep(0.001)\\n"
                      "threading.Thread(target=spawn, daemon=True).start()\\ntime.sleep(0.05)")
    report["hostile"] = hostile.ok
    report["tree_after_call"] = len(tree(box.worker_pid))
    with open(f"/proc/{box.notebook_pid}/stat") as handle:
        report["notebook_state"] = handle.read().rsplit(")", 1)[1].split()[0]
    box.fresh()
    second = box.run("import os\\nprint(os.path.exists('/tmp/mark'), [p for p in os.listdir('/proc') if p.isdigit()])")
    report["second"] = [second.ok, second.output]
print(json.dumps(report))
"""


@needs_sandbox
def test_the_non_root_path_holds(tmp_path):
    """No uid switch and no writable cgroup: a real unprivileged user runs the sandbox."""
    import subprocess
    import sys

    repo_package = os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "verigym"
    )
    if os.geteuid() == 0:
        setpriv, system_python = (
            shutil.which("setpriv"),
            shutil.which("python3", path="/usr/bin:/bin"),
        )
        if (
            setpriv is None
            or system_python is None
            or not supervisor._traversable_by_others(repo_package)
        ):
            pytest.skip(
                "needs setpriv, /usr/bin/python3 and a world-readable checkout to act as a non-root user"
            )
        command = [
            setpriv,
            "--reuid",
            "65533",
            "--regid",
            "65533",
            "--clear-groups",
            system_python,
            "-I",
        ]
    else:
        command = [sys.executable, "-I"]
    done = subprocess.run(
        command + ["-c", _NON_ROOT_SCENARIO, repo_package],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin"},
        cwd="/",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["euid"] != 0 and report["cgroup"] is False  # the path under test
    assert report["first"][0] and report["first"][1].strip() == "65534"
    assert report["hostile"]
    assert report["tree_after_call"] == 1  # the daemon died with the call
    assert report["notebook_state"] == "T"  # the notebook is stopped between calls
    assert report["second"] == [
        True,
        "False ['1']\n",
    ]  # a new machine: no file, no process of episode 1


@needs_sandbox
def test_a_cold_start_that_dies_is_tried_again(monkeypatch, caplog):
    """A worker that dies before "ready" (status 137 under load, seen in CI) is started again after
    a pause, with a warning, up to ``_START_RETRY_WAITS`` times; then it is the SandboxError it
    always was."""
    from verigym.sandbox import supervisor

    monkeypatch.setattr(supervisor, "_START_RETRY_WAITS", (0.0, 0.01))
    real = supervisor._Worker.wait_ready
    deaths = [1]

    def flaky(self):
        if deaths and deaths.pop():
            self.kill()
            return supervisor.ExecResult(
                False, "", "WorkerDied: the Python process exited (status 137)", killed="died"
            )
        return real(self)

    monkeypatch.setattr(supervisor._Worker, "wait_ready", flaky)
    with caplog.at_level("WARNING", logger=supervisor.__name__), PythonSandbox() as sandbox:
        assert sandbox.run("print(6 * 7)").output.strip() == "42"
    assert "died while starting" in caplog.text and not deaths

    deaths[:] = [1, 1]  # two deaths, two retries: the third start runs
    with PythonSandbox() as sandbox:
        assert sandbox.run("print(1)").output.strip() == "1"

    deaths[:] = [1, 1, 1]
    with PythonSandbox() as sandbox, pytest.raises(SandboxError, match="did not start"):
        sandbox.run("print(1)")
    assert not deaths


def test_oom_kills_are_read_from_either_cgroup_version(tmp_path):
    """The death message names OOM kills from ``memory.events`` (v2) or ``memory.oom_control`` (v1)."""
    from verigym.sandbox.cgroups import CgroupSet

    v1, v2, none = tmp_path / "v1", tmp_path / "v2", tmp_path / "none"
    for folder in (v1, v2, none):
        folder.mkdir()
    (v1 / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    (v2 / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n")
    assert CgroupSet(directories=[str(v1)]).oom_kills() == 2
    assert CgroupSet(directories=[str(v2)]).oom_kills() == 1
    assert CgroupSet(directories=[str(none)]).oom_kills() is None


def test_remove_stale_keeps_live_owners_and_foreign_names(tmp_path):
    """Only ``verigym-sandbox-<pid>-<8 hex>`` directories of a process that is gone are removed."""
    from verigym.sandbox.cgroups import remove_stale

    dead = subprocess.Popen(["true"])
    dead.wait()
    names = {
        f"verigym-sandbox-{dead.pid}-deadbeef": False,  # removed
        f"verigym-sandbox-{os.getpid()}-0badf00d": True,  # its owner runs
        f"verigym-sandbox-{dead.pid}-notahex!": True,  # not a name the sandbox makes
        "verigym-sandbox-0-deadbeef": True,  # pid 0 would signal a process group
        f"other-{dead.pid}-deadbeef": True,
    }
    for name in names:
        (tmp_path / name).mkdir()
    (tmp_path / f"verigym-sandbox-{dead.pid}-cafecafe").mkdir()
    (tmp_path / f"verigym-sandbox-{dead.pid}-cafecafe" / "held").mkdir()  # not empty: kept
    assert remove_stale(str(tmp_path)) == [str(tmp_path / f"verigym-sandbox-{dead.pid}-deadbeef")]
    assert {name: (tmp_path / name).is_dir() for name in names} == names
    assert (tmp_path / f"verigym-sandbox-{dead.pid}-cafecafe").is_dir()


@needs_sandbox
@pytest.mark.skipif(not HAS_CGROUP, reason="no writable cgroup filesystem")
def test_stale_cgroups_of_a_killed_host_are_removed_at_the_next_start():
    """A host process killed with SIGKILL leaves its sandbox cgroups; the next start removes them
    (every controller), and keeps those of a host process that still runs."""
    bases = cgroups.parent_directories()
    assert bases
    host = subprocess.Popen(["sleep", "60"])
    killed = subprocess.Popen(["sleep", "60"])
    killed.kill()
    killed.wait()
    stale = [f"{base}/verigym-sandbox-{killed.pid}-deadbeef" for base in bases]
    kept = [f"{base}/verigym-sandbox-{host.pid}-0badf00d" for base in bases]
    try:
        for directory in stale + kept:
            os.mkdir(directory)
        with PythonSandbox(FAST) as sandbox:
            assert sandbox.run("print(6 * 7)").output == "42\n"
        assert [d for d in stale if os.path.isdir(d)] == []
        assert [d for d in kept if os.path.isdir(d)] == kept
    finally:
        host.kill()
        host.wait()
        for directory in stale + kept:
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(directory)


_KILLED_HOST = """
import sys, time
sys.path.insert(0, sys.argv[1])
from verigym.sandbox import Limits, PythonSandbox, seccomp
seccomp.program = lambda: None  # the filter refuses the prctl below (a test of its own)
box = PythonSandbox(Limits(timeout_s=30.0))
box.run("import ctypes\\nctypes.CDLL(None).prctl(1, 0, 0, 0, 0)")  # PR_SET_PDEATHSIG: none
print(box.notebook_pid, flush=True)
time.sleep(60)
"""


@needs_sandbox
@pytest.mark.skipif(not HAS_CGROUP, reason="no writable cgroup filesystem")
# slow, not default: it failed once (the notebook still alive 5 s after the next start) in a
# fresh clone's default run on two xdist workers, and passed in six other runs; cause not found
@pytest.mark.slow
def test_a_notebook_that_outlived_its_killed_host_is_killed_at_the_next_start():
    """A host killed with SIGKILL takes its sandboxes with it through their death signal, which
    agent code may clear: that notebook ran on (stopped) in a cgroup the next start saw as held and
    left alone. The next start kills what a stale group of a dead owner holds, then removes it."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    host = subprocess.Popen(
        [sys.executable, "-c", _KILLED_HOST, repo], stdout=subprocess.PIPE, text=True
    )
    try:
        notebook = int(host.stdout.readline())
    finally:
        host.kill()
        host.wait()
        host.stdout.close()
    assert alive({notebook})  # it outlived its host
    with PythonSandbox(FAST) as sandbox:
        assert sandbox.run("print(6 * 7)").output == "42\n"
    deadline = time.monotonic() + 5.0
    while alive({notebook}) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive({notebook})
    assert not [
        entry
        for base in cgroups.parent_directories()
        for entry in os.listdir(base)
        if entry.startswith(f"verigym-sandbox-{host.pid}-")
    ]
