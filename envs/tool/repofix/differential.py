"""Differential checks: hidden FAIL_TO_PASS checks on inputs other than the issue's example.

A RepoFix issue shows one reproducing example. A patch that returns the original behaviour for
exactly that example's arguments, and keeps the bug everywhere else (:func:`special_case`, the
attack), passes every hidden test that only exercises those arguments. So every instance gets
*differential checks* as a step of its construction (:func:`make_checks`, run offline by
``scripts/gen_repofix_checks.py`` for any repository with a unittest or ``assert``-style suite):

1. each candidate test (the instance's FAIL_TO_PASS tests first, then the others) is copied with one
   input literal of its body or ``setUp`` changed (integers +-1, x2, negated; strings with a
   character dropped, doubled, case changed, digits incremented; floats shifted);
2. the copy runs with its assertions recording the compared values (``_probe.py``) on the original
   code, on the mutated code, and
   on the mutated code special-cased on the issue's example (the original twice more for the
   kept ones, under different hash seeds: unstable copies are dropped);
3. copies whose record differs between the original and both buggy trees are kept, up to
   ``max_checks`` (distinct tests and literals first); each stores its edits and the SHA-256 of
   the original's record.

At the verdict (:func:`run_checks`) the copies run in a fresh sandbox on the agent's tree; only
their records (strings) come back through ``PythonSandbox.call`` and the parent compares their
digests with the stored ones. The expected values never enter any sandbox.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "PROBE_SOURCE",
    "check_probes",
    "make_checks",
    "probe_variants",
    "run_checks",
    "run_probes_locally",
    "snippet_of",
    "special_case",
]

_PROBE_PATH = Path(__file__).with_name("_probe.py")
PROBE_SOURCE = _PROBE_PATH.read_text()
"""The sandbox side (stdlib only): ``_vg_run_probes(root, probes, seconds)``."""
_PROBE_SECONDS = 2.0
_BATCHES = 8
"""Batches of ``max_tests`` tests tried before settling for checks the attack survives."""
_ASSERT_EXPECTED = {
    "assertEqual",
    "assertNotEqual",
    "assertIs",
    "assertIsNot",
    "assertIn",
    "assertNotIn",
    "assertLess",
    "assertLessEqual",
    "assertGreater",
    "assertGreaterEqual",
    "assertAlmostEqual",
    "assertCountEqual",
    "assertListEqual",
    "assertDictEqual",
}


# -- the copies of a test with one literal changed ---------------------------------------------------


def _int_values(value: int) -> list[int]:
    out = [value + 1, value - 1, value * 2 if value else 3, -value if value else 2, 0]
    return [v for v in dict.fromkeys(out) if v != value and abs(v) < 10**9]


def _str_values(value: str) -> list[str]:
    n = len(value)
    out: list[str] = []
    for match in list(re.finditer(r"\d+", value))[:3]:
        number = str(int(match.group()) + 1).zfill(len(match.group()))
        out.append(value[: match.start()] + number + value[match.end() :])
    if n:
        out += [value[1:], value[:-1], value[: n // 2] + value[n // 2 + 1 :], value + value[-1]]
        out += [value[:1] + value, value.swapcase(), value[::-1] if n <= 40 else value]
        out.append("")
    else:
        out += ["a", " "]
    return [v for v in dict.fromkeys(out) if v != value]


def _shift_digits(value: str, step: int) -> str:
    """``value`` with every run of digits increased by ``step`` (zero-padded to its width)."""
    return re.sub(r"\d+", lambda m: str(int(m.group()) + step).zfill(len(m.group())), value)


def _float_values(value: float) -> list[float]:
    out = [value + 1.0, value / 2 if value else 0.5, -value if value else 1.5, value + 0.25]
    return [v for v in dict.fromkeys(out) if v != value]


def _skipped(function: ast.AST) -> set[int]:
    """ids of the nodes of ``function`` that are no inputs: docstrings, f-string parts, expected
    values of assertions."""
    skip: set[int] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.JoinedStr):
            skip.update(id(n) for n in ast.walk(node))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _ASSERT_EXPECTED
            and len(node.args) >= 2
        ):
            skip.update(id(n) for n in ast.walk(node.args[1]))
            for keyword in node.keywords:
                skip.update(id(n) for n in ast.walk(keyword.value))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skip.add(id(node.value))
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare):
            for comparator in node.test.comparators:
                skip.update(id(n) for n in ast.walk(comparator))
    return skip


def _literals(function: ast.AST) -> list[ast.Constant]:
    """The input literals of a test function: not docstrings, f-string parts or expected values."""
    skip = _skipped(function)
    return [
        n
        for n in ast.walk(function)
        if isinstance(n, ast.Constant)
        and id(n) not in skip
        and type(n.value) in (int, float, str)
        and hasattr(n, "end_col_offset")
    ]


def _joined(items: list[str], opening: str, closing: str, empty: str, comma: str) -> str:
    if not items:
        return empty
    return opening + ", ".join(items) + (comma if len(items) == 1 else "") + closing


def _structural(source: str, function: ast.AST) -> list[list[list]]:
    """Copies that change the structure of a test's inputs: each list, tuple, set or dict literal
    with one element dropped, emptied, its first or last element duplicated, or reversed; each
    call (not an assertion) with its first two positional arguments swapped or its last dropped.
    Each copy is one edit ``[line, col, end_line, end_col, text]``."""
    skip = _skipped(function)
    per_node: list[list[list[list]]] = []

    def text(node: ast.AST) -> str | None:
        return ast.get_source_segment(source, node)

    def place(node: ast.AST) -> list:
        return [node.lineno, node.col_offset, node.end_lineno, node.end_col_offset]

    for node in ast.walk(function):
        if id(node) in skip or not hasattr(node, "end_col_offset"):
            continue
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and not isinstance(
            node.ctx if hasattr(node, "ctx") else None, ast.Store
        ):
            parts = [text(e) for e in node.elts]
            if any(p is None or isinstance(e, ast.Starred) for p, e in zip(parts, node.elts)):
                continue
            kind = type(node)
            opening, closing = {ast.List: "[]", ast.Tuple: "()", ast.Set: "{}"}[kind]
            empty = {ast.List: "[]", ast.Tuple: "()", ast.Set: "set()"}[kind]
            comma = "," if kind is ast.Tuple else ""

            shapes = [[]] if parts else [["0"], ['"a"']]
            shapes += [parts[:k] + parts[k + 1 :] for k in range(min(len(parts), 8))]
            if parts:
                shapes += [[parts[0], *parts], [*parts, parts[-1]], parts[::-1], parts[:1]]
                inner = node.elts[0]
                if isinstance(inner, (ast.List, ast.Tuple)) and inner.elts:  # [[1, 2], [3]] -> [[]]
                    shapes.append(["[]" if isinstance(inner, ast.List) else "()"])
            options = [
                [[*place(node), _joined(items, opening, closing, empty, comma)]]
                for items in shapes
                if items != parts
            ]
            if kind in (ast.List, ast.Tuple):  # the other sequence type, same elements
                other = ("()", ",") if kind is ast.List else ("[]", "")
                swapped = _joined(parts, other[0][0], other[0][1], other[0], other[1])
                options.append([[*place(node), swapped]])
            per_node.append(list({o[0][4]: o for o in options}.values()))
        elif isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                continue
            pairs = [f"{text(k)}: {text(v)}" for k, v in zip(node.keys, node.values)]
            shapes = [[]] + [pairs[:k] + pairs[k + 1 :] for k in range(min(len(pairs), 8))]
            per_node.append(
                [
                    [[*place(node), "{" + ", ".join(items) + "}"]]
                    for items in shapes
                    if items != pairs
                ]
            )
        elif (
            isinstance(node, ast.Call)
            and not (isinstance(node.func, ast.Attribute) and node.func.attr.startswith("assert"))
            and node.args
            and not any(isinstance(a, ast.Starred) for a in node.args)
        ):
            args = [text(a) for a in node.args]
            func = text(node.func)
            if func is None or any(a is None for a in args) or node.keywords:
                continue
            shapes = [args[:-1]]
            if len(args) >= 2:
                shapes.append([args[1], args[0], *args[2:]])
            per_node.append([[[*place(node), func + "(" + ", ".join(i) + ")"]] for i in shapes])
    out: list[list[list]] = []
    for round_ in range(max((len(v) for v in per_node), default=0)):  # one of each node first
        for options in per_node:
            if round_ < len(options):
                out.append(options[round_])
    return out


def _edit(source: str, edits: Iterable[list]) -> str:
    """``source`` with each ``[line, col, end_line, end_col, text]`` (1-based lines, UTF-8 byte
    columns, as :mod:`ast` gives them) replaced, last first."""
    lines = source.splitlines(keepends=True)
    starts, total = [], 0
    for line in lines:
        starts.append(total)
        total += len(line.encode("utf-8"))
    data = source.encode("utf-8")
    for line, col, end_line, end_col, text in sorted(edits, reverse=True):
        start, end = starts[line - 1] + col, starts[end_line - 1] + end_col
        data = data[:start] + str(text).encode("utf-8") + data[end:]
    return data.decode("utf-8")


def _test_functions(tree: ast.Module, test: str) -> list[ast.AST]:
    """The test's function (``Class.method`` or a function name) and its class's ``setUp``."""
    owner, _, name = test.rpartition(".")
    if not owner:
        return [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    klass = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner), None)
    if klass is None:
        return []
    return [n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name in (name, "setUp")]


def probe_variants(
    source: str, test: str, limit: int = 120, structural: bool = False
) -> list[list[list]]:
    """Edit lists, each changing one input literal of ``test`` (its body, its class's ``setUp``, or a
    module-level constant or helper function it reads) in the module ``source``, after four that change all the
    test's numbers together (+1, +2, x2, +10); with ``structural``, copies that change the
    structure of its inputs (:func:`_structural`) come first.

    Returns at most ``limit`` lists (spread over the literals) whose edited module still parses.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    per_literal: list[list[list[list]]] = []
    functions = _test_functions(tree, test)
    used = {n.id for f in functions for n in ast.walk(f) if isinstance(n, ast.Name)}
    shared = [  # module-level constants and helper functions the test reads (after its own)
        stmt
        for stmt in tree.body
        if isinstance(stmt, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id in used for t in stmt.targets)
        or isinstance(stmt, ast.FunctionDef)
        and stmt.name in used
    ]
    for function in [*functions, *shared]:
        for node in _literals(function):
            if type(node.value) is int:
                values: list[Any] = _int_values(node.value)
            elif type(node.value) is float:
                values = _float_values(node.value)
            else:
                values = _str_values(node.value)
            place = [node.lineno, node.col_offset, node.end_lineno, node.end_col_offset]
            per_literal.append([[[*place, repr(v)]] for v in values])
    out: list[list[list]] = []
    # every number of the test shifted or scaled together first: the relations between its inputs
    # hold, so a bug at a boundary the example sits on shows again, on other arguments
    numbers = [
        n for function in functions for n in _literals(function) if type(n.value) in (int, float)
    ]
    for shift in (lambda v: v + 1, lambda v: v + 2, lambda v: v * 2, lambda v: v + 10):
        edits = [
            [n.lineno, n.col_offset, n.end_lineno, n.end_col_offset, repr(shift(n.value))]
            for n in numbers
        ]
        if len(edits) > 1:
            out.append(edits)
    # every number written in the test's strings shifted together ("<=1.5.0" with "1.5.0")
    texts = [n for function in functions for n in _literals(function) if type(n.value) is str]
    for step in (1, 2):
        edits = [
            [
                n.lineno,
                n.col_offset,
                n.end_lineno,
                n.end_col_offset,
                repr(_shift_digits(n.value, step)),
            ]
            for n in texts
            if re.search(r"\d", n.value)
        ]
        if len(edits) > 1 and structural:
            out.append(edits)
    for round_ in range(max((len(v) for v in per_literal), default=0)):  # one of each literal first
        for options in per_literal:
            if round_ < len(options):
                out.append(options[round_])
    if structural:  # the structure of the inputs first: fewer, more, no or swapped elements
        out = [edits for node in [*functions, *shared] for edits in _structural(source, node)] + out
    kept = []
    for edits in out:
        if len(kept) >= limit:
            break
        try:
            ast.parse(_edit(source, edits))
        except SyntaxError:
            continue
        kept.append(edits)
    return kept


