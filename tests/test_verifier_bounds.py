"""verigym.verifier_bounds and the ``verifier_bounds`` check of ``verigym check`` (issue 16, section 2)."""

from __future__ import annotations

import json
import re
import time

import gymnasium as gym
from gymnasium import spaces

from verigym import verifier_bounds
from verigym.checker import check_env
from verigym.core import UnicodeText
from verigym.verifier_bounds import (
    WORST_CASE_MEMORY_BYTES,
    adversarial_payloads,
    adversarial_replies,
    measure_worst_case,
    tool_schemas,
)

_SCHEMA = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "look a word up",
        "parameters": {
            "type": "object",
            "properties": {"word": {"type": "string"}, "limit": {"type": "integer"}},
        },
    },
}


class _TruthTableEnv(gym.Env):
    """A single-turn env whose verifier checks a formula by a truth table over the reply's variables:
    2^n work in the number of distinct names (capped at 2^20, about 0.1 s, measured against a 0.02 s bound), optionally
    screened first, and optionally building a 560 MiB value for a reply that asks for it."""

    metadata = {"render_modes": [], "family": "text"}

    def __init__(self, *, screened: bool = False, hungry: bool = False):
        self.screened, self.hungry = screened, hungry
        self.action_space = UnicodeText(4096)
        self.observation_space = UnicodeText(256)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "Give a formula over p and q.", {
            "instructions": "Reply with a formula.\n" + json.dumps(_SCHEMA)
        }

    def step(self, action):
        names = sorted(set(re.findall(r"[a-z]\w*", action)))
        info = {"success": False, "score": 0.0}
        if self.hungry and "'x' * 10**" in action:
            info["size"] = len(b"x" * (560 << 20))
        if self.screened and not set(names) <= {"p", "q"}:
            info["action_error"] = "only p and q"
            return "refused", 0.0, True, False, info
        rows = 0
        for bits in range(2 ** min(len(names), 20)):
            rows += (bits ^ bits >> 1) & 1
        return f"{rows} rows", 0.0, True, False, info


def test_payloads_cover_every_class_and_fit_the_space():
    payloads = dict(adversarial_payloads(1000))
    for label in (
        "long_digits",
        "nested_parentheses",
        "nested_braces",
        "power_tower_python",
        "huge_exponent",
        "many_variables_sum",
        "many_variables_logic",
        "repetition_regex",
        "repetition_encoded",
        "sql_printf",
        "code_loop",
    ):
        assert label in payloads
    assert all(len(text) <= 1000 for text in payloads.values())
    assert all(len(text) <= 20 for _, text in adversarial_payloads(20))


def test_tool_arguments_get_every_payload():
    instructions = "Do it.\n" + json.dumps(_SCHEMA) + "\nnot json {"
    assert tool_schemas(instructions) == [
        {"name": "lookup", "parameters": _SCHEMA["function"]["parameters"]}
    ]
    replies = adversarial_replies(8192, instructions)
    calls = [reply for label, reply in replies if label.endswith("/tool:lookup.word")]
    assert len(calls) == len(adversarial_payloads(8192))
    body = json.loads(calls[0][len("<tool_call>") : -len("</tool_call>")])
    assert (
        body["name"] == "lookup"
        and body["arguments"]["limit"] == 1
        and isinstance(body["arguments"]["word"], str)
    )
    assert all(len(reply) <= 8192 for _, reply in replies)
    assert any(label.endswith("/answer") for label, _ in replies) and any(
        label.endswith("/bare") for label, _ in replies
    )


class _NumberArgumentEnv(gym.Env):
    """A tool env that offers its tool only in the reset info's ``tools`` (as FunctionCalling does)
    and compares a number argument as a float: a 4000-digit integer raised OverflowError."""

    metadata = {"render_modes": [], "family": "tool"}

    def __init__(self, *, fixed: bool = False):
        self.fixed = fixed
        self.action_space = UnicodeText(8192)
        self.observation_space = UnicodeText(256)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "Call lookup.", {"instructions": "Call the tool.", "tools": [_SCHEMA]}

    def step(self, action):
        from verigym.core import ActionParseError
        from verigym.toolcalls import Tool, parse_reply

        tool = Tool("lookup", "", _SCHEMA["function"]["parameters"])
        info = {"success": False, "score": 0.0}
        try:
            call = parse_reply(action, [tool], max_length=8192)
        except ActionParseError as exc:
            info["action_error"] = str(exc)
            return "refused", 0.0, True, False, info
        limit = getattr(call, "arguments", {}).get("limit", 0)
        if not self.fixed or abs(limit) < 2**1000:
            float(limit)  # OverflowError on 10**4000 unless refused first
        return "ok", 0.0, True, False, info


