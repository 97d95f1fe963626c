"""RepoFix: fix a synthesized bug in a small Python repository, judged by hidden tests in a fresh sandbox."""

from __future__ import annotations

import ast
import difflib
import functools
import json
import posixpath
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verigym.core import episode_end
from verigym.envs.tool.base import ToolEnv, tool_call_text
from verigym.envs.tool.repofix.differential import run_checks
from verigym.envs.tool.repofix.issue import issue_text
from verigym.envs.tool.repofix.mutations import Mutant, apply
from verigym.envs.tool.workspace import ROOT, WORKSPACE_TOOLS, Workspace, unified_diff
from verigym.kwargs_policy import FloatRange, OneOf, client, operator_only
from verigym.sandbox import Limits
from verigym.toolcalls import FinalAnswer, Tool, ToolCall
from verigym.validation import check_bool, check_choice, check_number

__all__ = [
    "LEVELS",
    "PROJECTS",
    "RepoFixEnv",
    "SourceRepairEnv",
    "is_source_path",
    "load_data",
    "run_hidden_tests",
]

_DATA = Path(__file__).with_name("data") / "repofix.json"
_RUNNER = (Path(__file__).with_name("_runner.py")).read_text()
LEVELS = ("file", "anywhere", "pair")
"""``file``: one bug, its file named; ``anywhere``: one bug, no hint; ``pair``: two bugs."""

TEST_COMMAND = "python -m unittest discover -s tests -t . -q"
_SOURCE_BUDGET = 1 << 21
"""Characters of library modules read out of the workspace for the verdict (the rest is left out)."""
_SIMILARITY_CHARS = 50000
"""Characters of the agent's patch compared with the reference (bounds the ``difflib`` cost)."""
_NEVER_COPIED = {"conftest.py", "sitecustomize.py", "usercustomize.py", "__main__.py"}


@functools.lru_cache(maxsize=1)
def load_data() -> dict[str, Any]:
    """The projects and their precomputed mutants (``scripts/gen_repofix_mutants.py`` writes it)."""
    return json.loads(_DATA.read_text())["projects"]


PROJECTS: tuple[str, ...] = (
    "cmdline",
    "csvlite",
    "durations",
    "exprcalc",
    "fsm",
    "graphs",
    "intervals",
    "jsonpointer",
    "lrucache",
    "matrix",
    "semver",
    "textkit",
)
"""The repositories (sources in ``scripts/repofix_projects/<name>``, shipped inside ``data/repofix.json``)."""


def is_source_path(path: str, package: str) -> bool:
    """Whether ``path`` is a library module the verdict takes from the agent's workspace.

    Only ``.py`` files inside the package folder; never tests (a ``test``/``tests`` folder,
    ``test_*.py``, ``*_test.py``), ``conftest.py``, ``sitecustomize.py``, ``usercustomize.py``,
    ``__main__.py``, ``.pth`` files or configuration.
    """
    parts = path.split("/")
    name = parts[-1]
    return (
        len(parts) >= 2
        and parts[0] == package
        and name.endswith(".py")
        and name not in _NEVER_COPIED
        and not name.startswith("test_")
        and not name.endswith("_test.py")
        and not any(p in ("test", "tests") or p.startswith(".") for p in parts[:-1])
        and posixpath.normpath(path) == path
    )