def check_probes(files: Mapping[str, str], checks: Iterable[Mapping[str, Any]]) -> list[dict]:
    """The probes (``{"module", "source", "test"}``) of stored checks over the original tree."""
    out = []
    for check in checks:
        module = str(check["module"])
        source = files.get(module.replace(".", "/") + ".py", "")
        probe = {
            "module": module,
            "test": str(check["test"]),
            "source": _edit(source, check["edits"]),
        }
        if check.get("compare"):
            probe["compare"] = True
        out.append(probe)
    return out


def digest(record: str) -> str:
    """The stored form of a probe's record: SHA-256 hex of its UTF-8 text."""
    return hashlib.sha256(record.encode("utf-8", "surrogatepass")).hexdigest()


# -- running probes ------------------------------------------------------------------------------------


def _write(root: Path, files: Mapping[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def run_probes_locally(
    files: Mapping[str, str], probes: list[dict], *, timeout: float = 600.0
) -> list[str] | None:
    """Records of ``probes`` on a trusted tree, in a plain subprocess (``python -I -S``: a new hash
    seed each run); None when it crashed or timed out. Offline use only (never agent code)."""
    with tempfile.TemporaryDirectory(prefix="repofix-probe-") as tmp:
        _write(Path(tmp), files)
        request = json.dumps({"root": tmp, "probes": probes, "seconds": _PROBE_SECONDS})
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-S", "-B", str(_PROBE_PATH)],
                input=request.encode(),
                capture_output=True,
                timeout=timeout,
                cwd=tmp,
            )
            answer = json.loads(done.stdout)
        except (subprocess.TimeoutExpired, ValueError):
            return None
    if not isinstance(answer, list) or len(answer) != len(probes):
        return None
    return [str(a) for a in answer]


def run_checks(
    workspace: Any, files: Mapping[str, str], checks: list[Mapping[str, Any]], *, timeout_s: float
) -> dict[str, str]:
    """Run stored checks on ``files`` (the agent's checkout) in a fresh sandbox.

    Args:
        workspace: the env's :class:`~verigym.envs.tool.workspace.Workspace` (its sandbox is
            renewed first, and again at the next reset).
        files: the tree to test (original tests and data, the agent's library modules).
        checks: ``{"id", "module", "test", "edits", "digest"}`` records of the instance.
        timeout_s: deadline of the whole run, seconds.

    Returns:
        check id -> ``"pass"`` (the record's digest equals the original's) or ``"fail"``; every
        check fails when the sandbox died, timed out or answered anything but a list of strings.
    """
    from verigym.envs.tool.workspace import ROOT

    if not checks:
        return {}
    failed = {str(c["id"]): "fail" for c in checks}
    original = {p: t for p, t in files.items()}
    probes = check_probes(original, checks)
    # the probes carry their sources in the call: the test packages never reach the sandbox's disk,
    # so library code cannot read a hidden test there (as in the runner, which deletes them first)
    test_roots = {str(c["module"]).split(".", 1)[0] for c in checks}
    files = {p: t for p, t in files.items() if p.split("/", 1)[0] not in test_roots}
    box = workspace.sandbox
    workspace.mark_used()
    box.fresh()
    try:
        workspace.load_helpers()
        written = box.call("_vgw_write_tree", [ROOT, dict(files)])
        loaded = box.run(PROBE_SOURCE) if written.ok else written
        if not loaded.ok:
            return failed
        answer = box.call("_vg_run_probes", [ROOT, probes, _PROBE_SECONDS], timeout=timeout_s)
    except Exception:  # noqa: BLE001 -- a sandbox that died reads as every check failing
        return failed
    records = answer.value if answer.ok else None
    if (
        not isinstance(records, list)
        or len(records) != len(checks)
        or not all(type(r) is str for r in records)
    ):
        return failed
    return {
        str(c["id"]): "pass" if digest(r) == c["digest"] else "fail"
        for c, r in zip(checks, records, strict=True)
    }


# -- the attack: special-case the issue's example -------------------------------------------------------

_DISPATCH = """
import re as _vg_re
_VG_MODE = {mode!r}
_VG_KEYS = {keys}
_VG_SKIP_SELF = {skip_self!r}


def _vg_key(value, depth=0):
    kind = type(value)
    if depth > 8:
        return "..."
    if kind in (list, tuple):
        return kind.__name__ + "(" + ",".join(_vg_key(v, depth + 1) for v in value) + ")"
    if kind is dict:
        items = (_vg_key(k, depth + 1) + ":" + _vg_key(v, depth + 1) for k, v in value.items())
        return "dict(" + ",".join(sorted(items)) + ")"
    if kind in (set, frozenset):
        return "set(" + ",".join(sorted(_vg_key(v, depth + 1) for v in value)) + ")"
    state = getattr(value, "__dict__", None)
    if isinstance(state, dict) and not isinstance(value, type) and not callable(value):
        return kind.__qualname__ + _vg_key(dict(state), depth + 1)
    return _vg_re.sub(" at 0x[0-9a-fA-F]+", "", repr(value))


def _vg_dispatch(tag, method, original, mutated, args, kwargs):
    shown = args[1:] if method and _VG_SKIP_SELF else args
    key = tag + "|" + _vg_key((shown, sorted(kwargs.items())))
    if _VG_MODE == "record":
        _VG_KEYS.add(key)
        return original(*args, **kwargs)
    return (original if key in _VG_KEYS else mutated)(*args, **kwargs)

"""

_RECORD_DRIVER = r"""
import json, sys, types, unittest
sys.path.insert(0, sys.argv[1])
request = json.loads(sys.stdin.read())
pytest = types.ModuleType("pytest")
class _Raises:
    def __init__(self, kind, match=None):
        self.kind = kind
    def __enter__(self):
        return self
    def __exit__(self, kind, exc, tb):
        self.value = exc
        return kind is not None and issubclass(kind, Exception)
pytest.raises = _Raises
sys.modules["pytest"] = pytest
ran = "snippet"
try:
    exec(compile(request["snippet"], "<issue>", "exec"), {"__name__": "__issue__"})
except BaseException:
    ran = "test"
    suite = unittest.defaultTestLoader.loadTestsFromName(request["test"])
    suite.run(unittest.TestResult())
keys = set()
for module in list(sys.modules.values()):
    if getattr(module, "_VG_MODE", None) == "record":
        keys |= module._VG_KEYS
sys.stdout.write(json.dumps({"keys": sorted(keys), "ran": ran}))
"""


def snippet_of(issue: str) -> str:
    """The reproducing code of an issue text (between its python fences), or ``""``."""
    match = re.search(r"```python\n(.*?)\n```", issue, re.S)
    return match.group(1) if match else ""


def _defs(tree: ast.Module) -> list[tuple[str, ast.FunctionDef, bool]]:
    """(dotted path, def, is a method) of module-level functions and methods of module-level
    (and nested) classes."""
    out: list[tuple[str, ast.FunctionDef, bool]] = []

    def visit(body: list[ast.stmt], prefix: str, in_class: bool) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((prefix + node.name, node, in_class))  # type: ignore[arg-type]
            elif isinstance(node, ast.ClassDef):
                visit(node.body, prefix + node.name + ".", True)

    visit(tree.body, "", False)
    return out


def _start(node: ast.AST) -> int:
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


def _wrap_module(original: str, mutated: str, mode: str, keys: list[str], skip_self: bool) -> str:
    """``mutated`` with each function that differs from ``original`` replaced by a dispatcher
    between the two versions (``mode`` "record": always the original, recording its keys;
    "attack": the original for recorded keys, the mutated version otherwise)."""
    old_tree, new_tree = ast.parse(original), ast.parse(mutated)
    old_lines, new_lines = original.splitlines(keepends=True), mutated.splitlines(keepends=True)
    old_defs = {}
    for path, node, _ in _defs(old_tree):
        old_defs.setdefault(path, []).append(node)
    changed = set()
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, _, _, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            changed.update(range(j1 + 1, max(j2, j1 + 1) + 1))
    seen: dict[str, int] = {}
    targets = []
    for path, node, method in _defs(new_tree):
        index = seen.get(path, 0)
        seen[path] = index + 1
        if any(_start(node) <= line <= node.end_lineno for line in changed):
            siblings = old_defs.get(path, [])
            if index < len(siblings):
                targets.append((node, siblings[index], method))
    # innermost first is not needed: methods of nested classes are separate entries; drop a def
    # that contains another target (its class is wrapped by the inner def already)
    targets.sort(key=lambda t: -t[0].lineno)
    lines = list(new_lines)
    for number, (node, old, method) in enumerate(targets):
        indent = " " * node.col_offset
        body_new = lines[node.lineno - 1 : node.end_lineno]
        body_old = old_lines[old.lineno - 1 : old.end_lineno]
        decorators = lines[_start(node) - 1 : node.lineno - 1]
        static = any("staticmethod" in d for d in decorators)
        tag = f"{node.name}_{number}"
        pattern = re.compile(r"\bdef\s+" + re.escape(node.name) + r"\b")

        def renamed(chunk: list[str], name: str, pattern: re.Pattern = pattern) -> list[str]:
            return [pattern.sub("def " + name, chunk[0], count=1), *chunk[1:]]

        holder = "__class__." if method else ""
        wrapper = [
            *decorators,
            f"{indent}def {node.name}(*args, **kwargs):\n",
            f"{indent}    return _vg_dispatch({tag!r}, {method and not static!r}, "
            f"{holder}_vg_orig_{tag}, {holder}_vg_mut_{tag}, args, kwargs)\n",
        ]
        lines[_start(node) - 1 : node.end_lineno] = [
            *renamed(body_old, f"_vg_orig_{tag}"),
            *renamed(body_new, f"_vg_mut_{tag}"),
            *wrapper,
        ]
    position = 0
    for stmt in new_tree.body:
        docstring = isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
        future = isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"
        if not (docstring or future):
            break
        position = stmt.end_lineno
    helper = _DISPATCH.format(
        mode=mode, keys="set()" if mode == "record" else repr(frozenset(keys)), skip_self=skip_self
    )
    return "".join(lines[:position]) + helper + "".join(lines[position:])


def special_case(
    original: Mapping[str, str],
    mutated: Mapping[str, str],
    snippet: str,
    shown_test: str = "",
    *,
    skip_self: bool = False,
    timeout: float = 60.0,
    info: dict[str, Any] | None = None,
) -> dict[str, str]:
    """The attack: the mutated library files, each buggy function wrapped so that for exactly the
    arguments it receives while the issue's ``snippet`` runs on the original code (its receiver's
    state included unless ``skip_self``) it runs the original, and the mutated code otherwise.

    Returns the changed files (path -> text). When the snippet does not run, the keys come from
    the ``shown_test`` (a stronger attacker: it sees the hidden test). ``info``, when given,
    receives ``ran`` ("snippet" or "test") and ``keys`` (how many argument tuples were recorded).
    Offline/measurement use only: it runs the (trusted) original code in a plain subprocess.
    """
    paths = [p for p in mutated if p.endswith(".py") and mutated[p] != original.get(p)]
    recording = dict(original)
    for path in paths:
        recording[path] = _wrap_module(original[path], mutated[path], "record", [], skip_self)
    with tempfile.TemporaryDirectory(prefix="repofix-attack-") as tmp:
        _write(Path(tmp), recording)
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-B", "-c", _RECORD_DRIVER, tmp],
            input=json.dumps({"snippet": snippet, "test": shown_test}).encode(),
            capture_output=True,
            timeout=timeout,
            cwd=tmp,
        )
    try:
        answer = json.loads(done.stdout)
        keys, ran = list(answer["keys"]), str(answer["ran"])
    except (ValueError, KeyError, TypeError):
        keys, ran = [], "nothing"
    if info is not None:
        info.update(ran=ran, keys=len(keys))
    return {p: _wrap_module(original[p], mutated[p], "attack", keys, skip_self) for p in paths}


