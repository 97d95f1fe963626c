"""Sandbox latency against a bare ``subprocess.run([python, "-c", ...])``, side by side in one run.

Prints medians and ratios (sandbox / bare) for:

* cold call: a new sandbox (bubblewrap, cgroup, rlimits, worker start) runs one line and closes;
* new episode, back to back: ``PythonSandbox.fresh()`` (a new sandbox, the spare started at the
  previous ``fresh()``) plus one line, right after the previous episode (the spare may still be
  starting);
* new episode with pauses: 0.3 s after the last episode ``fresh()``, 0.3 s later the first call
  (as when an agent takes time to answer); only ``fresh()`` and the call are timed;
* warm call: one more line in a running notebook (includes stopping the notebook afterwards and
  checking that no other process of the sandbox is left);

and the warm calls per second. Usage::

    python benchmarks/sandbox_latency.py [--repeats 30]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from verigym.sandbox import PythonSandbox, run_code


def _median_seconds(function: Callable[[], object], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    code = "print(sum(range(100)))"

    def bare() -> None:
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)

    def bare_isolated() -> None:
        subprocess.run([sys.executable, "-I", "-S", "-c", code], check=True, capture_output=True)

    def cold() -> None:
        assert run_code(code).output == "4950\n"

    warm_box = PythonSandbox()
    warm_box.run("pass")

    def warm() -> None:
        assert warm_box.run(code).output == "4950\n"

    def episode() -> None:
        warm_box.fresh()
        assert warm_box.run(code).output == "4950\n"

    def idle_then_episode() -> float:
        time.sleep(0.3)  # the last episode's end
        start = time.perf_counter()
        warm_box.fresh()
        elapsed = time.perf_counter() - start
        time.sleep(0.3)  # the agent reads the task
        start = time.perf_counter()
        assert warm_box.run(code).output == "4950\n"
        return elapsed + time.perf_counter() - start

    results = {}
    for name, function in (
        ("bare subprocess.run(python -c)", bare),
        ("bare subprocess.run(python -I -S -c)", bare_isolated),
        ("sandbox cold call", cold),
        ("sandbox new episode, back to back", episode),
        ("sandbox warm call", warm),
    ):
        results[name] = _median_seconds(function, args.repeats)
    results["sandbox new episode, with pauses"] = statistics.median(
        idle_then_episode() for _ in range(args.repeats)
    )
    warm_box.close()
    reference = results["bare subprocess.run(python -c)"]
    print(f"{'':42s} {'median':>10s} {'ratio to bare':>14s}")
    for name, seconds in results.items():
        print(f"{name:42s} {seconds * 1000:8.2f} ms {seconds / reference:13.3f}x")
    print(
        f"warm calls per second: {1.0 / results['sandbox warm call']:.0f} "
        f"(bare subprocess.run: {1.0 / reference:.0f} per second)"
    )


if __name__ == "__main__":
    main()
