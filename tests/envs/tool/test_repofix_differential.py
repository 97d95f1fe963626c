"""RepoFix differential checks: hidden FAIL_TO_PASS checks on inputs other than the issue's example,
and the attack they stop (a patch that restores the original only for the example's arguments)."""

from __future__ import annotations

import gymnasium as gym
import pytest

import verigym  # noqa: F401  (registers the ids)
from tests.sandbox.support import needs_sandbox, no_sandbox_left_behind  # noqa: F401 (autouse fixture)
from verigym.envs.tool.base import tool_call_text
from verigym.envs.tool.repofix import differential
from verigym.envs.tool.repofix.env import load_data
from verigym.envs.tool.workspace import Workspace

TINY = {
    "pkg/__init__.py": "from pkg.core import Box, clamp\n",
    "pkg/core.py": (
        "def clamp(x, low, high):\n"
        "    if x < low:\n"
        "        return low\n"
        "    if x > high:\n"
        "        return high\n"
        "    return x\n"
        "\n"
        "\n"
        "class Box:\n"
        "    def __init__(self, items):\n"
        "        self.items = list(items)\n"
        "\n"
        "    def total(self, scale=1):\n"
        "        return sum(self.items) * scale\n"
    ),
    "tests/__init__.py": "",
    "tests/test_core.py": (
        "import unittest\n"
        "\n"
        "from pkg import Box, clamp\n"
        "\n"
        "\n"
        "class CoreTest(unittest.TestCase):\n"
        "    def setUp(self):\n"
        "        self.box = Box([1, 2, 3])\n"
        "\n"
        "    def test_clamp(self):\n"
        "        self.assertEqual(clamp(5, 0, 3), 3)\n"
        "        with self.assertRaises(TypeError):\n"
        "            clamp(None, 0, 3)\n"
        "\n"
        "    def test_total(self):\n"
        "        self.assertEqual(self.box.total(2), 12)\n"
    ),
}
BUGGY = dict(
    TINY,
    **{"pkg/core.py": TINY["pkg/core.py"].replace("        return high", "        return low")},
)
ISSUE = "Running this:\n\n```python\nfrom pkg import clamp\nclamp(5, 0, 3)\n```\n\nIt gives 0."
CLAMP = "tests.test_core.CoreTest.test_clamp"


def _probe(files, edits=()):
    source = differential._edit(files["tests/test_core.py"], edits)
    return {"module": "tests.test_core", "test": "CoreTest.test_clamp", "source": source}


# -- offline ----------------------------------------------------------------------------------------


def test_a_probe_records_the_compared_values_and_the_raised_exceptions():
    assert differential.run_probes_locally(TINY, [_probe(TINY)]) == ["3\n3\nraised:TypeError\nend"]
    assert differential.run_probes_locally(BUGGY, [_probe(BUGGY)]) == [
        "0\n3\nraised:TypeError\nend"
    ]


def test_variants_change_input_literals_and_never_the_expected_value():
    source = TINY["tests/test_core.py"]
    variants = differential.probe_variants(source, "CoreTest.test_clamp")
    shifted, variants = variants[:4], variants[4:]  # all numbers +1, +2, x2, +10 together
    assert [[e[4] for e in edits] for edits in shifted][0] == [
        "2",
        "3",
        "4",
        "6",
        "1",
        "4",
        "1",
        "4",
    ]
    assert variants and all(len(edits) == 1 for edits in variants)
    expected = (11, 45)  # line, column of the expected `3` in assertEqual(clamp(5, 0, 3), 3)
    assert all((e[0], e[1]) != expected for edits in shifted + variants for e in edits)
    places = {(e[0][0], e[0][1]) for e in variants}  # setUp's and the body's inputs
    assert places == {(8, 24), (8, 27), (8, 30), (11, 31), (11, 34), (11, 37), (13, 24), (13, 27)}
    assert all(differential._edit(source, e) != source for e in variants)


