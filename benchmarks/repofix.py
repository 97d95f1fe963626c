"""RepoFix reset and verdict time against a bare ``python -m unittest`` subprocess, side by side.

The repository is about 1,000 lines: three RepoFix projects merged into one tree (``intervals``,
``lrucache``, ``jsonpointer``: three packages, their unittest suites). Timed, medians over
``--repeats``:

* bare: ``python -m unittest discover`` of that tree in a plain subprocess (a temporary folder);
* workspace reset: ``Workspace.reset`` after an episode that used its sandbox (a new sandbox, the
  tree written in) -- the part of a RepoFix reset that grows with the repository; and after one
  that did not (the sandbox is reused, only the tree is replaced);
* env reset: ``RepoFixEnv.reset`` on its largest project after a used episode (mutant, issue
  text, new sandbox, tree);
* verdict: ``run_hidden_tests`` on the merged tree (fresh sandbox, tree written, trusted runner,
  every test one at a time, typed answer).

Prints the medians and the ratios to the bare run. ``--runner-before FILE`` also times the verdict
with another runner source (an older ``_runner.py``), its samples interleaved with the current
runner's so that both see the same load. Usage::

    python benchmarks/repofix.py [--repeats 10] [--runner-before OLD_RUNNER.py]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from verigym.envs.tool.repofix import env as env_module
from verigym.envs.tool.repofix.env import RepoFixEnv, load_data, run_hidden_tests
from verigym.envs.tool.workspace import Workspace

PROJECTS = ("intervals", "lrucache", "jsonpointer")


def _median(function: Callable[[], object], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--runner-before", type=Path, default=None)
    args = parser.parse_args()
    current_runner = env_module._RUNNER
    before_runner = args.runner_before.read_text() if args.runner_before else None
    data = load_data()
    files: dict[str, str] = {}
    modules: list[str] = []
    for name in PROJECTS:
        files.update(data[name]["files"])  # tests/__init__.py is shared (empty in each)
        modules += data[name]["modules"]
    lines = sum(text.count("\n") for text in files.values())
    tests = sum(len(data[name]["tests"]) for name in PROJECTS)

    tmp = tempfile.TemporaryDirectory(prefix="repofix-bench-")
    for rel, text in files.items():
        path = Path(tmp.name) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def bare() -> None:
        done = subprocess.run(
            [sys.executable, "-m", "unittest", "discover", "-s", "tests", "-t", ".", "-q"],
            cwd=tmp.name,
            capture_output=True,
        )
        assert done.returncode == 0, done.stderr[-500:]

    workspace = Workspace()

    def reset_workspace() -> None:
        workspace.mark_used()  # as after an episode with tool calls: a new sandbox
        workspace.reset(files)

    def reset_untouched() -> None:
        workspace.reset(files)  # nothing ran since the last reset: the sandbox is reused

    def verdict() -> None:
        results, tampered = run_hidden_tests(workspace, files, modules, timeout_s=30.0)
        assert not tampered and len(results) == tests and set(results.values()) == {"pass"}

    def verdicts_interleaved() -> tuple[float, float]:
        """Medians of the current and the --runner-before runner, sample by sample in turn."""
        samples: dict[str, list[float]] = {"now": [], "before": []}
        for _ in range(args.repeats):
            for label, source in (("before", before_runner), ("now", current_runner)):
                env_module._RUNNER = source
                start = time.perf_counter()
                verdict()
                samples[label].append(time.perf_counter() - start)
        env_module._RUNNER = current_runner
        return statistics.median(samples["now"]), statistics.median(samples["before"])

    largest = max(data, key=lambda n: sum(t.count("\n") for t in data[n]["files"].values()))
    env = RepoFixEnv(project=largest)
    seeds = iter(range(10**6))

    def reset_env() -> None:
        env.workspace.mark_used()
        env.reset(seed=next(seeds))

    try:
        bare()  # warm the page cache and the interpreter files
        reset_workspace()
        verdict()
        reset_env()
        timings = {
            "bare python -m unittest": _median(bare, args.repeats),
            "workspace reset (1k-line tree)": _median(reset_workspace, args.repeats),
            "workspace reset, sandbox untouched": _median(reset_untouched, args.repeats),
            f"env reset ({largest})": _median(reset_env, args.repeats),
        }
        if before_runner is None:
            timings["verdict (hidden tests, fresh sandbox)"] = _median(verdict, args.repeats)
        else:
            now, before = verdicts_interleaved()
            timings["verdict (hidden tests, fresh sandbox)"] = now
            timings[f"verdict, runner {args.runner_before.name}"] = before
    finally:
        workspace.close()
        env.close()
        tmp.cleanup()
    print(f"repository: {len(files)} files, {lines} lines, {tests} tests ({', '.join(PROJECTS)})")
    base = timings["bare python -m unittest"]
    for label, seconds in timings.items():
        print(f"{label:44s} {seconds * 1000:8.1f} ms   x{seconds / base:5.2f} of bare")


if __name__ == "__main__":
    main()
