"""RepoFix-Real: fix a synthesized bug in a real vendored library, judged by its own pytest suite."""

from __future__ import annotations

import ast
import base64
import functools
import json
import lzma
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verigym.envs.tool.repofix import real
from verigym.envs.tool.repofix.env import SourceRepairEnv, is_source_path
from verigym.envs.tool.repofix.mutations import Mutant, apply
from verigym.envs.tool.workspace import ROOT, WORKSPACE_TOOLS, Workspace, unified_diff
from verigym.kwargs_policy import FloatRange, OneOf, client, operator_only
from verigym.sandbox import Limits
from verigym.toolcalls import FinalAnswer, Tool, ToolCall
from verigym.validation import check_bool, check_choice, check_number

__all__ = [
    "REAL_LIBRARIES",
    "SPLITS",
    "RepoFixRealEnv",
    "drop_pytest_tests",
    "apply_mutants",
    "failure_line",
    "instance_mutants",
    "load_real_data",
    "pack_real_data",
    "unpack_real_data",
]

_DATA = Path(__file__).with_name("data") / "repofix_real.json.xz"
_MAX_DATA_BYTES = 1 << 28
"""The most the instance file may decompress to (a damaged or hostile header asks for more)."""
_DEPS_DIR = ".vgdeps"
"""pytest's modules in the agent's workspace (so ``run_tests`` works; never read by the verdict)."""
_SOURCE_BUDGET = 1 << 22
SPLITS = ("all", "train", "eval")
BUGS = (1, 2)
"""``bugs``: one synthesized bug (``instances``) or two whose FAIL_TO_PASS lists share a test
(``pairs``)."""
"""``train``/``eval``: the instances of that split (recorded per instance in the data)."""


REAL_LIBRARIES: tuple[str, ...] = (
    "attrs",
    "boltons",
    "cachetools",
    "click",
    "idna",
    "inflection",
    "itsdangerous",
    "more-itertools",
    "pyparsing",
    "semver",
    "tabulate",
    "toolz",
    "webcolors",
)
"""The libraries whose validated instances in ``data/repofix_real.json.xz`` are posed (each has its
``RepoFix-<Library>-v0`` id)."""