def _drop_tests(text: str, names: set[str]) -> str:
    """A test module without the test methods named ``Class.method`` in ``names``."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    cuts: list[tuple[int, int, bool]] = []
    for klass in tree.body:
        if not isinstance(klass, ast.ClassDef):
            continue
        spans = [
            (min([m.lineno] + [d.lineno for d in m.decorator_list]), m.end_lineno)
            for m in klass.body
            if isinstance(m, ast.FunctionDef) and f"{klass.name}.{m.name}" in names
        ]
        if spans and len(spans) == len(klass.body):  # nothing left: the class keeps a `pass`
            cuts.append((spans[0][0], spans[-1][1], True))
        else:
            cuts.extend((start, end, False) for start, end in spans)
    for start, end, keep_pass in sorted(cuts, reverse=True):
        indent = lines[start - 1][: len(lines[start - 1]) - len(lines[start - 1].lstrip())]
        lines[start - 1 : end] = [indent + "pass\n"] if keep_pass else []
    return "".join(lines)


def run_hidden_tests(
    workspace: Workspace, files: dict[str, str], modules: list[str], *, timeout_s: float
) -> tuple[dict[str, str], bool]:
    """Run ``modules`` of ``files`` in a fresh sandbox; (test id -> "pass"/"fail", tampered).

    The workspace's sandbox is renewed first (nothing of the agent's session is left), the tree is
    written to :data:`~verigym.envs.tool.workspace.ROOT`, the trusted runner (``_runner.py``) is
    loaded before any repository code, and its answer comes back through ``PythonSandbox.call``
    as typed JSON. A run that dies, times out or answers malformed reads as every test failing
    (``tampered`` True, no results).
    """
    box = workspace.sandbox
    workspace.mark_used()
    box.fresh()
    try:
        workspace.load_helpers()
        written = box.call("_vgw_write_tree", [ROOT, files])
        loaded = box.run(_RUNNER) if written.ok else written
        if not loaded.ok:
            return {}, True
        answer = box.call("run_suite", [ROOT, list(modules)], timeout=timeout_s)
    except Exception:  # noqa: BLE001 -- a sandbox that died reads as every test failing
        return {}, True
    value = answer.value if answer.ok else None
    if not isinstance(value, dict) or not isinstance(value.get("results"), dict):
        return {}, True
    results = {
        t: v for t, v in value["results"].items() if isinstance(t, str) and v in ("pass", "fail")
    }
    return results, value.get("tampered") is not False


class SourceRepairEnv(ToolEnv):
    """What every RepoFix env shares: the verdict at the turn limit, the end-of-episode info, the
    oracle (the inverse patch), the reference patch and closing the workspace.

    A subclass sets ``workspace``, ``_original`` (path -> text of the clean tree), ``_reference``,
    ``_end_info``, and defines ``_is_source(path)`` (the library modules the verdict takes from the
    agent), ``_agent_sources()`` and ``_verify(answer) -> (success, score)``.
    """

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = super().step(action)
        if truncated and not terminated:
            success, score = self._verify("")
            episode_end(info, success=success, score=score)
            reward = float(score)
        if terminated or truncated:
            info.update(self._end_info)
        return observation, reward, terminated, truncated, info

    def oracle_action(self) -> str:
        """The inverse patch (from the workspace as it is now back to the original), then submit."""
        current = self._agent_sources()
        if current is None:
            return tool_call_text("submit")
        original = {p: t for p, t in self._original.items() if self._is_source(p)}
        diff = unified_diff(current, original)
        if not diff:
            return tool_call_text("submit")
        action = tool_call_text("apply_patch", diff=diff)
        if len(action) <= self.max_action_length:
            return action
        for path in sorted(original):  # too long for one reply: one file at a time
            if current.get(path) != original[path]:
                return tool_call_text("write_file", path=path, content=original[path])
        return tool_call_text("submit")

    def reference_patch(self) -> str:
        """The diff that undoes the bug(s) (mutated -> original library modules)."""
        return self._reference

    def _grade(
        self,
        before: dict[str, str],
        agent: dict[str, str],
        passing: set[str],
        *,
        tampered: bool,
        tests_run: Any,
        example_only: bool = False,
        **info: Any,
    ) -> tuple[bool, float]:
        """Grade a run as SWE-bench does and set the end-of-episode info.

        Success: every FAIL_TO_PASS and every PASS_TO_PASS test is in ``passing``. Score: the share
        of FAIL_TO_PASS tests fixed, 0 when a PASS_TO_PASS test broke or ``example_only`` (a fix that
        fits only the example). ``info`` adds keys to the end-of-episode info.

        Returns:
            ``(success, score)``.
        """
        fixed = sum(1 for t in self._f2p if t in passing)
        kept = sum(1 for t in self._p2p if t in passing)
        score = (fixed / len(self._f2p)) * (1.0 if kept == len(self._p2p) else 0.0)
        if example_only:
            score = 0.0
        success = fixed == len(self._f2p) and kept == len(self._p2p)
        patch = unified_diff(before, agent)
        self._end_info = {
            "patch_similarity": round(
                difflib.SequenceMatcher(
                    None, patch[:_SIMILARITY_CHARS], self._reference, autojunk=False
                ).ratio(),
                4,
            ),
            "patch": patch if len(patch) <= 20000 else patch[:20000] + "\n[patch cut]\n",
            "fail_to_pass": [fixed, len(self._f2p)],
            "pass_to_pass": [kept, len(self._p2p)],
            "tampered": bool(tampered),
            "tests_run": tests_run,
            "project": self._name,
            **info,
        }
        return success, score

    def close(self) -> None:
        self.workspace.close()
        super().close()


class RepoFixEnv(SourceRepairEnv):
    """Fix a bug in a small Python repository from an issue report (SWE-smith-style tasks).

    ## Description
    One of twelve small pure-Python repositories written for verigym (:data:`PROJECTS`: a CLI
    parser, a CSV reader, duration parsing, an expression evaluator, a state machine, graph
    algorithms, an interval tree, JSON Pointer, an LRU cache, exact matrices, semantic versions,
    text utilities; 284-399 lines each with their unittest suites of 14-28 tests) gets one or two bugs synthesized by
    AST mutation operators (:mod:`verigym.envs.tool.repofix.mutations`), chosen by the reset
    seed among the mutants its test suite detects (precomputed offline in ``data/repofix.json``,
    so a reset runs no test). The agent sees an issue written from the failing behaviour (a
    reproducing snippet, the result, the expectation; :mod:`~verigym.envs.tool.repofix.issue`)
    and works in a sandbox where the repository is at ``/tmp/work`` with tools to run shell
    commands, read, write and patch files and run the visible tests (the suite without the tests
    that reveal the bug).

    ## Verdict
    On ``submit`` (or at the turn limit) the library modules of the workspace (:func:`is_source_path`:
    never tests, ``conftest.py``, ``sitecustomize.py``, ``.pth`` files or configuration) are read
    out, bounded, and copied over a clean checkout in a **fresh** sandbox (nothing the agent wrote or
    started is there) together with the full hidden test suite, which a trusted runner executes one
    test at a time. Its answer reaches the parent through ``PythonSandbox.call`` as typed JSON (never
    printed text): per-test outcomes and whether ``unittest``/``builtins`` were tampered with (then
    everything fails). ``assertEqual`` and its typed variants compare canonical forms the
    runner builds, never the repository's own ``__eq__``. FAIL_TO_PASS are the tests the bug
    breaks, PASS_TO_PASS all the others (SWE-bench's definitions). FAIL_TO_PASS also holds the
    instance's differential checks (:mod:`~verigym.envs.tool.repofix.differential`: the tests on
    other inputs than the issue's example, compared with the original code's records by digest in
    the parent, in another fresh sandbox); on one-bug levels a failing check scores 0. A workspace
    whose library modules are exactly the buggy or exactly the original ones gets the outcome the
    offline scan measured for that tree without a run (``info["tests_run"]`` False).

    ## Action Space
    ``UnicodeText``: one tool call per turn (``run_shell``, ``read_file``, ``write_file``,
    ``apply_patch``, ``run_tests``, ``submit``), or ``<answer>...</answer>`` (the same as ``submit``).

    ## Observation Space
    ``UnicodeText``: the issue on reset; then the tool's output (capped, says when cut).

    ## Rewards
    At the end: ``score`` = fraction of FAIL_TO_PASS tests passing × (every PASS_TO_PASS test
    passing); ``success`` = all hidden tests pass; the reward is ``score``.
    ``invalid_action_reward`` for a malformed reply or a failed tool call. The final ``info`` adds
    ``patch_similarity`` (``difflib`` ratio of the agent's diff to the reference patch, as SWE-RL's
    reward), ``patch`` (the agent's diff of the library files, capped), ``fail_to_pass`` and
    ``pass_to_pass`` (``[passing, total]``) and ``tampered``.

    ## Starting State
    Project (unless fixed), mutant(s) and thus the issue from the reset seed.

    ## Episode End
    Terminated at ``submit``; truncated at ``max_turns`` replies, with the verdict of the workspace
    as it is then.

    ## Arguments
    * ``level`` (``"file"``, ``"anywhere"``, ``"pair"``): one bug with its file named, one bug, or
      two bugs (in different functions, usually failing a common test).
    * ``project`` (str or None): fix the repository (the ids ``RepoFix-<Project>-v0`` set it, e.g.
      ``RepoFix-SemVer-v0``); None draws one per reset. Either way only mutants the suite detects.
    * ``timeout_s`` (float): deadline of the hidden-test run; ``shell_timeout_s`` (float): of one
      shell command.
    * ``unsafe`` (bool): run without bubblewrap (never for untrusted agents).
    * ``max_turns`` (default 30), ``invalid_action_reward``, ``max_action_length`` (default 32768):
      see :class:`~verigym.envs.tool.base.ToolEnv`.

    ## Version History
    * v0: initial version. Verifier fix (version kept): the runner's audit hook also refuses the
      root and ``/dev`` themselves and relative paths that climb with ``..`` (through a folder's
      descriptor library code read its nonce from ``/proc/self/mem`` and forged a full pass).
    """

    metadata = {"render_modes": ["ansi"], "family": "tool"}

    remote_kwargs = {
        "level": client(OneOf(LEVELS)),
        "project": client(OneOf((None, *PROJECTS))),
        "timeout_s": operator_only(FloatRange(1.0, 120.0), why="wall-clock seconds of a test run"),
        "shell_timeout_s": operator_only(
            FloatRange(0.5, 60.0), why="wall-clock seconds of a shell command"
        ),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(
        self,
        *,
        level: str = "file",
        project: str | None = None,
        timeout_s: float = 20.0,
        shell_timeout_s: float = 10.0,
        unsafe: bool = False,
        max_turns: int = 30,
        max_action_length: int = 32768,
        **kwargs: Any,
    ):
        super().__init__(max_turns=max_turns, max_action_length=max_action_length, **kwargs)
        self.level = check_choice("level", level, LEVELS)
        self.project = check_choice("project", project, (None, *PROJECTS))
        self.timeout_s = check_number("timeout_s", timeout_s, 0, 600, low_open=True)
        shell_timeout_s = check_number("shell_timeout_s", shell_timeout_s, 0, 600, low_open=True)
        self.unsafe = check_bool("unsafe", unsafe)
        # a workspace whose library modules equal the buggy or the original checkout gets the
        # verdict the offline scan measured, without a run; tests set False to force a run
        self.cache_verdicts = True
        self.workspace = Workspace(
            test_command=TEST_COMMAND,
            shell_timeout_s=shell_timeout_s,
            limits=Limits(
                timeout_s=max(self.timeout_s, shell_timeout_s + 10.0), max_processes=48, tmp_mb=64
            ),
            unsafe=self.unsafe,
        )
        self._name = ""
        self._package = ""
        self._original: dict[str, str] = {}
        self._mutated: dict[str, str] = {}
        self._modules: list[str] = []
        self._f2p: list[str] = []
        self._checks: list[dict[str, Any]] = []
        self._p2p: list[str] = []
        self._reference = ""
        self._end_info: dict[str, Any] = {}

    # -- task ------------------------------------------------------------------------------------
    def _task_instructions(self) -> str:
        return (
            f"You are given a Python repository in {ROOT} and a bug report. Find the cause and fix the "
            "library code (changes to tests are ignored: hidden tests decide). Use the tools to explore, "
            "edit and test; call submit when done (the episode ends and your changes are verified)."
        )

    def _tools(self) -> Sequence[Tool]:
        return tuple(WORKSPACE_TOOLS.values())

    def _generate(self) -> str:
        rng = self.np_random
        data = load_data()
        name = self.project or PROJECTS[int(rng.integers(len(PROJECTS)))]
        project = data[name]
        files: dict[str, str] = dict(project["files"])
        mutants = project["mutants"]
        if self.level == "pair" and project["pairs"]:
            task = project["pairs"][int(rng.integers(len(project["pairs"])))]
            chosen = [mutants[i] for i in task["mutants"]]
        else:
            task = mutants[int(rng.integers(len(mutants)))]
            chosen = [task]
        mutated = dict(files)
        for record in sorted(chosen, key=lambda m: -m["first"]):
            mutant = Mutant(**{k: record[k] for k in Mutant.__dataclass_fields__})
            mutated[mutant.file] = apply(mutated[mutant.file], mutant)
        self._name, self._package = name, project["package"]
        self._original, self._mutated = files, mutated
        self._modules = list(project["modules"])
        self._f2p = list(task["f2p"])
        self._p2p = [t for t in project["tests"] if t not in set(self._f2p)]
        sources = {p: t for p, t in files.items() if self._is_source(p)}
        self._reference = unified_diff({p: mutated[p] for p in sources}, sources)
        self._end_info = {}
        visible = dict(mutated)
        hidden_by_file: dict[str, set[str]] = {}
        for test in self._f2p:
            module, klass, method = test.rsplit(".", 2)
            hidden_by_file.setdefault(module.replace(".", "/") + ".py", set()).add(
                f"{klass}.{method}"
            )
        for path, names in hidden_by_file.items():
            visible[path] = _drop_tests(visible[path], names)
        # differential checks (inputs other than the issue's example) count as FAIL_TO_PASS
        self._checks = list(task.get("checks", []))
        self._f2p += [c["id"] for c in self._checks]
        self.workspace.reset(visible)
        return issue_text(
            files,
            task["shown"],
            task["detail"],
            package=self._package,
            file_hint=chosen[0]["file"] if self.level == "file" else None,
            several=self.level == "pair",
        )

    # -- tools -----------------------------------------------------------------------------------
    def parse_action(self, text: str) -> ToolCall | FinalAnswer:
        parsed = super().parse_action(text)
        if isinstance(parsed, ToolCall) and parsed.name == "submit":
            return FinalAnswer("submit")
        return parsed

    def _call_tool(self, call: ToolCall) -> str:
        return self.workspace.call_tool(call)

    # -- verdict ---------------------------------------------------------------------------------
    def _is_source(self, path: str) -> bool:
        return is_source_path(path, self._package)

    def _agent_sources(self) -> dict[str, str] | None:
        """The agent's library modules (``None`` when the workspace could not be read)."""
        try:
            snapshot = self.workspace.snapshot(under=self._package)
        except Exception:  # noqa: BLE001 -- a dead sandbox reads as an empty workspace
            return None
        out, budget = {}, _SOURCE_BUDGET
        for path, text in sorted(snapshot.items()):
            if self._is_source(path) and len(text) <= budget:
                out[path] = text
                budget -= len(text)
        return out

    def _verify(self, answer: str) -> tuple[bool, float]:
        agent = self._agent_sources() or {}
        checkout = {p: t for p, t in self._original.items() if not self._is_source(p)}
        checkout.update(agent)  # library modules: the agent's (a deleted one stays deleted)
        before = {p: t for p, t in self._mutated.items() if self._is_source(p)}
        original = {p: t for p, t in self._original.items() if self._is_source(p)}
        tests_run = not (self.cache_verdicts and agent in (before, original))
        if tests_run:
            results, tampered = run_hidden_tests(
                self.workspace, checkout, self._modules, timeout_s=self.timeout_s
            )
            if self._checks and not tampered:
                results.update(
                    run_checks(self.workspace, checkout, self._checks, timeout_s=self.timeout_s)
                )
        else:  # the buggy or the original tree: the offline scan's outcome, no run needed
            failing = set(self._f2p) if agent == before else set()
            results = {t: "fail" if t in failing else "pass" for t in self._f2p + self._p2p}
            tampered = False
        # the next reset replaces this sandbox (fresh), so the hidden tests leave with it
        passing = {t for t, v in results.items() if v == "pass" and isinstance(t, str)}
        if tampered:
            passing = set()
        # one bug: a fix that fails a differential check only fits the example
        example_only = self.level != "pair" and any(c["id"] not in passing for c in self._checks)
        return self._grade(
            before,
            agent,
            passing,
            tampered=bool(tampered and results),
            tests_run=tests_run,
            example_only=example_only,
        )
