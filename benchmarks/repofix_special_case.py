"""How often a patch that special-cases the issue's example wins a single-bug RepoFix task.

The attack (:func:`verigym.envs.tool.repofix.differential.special_case`), played through
``gym.make``/``reset``/``step`` only: read the snippet out of the issue (the reset observation),
wrap each buggy function so that for exactly the arguments it receives while the snippet runs on
the original code (its receiver's state included) it runs the original, and the buggy code for
every other call; write the wrapped files with ``write_file`` and ``submit``. It uses the env's
original tree (an attacker that knows the fix, yet only applies it to the example). A win is a
reward of 1.0; an episode whose verdict did not run (a PASS_TO_PASS test failing, which the wrapper
never causes: a sandbox deadline on a loaded machine) is counted and named. The honest oracle (``oracle_action`` until the end, with the verdict's cache off so
the hidden tests and the differential checks really run) is played on the same tasks.

Prints per id and in total: attack wins / tasks, and oracle 1.0 rewards / tasks. Usage::

    python benchmarks/repofix_special_case.py [--seeds 0:10] [--ids RepoFix-Anywhere-v0,...]
    python benchmarks/repofix_special_case.py --every-mutant --no-oracle  # every single-bug task

A seed range samples few mutants: with the project fixed, the seed's first draw is the mutant, so
seeds 0 and 2 draw the same index in every project. ``--every-mutant`` plays each mutant once.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym

import verigym
from verigym.envs.tool.base import tool_call_text
from verigym.envs.tool.repofix.differential import snippet_of, special_case


def single_bug_ids() -> list[str]:
    """Every registered RepoFix id whose default level has one bug."""
    return sorted(
        row.id
        for row in verigym.rows("tool")
        if ".repofix." in row.entry_point and row.kwargs.get("level", "file") != "pair"
    )


def every_mutant_seeds(env_id: str, start: int = 0) -> list[int]:
    """One reset seed per mutant of the id's project (the smallest one >= ``start`` that draws it),
    in mutant order; ``[]`` for an id without a fixed project (its seed draws the project too)."""
    from gymnasium.utils import seeding

    from verigym.envs.tool.repofix.env import load_data

    env = gym.make(env_id)
    try:
        project = env.unwrapped.project
    finally:
        env.close()
    if not project:
        return []
    count = len(load_data()[project]["mutants"])
    seeds: dict[int, int] = {}
    seed = start
    while len(seeds) < count and seed < start + 100 * count:
        seeds.setdefault(int(seeding.np_random(seed)[0].integers(count)), seed)
        seed += 1
    return [seeds[i] for i in sorted(seeds)]


def play_attack(
    env_id: str, seed: int, skip_self: bool = False, timeout_s: float = 60.0, checks: bool = True
) -> tuple[float, dict]:
    """(reward, attack info and the verdict's counts) of one special-casing episode."""
    env = gym.make(env_id, max_action_length=1 << 20, timeout_s=timeout_s)
    try:
        observation, _ = env.reset(seed=seed)
        base = env.unwrapped
        if not checks:  # the baseline: the hidden test suite alone
            ids = {c["id"] for c in base._checks}
            base._checks, base._f2p = [], [t for t in base._f2p if t not in ids]
        info: dict = {}
        patched = special_case(
            base._original, base._mutated, snippet_of(observation), skip_self=skip_self, info=info
        )
        for path, text in sorted(patched.items()):
            env.step(tool_call_text("write_file", path=path, content=text))
        _, reward, terminated, truncated, end = env.step(tool_call_text("submit"))
        assert terminated or truncated
        info.update({k: end.get(k) for k in ("fail_to_pass", "pass_to_pass", "tampered")})
        return float(reward), info
    finally:
        env.close()


def play_oracle(env_id: str, seed: int, timeout_s: float = 60.0) -> float:
    env = gym.make(env_id, timeout_s=timeout_s)
    try:
        env.reset(seed=seed)
        env.unwrapped.cache_verdicts = False  # run the hidden tests and the checks for real
        for _ in range(10):
            _, reward, terminated, truncated, _ = env.step(env.unwrapped.oracle_action())
            if terminated or truncated:
                return float(reward)
        return 0.0
    finally:
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="0:10", help="start:stop")
    parser.add_argument(
        "--ids", default="", help="comma-separated ids (default: every single-bug id)"
    )
    parser.add_argument("--skip-self", action="store_true", help="key calls without the receiver")
    parser.add_argument("--no-oracle", action="store_true")
    parser.add_argument("--no-attack", action="store_true", help="play only the oracle")
    parser.add_argument("--timeout-s", type=float, default=60.0, help="verdict deadline (load)")
    parser.add_argument(
        "--without-checks", action="store_true", help="baseline: drop the differential checks"
    )
    parser.add_argument("--verbose", action="store_true", help="one line per attack episode")
    parser.add_argument(
        "--every-mutant",
        action="store_true",
        help="instead of --seeds: one seed per mutant of each id with a fixed project (every task)",
    )
    parser.add_argument(
        "--mutants",
        default="",
        help="with --every-mutant: only these, as project:i+j,... (e.g. matrix:0+18,fsm:19)",
    )
    args = parser.parse_args()
    only: dict[str, set[int]] = {}
    for item in filter(None, args.mutants.split(",")):
        project, _, numbers = item.partition(":")
        only[project] = {int(i) for i in numbers.split("+") if i}
    start, stop = (int(x) for x in args.seeds.split(":"))
    ids = [i if "/" in i else "verigym/" + i for i in args.ids.split(",") if i] or single_bug_ids()
    began = time.time()
    wins = tasks = oracle_ok = invalid = 0
    ran: dict[str, int] = {}
    for env_id in ids:
        id_wins = id_oracle = 0
        seeds = every_mutant_seeds(env_id, start) if args.every_mutant else range(start, stop)
        if only:
            project = gym.spec(env_id).kwargs.get("project")
            seeds = [s for i, s in enumerate(seeds) if i in only.get(project, ())]
        if args.every_mutant and not seeds:
            continue
        for seed in seeds:
            reward, info = (
                play_attack(env_id, seed, args.skip_self, args.timeout_s, not args.without_checks)
                if not args.no_attack
                else (0.0, {"ran": "-", "pass_to_pass": [0, 0]})
            )
            kept = info.get("pass_to_pass") or [0, 1]
            if kept[0] != kept[1]:  # the wrapper keeps every other test as it was: a dead run
                invalid += 1
                print(f"  verdict did not run: {env_id} seed {seed} {info}", flush=True)
            if args.verbose:
                print(f"  {env_id} seed {seed}: reward {reward:.3f} {info}", flush=True)
            ran[info.get("ran", "?")] = ran.get(info.get("ran", "?"), 0) + 1
            id_wins += reward >= 1.0
            if reward >= 1.0:
                print(f"  win: {env_id} seed {seed}", flush=True)
            if not args.no_oracle:
                oracle = play_oracle(env_id, seed, args.timeout_s)
                id_oracle += oracle >= 1.0
                if oracle < 1.0:
                    print(f"  ORACLE FAILED: {env_id} seed {seed} reward {oracle}", flush=True)
        count = len(seeds)
        wins, tasks, oracle_ok = wins + id_wins, tasks + count, oracle_ok + id_oracle
        oracle_text = "" if args.no_oracle else f"; oracle {id_oracle}/{count}"
        print(f"{env_id}: attack wins {id_wins}/{count}{oracle_text}", flush=True)
    oracle_text = "" if args.no_oracle else f"; oracle 1.0 on {oracle_ok}/{tasks}"
    print(
        f"total: attack wins {wins}/{tasks} ({100 * wins / max(tasks, 1):.1f}%){oracle_text}; "
        f"example keys from {ran}; verdicts that did not run: {invalid}; "
        f"{time.time() - began:.0f} s"
    )


if __name__ == "__main__":
    main()
