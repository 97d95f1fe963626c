"""Synthesize and validate RepoFix-Real instances: bugs in vendored libraries proven by their own suites.

For each library (``envs/tool/repofix/vendor/``): run its whole pytest suite once in the sandbox (the
baseline: tests that pass on the clean checkout). When that run reads as tampered, each test file
runs alone and the files the runner refuses (an honest suite can trip its audit hook: boltons'
``test_gcutils.py`` walks the heap with ``gc.get_referrers``; its ``test_funcutils_fb_py3.py``
imports asyncio, whose ``types.coroutine`` writes a ``__code__``) are left out of the suite and
recorded per library (``excluded_tests``). Then draw mutants one function at a time in a seeded
order: the AST operators of :mod:`verigym.envs.tool.repofix.mutations` and the removals of
:mod:`verigym.envs.tool.repofix.real_mutations` on the function's own text, and dropping an
undecorated method from its class, each mapped back onto the module and kept when the module
still parses; for each, the relevant test files are those that import the package and name the
mutated function (SWE-bench's test directives); run them with the mutant in the sandbox. An
instance is kept only when at least one baseline-passing test fails (FAIL_TO_PASS) and at least
one still passes (PASS_TO_PASS), the run was not tampered and some test ran. Writes
``envs/tool/repofix/data/repofix_real.json.xz``: per library its package folders, how many mutants
were tried, the excluded test files, and per instance the mutant, the test files, FAIL_TO_PASS,
PASS_TO_PASS, the function's qualified name, the first failure line (for the issue text) and the
split (``train``/``eval``, drawn per instance from its id). Libraries not named by
``--libraries`` keep their instances (``--fresh`` starts a new file). ``--pairs N`` builds
two-bug instances (``pairs``) from a library's validated ones instead (see :func:`_make_pairs`).

Usage (cachetools 25 of 30 and tabulate 16 of 21 validated, ~6 minutes wall on 2 shared cores;
boltons: see the data's ``tried``)::

    python scripts/gen_repofix_real.py --per-library 30 --libraries cachetools tabulate
    python scripts/gen_repofix_real.py --per-library 150 --max-seconds 600 --libraries boltons

The full run is the same script with larger bounds, e.g. ``--per-library 1000 --per-function 8``
(~3-30 s of sandbox time per mutant tried, by the size of the relevant test files). Each library
here passes the sandboxed runner but for the files recorded in its ``excluded_tests``: boltons'
``test_gcutils.py`` (``gc.get_referrers``), toolz' doctest file (no test runs), pyparsing's
``test_unit.py`` (a 200-frame stack walk reaches the runner's ``_main``: docs/security.md); test
files whose imports are not vendored (itsdangerous' ``test_timed.py``: freezegun; idna's
``test_idna_properties.py``: hypothesis) collect no test.
"""

from __future__ import annotations

import argparse
import ast
import collections
import functools
import hashlib
import json
import random
import re
import signal
import sys
import textwrap
import time
from pathlib import Path

from verigym.envs.tool.repofix import real
from verigym.envs.tool.repofix.env import is_source_path
from verigym.envs.tool.repofix.mutations import Mutant, _as_mutant, apply, mutants_of
from verigym.envs.tool.repofix.real_env import apply_mutants, pack_real_data, unpack_real_data
from verigym.envs.tool.repofix.real_mutations import extra_mutants
from verigym.envs.tool.workspace import ROOT, Workspace
from verigym.sandbox import Limits

OUT = Path(real.__file__).with_name("data") / "repofix_real.json.xz"
_SAVE_EVERY_S = 60.0
"""Seconds between saves while a library runs (each packs the whole file; a cut run loses less)."""
WORKING = ("cachetools", "tabulate", "boltons")
"""The libraries ``--libraries`` names by default (name others explicitly)."""


_MAX_FUNCTION_LINES = 60
"""Longer functions get only the removal operators (the catalogue's cost grows with the square)."""
_PER_FUNCTION = 2
"""Mutants tried per function (spreads the instances over the library)."""


