"""Synthesize and validate RepoFix-Real instances: bugs in vendored libraries proven by their own suites.

For each library (``envs/tool/repofix/vendor/``): run its whole pytest suite once in the sandbox (the
baseline: tests that pass on the clean checkout); draw mutants (the AST operators of
:mod:`verigym.envs.tool.repofix.mutations`, applied one function at a time, plus the removal
operators of :mod:`verigym.envs.tool.repofix.real_mutations`) in a seeded order; for each, the
relevant test files are those that import the package and name the mutated function (SWE-bench's
test directives); run them with the mutant in the sandbox. An instance is kept only when at least
one baseline-passing test fails (FAIL_TO_PASS) and at least one still passes (PASS_TO_PASS), the
run was not tampered and some test ran. Writes ``envs/tool/repofix/data/repofix_real.json``:
per library its package folders and per instance the mutant, the test files, FAIL_TO_PASS,
PASS_TO_PASS, the function's qualified name, the first failure line (for the issue text) and the
split (``train``/``eval``, drawn per instance from its id).

Usage (this slice: cachetools 25 of 30 and tabulate 16 of 21 validated, ~6 minutes wall on 2
shared cores)::

    python scripts/gen_repofix_real.py --per-library 30

The full run is the same script with larger bounds, e.g. ``--per-library 1000 --per-function 8``
(~3 s of sandbox time per mutant tried); it reaches >= 1,500 instances only once more libraries
pass the sandboxed runner (more-itertools and toolz are vendored but trip it today).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import random
import re
import sys
import textwrap
import time
from pathlib import Path

from verigym.envs.tool.repofix import real
from verigym.envs.tool.repofix.mutations import Mutant, apply, mutants_of
from verigym.envs.tool.repofix.real_mutations import extra_mutants
from verigym.envs.tool.workspace import ROOT, Workspace
from verigym.sandbox import Limits

OUT = Path(real.__file__).with_name("data") / "repofix_real.json"
WORKING = ("cachetools", "tabulate")
"""Libraries whose whole suite passes under the sandboxed runner today (more-itertools and toolz
trip its audit hook: the next slice)."""


_MAX_FUNCTION_LINES = 60
"""Longer functions get only the removal operators (the catalogue's cost grows with the square)."""
_PER_FUNCTION = 2
"""Mutants tried per function (spreads the instances over the library)."""


def _functions(tree: ast.AST) -> list[tuple[str, ast.AST]]:
    out = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((node.name, node))
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out.append((f"{node.name}.{item.name}", item))
    return out


def function_mutants(path: str, source: str, node: ast.AST) -> list[Mutant]:
    """The operator catalogue's mutants of one function, mapped back onto the whole module."""
    lines = source.splitlines(keepends=True)
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    chunk = "".join(lines[first - 1 : node.end_lineno])
    indent = node.col_offset
    snippet = textwrap.dedent(chunk)
    if len(snippet) == len(chunk) and indent:
        return []
    out = []
    for m in mutants_of(path, snippet):
        new = "".join(
            " " * indent + line if line.strip() else line for line in m.new.splitlines(True)
        )
        old = "".join(
            " " * indent + line if line.strip() else line for line in m.old.splitlines(True)
        )
        mutant = Mutant(path, m.operator, m.first + first - 1, m.last + first - 1, old, new)
        try:
            ast.parse(apply(source, mutant))
        except (ValueError, SyntaxError):
            continue
        out.append(mutant)
    return out


def _split(instance_id: str) -> str:
    return "eval" if int(hashlib.sha256(instance_id.encode()).hexdigest(), 16) % 5 == 0 else "train"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-library", type=int, default=40, help="mutants tried per library")
    parser.add_argument(
        "--per-function", type=int, default=_PER_FUNCTION, help="mutants tried per function"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--libraries", nargs="*", default=list(WORKING))
    args = parser.parse_args(argv)
    workspace = Workspace(
        test_command="true",
        shell_timeout_s=10.0,
        limits=Limits(timeout_s=300.0, max_processes=48, tmp_mb=64),
    )
    data = {"libraries": {}}
    try:
        for name in args.libraries:
            files = real.library_files(name)
            packages = real.package_dirs(name)
            tests_dir = real.tests_dir(name)
            test_files = sorted(
                p
                for p in files
                if p.startswith(tests_dir + "/") and p.rsplit("/", 1)[-1].startswith("test_")
            )
            sources = sorted(
                p
                for p in files
                if any(p.startswith(d + "/") for d in packages)
                and not p.startswith(tests_dir + "/")
            )
            started = time.monotonic()
            workspace.sandbox.fresh()
            workspace.load_helpers()
            baseline, tampered, _ = real.run_tests(
                workspace.sandbox, ROOT, files, test_files, timeout_s=240.0
            )
            if tampered:
                print(f"{name}: the baseline run failed", file=sys.stderr)
                continue
            passing = {t for t, v in baseline.items() if v == "pass"}
            print(f"{name}: baseline {len(passing)} passing in {time.monotonic() - started:.1f}s")
            rng = random.Random(f"{args.seed}:{name}")
            functions = [
                (path, qualname, node)
                for path in sources
                for qualname, node in _functions(ast.parse(files[path]))
            ]
            rng.shuffle(functions)
            extra = {path: extra_mutants(path, files[path]) for path in sources}

            def candidates(
                functions=functions, extra=extra, files=files, rng=rng, cap=args.per_function
            ):
                for path, qualname, node in functions:
                    inside = [
                        m
                        for m in extra[path]
                        if node.lineno <= m.first and m.last <= (node.end_lineno or 0)
                    ]
                    if (node.end_lineno or 0) - node.lineno <= _MAX_FUNCTION_LINES:
                        inside += function_mutants(path, files[path], node)
                    rng.shuffle(inside)
                    for mutant in inside[:cap]:
                        yield mutant, qualname

            instances = []
            tried = 0
            for mutant, qualname in candidates():
                if tried >= args.per_library:
                    break
                word = re.compile(r"\b" + re.escape(qualname.rsplit(".", 1)[-1]) + r"\b")
                top = packages[0].rsplit("/", 1)[-1]
                relevant = [
                    t
                    for t in test_files
                    if re.search(rf"\b(import|from)\s+{re.escape(top)}\b", files[t])
                    and word.search(files[t])
                ]
                if not relevant:
                    continue
                tried += 1
                mutated = dict(files)
                mutated[mutant.file] = apply(files[mutant.file], mutant)
                t0 = time.monotonic()
                workspace.sandbox.fresh()
                workspace.load_helpers()
                results, tampered, messages = real.run_tests(
                    workspace.sandbox, ROOT, mutated, relevant, timeout_s=120.0
                )
                seconds = time.monotonic() - t0
                if tampered:
                    continue
                f2p = sorted(t for t in passing if results.get(t) == "fail")
                p2p = sorted(
                    t for t in passing if results.get(t) == "pass" and t.split("::")[0] in relevant
                )
                if not f2p or not p2p:
                    continue
                message = messages.get(f2p[0], "")
                if any(
                    line.strip() and line.strip() in message for line in mutant.new.splitlines()
                ):
                    message = ""  # never show the mutated code
                instance_id = f"{name}-{hashlib.sha256(json.dumps(mutant.to_json()).encode()).hexdigest()[:10]}"
                instances.append(
                    {
                        "id": instance_id,
                        "mutant": mutant.to_json(),
                        "function": qualname,
                        "tests": relevant,
                        "f2p": f2p,
                        "p2p": p2p,
                        "message": message,
                        "split": _split(instance_id),
                        "seconds": round(seconds, 2),
                    }
                )
                print(
                    f"  {instance_id} {mutant.operator} {qualname}: {len(f2p)} F2P {len(p2p)} P2P ({seconds:.1f}s)"
                )
            data["libraries"][name] = {
                "packages": packages,
                "sources": sources,
                "tried": tried,
                "instances": instances,
            }
            print(
                f"{name}: {len(instances)} of {tried} validated in {time.monotonic() - started:.0f}s"
            )
    finally:
        workspace.close()
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(data, indent=None, sort_keys=True, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
