"""Terminal templates, group ``script``: write a small program; the checker runs it on new inputs.

The verdict copies only the program out of the final workspace into a new sandbox (nothing else
the agent left there), runs it on hidden inputs drawn at reset (never shown to the agent: the
workspace holds other, sample inputs) and compares what it wrote with the answers computed here.
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np

from verigym.envs.tool.terminal.core import (
    WORDS,
    Runner,
    Snapshot,
    Template,
    Verdict,
    choice,
    sample,
    scored,
)

HIDDEN_CASES = 4


def _run_cases(
    runner: Runner,
    program: tuple[str, bytes, int],
    cases: list[dict],
    invoke: str,
) -> Verdict:
    """Run ``invoke`` (``{i}`` = case index) once per case in one fresh sandbox; compare stdout files."""
    path, data, mode = program
    files: dict = {path: (data, mode)}
    for i, case in enumerate(cases):
        for name, text in case["files"].items():
            files[f"cases/{i}/{name}"] = text
    command = "; ".join(
        f"( {invoke.format(i=i, dir=f'cases/{i}')} ) > cases/{i}.out 2>/dev/null </dev/null"
        for i in range(len(cases))
    )
    status, _, snap = runner.shell(files, command, timeout=10.0, snapshot=True)
    if snap is None:
        return False, 0.0, f"the program could not be run (status {status})"
    outputs = [snap.text(f"cases/{i}.out") for i in range(len(cases))]
    items = [
        out is not None and out.strip() == case["expected"].strip()
        for out, case in zip(outputs, cases)
    ]
    return scored(items, detail=f"hidden inputs passed: {sum(items)}/{len(items)}")


def _program(snap: Snapshot, path: str) -> tuple[str, bytes, int] | None:
    entry = snap.entries.get(path)
    if entry is None or entry.kind != "f" or entry.data is None:
        return None
    return path, entry.data, entry.mode


# -- colsum --------------------------------------------------------------------------------------
def _colsum_case(rng: np.random.Generator) -> dict:
    cols = sample(rng, WORDS, int(rng.integers(2, 5)))
    target = choice(rng, cols)
    rows = [cols] + [
        [str(int(v)) for v in rng.integers(-500, 1000, len(cols))]
        for _ in range(int(rng.integers(0, 15)))
    ]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    total = sum(int(r[cols.index(target)]) for r in rows[1:])
    return {"files": {"in.csv": out.getvalue()}, "column": target, "expected": str(total)}


def _colsum_generate(rng: np.random.Generator):
    sample_case = _colsum_case(rng)
    cases = [_colsum_case(rng) for _ in range(HIDDEN_CASES)]
    instruction = (
        "Write a Python program tools/colsum.py: `python3 tools/colsum.py FILE COLUMN` reads the CSV file FILE "
        "(a header row, then integer cells) and prints the sum of the column named COLUMN as an integer (0 when "
        f"there are no data rows). A sample input is samples/in.csv (the sum of its column "
        f"`{sample_case['column']}` is {sample_case['expected']}). It will be run on other files."
    )
    files = {"samples/in.csv": sample_case["files"]["in.csv"]}
    return instruction, files, {"cases": cases}


def _colsum_check(expect: dict, snap: Snapshot, runner: Runner) -> Verdict:
    program = _program(snap, "tools/colsum.py")
    if program is None:
        return False, 0.0, "tools/colsum.py is missing"
    cases = [
        {"files": {**c["files"], "column": c["column"]}, "expected": c["expected"]}
        for c in expect["cases"]
    ]
    return _run_cases(
        runner, program, cases, 'python3 tools/colsum.py {dir}/in.csv "$(cat {dir}/column)"'
    )


def _colsum_oracle(expect: dict) -> list[str]:
    return [
        "mkdir -p tools && cat > tools/colsum.py <<'EOF'\nimport csv, sys\n"
        "rows = list(csv.reader(open(sys.argv[1])))\ni = rows[0].index(sys.argv[2])\n"
        "print(sum(int(r[i]) for r in rows[1:] if r))\nEOF"
    ]


# -- extract_errors ------------------------------------------------------------------------------
def _errors_case(rng: np.random.Generator) -> dict:
    lines, want = [], []
    for i in range(int(rng.integers(3, 20))):
        level = choice(rng, ("INFO", "WARN", "ERROR", "DEBUG"))
        msg = " ".join(sample(rng, WORDS, int(rng.integers(1, 5))))
        lines.append(f"{1700000000 + i} level={level} msg={msg}")
        if level == "ERROR":
            want.append(msg)
    return {"files": {"app.log": "\n".join(lines) + "\n"}, "expected": "\n".join(want)}


def _errors_generate(rng: np.random.Generator):
    sample_case = _errors_case(rng)
    cases = [_errors_case(rng) for _ in range(HIDDEN_CASES)]
    instruction = (
        "Write an executable program bin/errors (any language with a #! line; it must run as `./bin/errors LOGFILE`). "
        "Each line of a log is `<epoch> level=<LEVEL> msg=<message, may contain spaces>`; the program prints the "
        "message of every line whose level is ERROR, one per line, in order, and nothing else. A sample log is "
        "samples/app.log. It will be run on other logs."
    )
    return instruction, {"samples/app.log": sample_case["files"]["app.log"]}, {"cases": cases}


def _errors_check(expect: dict, snap: Snapshot, runner: Runner) -> Verdict:
    program = _program(snap, "bin/errors")
    if program is None:
        return False, 0.0, "bin/errors is missing"
    return _run_cases(runner, program, expect["cases"], "./bin/errors {dir}/app.log")


def _errors_oracle(expect: dict) -> list[str]:
    return [
        "mkdir -p bin && printf '%s\\n' '#!/bin/sh' "
        '\'grep -E "^[^ ]+ level=ERROR msg=" "$1" | sed -E "s/^[^ ]+ level=ERROR msg=//"\' > bin/errors '
        "&& chmod +x bin/errors"
    ]


# -- json_get ------------------------------------------------------------------------------------
def _nested(rng: np.random.Generator, depth: int) -> dict:
    out: dict = {}
    for key in sample(rng, WORDS, int(rng.integers(2, 5))):
        kind = int(rng.integers(0, 4)) if depth < 3 else int(rng.integers(1, 4))
        if kind == 0:
            out[key] = _nested(rng, depth + 1)
        elif kind == 1:
            out[key] = int(rng.integers(-100, 100))
        elif kind == 2:
            out[key] = choice(rng, WORDS)
        else:
            out[key] = [int(v) for v in rng.integers(0, 9, int(rng.integers(0, 4)))]
    return out


def _leaves(value, prefix=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*prefix, k))
    else:
        yield prefix, value


def _json_case(rng: np.random.Generator) -> dict:
    doc = _nested(rng, 0)
    paths = list(_leaves(doc))
    path, value = paths[int(rng.integers(len(paths)))]
    shown = value if isinstance(value, str) else json.dumps(value)
    return {"files": {"doc.json": json.dumps(doc), "path": ".".join(path)}, "expected": shown}


def _json_get_generate(rng: np.random.Generator):
    sample_case = _json_case(rng)
    cases = [_json_case(rng) for _ in range(HIDDEN_CASES)]
    instruction = (
        "Write a Python program tools/jget.py: `python3 tools/jget.py FILE KEY.PATH` loads the JSON object in FILE, "
        "follows the dotted key path (object keys only) and prints the value found: a string as is (no quotes), "
        "anything else as Python's json.dumps(value) writes it (e.g. `[1, 2]`). Sample: samples/doc.json with the path "
        f"`{sample_case['files']['path']}` prints `{sample_case['expected']}`. It will be run on other files."
    )
    return instruction, {"samples/doc.json": sample_case["files"]["doc.json"]}, {"cases": cases}


def _json_get_check(expect: dict, snap: Snapshot, runner: Runner) -> Verdict:
    program = _program(snap, "tools/jget.py")
    if program is None:
        return False, 0.0, "tools/jget.py is missing"
    return _run_cases(
        runner, program, expect["cases"], 'python3 tools/jget.py {dir}/doc.json "$(cat {dir}/path)"'
    )


def _json_get_oracle(expect: dict) -> list[str]:
    return [
        "mkdir -p tools && cat > tools/jget.py <<'EOF'\nimport json, sys\nv = json.load(open(sys.argv[1]))\n"
        "for k in sys.argv[2].split('.'):\n    v = v[k]\nprint(v if isinstance(v, str) else json.dumps(v))\nEOF"
    ]


TEMPLATES = [
    Template("script_colsum", "script", _colsum_generate, _colsum_check, _colsum_oracle),
    Template("script_errors", "script", _errors_generate, _errors_check, _errors_oracle),
    Template("script_json_get", "script", _json_get_generate, _json_get_check, _json_get_oracle),
]