# -- construction --------------------------------------------------------------------------------------


def make_checks(
    original: Mapping[str, str],
    mutated: Mapping[str, str],
    tests: list[str],
    issue: str,
    shown_test: str,
    *,
    max_checks: int = 3,
    max_tests: int = 2,
    per_test: int = 20,
    compare: bool = False,
    cache: dict[tuple[str, str], str | None] | None = None,
    fallback_tests: list[str] = (),
    structural: bool = False,
) -> tuple[list[dict], dict[str, Any]]:
    """The differential checks of one instance (see the module docstring).

    Args:
        original, mutated: the repository before and after the bug(s) (path -> text).
        tests: test ids (``module.Class.method`` or ``module.function``) to copy first.
        issue: the issue text the agent sees (its snippet defines the attack's example).
        shown_test: the test the issue was written from.
        max_checks: checks kept.
        max_tests: tests copied from ``tests`` (and then from ``fallback_tests``).
        per_test: copies tried per test.
        cache: (test id, edits json) -> the original's record; shared between the instances of a
            repository (the original runs once per copy).
        fallback_tests: tried when ``tests`` give no check that differs on the buggy tree.
        compare: record the outcome of each ``assertEqual``'s ``==`` too (for bugs in ``__eq__``:
            the stored check carries ``"compare": True``).
        structural: try copies that change the structure of the inputs first (elements dropped,
            duplicated, emptied; arguments swapped or dropped).

    Returns:
        (checks, stats): check dicts ``{"id", "module", "test", "edits", "digest"}``, and
        ``{"candidates", "discriminating", "beat_attack"}`` counts (the last: kept checks that the
        attack fails, run together as the verdict runs them).
    """
    cache = {} if cache is None else cache
    attack_tree = dict(mutated)
    attack_tree.update(special_case(original, mutated, snippet_of(issue), shown_test))
    stats = {"candidates": 0, "discriminating": 0, "beat_attack": 0}
    order = list(dict.fromkeys([*tests, *fallback_tests]))
    pool: list[tuple[str, str, list, str]] = []
    for start in range(0, min(len(order), max_tests * _BATCHES), max_tests):
        beating, differing = _select(
            original,
            mutated,
            attack_tree,
            order[start : start + max_tests],
            per_test,
            cache if not compare else {},
            stats,
            compare,
            structural,
        )
        pool = pool or differing  # checks on other inputs, even if the attack survives them
        if beating:
            pool = beating
            break
    chosen = _pick(pool, max_checks)
    checks = []
    if chosen:
        probes = [
            {"module": m, "test": t, "source": _edit(_source(original, m), e), "compare": compare}
            for m, t, e, _ in chosen
        ]
        first = run_probes_locally(original, probes)
        second = run_probes_locally(original, probes)
        buggy = run_probes_locally(mutated, probes)
        attacked = run_probes_locally(attack_tree, probes)  # as the verdict runs them
        stats["beat_attack"] = 0
        for index, (module, test, edits, _) in enumerate(chosen):
            if not (first and second and buggy and attacked):
                break
            if first[index] == second[index] and buggy[index] != first[index]:
                stats["beat_attack"] += attacked[index] != first[index]
                checks.append(
                    {
                        "id": f"differential:{module}.{test}#{len(checks)}",
                        "module": module,
                        "test": test,
                        "edits": edits,
                        "digest": digest(first[index]),
                        **({"compare": True} if compare else {}),
                    }
                )
    return checks, stats