SECOND = {
    "pkg/__init__.py": "from pkg.core import second_or\n",
    "pkg/core.py": (
        "def second_or(items, default):\n"
        "    if len(items) < 2:\n"
        "        return default\n"
        "    return items[1]\n"
    ),
    "tests/__init__.py": "",
    "tests/test_core.py": (
        "import unittest\n"
        "\n"
        "from pkg import second_or\n"
        "\n"
        "\n"
        "class CoreTest(unittest.TestCase):\n"
        "    def test_second(self):\n"
        "        self.assertEqual(second_or([4, 5], None), 5)\n"
        "        self.assertIsNone(second_or([], None))\n"
    ),
}
SECOND_BUGGY = dict(
    SECOND, **{"pkg/core.py": "def second_or(items, default):\n    return items[1]\n"}
)


SECOND_ISSUE = "Running this:\n\n```python\nfrom pkg import second_or\nsecond_or([], None)\n```\n"


def test_structural_copies_change_the_shape_of_the_inputs():
    source = SECOND["tests/test_core.py"]
    variants = differential.probe_variants(source, "CoreTest.test_second", 60, structural=True)
    shapes = {e[0][4] for e in variants if len(e) == 1}
    assert {"[4]", "[5]", "[]", "[0]", "[4, 5, 5]", "[5, 4]", "(4, 5)", "()"} <= shapes
    assert {"second_or([4, 5])", "second_or(None, [4, 5])"} <= shapes  # arguments dropped, swapped
    assert not {"[]", "[0]"} & {
        e[0][4] for e in differential.probe_variants(source, "CoreTest.test_second", 60)
    }  # without structural: only literals change
    assert differential._shift_digits(">=1.5.09 <2", 1) == ">=2.6.10 <3"  # strings' numbers too
    expected = (8, 50)  # the expected `5` of assertEqual(second_or([4, 5], None), 5)
    assert all((e[0], e[1]) != expected for edits in variants for e in edits)


@pytest.mark.slow  # about 15 subprocesses
def test_structural_copies_reach_a_bug_that_no_literal_change_reaches():
    # the dropped guard shows only on a list shorter than 2; the example's is `[]` (no literal to
    # change), the test's other list has two elements: only a copy with another shape reaches it
    test = "tests.test_core.CoreTest.test_second"
    args = (SECOND, SECOND_BUGGY, [test], SECOND_ISSUE, test)
    _, literal = differential.make_checks(*args, per_test=30)
    checks, structural = differential.make_checks(*args, per_test=30, structural=True)
    assert literal["beat_attack"] == 0
    assert checks and structural["beat_attack"] >= 1


def test_the_attack_fits_the_example_and_nothing_else():
    attacked = dict(BUGGY)
    info: dict = {}
    attacked.update(
        differential.special_case(TINY, BUGGY, differential.snippet_of(ISSUE), info=info)
    )
    assert info == {"ran": "snippet", "keys": 1}
    example = differential.run_probes_locally(attacked, [_probe(attacked)])
    assert example == ["3\n3\nraised:TypeError\nend"]  # the example (the hidden test) passes
    other = [[[11, 31, 11, 32, "6"]]]  # clamp(6, 0, 3)
    assert differential.run_probes_locally(attacked, [_probe(attacked, other[0])]) == [
        "0\n3\nraised:TypeError\nend"
    ]


@pytest.fixture(scope="module")
def tiny_checks():
    return differential.make_checks(TINY, BUGGY, [CLAMP], ISSUE, CLAMP, per_test=8)


def test_make_checks_keeps_checks_that_the_original_passes_and_the_attack_fails(tiny_checks):
    checks, stats = tiny_checks
    assert checks and stats["beat_attack"] >= 1
    attacked = dict(BUGGY)
    attacked.update(differential.special_case(TINY, BUGGY, differential.snippet_of(ISSUE)))
    for tree, passes in ((TINY, True), (BUGGY, False), (attacked, False)):
        records = differential.run_probes_locally(tree, differential.check_probes(TINY, checks))
        assert [differential.digest(r) == c["digest"] for r, c in zip(records, checks)] == [
            passes
        ] * len(checks)


