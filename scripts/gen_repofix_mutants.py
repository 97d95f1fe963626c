"""Regenerate ``envs/tool/repofix/data/repofix.json``: the RepoFix projects and their killed mutants.

For every project under ``scripts/repofix_projects/``: run its unittest suite (all must pass),
enumerate the single-edit mutants of its source modules (``verigym.envs.tool.repofix.mutations``),
keep at most ``--per-operator`` of each operator per file (evenly spaced), run the suite on each in
a plain subprocess (``python -I -S _runner.py``: trusted code, our own mutants; ``--timeout`` s
each), and keep the mutants that at least one test detects (fail-to-pass tests exist), no test
hangs, and nothing fails at import. At most ``--max-mutants`` per project are kept, round-robin
over the operators; then up to ``--pairs`` two-bug tasks are formed from kept mutants in different
functions whose fail-to-pass sets overlap where possible (interacting bugs), and their combined
fail-to-pass set is measured too; then every instance gets its differential checks
(``scripts/gen_repofix_checks.py``: inputs other than the issue's example). The JSON holds the project files, the test ids, every kept
mutant with its fail-to-pass ids and where its first failure showed (line, compared values), so an
env reset runs no test.

Usage::

    python scripts/gen_repofix_mutants.py [--jobs 2] [--only intervals,lrucache]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from verigym.envs.tool.repofix.mutations import Mutant, apply, mutants_of

ROOT = Path(__file__).resolve().parent.parent
PROJECTS = ROOT / "scripts" / "repofix_projects"
RUNNER = ROOT / "envs" / "tool" / "repofix" / "_runner.py"
OUT = ROOT / "envs" / "tool" / "repofix" / "data" / "repofix.json"


def project_files(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): path.read_text()
        for path in sorted(folder.rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def test_modules(files: dict[str, str]) -> list[str]:
    return sorted(
        p[:-3].replace("/", ".")
        for p in files
        if p.startswith("tests/") and p.rsplit("/", 1)[-1].startswith("test_")
    )


def run(files: dict[str, str], modules: list[str], timeout: float) -> dict | None:
    """The runner's answer for this tree, or None on a timeout or a crash."""
    with tempfile.TemporaryDirectory(prefix="repofix-") as tmp:
        for rel, text in files.items():
            path = Path(tmp) / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-S", "-B", str(RUNNER), tmp, *modules],
                capture_output=True,
                timeout=timeout,
                cwd=tmp,
            )
        except subprocess.TimeoutExpired:
            return None
        try:
            return json.loads(done.stdout)
        except ValueError:
            return None


def spread(items: list, count: int) -> list:
    if len(items) <= count:
        return list(items)
    step = len(items) / count
    return [items[int(i * step)] for i in range(count)]


def best_detail(f2p: list[str], details: dict) -> tuple[str, dict]:
    """The fail-to-pass test whose failure reads best in an issue: compared values, then errors."""

    def rank(test: str) -> tuple:
        d = details.get(test, {})
        return (0 if "got" in d else 1 if d.get("kind") == "error" else 2, test)

    test = min(f2p, key=rank)
    return test, details.get(test, {})


def function_of(files: dict[str, str], mutant: Mutant) -> tuple[str, int]:
    """(file, first line of the enclosing top-level or method def) of a mutant."""
    import ast

    tree = ast.parse(files[mutant.file])
    best = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.lineno <= mutant.first <= node.end_lineno:
            best = max(best, node.lineno)
    return mutant.file, best


