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

``--real`` times RepoFix-Real instead (real vendored libraries, their own pytest suites): for
each library, over its first ``--instances`` instances (20 by default; fewer where a library has
fewer, said in the table), the env's reset after a used episode (a new sandbox, the library's
checkout with the bug, pytest written in) and the verdict of the oracle's fix (``submit``: a fresh
sandbox, the instance's test files run by the trusted pytest runner; its verdict cache off, so the
tests always run). Prints a table of medians (and the slowest sample) per library::

    python benchmarks/repofix.py --real [--instances 20] [--libraries cachetools tabulate]
        [--runner OTHER_PYTEST_RUNNER.py]
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


def real_main(
    instances: int,
    libraries: list[str] | None,
    runner: Path | None = None,
    start: int = 0,
    bugs: int = 1,
) -> None:
    """``--real``: RepoFix-Real reset and verdict medians per library, printed as a table (and a
    line per instance as it is played, so a cut run keeps what it measured). ``start``: the first
    seed (instances are appended as they are validated: the new ones are at the end); ``bugs``:
    1 for the single-bug instances, 2 for the two-bug ones (libraries without any are skipped)."""
    import os

    from verigym.envs.tool.repofix import real
    from verigym.envs.tool.repofix.real_env import REAL_LIBRARIES, RepoFixRealEnv, load_real_data

    if runner is not None:  # another _pytest_runner.py source (e.g. git show HEAD:...)
        real._RUNNER = runner.read_text()

    data = load_real_data()
    key = "pairs" if bugs == 2 else "instances"
    rows = []
    for name in libraries or REAL_LIBRARIES:
        count = max(0, min(instances, len(data[name].get(key, ())) - start))
        if not count:
            continue
        env = RepoFixRealEnv(library=name, bugs=bugs)
        env.cache_verdicts = False  # the oracle's fix is the original tree: time a real run
        resets, verdicts, solved = [], [], 0
        try:
            env.reset(seed=0)  # warm: the checkout is read and cached, the sandbox started once
            for seed in range(start, start + count):
                env.workspace.mark_used()
                t0 = time.perf_counter()  # not ``start``: the next library starts there too
                env.reset(seed=seed)
                resets.append(time.perf_counter() - t0)
                env.step(env.oracle_action())  # the inverse patch
                t0 = time.perf_counter()
                *_, info = env.step(env.oracle_action())  # submit: the verdict
                verdicts.append(time.perf_counter() - t0)
                solved += bool(info.get("success")) and bool(info.get("tests_run"))
                print(
                    f"  {info.get('instance_id')}: reset {resets[-1]:.2f}s verdict "
                    f"{verdicts[-1]:.2f}s success {info.get('success')} "
                    f"(load {os.getloadavg()[0]:.1f})",
                    flush=True,
                )
        finally:
            env.close()
        rows.append((name, count, len(data[name][key]), resets, verdicts, solved))
    load = os.getloadavg()[0]
    print(
        f"RepoFix-Real ({bugs} bug{'s' if bugs > 1 else ''}), medians over the first N instances "
        f"per library (load average {load:.1f})"
    )
    print(
        f"{'library':16s} {'N':>3s} {'of':>4s} {'reset med':>10s} {'max':>7s} "
        f"{'verdict med':>12s} {'max':>7s} {'oracle':>7s}"
    )
    for name, count, total, resets, verdicts, solved in rows:
        if not resets:
            continue
        print(
            f"{name:16s} {count:3d} {total:4d} {statistics.median(resets):9.2f}s "
            f"{max(resets):6.2f}s {statistics.median(verdicts):11.2f}s {max(verdicts):6.2f}s "
            f"{solved:3d}/{count:<3d}"
        )
    short = [f"{r[0]} ({r[1]})" for r in rows if r[1] < instances]
    if short:
        print(f"fewer than {instances} instances: {', '.join(short)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--runner-before", type=Path, default=None)
    parser.add_argument("--real", action="store_true", help="time RepoFix-Real per library")
    parser.add_argument("--instances", type=int, default=20, help="--real: instances per library")
    parser.add_argument("--libraries", nargs="*", default=None, help="--real: which libraries")
    parser.add_argument("--start", type=int, default=0, help="--real: the first instance (seed)")
    parser.add_argument(
        "--bugs", type=int, choices=(1, 2), default=1, help="--real: 2 times the two-bug instances"
    )
    parser.add_argument(
        "--runner", type=Path, default=None, help="--real: time this _pytest_runner.py source"
    )
    args = parser.parse_args()
    if args.real:
        real_main(args.instances, args.libraries, args.runner, args.start, args.bugs)
        return
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