def test_tools_of_the_reset_info_get_raw_json_arguments():
    replies = dict(adversarial_replies(8192, "", [_SCHEMA]))
    assert "huge_integer/raw:lookup.limit" in replies
    body = json.loads(
        replies["huge_integer/raw:lookup.limit"][len("<tool_call>") : -len("</tool_call>")]
    )
    assert body["arguments"]["limit"] == int("9" * 4000) and body["arguments"]["word"] == ""
    nested = replies["nested_json_argument/raw:lookup.word"]
    assert nested.count("[") == 2000
    worst = measure_worst_case(_NumberArgumentEnv)
    assert worst is not None and any(
        p.startswith("huge_integer/raw:lookup.limit: step raised OverflowError")
        for p in worst.problems
    ), worst.problems
    worst = measure_worst_case(lambda: _NumberArgumentEnv(fixed=True))
    assert worst is not None and not worst.problems, worst.problems


def test_exponential_verifier_is_caught_and_a_screened_one_is_not():
    worst = measure_worst_case(lambda: _TruthTableEnv(), seconds=0.02)
    assert worst is not None and len(worst.problems) == 1, worst
    assert worst.slowest.startswith("many_variables") and "bound 0.02 s" in worst.problems[0]
    screened = measure_worst_case(lambda: _TruthTableEnv(screened=True), seconds=0.02)
    assert screened is not None and not screened.problems, screened.problems
    assert screened.replies > 60
    assert (
        check_env(lambda: _TruthTableEnv(screened=True), checks=["verifier_bounds"])
        .results[-1]
        .status
        == "pass"
    )


def test_memory_growth_fails_the_check():
    worst = measure_worst_case(lambda: _TruthTableEnv(screened=True, hungry=True))
    assert worst is not None and worst.memory_bytes > WORST_CASE_MEMORY_BYTES
    assert worst.hungriest.startswith("repetition_product")
    result = check_env(
        lambda: _TruthTableEnv(screened=True, hungry=True), checks=["verifier_bounds"]
    ).results[-1]
    assert result.status == "fail" and "peak memory grew" in result.detail, result.detail


def test_non_text_actions_are_skipped():
    class Discrete(_TruthTableEnv):
        def __init__(self):
            super().__init__()
            self.action_space = spaces.Discrete(3)

    assert measure_worst_case(Discrete) is None
    assert check_env(Discrete, checks=["verifier_bounds"]).results[-1].status == "skip"


def test_a_sandbox_env_is_measured_under_a_one_second_deadline():
    """A code env's never-ending programs are stopped at the cut deadline (not the env's 10 s), and
    the cut applies only to the measured instance."""
    from verigym.verifier_bounds import (
        SANDBOX_CHECK_DEADLINE_SECONDS,
        SANDBOX_MARGIN_SECONDS,
        sandbox_deadline,
    )

    made = []

    def factory():
        made.append(gym.make("verigym/PythonMath-v0"))
        return made[-1]

    worst = measure_worst_case(factory)
    assert worst is not None and not worst.problems, worst.problems
    assert sandbox_deadline(made[0]) == SANDBOX_CHECK_DEADLINE_SECONDS
    assert worst.slowest.startswith(("power_tower_python", "code_")), worst
    assert (
        SANDBOX_CHECK_DEADLINE_SECONDS
        <= worst.seconds
        < SANDBOX_CHECK_DEADLINE_SECONDS + SANDBOX_MARGIN_SECONDS
    )
    assert sandbox_deadline(gym.make("verigym/PythonMath-v0")) == 10.0


class _WaitingEnv(_TruthTableEnv):
    """A verifier that waits ``wait`` seconds without computing on the first reply and its replay (a
    machine whose cores are busy elsewhere looks like this to the checker) or, with ``worker_cpu``, burns that many seconds of
    CPU in a verifier worker process, not in this one."""

    def __init__(self, *, wait: float = 0.0, worker_cpu: float = 0.0, worker_timeout: float = 30.0):
        super().__init__(screened=True)
        self.wait, self.worker_cpu, self.worker_timeout = wait, worker_cpu, worker_timeout
        from verigym.workers import BoundedWorker

        self.worker = BoundedWorker()

    def step(self, action):
        import time

        self.steps = getattr(self, "steps", 0) + 1
        if self.steps <= 2:  # the first reply and its replay
            time.sleep(self.wait)
        if self.worker_cpu and "p" in action:
            from verigym.workers import VerifierTimeout

            try:
                self.worker.call(_spin, (self.worker_cpu,), timeout=self.worker_timeout)
            except VerifierTimeout:
                pass  # stopped at its CPU limit: the reply scores 0
        return super().step(action)

    def close(self):
        self.worker._kill()  # the worker process ends with the env


