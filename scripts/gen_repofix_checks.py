"""Add differential checks to every RepoFix instance of ``envs/tool/repofix/data/repofix.json``.

A step of instance construction after ``scripts/gen_repofix_mutants.py`` (which calls it too): for
every single-bug mutant, :func:`verigym.envs.tool.repofix.differential.make_checks`
copies its tests with one input literal changed, keeps the copies whose recorded values differ
between the original code and both the buggy code and the buggy code special-cased on the issue's
example, and stores up to ``--max-checks`` of them (edits + digest of the original's record) as
``"checks"``; a two-bug pair gets the checks of its two mutants. The env adds them to
FAIL_TO_PASS. Prints, per project, how many mutants got a check that defeats the special-casing
attack. ``--what repair`` searches again, wider (2x the copies per test, 4 tests per batch, copies
that change the structure of the inputs first), for the mutants whose stored checks the attack
survives; ``--mutants cmdline:30+34,csvlite:2`` limits a run to those mutants.

Usage::

    python scripts/gen_repofix_checks.py [--jobs 2] [--only semver,textkit] [--what singles]
    python scripts/gen_repofix_checks.py --what repair [--mutants cmdline:30+34]
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from verigym.envs.tool.repofix import differential
from verigym.envs.tool.repofix.issue import issue_text
from verigym.envs.tool.repofix.mutations import Mutant, apply

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "envs" / "tool" / "repofix" / "data" / "repofix.json"


def _mutant(record: dict) -> Mutant:
    return Mutant(**{k: record[k] for k in Mutant.__dataclass_fields__})


def add_checks(
    name: str,
    project: dict,
    max_checks: int = 3,
    per_test: int = 20,
    what: str = "all",
    indices: list[int] | None = None,
) -> dict:
    """``project`` (a ``repofix.json`` entry) with ``"checks"`` on every mutant (or those at
    ``indices``) and/or pair."""
    files = project["files"]
    cache: dict = {}
    beaten = total = 0
    max_tests = 2
    tasks = [(m, [m]) for m in project["mutants"]] if what != "pairs" else []
    if indices is not None:
        tasks = [tasks[i] for i in indices if 0 <= i < len(tasks)]
    for task, chosen in tasks:
        mutated = dict(files)
        for record in sorted(chosen, key=lambda m: -m["first"]):
            mutated[record["file"]] = apply(mutated[record["file"]], _mutant(record))
        issue = issue_text(
            files,
            task["shown"],
            task["detail"],
            package=project["package"],
            several=len(chosen) > 1,
        )
        if what == "repair":  # only the mutants whose stored checks the attack survives
            if _beats_attack(files, mutated, issue, task["shown"], task.get("checks", [])):
                total += 1
                beaten += 1
                continue
            per_test, max_tests = per_test * 2, 4
        tests = [task["shown"], *(t for t in task["f2p"] if t != task["shown"])]
        others = [t for t in project["tests"] if t not in set(task["f2p"])]
        common = dict(
            max_checks=max_checks, per_test=per_test, max_tests=max_tests, fallback_tests=others
        )
        checks, stats = differential.make_checks(
            files,
            mutated,
            tests,
            issue,
            task["shown"],
            cache=cache,
            structural=what == "repair",
            **common,
        )
        if what == "repair" and not (checks and stats["beat_attack"]):  # bugs in __eq__
            checks, stats = differential.make_checks(
                files, mutated, tests, issue, task["shown"], compare=True, structural=True, **common
            )
        if what == "repair":
            per_test, max_tests = per_test // 2, 2
            if not (checks and stats["beat_attack"]):
                total += 1
                continue
        task["checks"] = checks
        total += 1
        beaten += bool(stats["beat_attack"]) and bool(checks)
    if what != "pairs":
        print(f"{name}: {beaten}/{total} mutants with a check that defeats the attack", flush=True)
    if what != "singles":
        for pair in project["pairs"]:
            pair["checks"] = pair_checks([project["mutants"][i] for i in pair["mutants"]])
    return project


def _beats_attack(files: dict, mutated: dict, issue: str, shown: str, checks: list) -> bool:
    """Whether a stored check fails on the mutated tree special-cased on the issue's example."""
    attacked = dict(mutated)
    attacked.update(
        differential.special_case(files, mutated, differential.snippet_of(issue), shown)
    )
    records = differential.run_probes_locally(attacked, differential.check_probes(files, checks))
    return bool(records) and any(
        differential.digest(r) != c["digest"] for r, c in zip(records, checks, strict=True)
    )


def pair_checks(mutants: list[dict]) -> list[dict]:
    """A two-bug task's checks: those of its mutants (their expected records are the original
    code's, which the fix of both bugs restores), renumbered."""
    out = []
    for mutant in mutants:
        for check in mutant.get("checks", []):
            base = check["id"].rsplit("#", 1)[0]
            out.append({**check, "id": f"{base}#{len(out)}"})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--max-checks", type=int, default=3)
    parser.add_argument("--per-test", type=int, default=20)
    parser.add_argument("--what", choices=("all", "singles", "pairs", "repair"), default="all")
    parser.add_argument("--only", default="")
    parser.add_argument(
        "--mutants", default="", help="project:i+j,... (only these mutants; implies --only)"
    )
    args = parser.parse_args()
    data = json.loads(DATA.read_text())
    names = sorted(data["projects"])
    chosen: dict[str, list[int]] = {}
    for item in filter(None, args.mutants.split(",")):
        project, _, numbers = item.partition(":")
        chosen[project] = [int(i) for i in numbers.split("+") if i]
    if args.only or chosen:
        names = [n for n in names if n in args.only.split(",") or n in chosen]
    start = time.time()
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = {
            n: pool.submit(
                add_checks,
                n,
                data["projects"][n],
                args.max_checks,
                args.per_test,
                args.what,
                chosen.get(n),
            )
            for n in names
        }
        for name, future in futures.items():
            data["projects"][name] = future.result()
    DATA.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")
    print(f"wrote {DATA.relative_to(ROOT)} in {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