def _functions(tree: ast.AST) -> list[tuple[str, ast.AST, int]]:
    """(qualified name, node, length of the class body holding it, 0 for a module function)."""
    out = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((node.name, node, 0))
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out.append((f"{node.name}.{item.name}", item, len(node.body)))
    return out


def function_mutants(path: str, source: str, node: ast.AST, class_body: int = 0) -> list[Mutant]:
    """The mutants of one function, mapped back onto the whole module, not yet checked to parse.

    The operator catalogue (on functions of at most :data:`_MAX_FUNCTION_LINES` lines) and the
    removals of :mod:`~verigym.envs.tool.repofix.real_mutations` run on the function's own text
    (a module's cost would grow with its size for every function); a method without decorators
    can also be dropped from its class (``class_body``: how many statements the class holds).
    """
    lines = source.splitlines(keepends=True)
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    chunk = "".join(lines[first - 1 : node.end_lineno])
    indent = node.col_offset
    snippet = textwrap.dedent(chunk)
    if len(snippet) == len(chunk) and indent:
        return []
    found = list(extra_mutants(path, snippet))
    if (node.end_lineno or 0) - node.lineno <= _MAX_FUNCTION_LINES:
        found += mutants_of(path, snippet)
    out = []
    for m in found:
        new = "".join(
            " " * indent + line if line.strip() else line for line in m.new.splitlines(True)
        )
        old = "".join(
            " " * indent + line if line.strip() else line for line in m.old.splitlines(True)
        )
        out.append(Mutant(path, m.operator, m.first + first - 1, m.last + first - 1, old, new))
    if class_body and not node.decorator_list:
        pad = " " * indent
        kept = [pad + "pass\n"] if class_body == 1 else []
        new_lines = lines[: node.lineno - 1] + kept + lines[node.end_lineno :]
        out.append(_as_mutant(path, "dropped_method", lines, new_lines))
    return out


@functools.lru_cache(maxsize=8)
def _dump(source: str) -> str:
    return ast.dump(ast.parse(source))


def parses(source: str, mutant: Mutant) -> bool:
    """Whether the module still parses with ``mutant`` applied (and differs from the original)."""
    try:
        return ast.dump(ast.parse(apply(source, mutant))) != _dump(source)
    except (ValueError, SyntaxError):
        return False


class _Baselines:
    """Baseline runs cached on disk, one JSON file per library: {key: [results, tampered]}, the key
    a digest of the runner's source, the library's sdist, the test files run and hypothesis'
    version (a changed runner or pin runs them again)."""

    def __init__(self, folder: Path):
        self.folder = folder

    def get(self, name: str, tests: list[str], compute) -> tuple[dict[str, str], bool]:
        """The cached (results, tampered) of running ``tests``, or ``compute()``'s, then stored."""
        blobs = real.hypothesis_files() if "hypothesis" in real.tests_need(name, tests) else None
        key = hashlib.sha256(
            json.dumps(
                [
                    real._RUNNER,
                    real._manifest()["libraries"][name]["sha256"],
                    sorted(tests),
                    (blobs or {}).get("hypothesis/version.py", b"").decode(),
                ]
            ).encode()
        ).hexdigest()
        path = self.folder / f"{name}.json"
        table = json.loads(path.read_text()) if path.exists() else {}
        if key in table:
            results, tampered = table[key]
            return dict(results), bool(tampered)
        results, tampered, _ = compute()
        table[key] = [results, tampered]
        self.folder.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(table, sort_keys=True))
        return results, tampered


def _split(instance_id: str) -> str:
    return "eval" if int(hashlib.sha256(instance_id.encode()).hexdigest(), 16) % 5 == 0 else "train"


_PAIRS_PER_BUG = 2
"""Two-bug instances one validated bug, or one pair of functions, may join by default (spreads
them over the library; ``--pairs-per-bug``)."""