class _StarvedEnv(_TruthTableEnv):
    """A verifier whose first reply (and its replay) computes ``cpu`` seconds in a verifier worker
    that gets a tenth of a core (SIGSTOP 90 ms, SIGCONT 10 ms: a loaded machine)."""

    def __init__(self, *, cpu: float):
        super().__init__(screened=True)
        from verigym.workers import BoundedWorker

        self.cpu, self.worker = cpu, BoundedWorker(start_method="fork")
        self.worker.call(_spin, (0.0,), timeout=5.0)  # started outside the measured steps

    def step(self, action):
        from tests.processes import starved

        self.steps = getattr(self, "steps", 0) + 1
        if self.steps <= 2:
            with starved(self.worker._pid()):
                self.worker.call(_spin, (self.cpu,), timeout=30.0)
        return super().step(action)

    def close(self):
        self.worker._kill()


def test_a_computing_step_that_the_machine_starves_is_within_its_cpu_bound():
    """A reply whose verifier computes 0.06 s of CPU in a worker that gets a tenth of a core takes
    ~0.6 s, past the 0.4 s wall-clock backstop of a 0.1 s bound; it was computing, not blocked,
    so it is within the bound (as the workers' own backstop lets it finish)."""
    worst = measure_worst_case(lambda: _StarvedEnv(cpu=0.06), seconds=0.1)
    assert worst is not None and not worst.problems, worst.problems
    assert worst.wall_seconds > 0.4 and worst.seconds < 0.1, worst


def _spin(seconds: float) -> int:
    import time

    end, count = time.process_time() + seconds, 0
    while time.process_time() < end:
        count += 1
    return count


def test_the_time_bound_is_cpu_time_so_waiting_is_no_overrun_but_a_worker_s_cpu_counts(
    monkeypatch,
):
    """The bound is in CPU seconds, the unit of the verifier workers' own limits: a step that waits
    0.3 s under a 0.2 s bound (a loaded machine) passes, one that waits past the wall-clock backstop
    (4x) fails, and CPU burnt in a verifier worker process counts against the bound."""
    waited = measure_worst_case(lambda: _WaitingEnv(wait=0.3), seconds=0.2)
    assert waited is not None and not waited.problems, waited.problems
    assert waited.wall_seconds >= 0.3 and waited.seconds < 0.2
    # 2 s, well past the 0.8 s backstop: the step's own ~10 ms of CPU must stay under 1% of its
    # wall time for it to read as blocked. The checker counts the whole process's CPU, and the test
    # runner's own threads (pytest-xdist's, earlier tests' servers) used ~11 ms in those 2 s on a
    # loaded machine (1.05%: read as computing), so this measurement counts this thread's CPU and
    # the verifier workers' only: the single-threaded step's own, which is what the case is about.
    monkeypatch.setattr(
        verifier_bounds,
        "_cpu_seconds_so_far",
        lambda: time.thread_time() + verifier_bounds.verifier_cpu_seconds(),
    )
    stuck = measure_worst_case(lambda: _WaitingEnv(wait=2.0), seconds=0.2)
    assert (
        stuck is not None and len(stuck.problems) == 1 and "0.8 s wall clock)" in stuck.problems[0]
    ), stuck.problems
    busy = measure_worst_case(lambda: _WaitingEnv(worker_cpu=0.3), seconds=0.2)
    assert busy is not None and len(busy.problems) == 1, busy
    assert "s of CPU time" in busy.problems[0] and busy.seconds >= 0.25, busy


def test_busy_processes_that_are_no_verifier_workers_are_not_counted_but_a_stopped_worker_is():
    """A test runner's or trainer's other children may burn CPU while a reply is measured (the
    conformance suite's fresh-interpreter rollouts do): they do not count. A verifier worker that
    was stopped at its limit during the step still counts, with the CPU it used until then."""
    import subprocess
    import sys

    busy = subprocess.Popen(
        [sys.executable, "-c", "import time\nend = time.time() + 20\nwhile time.time() < end: pass"]
    )
    try:
        waited = measure_worst_case(lambda: _WaitingEnv(wait=0.5), seconds=0.2)
        assert waited is not None and not waited.problems, waited.problems
    finally:
        busy.kill()
        busy.wait()
    stopped = measure_worst_case(
        lambda: _WaitingEnv(worker_cpu=5.0, worker_timeout=0.4), seconds=0.2
    )
    assert stopped is not None and len(stopped.problems) == 1 and stopped.seconds >= 0.35, stopped