def test_every_instance_has_a_check_on_other_inputs_than_the_example():
    without = []
    for name, project in load_data().items():
        files = project["files"]
        for task in project["mutants"] + project["pairs"]:
            if not task.get("checks"):
                without.append((name, task["shown"]))
            for check in task["checks"]:
                assert check["id"].startswith("differential:") and len(check["digest"]) == 64
                source = files[check["module"].replace(".", "/") + ".py"]
                assert check["edits"] and differential._edit(source, check["edits"]) != source
    # 3 of 576 have none yet (two bugs in Interval.__eq__, one in Table.to_csv reached only through
    # a module-level constant): `gen_repofix_checks.py --what repair` has the modes that reach them
    assert len(without) <= 3, without


# -- in the sandbox -------------------------------------------------------------------------------


@needs_sandbox
def test_run_checks_passes_the_original_and_fails_the_bug_and_a_dead_sandbox(tiny_checks):
    checks, _ = tiny_checks
    workspace = Workspace()
    try:
        ids = {c["id"] for c in checks}
        ok = differential.run_checks(workspace, TINY, checks, timeout_s=20)
        assert ok == {i: "pass" for i in ids}
        bad = differential.run_checks(workspace, BUGGY, checks, timeout_s=20)
        assert bad == {i: "fail" for i in ids}
        dying = dict(TINY, **{"pkg/__init__.py": "import os\nos._exit(0)\n"})
        assert differential.run_checks(workspace, dying, checks, timeout_s=20) == bad
    finally:
        workspace.close()


def _attack(env_id: str, seed: int) -> tuple[float, dict]:
    env = gym.make(env_id, max_action_length=1 << 20, timeout_s=60.0)
    try:
        observation, _ = env.reset(seed=seed)
        base = env.unwrapped
        patched = differential.special_case(
            base._original, base._mutated, differential.snippet_of(observation)
        )
        for path, text in sorted(patched.items()):
            env.step(tool_call_text("write_file", path=path, content=text))
        _, reward, terminated, _, info = env.step(tool_call_text("submit"))
        assert terminated
        return reward, info
    finally:
        env.close()


# seeds on which the special-casing patch passed every hidden test before the checks existed
WON_BEFORE = [("verigym/RepoFix-Fsm-v0", 0), ("verigym/RepoFix-LruCache-v0", 1)]


@needs_sandbox
@pytest.mark.parametrize(("env_id", "seed"), WON_BEFORE)
def test_special_casing_the_example_scores_zero(env_id, seed):
    reward, info = _attack(env_id, seed)
    assert info["tests_run"] and not info["tampered"]
    assert info["pass_to_pass"][0] == info["pass_to_pass"][1]  # nothing else broken
    assert info["fail_to_pass"][0] < info["fail_to_pass"][1]  # a differential check failed
    assert reward == 0.0 and not info["success"]


def _survives(project: dict, mutant: dict) -> bool:
    """Whether the special-casing patch passes every stored check of a single-bug mutant (offline:
    the checks run locally on the attacked tree, as the verdict runs them)."""
    from verigym.envs.tool.repofix.issue import issue_text
    from verigym.envs.tool.repofix.mutations import Mutant, apply

    files = project["files"]
    mutated = dict(files)
    record = Mutant(**{k: mutant[k] for k in Mutant.__dataclass_fields__})
    mutated[record.file] = apply(files[record.file], record)
    issue = issue_text(files, mutant["shown"], mutant["detail"], package=project["package"])
    attacked = dict(mutated)
    attacked.update(
        differential.special_case(files, mutated, differential.snippet_of(issue), mutant["shown"])
    )
    checks = mutant.get("checks", [])
    if not checks:
        return True
    records = differential.run_probes_locally(attacked, differential.check_probes(files, checks))
    return records is not None and all(  # a crashed run fails every check at the verdict
        differential.digest(r) == c["digest"] for r, c in zip(records, checks, strict=True)
    )


@pytest.mark.slow  # every single-bug task: 432 attacks, minutes (measured 7/432, 1.6%)
def test_special_casing_wins_at_most_2_percent_of_single_bug_tasks():
    # every mutant once (a seed range samples few: the seed's first draw is the mutant index, so
    # seeds 0 and 2 draw the same mutant of every project)
    data = load_data()
    tasks = [(name, i) for name in sorted(data) for i in range(len(data[name]["mutants"]))]
    won = [(n, i) for n, i in tasks if _survives(data[n], data[n]["mutants"][i])]
    assert len(won) <= 0.02 * len(tasks), won