def scan(name: str, args: argparse.Namespace) -> dict:
    folder = PROJECTS / name
    files = project_files(folder)
    modules = test_modules(files)
    baseline = run(files, modules, args.timeout * 3)
    if baseline is None or any(v != "pass" for v in baseline["results"].values()):
        raise SystemExit(f"{name}: the test suite does not pass on the original code")
    tests = sorted(baseline["results"])
    candidates: list[Mutant] = []
    for rel in sorted(files):
        if rel.startswith("tests/") or rel.endswith("__init__.py"):
            continue
        by_operator: dict[str, list[Mutant]] = {}
        for mutant in mutants_of(rel, files[rel]):
            by_operator.setdefault(mutant.operator, []).append(mutant)
        for group in by_operator.values():
            candidates.extend(spread(group, args.per_operator))

    def check(mutant: Mutant) -> tuple[Mutant, dict | None]:
        mutated = dict(files)
        mutated[mutant.file] = apply(files[mutant.file], mutant)
        return mutant, run(mutated, modules, args.timeout)

    killed: list[tuple[Mutant, list[str], dict]] = []
    with ThreadPoolExecutor(args.jobs) as pool:
        for mutant, answer in pool.map(check, candidates):
            if answer is None or answer["tampered"]:
                continue
            results = answer["results"]
            if any(k.startswith("import:") for k in results) or set(results) != set(tests):
                continue
            f2p = sorted(t for t, v in results.items() if v != "pass")
            if f2p and len(f2p) < len(tests):
                killed.append((mutant, f2p, answer["details"]))
    by_operator: dict[str, list] = {}
    for item in killed:
        by_operator.setdefault(item[0].operator, []).append(item)
    chosen = []
    for group in itertools.zip_longest(*by_operator.values()):
        chosen.extend(item for item in group if item is not None)
    chosen = chosen[: args.max_mutants]
    chosen.sort(key=lambda item: (item[0].file, item[0].first, item[0].operator))
    mutants = []
    for mutant, f2p, details in chosen:
        test, detail = best_detail(f2p, details)
        mutants.append({**mutant.to_json(), "f2p": f2p, "shown": test, "detail": detail})

    rng = random.Random(name)
    places = [
        function_of(files, Mutant(**{k: m[k] for k in Mutant.__dataclass_fields__}))
        for m in mutants
    ]
    pairs_all = [
        (i, j)
        for i, j in itertools.combinations(range(len(mutants)), 2)
        if places[i] != places[j]
        and not (
            mutants[i]["file"] == mutants[j]["file"]
            and mutants[i]["first"] <= mutants[j]["last"] + 1
            and mutants[j]["first"] <= mutants[i]["last"] + 1
        )
    ]
    overlapping = [p for p in pairs_all if set(mutants[p[0]]["f2p"]) & set(mutants[p[1]]["f2p"])]
    rng.shuffle(overlapping)
    rest = [p for p in pairs_all if p not in set(overlapping)]
    rng.shuffle(rest)
    pairs = []
    for i, j in (overlapping + rest)[: args.pairs * 2]:
        mutated = dict(files)
        for k in sorted((i, j), key=lambda k: -mutants[k]["first"]):
            m = mutants[k]
            mutated[m["file"]] = apply(
                mutated[m["file"]], Mutant(**{f: m[f] for f in Mutant.__dataclass_fields__})
            )
        answer = run(mutated, modules, args.timeout)
        if answer is None or answer["tampered"]:
            continue
        f2p = sorted(t for t, v in answer["results"].items() if v != "pass")
        if not f2p or len(f2p) >= len(tests) or any(t.startswith("import:") for t in f2p):
            continue
        test, detail = best_detail(f2p, answer["details"])
        pairs.append({"mutants": [i, j], "f2p": f2p, "shown": test, "detail": detail})
        if len(pairs) >= args.pairs:
            break
    package = sorted({p.split("/")[0] for p in files if not p.startswith("tests/")})[0]
    print(
        f"{name}: {len(files)} files, {sum(t.count(chr(10)) for t in files.values())} lines, "
        f"{len(tests)} tests; {len(candidates)} candidates, {len(killed)} killed, "
        f"{len(mutants)} kept, {len(pairs)} pairs",
        flush=True,
    )
    return {
        "package": package,
        "files": files,
        "modules": modules,
        "tests": tests,
        "mutants": mutants,
        "pairs": pairs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--per-operator", type=int, default=4)
    parser.add_argument("--max-mutants", type=int, default=36)
    parser.add_argument("--pairs", type=int, default=12)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    names = sorted(p.name for p in PROJECTS.iterdir() if p.is_dir() and not p.name.startswith("_"))
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    start = time.time()
    data = {"format": 1, "projects": {name: scan(name, args) for name in names}}
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gen_repofix_checks import add_checks  # differential checks: a step of construction

    for name in names:
        add_checks(name, data["projects"][name])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")
    print(
        f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size >> 10} KiB) in {time.time() - start:.0f} s"
    )


if __name__ == "__main__":
    main()