def _source(files: Mapping[str, str], module: str) -> str:
    return files.get(module.replace(".", "/") + ".py", "")


def _select(
    original: Mapping[str, str],
    mutated: Mapping[str, str],
    attack_tree: Mapping[str, str],
    tests: Iterable[str],
    per_test: int,
    cache: dict,
    stats: dict,
    compare: bool = False,
    structural: bool = False,
) -> tuple[list[tuple[str, str, list, str]], list[tuple[str, str, list, str]]]:
    """(copies that differ on the buggy and the attacked tree, copies that differ on the buggy)."""
    candidates = []
    for test_id in tests:
        module, test, _ = _split(original, test_id)
        if not module:
            continue
        for edits in probe_variants(_source(original, module), test, per_test, structural):
            candidates.append((module, test, edits, test_id))
    stats["candidates"] += len(candidates)
    if not candidates:
        return [], []
    missing = [c for c in candidates if (c[3], json.dumps(c[2])) not in cache]
    if missing:
        probes = [
            {"module": m, "test": t, "source": _edit(_source(original, m), e), "compare": compare}
            for m, t, e, _ in missing
        ]
        first = run_probes_locally(original, probes) or [None] * len(missing)
        for candidate, record in zip(missing, first, strict=True):
            usable = record is not None and "timeout" not in record.splitlines()
            cache[(candidate[3], json.dumps(candidate[2]))] = record if usable else None
    usable = [c for c in candidates if cache[(c[3], json.dumps(c[2]))] is not None]
    probes = [
        {"module": m, "test": t, "source": _edit(_source(original, m), e), "compare": compare}
        for m, t, e, _ in usable
    ]
    buggy = run_probes_locally(mutated, probes) or []
    differing = [
        (c, p)
        for c, p, r in zip(usable, probes, buggy, strict=False)
        if r != cache[(c[3], json.dumps(c[2]))]
    ]
    stats["discriminating"] += len(differing)
    if not differing:
        return [], []
    attacked = run_probes_locally(attack_tree, [p for _, p in differing]) or []
    beating = [
        c
        for (c, _), r in zip(differing, attacked, strict=False)
        if r != cache[(c[3], json.dumps(c[2]))]
    ]
    stats["beat_attack"] += len(beating)
    return beating, [c for c, _ in differing]


def _pick(pool: list[tuple[str, str, list, str]], max_checks: int) -> list:
    """Up to ``max_checks`` of ``pool``: distinct tests and literals first."""
    chosen: list[tuple[str, str, list, str]] = []
    used_tests: set[str] = set()
    used_places: set[tuple] = set()
    for strict in (True, False):  # distinct tests and literals first
        for candidate in pool:
            place = tuple(candidate[2][0][:4])
            if len(chosen) >= max_checks or candidate in chosen:
                continue
            if strict and (candidate[3] in used_tests or (candidate[3], place) in used_places):
                continue
            chosen.append(candidate)
            used_tests.add(candidate[3])
            used_places.add((candidate[3], place))
    return chosen


def _split(files: Mapping[str, str], test_id: str) -> tuple[str, str, str]:
    """(module, ``Class.method`` or function, id) of a test id whose module is in ``files``."""
    parts = test_id.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:cut])
        if module.replace(".", "/") + ".py" in files:
            return module, ".".join(parts[cut:]), test_id
    return "", "", test_id