def pack_real_data(data: dict[str, Any]) -> bytes:
    """``data`` (``{"libraries": {...}}``) as the instance file's bytes: compact, key-sorted JSON in
    an xz container with a SHA-256 check (the same data gives the same bytes)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n"
    return lzma.compress(text.encode(), format=lzma.FORMAT_XZ, check=lzma.CHECK_SHA256, preset=6)


def unpack_real_data(blob: bytes) -> dict[str, Any]:
    """The data :func:`pack_real_data` wrote, checked before use.

    Raises:
        ValueError: the bytes are not one complete xz stream whose SHA-256 check holds, they
            decompress to more than 256 MiB, or the JSON is not ``{"libraries": {name: {...,
            "instances": [...]}}}`` with each instance's ``id``, ``mutant``, ``tests``, ``f2p``,
            ``p2p`` and ``split`` present (a damaged file is reported, never read in part).
    """
    try:
        decoder = lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=1 << 27)
        raw = decoder.decompress(blob, max_length=_MAX_DATA_BYTES)
        if not decoder.eof or decoder.unused_data or decoder.check != lzma.CHECK_SHA256:
            raise ValueError("not one complete xz stream with a SHA-256 check")
        data = json.loads(raw)
    except (lzma.LZMAError, EOFError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"RepoFix-Real's instance file is damaged: {exc}") from None
    libraries = data.get("libraries") if isinstance(data, dict) else None
    if not isinstance(libraries, dict):
        raise ValueError("RepoFix-Real's instance file is damaged: no library table")
    for name, library in libraries.items():
        for key in ("instances", "pairs"):
            rows = library.get(key, []) if isinstance(library, dict) else None
            if not isinstance(rows, list) or not all(
                isinstance(row, dict)
                and isinstance(row.get("id"), str)
                and isinstance(row.get("split"), str)
                and all(isinstance(row.get(k), list) for k in ("tests", "f2p", "p2p"))
                and ("mutant" in row or "mutants" in row)
                for row in rows
            ):
                raise ValueError(f"RepoFix-Real's instance file is damaged: {name}'s {key}")
    return data


@functools.lru_cache(maxsize=1)
def load_real_data() -> dict[str, Any]:
    """The validated instances per library of :data:`REAL_LIBRARIES` (``scripts/gen_repofix_real.py``
    writes them to ``data/repofix_real.json.xz``; a library the data holds but this tuple does not
    name is left out): ``instances`` (one bug each) and ``pairs`` (two bugs, see
    :class:`RepoFixRealEnv`'s ``bugs``).

    Raises:
        ValueError: the file is damaged (:func:`unpack_real_data`).
    """
    data = unpack_real_data(_DATA.read_bytes())["libraries"]
    return {name: data[name] for name in REAL_LIBRARIES if name in data}


def drop_pytest_tests(text: str, names: set[str]) -> str:
    """A pytest module without the tests named in ``names`` (``func`` or ``Class::method``; a
    parametrized id's ``[...]`` is ignored, so every case of that function goes)."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    bare = {n.split("[", 1)[0] for n in names}
    cuts: list[tuple[int, int, str | None]] = []

    def span(node: ast.AST) -> tuple[int, int]:
        return min([node.lineno] + [d.lineno for d in node.decorator_list]), node.end_lineno

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in bare:
            cuts.append((*span(node), None))
        elif isinstance(node, ast.ClassDef):
            inner = [
                m
                for m in node.body
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                and f"{node.name}::{m.name}" in bare
            ]
            if inner and len(inner) == len(node.body):
                start, end = span(inner[0])[0], inner[-1].end_lineno
                indent = lines[inner[0].lineno - 1]
                cuts.append((start, end, indent[: len(indent) - len(indent.lstrip())] + "pass\n"))
            else:
                cuts.extend((*span(m), None) for m in inner)
    for start, end, keep in sorted(cuts, reverse=True):
        lines[start - 1 : end] = [keep] if keep else []
    return "".join(lines)


_EXPLANATION = re.compile(r"\s{3,}[-+?] ")
"""Where pytest's explanation of a failed comparison starts in a one-line failure message (its
``- expected`` / ``+ actual`` / ``? ^^^`` lines, joined by spaces): an ndiff of two values."""


def failure_line(message: str) -> str:
    """A failure message up to pytest's diff explanation (``assert 'a-b' == 'a b'`` stays; the
    ndiff lines after it, which read like a patch, go)."""
    return _EXPLANATION.split(message, maxsplit=1)[0].rstrip()


def _pool(library: str | None, split: str, bugs: int = 1) -> list[tuple[str, dict[str, Any]]]:
    """The instances posed: of ``library`` (all when None), ``split`` and ``bugs`` (1: the
    single-bug ``instances``, 2: the two-bug ``pairs``), but those whose tests need an optional
    dependency that is not importable here (hypothesis: the ``test`` extra)."""
    data = load_real_data()
    names = [library] if library else sorted(data)
    key = "pairs" if bugs == 2 else "instances"
    return [
        (name, instance)
        for name in names
        for instance in data[name].get(key, ())
        if (split == "all" or instance["split"] == split)
        and real.available(instance.get("needs", ()))
    ]


def instance_mutants(instance: dict[str, Any]) -> list[Mutant]:
    """The mutants of a single-bug instance (one) or a two-bug one (two, in disjoint lines)."""
    records = instance["mutants"] if "mutants" in instance else [instance["mutant"]]
    return [Mutant(**{k: r[k] for k in Mutant.__dataclass_fields__}) for r in records]


def apply_mutants(files: dict[str, str], mutants: Sequence[Mutant]) -> dict[str, str]:
    """``files`` with every mutant applied (within a file the later lines first, so the earlier
    mutants' line numbers still hold; their ranges must be disjoint).

    Raises:
        ValueError: a mutant's lines are not in its file.
    """
    out = dict(files)
    for mutant in sorted(mutants, key=lambda m: (m.file, -m.first)):
        out[mutant.file] = apply(out[mutant.file], mutant)
    return out


class RepoFixRealEnv(SourceRepairEnv):
    """Fix a bug synthesized in a real Python library from an issue report (SWE-smith on real code).

    ## Description
    A vendored library (``vendor/``: its pinned PyPI sdist with its licence; :data:`REAL_LIBRARIES`)
    has one bug synthesized by an AST operator (the RepoFix catalogue plus SWE-smith's removals,
    :mod:`~verigym.envs.tool.repofix.real_mutations`), proven offline by the library's own pytest
    suite in the sandbox (``scripts/gen_repofix_real.py``: at least one FAIL_TO_PASS and one
    PASS_TO_PASS test). The agent gets an issue written from behaviour (the function that misbehaves
    and the failure a user sees; never the diff, the line or the original code) and a workspace at
    ``/tmp/work`` with the buggy library and its tests minus the FAIL_TO_PASS ones.

    ## Verdict
    On ``submit`` (or at the turn limit) the library modules of the workspace (never tests,
    ``conftest.py``, ``.pth`` files or configuration) are read out, bounded, and copied over a clean
    checkout in a **fresh** sandbox, where the trusted pytest runner (``_pytest_runner.py``) runs
    only the instance's test files (SWE-bench's test directives) and reports per-test outcomes as
    typed JSON. FAIL_TO_PASS and PASS_TO_PASS are graded as SWE-bench does; a tampered run or one
    where no test ran scores 0.

    ## Action Space
    ``UnicodeText``: one tool call per turn (``run_shell``, ``read_file``, ``write_file``,
    ``apply_patch``, ``run_tests``, ``submit``).

    ## Observation Space
    ``UnicodeText``: the issue on reset; then the tool's output (capped).

    ## Rewards
    ``score`` = fraction of FAIL_TO_PASS passing × (every PASS_TO_PASS passing); ``success`` = all
    pass; the reward is ``score``. The final ``info`` adds ``patch_similarity``, ``patch``,
    ``fail_to_pass``/``pass_to_pass`` (``[passing, total]``), ``tampered``, ``tests_run``,
    ``instance_id`` and ``split``.

    ## Starting State
    The reset seed indexes the instances of ``library`` (all libraries when None) and ``split``
    (``seed % count``, in the data's order); a reset without a seed draws one.

    ## Episode End
    Terminated at ``submit``; truncated at ``max_turns``, with the verdict of the workspace then.

    ## Arguments
    * ``library`` (str or None): one of :data:`REAL_LIBRARIES` or None for all.
    * ``split`` (``"all"``, ``"train"``, ``"eval"``): which instances.
    * ``bugs`` (1 or 2): one bug, or two bugs in different functions whose FAIL_TO_PASS lists share
      a test (validated together; each bug alone still fails one of them, so fixing one of the two
      never passes). A two-bug instance joins two bugs of the same split.
    * ``timeout_s`` (float): deadline of the verdict's test run; ``shell_timeout_s`` (float).
    * ``unsafe`` (bool): run without bubblewrap (never for untrusted agents).
    * ``max_turns`` (default 30), ``invalid_action_reward``, ``max_action_length`` (default 32768).

    ## Version History
    * v0: initial version. Verifier fix (version kept): the runner's audit hook also refuses
      ``//proc`` paths, the root and ``/dev`` themselves and relative paths that climb with
      ``..`` (library code read the report's nonce from ``/proc/self/mem`` and forged a pass),
      and a test module compiled from another source than the one on disk before the library
      ran (the library rewrote a test file before pytest collected it); the checkout is
      read-only to the tests' process and a chmod or rename of it by library code ends the run
      (the library wrote a test's expected value into its data file).
    """

    metadata = {"render_modes": ["ansi"], "family": "tool"}

    remote_kwargs = {
        "library": client(OneOf((None, *REAL_LIBRARIES))),
        "split": client(OneOf(SPLITS)),
        "bugs": client(OneOf(BUGS)),
        "timeout_s": operator_only(FloatRange(1.0, 300.0), why="wall-clock seconds of a test run"),
        "shell_timeout_s": operator_only(
            FloatRange(0.5, 60.0), why="wall-clock seconds of a shell command"
        ),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(
        self,
        *,
        library: str | None = None,
        split: str = "all",
        bugs: int = 1,
        timeout_s: float = 120.0,
        shell_timeout_s: float = 30.0,
        unsafe: bool = False,
        max_turns: int = 30,
        max_action_length: int = 32768,
        **kwargs: Any,
    ):
        super().__init__(max_turns=max_turns, max_action_length=max_action_length, **kwargs)
        self.library = check_choice("library", library, (None, *REAL_LIBRARIES))
        missing = [n for n in real.needs(library) if not real.available([n])] if library else []
        if missing:
            raise ValueError(
                f"RepoFix-Real's {library} suite needs {', '.join(missing)}, which this Python "
                "cannot import (not vendored: MPL-2.0); install it: pip install 'verigym[test]'"
            )
        self.split = check_choice("split", split, SPLITS)
        self.bugs = check_choice("bugs", bugs, BUGS)
        self.timeout_s = check_number("timeout_s", timeout_s, 0, 600, low_open=True)
        shell_timeout_s = check_number("shell_timeout_s", shell_timeout_s, 0, 600, low_open=True)
        self.unsafe = check_bool("unsafe", unsafe)
        self.cache_verdicts = True
        self.workspace = Workspace(
            test_command="true",
            shell_timeout_s=shell_timeout_s,
            limits=Limits(
                timeout_s=max(self.timeout_s, shell_timeout_s) + 15.0, max_processes=48, tmp_mb=96
            ),
            unsafe=self.unsafe,
        )
        self._instance: dict[str, Any] = {}
        self._name = ""
        self._packages: list[str] = []
        self._original: dict[str, str] = {}
        self._mutated: dict[str, str] = {}
        self._f2p: list[str] = []
        self._p2p: list[str] = []
        self._reference = ""
        self._end_info: dict[str, Any] = {}
        self._seed: int | None = None
        self._needs: tuple[str, ...] = ()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """A new instance: ``seed`` indexes the pool (``seed % len(pool)``); None draws one."""
        self._seed = seed if isinstance(seed, int) and not isinstance(seed, bool) else None
        return super().reset(seed=seed, options=options)

    def _is_source(self, path: str) -> bool:
        return any(is_source_path(path, p) for p in self._packages)

    def _task_instructions(self) -> str:
        return (
            f"You are given a real Python library in {ROOT} and a bug report. Find the cause and fix "
            "the library code (changes to tests are ignored: its own tests decide). Use the tools to "
            "explore, edit and test (run_tests runs its pytest suite); call submit when done."
        )

    def _tools(self) -> Sequence[Tool]:
        return tuple(WORKSPACE_TOOLS.values())

    def _generate(self) -> str:
        pool = _pool(self.library, self.split, self.bugs)
        if not pool:
            raise RuntimeError(
                f"no RepoFix-Real instances for {self.library!r}, {self.split!r}, bugs={self.bugs}"
            )
        index = (
            self._seed % len(pool)
            if self._seed is not None
            else int(self.np_random.integers(len(pool)))
        )
        name, instance = pool[index]
        files = dict(real.library_files(name))
        mutants = instance_mutants(instance)
        mutated = apply_mutants(files, mutants)
        self._instance, self._name = instance, name
        self._packages = list(load_real_data()[name]["packages"])
        self._original, self._mutated = files, mutated
        self._f2p, self._p2p = list(instance["f2p"]), list(instance["p2p"])
        sources = {p: t for p, t in files.items() if self._is_source(p)}
        self._reference = unified_diff({p: mutated[p] for p in sources}, sources)
        self._end_info = {}
        visible = dict(mutated)
        hidden: dict[str, set[str]] = {}
        for test in self._f2p:
            path, _, rest = test.partition("::")
            hidden.setdefault(path, set()).add(rest)
        for path, names in hidden.items():
            visible[path] = drop_pytest_tests(visible[path], names)
        visible.update({f"{_DEPS_DIR}/{p}": t for p, t in real.pytest_files().items()})
        tests = " ".join(instance["tests"])
        self._needs = real.tests_need(name, instance["tests"])
        self.workspace.test_command = (
            f"python -c \"import sys; sys.path[:0] = ['{_DEPS_DIR}', '.']; import pytest; "
            f"sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', *sys.argv[1:]]))\" {tests}"
        )
        self.workspace.reset(visible)
        if "hypothesis" in self._needs:  # so that run_tests imports it (a compiled module too)
            blobs = real.hypothesis_files() or {}
            box = self.workspace.sandbox
            loaded = box.run(real._RUNNER)
            if loaded.ok:
                box.call(
                    "write_blobs",
                    [
                        f"{ROOT}/{_DEPS_DIR}",
                        {p: base64.b64encode(b).decode("ascii") for p, b in blobs.items()},
                    ],
                )
        return self._issue(name, [m.file for m in mutants], instance)

    def _issue(self, name: str, paths: str | list[str], instance: dict[str, Any]) -> str:
        """The bug report: reads only its arguments (``paths``: the mutated module, or one per
        bug of a two-bug instance), never the env's state."""
        paths = [paths] if isinstance(paths, str) else list(paths)
        functions = instance["functions"] if "functions" in instance else [instance["function"]]
        messages = instance["messages"] if "messages" in instance else [instance.get("message")]
        publics = [f.rsplit(".", 1)[0] if "." in f else f for f in functions]
        lines = [failure_line(m or "") or "it gives a wrong result or raises" for m in messages]
        if len(functions) == 1:
            return (
                f"## Bug report: {name}\n\n"
                f"Since the last change, code that uses `{publics[0]}` (from `{paths[0]}`) "
                "misbehaves. A check of its documented behaviour now fails with:\n\n"
                f"```\n{lines[0]}\n```\n\n"
                "Expected: the behaviour the library documents (and had before), with everything "
                "else unchanged."
            )
        uses = " and ".join(f"`{f}` (from `{p}`)" for f, p in zip(publics, paths))
        shown = "\n\n".join(f"```\n{line}\n```" for line in dict.fromkeys(lines))
        return (
            f"## Bug report: {name}\n\n"
            f"Since the last change, code that uses {uses} misbehaves: there may be more than one "
            "cause. Checks of their documented behaviour now fail with:\n\n"
            f"{shown}\n\n"
            "Expected: the behaviour the library documents (and had before), with everything "
            "else unchanged."
        )

    def parse_action(self, text: str) -> ToolCall | FinalAnswer:
        parsed = super().parse_action(text)
        if isinstance(parsed, ToolCall) and parsed.name == "submit":
            return FinalAnswer("submit")
        return parsed

    def _call_tool(self, call: ToolCall) -> str:
        return self.workspace.call_tool(call)

    def _agent_sources(self) -> dict[str, str] | None:
        out, budget = {}, _SOURCE_BUDGET
        for package in self._packages:
            try:
                snapshot = self.workspace.snapshot(under=package)
            except Exception:  # noqa: BLE001 -- a dead sandbox reads as an empty workspace
                return None
            for path, text in sorted(snapshot.items()):
                if self._is_source(path) and len(text) <= budget:
                    out[path] = text
                    budget -= len(text)
        return out

    def _verify(self, answer: str) -> tuple[bool, float]:
        agent = self._agent_sources() or {}
        checkout = {p: t for p, t in self._original.items() if not self._is_source(p)}
        checkout.update(agent)
        before = {p: t for p, t in self._mutated.items() if self._is_source(p)}
        original = {p: t for p, t in self._original.items() if self._is_source(p)}
        tests_run = not (self.cache_verdicts and agent in (before, original))
        tampered = False
        if tests_run:
            box = self.workspace.sandbox
            self.workspace.mark_used()
            try:
                box.fresh()
                self.workspace.load_helpers()
            except Exception:  # noqa: BLE001 -- no sandbox: every test fails
                results, tampered = {}, True
            else:
                results, tampered, _ = real.run_tests(
                    box,
                    ROOT,
                    checkout,
                    list(self._instance["tests"]),
                    timeout_s=self.timeout_s,
                    needs=self._needs,
                )
        else:  # the buggy or the original tree: the offline validation's outcome
            failing = set(self._f2p) if agent == before else set()
            results = {t: "fail" if t in failing else "pass" for t in self._f2p + self._p2p}
        passing = set() if tampered else {t for t, v in results.items() if v == "pass"}
        return self._grade(
            before,
            agent,
            passing,
            tampered=tampered,
            tests_run=tests_run,
            instance_id=self._instance["id"],
            split=self._instance["split"],
        )