def _shown(message: str, mutants: list[Mutant]) -> str:
    """A failing test's message as the issue may show it: empty when it holds a line of a mutant's
    code (the issue never shows the mutated code)."""
    lines = (line.strip() for m in mutants for line in m.new.splitlines())
    return "" if any(line and line in message for line in lines) else message


def _disjoint(a: Mutant, b: Mutant) -> bool:
    """Whether two mutants can both apply: other files, or line ranges that do not touch."""
    return a.file != b.file or a.last + 1 < b.first or b.last + 1 < a.first


def pair_candidates(instances: list[dict], rng: random.Random) -> list[tuple[dict, dict]]:
    """Pairs of validated instances that may make a two-bug instance, in a seeded order (those
    with the fewest test files first): the same split (an evaluation bug never joins a training
    one), different functions, disjoint lines and a FAIL_TO_PASS test in common."""
    out = []
    for i, a in enumerate(instances):
        for b in instances[i + 1 :]:
            if (
                a["split"] == b["split"]
                and a["function"] != b["function"]
                and set(a["f2p"]) & set(b["f2p"])
                and _disjoint(Mutant(**a["mutant"]), Mutant(**b["mutant"]))
            ):
                out.append((a, b))
    rng.shuffle(out)  # then the fewest test files first (each candidate's run costs that much)
    out.sort(key=lambda pair: len(set(pair[0]["tests"]) | set(pair[1]["tests"])))
    return out


def _make_pairs(name, instances, pairs, files, passing, run, rng, args, save) -> int:
    """Validate up to ``args.pairs`` two-bug candidates of one library; returns how many were kept.

    Kept when the run with both mutants is not tampered, some baseline-passing test of the union
    of the two instances' test files fails (FAIL_TO_PASS) and some passes (PASS_TO_PASS), and each
    bug alone still fails one of those FAIL_TO_PASS tests (its own validated FAIL_TO_PASS, run on
    files the pair's verdict runs too): fixing only one of the two never passes the verdict.
    """
    known = {p["id"] for p in pairs}
    used = {tuple(p["parts"]) for p in pairs}
    uses = collections.Counter(part for p in pairs for part in p["parts"])
    joined = collections.Counter(frozenset(p["functions"]) for p in pairs)
    made = tried = 0
    started = time.monotonic()
    for a, b in pair_candidates(instances, rng):
        if tried >= args.pairs or time.monotonic() - started > args.max_seconds:
            break
        functions = frozenset((a["function"], b["function"]))
        if (
            (a["id"], b["id"]) in used
            or max(uses[a["id"]], uses[b["id"]]) >= args.pairs_per_bug
            or joined[functions] >= args.pairs_per_bug
        ):
            continue
        mutants = [Mutant(**a["mutant"]), Mutant(**b["mutant"])]
        pair_id = f"{name}-pair-" + hashlib.sha256(f"{a['id']}+{b['id']}".encode()).hexdigest()[:10]
        try:
            mutated = apply_mutants(files, mutants)
            ast.parse(mutated[mutants[0].file]), ast.parse(mutated[mutants[1].file])
        except (ValueError, SyntaxError):
            continue
        tests = list(dict.fromkeys([*a["tests"], *b["tests"]]))
        tried += 1
        t0 = time.monotonic()
        results, tampered, messages = run(tests, 120.0, files=mutated)
        seconds = time.monotonic() - t0
        f2p = sorted(t for t in passing if results.get(t) == "fail")
        p2p = sorted(t for t in passing if results.get(t) == "pass" and t.split("::")[0] in tests)
        alone = [sorted(set(x["f2p"]) & set(f2p)) for x in (a, b)]
        if tampered or not f2p or not p2p or not all(alone) or pair_id in known:
            print(f"  {a['id']} + {b['id']}: dropped ({seconds:.1f}s)", flush=True)
            continue
        shown = [_shown(messages.get(tests_alone[0], ""), mutants) for tests_alone in alone]
        need = real.tests_need(name, tests)
        pairs.append(
            {
                "id": pair_id,
                "parts": [a["id"], b["id"]],
                "mutants": [m.to_json() for m in mutants],
                "functions": [a["function"], b["function"]],
                "tests": tests,
                "f2p": f2p,
                "p2p": p2p,
                "messages": shown,
                "split": a["split"],
                "seconds": round(seconds, 2),
                **({"needs": list(need)} if need else {}),
            }
        )
        known.add(pair_id)
        uses.update([a["id"], b["id"]])
        joined[functions] += 1
        made += 1
        save(now=False)
        print(
            f"  {pair_id} ({a['function']} + {b['function']}): {len(f2p)} F2P {len(p2p)} P2P "
            f"({seconds:.1f}s)",
            flush=True,
        )
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-library", type=int, default=40, help="mutants tried per library")
    parser.add_argument(
        "--per-function", type=int, default=_PER_FUNCTION, help="mutants tried per function"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--libraries", nargs="*", default=list(WORKING))
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=600.0,
        help="stop drawing a library's mutants after this many seconds of wall time",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="start a new data file (default: libraries not in --libraries keep their instances)",
    )
    parser.add_argument(
        "--extend",
        action="store_true",
        help="keep the libraries' validated instances and add new ones (mutants already there are "
        "not run again; pair with a new --seed to draw other mutants)",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path.home() / ".cache" / "verigym" / "repofix_real",
        help="folder of cached baseline runs (keyed by the runner, the library's sdist, the test "
        "files and hypothesis' version; click's per-file baseline took 819 s)",
    )
    parser.add_argument(
        "--runner",
        type=Path,
        default=None,
        help="validate with this _pytest_runner.py source instead of the package's (e.g. a "
        "committed one: git show HEAD:envs/tool/repofix/_pytest_runner.py > FILE)",
    )
    parser.add_argument(
        "--revalidate",
        action="store_true",
        help="run each stored instance of --libraries again (its mutant, its test files) against a "
        "new baseline and keep those still proven, with their FAIL_TO_PASS/PASS_TO_PASS as now "
        "found; draws no new mutants (after a change of the runner or of its hypothesis profile)",
    )
    parser.add_argument(
        "--pairs",
        type=int,
        default=0,
        help="draw this many two-bug candidates per library instead of single mutants: two "
        "validated instances of the same split, in different functions, whose FAIL_TO_PASS lists "
        "share a test, applied together and validated by the union of their test files",
    )
    parser.add_argument(
        "--pairs-per-bug",
        type=int,
        default=_PAIRS_PER_BUG,
        help="--pairs: two-bug instances one validated bug, or one pair of functions, may join",
    )
    args = parser.parse_args(argv)
    # a stopped run (kill PID) still saves what it validated since the last save
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.runner is not None:
        real._RUNNER = args.runner.read_text()
    workspace = Workspace(
        test_command="true",
        shell_timeout_s=10.0,
        limits=Limits(timeout_s=300.0, max_processes=48, tmp_mb=64),
    )
    data = {"libraries": {}}
    kept: dict[str, dict] = {}
    if OUT.exists() and not args.fresh:
        data["libraries"] = unpack_real_data(OUT.read_bytes())["libraries"]
        kept = {n: data["libraries"][n] for n in args.libraries if n in data["libraries"]}
        if not args.extend and not args.revalidate and not args.pairs:
            for name in args.libraries:
                data["libraries"].pop(name, None)
    baselines = _Baselines(args.cache)

    saved = [time.monotonic()]

    def save(now: bool = True) -> None:  # a cut run keeps what it validated up to the last save
        if not now and time.monotonic() - saved[0] < _SAVE_EVERY_S:
            return
        OUT.parent.mkdir(exist_ok=True)
        OUT.with_suffix(".tmp").write_bytes(pack_real_data(data))
        OUT.with_suffix(".tmp").replace(OUT)
        saved[0] = time.monotonic()

    try:
        for name in args.libraries:
            files = real.library_files(name)
            packages = real.package_dirs(name)
            tests_dir = real.tests_dir(name)
            test_files = real.test_files(name)
            # the modules the verdict takes from the agent's workspace (never a test, a conftest
            # or a __main__.py: a bug there would not be in the checkout the verdict runs)
            sources = sorted(
                p
                for p in files
                if any(is_source_path(p, d) for d in packages) and not p.startswith(tests_dir + "/")
            )
            started = time.monotonic()
            excluded: dict[str, str] = {}
            # files a run of this library refused before go out first (one baseline run for the
            # rest instead of one run per file); if the rest still reads as tampered, see below
            for test_file, why in kept.get(name, {}).get("excluded_tests", {}).items():
                if test_file in test_files and why in ("tampered", "no test ran"):
                    excluded[test_file] = why
                    test_files.remove(test_file)
            for test_file in list(test_files):
                missing = [n for n in real.tests_need(name, [test_file]) if not real.available([n])]
                if missing:
                    excluded[test_file] = "needs " + ", ".join(missing)
                    test_files.remove(test_file)

            def run(tests: list[str], timeout_s: float, name=name, files=files):
                workspace.sandbox.fresh()
                workspace.load_helpers()
                return real.run_tests(
                    workspace.sandbox,
                    ROOT,
                    files,
                    tests,
                    timeout_s=timeout_s,
                    needs=real.tests_need(name, tests),
                )

            baseline, tampered = baselines.get(name, test_files, lambda t=test_files: run(t, 600.0))
            if tampered:  # find the test files the runner refuses; the others are the suite
                baseline = {}
                for test_file in test_files:
                    one, tampered = baselines.get(
                        name, [test_file], lambda t=test_file: run([t], 240.0)
                    )
                    if tampered:
                        excluded[test_file] = "no test ran" if not one else "tampered"
                    else:
                        baseline.update(one)
                test_files = [t for t in test_files if t not in excluded]
                for test_file, why in excluded.items():
                    print(f"{name}: {test_file} left out of the suite ({why})", file=sys.stderr)
            if not baseline:
                print(f"{name}: the baseline run failed", file=sys.stderr)
                continue
            passing = {t for t, v in baseline.items() if v == "pass"}
            print(f"{name}: baseline {len(passing)} passing in {time.monotonic() - started:.1f}s")
            rng = random.Random(f"{args.seed}:{name}")
            if args.pairs:
                entry = data["libraries"][name]
                pairs = entry.setdefault("pairs", [])
                made = _make_pairs(
                    name, entry["instances"], pairs, files, passing, run, rng, args, save
                )
                save()
                print(
                    f"{name}: {len(pairs)} two-bug instances ({made} new) in "
                    f"{time.monotonic() - started:.0f}s",
                    flush=True,
                )
                continue
            functions = [
                (path, qualname, node, class_body)
                for path in sources
                for qualname, node, class_body in _functions(ast.parse(files[path]))
            ]
            rng.shuffle(functions)

            def candidates(functions=functions, files=files, rng=rng, cap=args.per_function):
                for path, qualname, node, class_body in functions:
                    inside = function_mutants(path, files[path], node, class_body)
                    rng.shuffle(inside)
                    taken = 0
                    for mutant in inside:
                        if taken >= cap:
                            break
                        if parses(files[path], mutant):
                            taken += 1
                            yield mutant, qualname

            previous = kept.get(name, {}) if args.extend or args.revalidate else {}
            instances = [i for i in previous.get("instances", ()) if i["mutant"]["file"] in sources]
            pairs = [
                p
                for p in previous.get("pairs", ())
                if all(m["file"] in sources for m in p["mutants"])
            ]
            for gone in sorted(
                {i["id"] for i in previous.get("instances", ())} - {i["id"] for i in instances}
            ):
                print(f"  {gone}: dropped (its module is not one the verdict copies)", flush=True)
            known = {i["id"] for i in instances}
            tried = 0
            data["libraries"][name] = entry = {
                "packages": packages,
                "sources": sources,
                "tried": previous.get("tried", 0),
                "excluded_tests": excluded,
                "instances": instances,
                **({"pairs": pairs} if pairs else {}),
            }

            def validate(
                mutant, qualname, relevant, instance_id, name=name, files=files, passing=passing
            ):
                """The instance ``mutant`` makes, or None where its tests do not prove it."""
                mutated = dict(files)
                mutated[mutant.file] = apply(files[mutant.file], mutant)
                t0 = time.monotonic()
                workspace.sandbox.fresh()
                workspace.load_helpers()
                results, tampered, messages = real.run_tests(
                    workspace.sandbox,
                    ROOT,
                    mutated,
                    relevant,
                    timeout_s=120.0,
                    needs=real.tests_need(name, relevant),
                )
                seconds = time.monotonic() - t0
                if tampered:
                    return None
                f2p = sorted(t for t in passing if results.get(t) == "fail")
                p2p = sorted(
                    t for t in passing if results.get(t) == "pass" and t.split("::")[0] in relevant
                )
                if not f2p or not p2p:
                    return None
                message = _shown(messages.get(f2p[0], ""), [mutant])
                need = real.tests_need(name, relevant)
                return {
                    "id": instance_id,
                    "mutant": mutant.to_json(),
                    "function": qualname,
                    "tests": relevant,
                    "f2p": f2p,
                    "p2p": p2p,
                    "message": message,
                    "split": _split(instance_id),
                    "seconds": round(seconds, 2),
                    **({"needs": list(need)} if need else {}),
                }

            if args.revalidate:  # the stored instances again, against this baseline
                held, instances[:] = list(instances), []
                for old in held:
                    mutant = Mutant(**old["mutant"])
                    again = validate(mutant, old["function"], list(old["tests"]), old["id"])
                    print(
                        f"  {old['id']}: "
                        + (
                            f"kept, {len(again['f2p'])} F2P (was {len(old['f2p'])}) "
                            f"{len(again['p2p'])} P2P (was {len(old['p2p'])}) {again['seconds']}s"
                            if again
                            else "dropped"
                        ),
                        flush=True,
                    )
                    if again is not None:
                        instances.append(again)
                    save(now=False)
            for mutant, qualname in candidates():
                if (
                    args.revalidate
                    or tried >= args.per_library
                    or time.monotonic() - started > args.max_seconds
                ):
                    break
                word = re.compile(r"\b" + re.escape(qualname.rsplit(".", 1)[-1]) + r"\b")
                top = packages[0].rsplit("/", 1)[-1]
                relevant = [
                    t
                    for t in test_files
                    if re.search(rf"\b(import|from)\s+{re.escape(top)}\b", files[t])
                    and word.search(files[t])
                ]
                instance_id = f"{name}-{hashlib.sha256(json.dumps(mutant.to_json()).encode()).hexdigest()[:10]}"
                if not relevant or instance_id in known:
                    continue
                tried += 1
                entry["tried"] += 1
                instance = validate(mutant, qualname, relevant, instance_id)
                if instance is None:
                    continue
                instances.append(instance)
                known.add(instance_id)
                save(now=False)
                print(
                    f"  {instance_id} {mutant.operator} {qualname}: {len(instance['f2p'])} F2P "
                    f"{len(instance['p2p'])} P2P ({instance['seconds']:.1f}s)",
                    flush=True,
                )
            save()
            print(
                f"{name}: {len(instances)} instances ({len(instances) - len(previous.get('instances', ()))}"
                f" new of {tried} tried) in {time.monotonic() - started:.0f}s"
            )
    finally:  # a stopped or failed run keeps what it validated
        save()
        workspace.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
