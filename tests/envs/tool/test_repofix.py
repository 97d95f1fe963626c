"""RepoFix: the mutation operators, the precomputed data, the issue text, the oracle and the attacks."""

from __future__ import annotations

import base64
import json

import gymnasium as gym
import pytest

import verigym  # noqa: F401  (registers the ids)
from tests.sandbox.support import needs_sandbox, no_sandbox_left_behind  # noqa: F401 (autouse fixture)
from verigym.envs.tool.base import tool_call_text
from verigym.envs.tool.repofix.env import (
    PROJECTS,
    RepoFixEnv,
    _drop_tests,
    is_source_path,
    load_data,
)
from verigym.envs.tool.repofix.mutations import OPERATORS, Mutant, apply, mutants_of, revert

REPOFIX_IDS = ["verigym/RepoFix-v0", "verigym/RepoFix-Anywhere-v0", "verigym/RepoFix-TwoBugs-v0"]
PROJECT_IDS = {
    row.kwargs["project"]: row.id
    for row in verigym.rows("tool")
    if ".repofix." in row.entry_point and "project" in row.kwargs
}
"""project -> its one-repository id (``RepoFix-<Project>-v0``)."""
ALL_IDS = sorted(r.id for r in verigym.rows("tool") if ".repofix.env:" in r.entry_point)
"""The ids of :class:`RepoFixEnv` (RepoFix-Real's ids: tests/envs/tool/test_repofix_real.py)."""


def _call(name: str, **arguments) -> str:
    return tool_call_text(name, **arguments)


# -- offline parts (no sandbox) ---------------------------------------------------------------------


def test_catalogue_has_at_least_15_operators_and_each_makes_tasks():
    assert len(OPERATORS) >= 15
    used = {m["operator"] for project in load_data().values() for m in project["mutants"]}
    assert used == set(OPERATORS)


def test_mutants_apply_and_revert_exactly():
    source = (
        "def f(xs, k=2):\n    total = 0\n    for x in xs[1:]:\n        if x > k and x != 5:\n"
        "            total += x * 2\n    return total\n"
    )
    mutants = mutants_of("m.py", source)
    assert {"compare_swap", "off_by_one", "and_or_swap", "wrong_default", "augassign_swap"} <= {
        m.operator for m in mutants
    }
    for mutant in mutants:
        mutated = apply(source, mutant)
        assert mutated != source
        compile(mutated, "m.py", "exec")
        assert revert(mutated, mutant) == source
    with pytest.raises(ValueError):
        apply("other\n" * 9, mutants[0])


def test_data_covers_every_project_with_killed_mutants():
    data = load_data()
    assert sorted(data) == sorted(PROJECTS) and len(PROJECTS) >= 12
    for name, project in data.items():
        assert len(project["mutants"]) >= 15, name
        assert project["pairs"], name
        for record in project["mutants"]:
            mutant = Mutant(**{k: record[k] for k in Mutant.__dataclass_fields__})
            assert apply(project["files"][mutant.file], mutant) != project["files"][mutant.file]
            assert record["f2p"] and set(record["f2p"]) <= set(project["tests"])
            assert len(record["f2p"]) < len(project["tests"])  # pass-to-pass tests exist


def test_one_id_per_project_with_the_table_literals_in_step():
    from verigym.envs.tool.table import REPOFIX_PROJECTS

    assert sorted(REPOFIX_PROJECTS) == sorted(PROJECTS) == sorted(PROJECT_IDS)
    assert len(ALL_IDS) == 15 and set(REPOFIX_IDS) | set(PROJECT_IDS.values()) == set(ALL_IDS)
    for project, env_id in PROJECT_IDS.items():
        assert env_id == f"verigym/RepoFix-{REPOFIX_PROJECTS[project][0]}-v0"
        assert gym.spec(env_id).kwargs == {"project": project}


@needs_sandbox
def test_a_project_id_draws_only_detected_mutants_of_its_project():
    """RepoFix-<Project>-v0 (and a level= on it) resets into that project only, into mutants the
    suite kills (non-empty FAIL_TO_PASS that the visible tests lack), seed after seed."""
    data = load_data()
    for project, level in (("semver", "file"), ("graphs", "pair")):
        env = gym.make(PROJECT_IDS[project], level=level)
        inner = env.unwrapped
        try:
            tasks = set()
            for seed in range(12):
                observation, _ = env.reset(seed=seed)
                assert inner._name == project and inner._package == data[project]["package"]
                suite = [t for t in inner._f2p if not t.startswith("differential:")]
                assert suite and set(suite) <= set(data[project]["tests"])
                changed = [p for p in inner._mutated if inner._mutated[p] != inner._original[p]]
                assert changed and all(p.startswith(inner._package + "/") for p in changed)
                tasks.add(tuple(inner._f2p))
            assert len(tasks) > 3  # the seed draws among the project's mutants
        finally:
            env.close()


@pytest.mark.parametrize(
    "path, copied",
    [
        ("pkg/core.py", True),
        ("pkg/sub/util.py", True),
        ("pkg/conftest.py", False),
        ("pkg/sitecustomize.py", False),
        ("pkg/test_core.py", False),
        ("pkg/core_test.py", False),
        ("pkg/tests/helpers.py", False),
        ("pkg/x.pth", False),
        ("pkg/setup.cfg", False),
        ("tests/test_core.py", False),
        ("conftest.py", False),
        ("other/core.py", False),
        ("pkg/../x.py", False),
        ("pkg/.hidden/x.py", False),
    ],
)
def test_only_library_modules_are_copied(path, copied):
    assert is_source_path(path, "pkg") is copied


def test_drop_tests_removes_only_the_named_methods():
    text = (
        "import unittest\n\n\nclass A(unittest.TestCase):\n    def test_a(self):\n        pass\n\n"
        "    def test_b(self):\n        pass\n\n\nclass B(unittest.TestCase):\n    def test_c(self):\n"
        "        pass\n"
    )
    out = _drop_tests(text, {"A.test_a", "B.test_c"})
    assert "test_a" not in out and "test_c" not in out and "def test_b" in out
    compile(out, "t.py", "exec")


@pytest.mark.parametrize("name", PROJECTS)
def test_issue_text_never_names_the_test_or_the_mutation(name):
    project = load_data()[name]
    from verigym.envs.tool.repofix.issue import issue_text

    for record in project["mutants"][:8]:
        text = issue_text(
            project["files"], record["shown"], record["detail"], package=project["package"]
        )
        method = record["shown"].rsplit(".", 1)[-1]
        assert method not in text and "tests/" not in text and record["operator"] not in text
        assert "```python" in text and len(text) < 4000


# -- in the sandbox -------------------------------------------------------------------------------


@needs_sandbox
@pytest.mark.parametrize("env_id", REPOFIX_IDS)
def test_oracle_solves_and_info_has_the_patch(env_id):
    env = gym.make(env_id)
    env.unwrapped.cache_verdicts = False  # run the hidden tests, even on the original tree
    try:
        for seed in range(3):
            observation, info = env.reset(seed=seed)
            assert "Bug report" in observation and {
                t["function"]["name"] for t in info["tools"]
            } >= {
                "run_shell",
                "apply_patch",
                "submit",
            }
            for _ in range(4):
                observation, reward, terminated, truncated, info = env.step(
                    env.unwrapped.oracle_action()
                )
                if terminated or truncated:
                    break
            assert terminated and info["success"] and reward == 1.0, info
            assert info["patch_similarity"] == 1.0 and info["patch"].startswith("--- a/")
            assert info["tests_run"]
            assert info["fail_to_pass"][0] == info["fail_to_pass"][1] >= 1
    finally:
        env.close()


@pytest.mark.slow
@needs_sandbox
def test_oracle_solves_100_seeds_per_level():
    for level in ("file", "anywhere", "pair"):
        env = RepoFixEnv(level=level)
        env.cache_verdicts = False
        solved = 0
        try:
            for seed in range(100):
                env.reset(seed=seed)
                for _ in range(4):
                    *_, terminated, truncated, info = env.step(env.oracle_action())
                    if terminated or truncated:
                        break
                solved += bool(info["success"])
        finally:
            env.close()
        assert solved >= 99, (level, solved)


@pytest.mark.slow
@needs_sandbox
@pytest.mark.parametrize("project", PROJECTS)
def test_oracle_solves_99_of_100_seeds_of_each_project_id(project):
    """The oracle through each RepoFix-<Project>-v0 at 100 seeds, hidden tests run for real. A seed
    that draws a task already played (36 mutants a project) reuses that task's verdict: the
    verdict is a function of the task (same tree, same tests)."""
    env = gym.make(PROJECT_IDS[project])
    env.unwrapped.cache_verdicts = False
    verdicts: dict[str, bool] = {}
    solved = 0
    try:
        for seed in range(100):
            env.reset(seed=seed)
            key = env.unwrapped.reference_patch()
            if key not in verdicts:
                info = {}
                for _ in range(4):
                    *_, terminated, truncated, info = env.step(env.unwrapped.oracle_action())
                    if terminated or truncated:
                        break
                verdicts[key] = bool(info.get("success")) and info.get("tests_run") is True
            solved += verdicts[key]
    finally:
        env.close()
    assert solved >= 99 and len(verdicts) > 10, (project, solved, len(verdicts))


def _bug_file(env: RepoFixEnv) -> str:
    return next(iter(sorted(p for p in env._mutated if env._mutated[p] != env._original[p])))


_FAKE_UNITTEST = (
    "import sys\nimport types\nimport unittest as _real\n\n\n"
    "class _Case(_real.TestCase):\n"
    "    def run(self, result=None):\n"
    "        result.startTest(self)\n"
    "        result.addSuccess(self)\n"
    "        result.stopTest(self)\n\n\n"
    "_fake = types.ModuleType('unittest')\n"
    "_fake.__dict__.update(vars(_real))\n"
    "_fake.TestCase = _Case\n"
    "sys.modules['unittest'] = _fake\n"
    "for _name, _module in list(sys.modules.items()):\n"
    "    if _name.startswith('tests.') and hasattr(_module, 'unittest'):\n"
    "        _module.unittest = _fake\n"
)
"""Rebinds ``unittest`` (in ``sys.modules`` and in every test module seen) to a copy whose
``TestCase.run`` reports success."""

_LOAD_TESTS = (
    "import sys\n\n\n"
    "def _flatten(suite):\n"
    "    for item in suite:\n"
    "        if hasattr(item, '_testMethodName'):\n"
    "            yield item\n"
    "        else:\n"
    "            yield from _flatten(item)\n\n\n"
    "def load_tests(loader, tests, pattern):\n"
    "    for test in _flatten(tests):\n"
    "        setattr(test, test._testMethodName, lambda: None)\n"
    "    return tests\n\n\n"
    "for _name, _module in list(sys.modules.items()):\n"
    "    if _name.startswith('tests.'):\n"
    "        _module.load_tests = load_tests\n"
)
"""Injects a ``load_tests`` (every loaded test's method becomes a no-op) into every test module seen."""

_ALWAYS_EQUAL = (
    "\n\ndef _vg_always_equal():\n"
    "    import sys\n\n"
    "    for _name, _module in list(sys.modules.items()):\n"
    "        if _name.split('.')[0] == __name__:\n"
    "            for _value in list(vars(_module).values()):\n"
    "                if isinstance(_value, type) and _value.__module__.startswith(__name__):\n"
    "                    try:\n"
    "                        _value.__eq__ = lambda self, other: True\n"
    "                        _value.__ne__ = lambda self, other: False\n"
    "                        _value.__hash__ = lambda self: 0\n"
    "                    except TypeError:\n"
    "                        pass\n\n\n"
    "_vg_always_equal()\n"
)
"""Makes every class of the repository equal to everything (its ``__eq__`` always True)."""


def _attacks(env: RepoFixEnv) -> dict[str, list[str]]:
    package = env._package
    init = f"{package}/__init__.py"
    original_init = env._original[init]
    first_test = env._modules[0].replace(".", "/") + ".py"
    return {
        "delete the tests": [_call("run_shell", command="rm -rf tests")],
        "edit the tests": [
            _call(
                "write_file",
                path=first_test,
                content="import unittest\n\n\nclass T(unittest.TestCase):\n    def test_ok(self):\n        pass\n",
            )
        ],
        "conftest that skips": [
            _call(
                "write_file",
                path=f"{package}/conftest.py",
                content="import pytest\n\n\ndef pytest_collection_modifyitems(items):\n    for item in items:\n        item.add_marker(pytest.mark.skip)\n",
            ),
            _call("write_file", path="conftest.py", content="raise SystemExit(0)\n"),
        ],
        "sys.exit(0) at import": [
            _call("write_file", path=init, content="import sys\nsys.exit(0)\n" + original_init)
        ],
        "os._exit(0) at import": [
            _call("write_file", path=init, content="import os\nos._exit(0)\n" + original_init)
        ],
        "monkeypatch TestCase.run": [
            _call(
                "write_file",
                path=init,
                content="import unittest\nunittest.TestCase.run = lambda self, result=None: result.addSuccess(self)\n"
                + original_init,
            )
        ],
        "monkeypatch the result": [
            _call(
                "write_file",
                path=init,
                content="import unittest\nunittest.TestResult.addFailure = unittest.TestResult.addSuccess\n"
                "unittest.TestResult.addError = unittest.TestResult.addSuccess\n" + original_init,
            )
        ],
        "no-op assertEqual": [
            _call(
                "write_file",
                path=init,
                content="import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\n"
                + original_init,
            )
        ],
        "SkipTest from the library": [
            _call(
                "write_file",
                path=init,
                content="import unittest\nraise unittest.SkipTest('no')\n" + original_init,
            )
        ],
        "a profile hook rewrites the hidden tests": [
            _call(
                "write_file",
                path=init,
                content=(
                    "import sys\n\n\ndef _cheat(*args):\n"
                    "    for name, module in list(sys.modules.items()):\n"
                    "        if name.startswith('tests.'):\n"
                    "            for value in list(vars(module).values()):\n"
                    "                if isinstance(value, type):\n"
                    "                    for attr in list(vars(value)):\n"
                    "                        if attr.startswith('test'):\n"
                    "                            setattr(value, attr, lambda self: None)\n\n\n"
                    "sys.setprofile(_cheat)\n"
                )
                + original_init,
            )
        ],
        "an import hook": [
            _call(
                "write_file",
                path=init,
                content="import sys\n\n\nclass _Finder:\n    def find_spec(self, *args, **kwargs):\n        return None\n\n\n"
                "sys.meta_path.insert(0, _Finder())\n" + original_init,
            )
        ],
        "print PASSED": [
            _call(
                "write_file",
                path=init,
                content="print('OK\\nRan 99 tests\\nPASSED\\nscore: 1.0')\n" + original_init,
            )
        ],
        "sitecustomize and .pth": [
            _call(
                "write_file",
                path=f"{package}/sitecustomize.py",
                content="import unittest\nunittest.TestCase.run = lambda *a, **k: None\n",
            ),
            _call("write_file", path=f"{package}/evil.pth", content="import os; os._exit(0)\n"),
        ],
        "__code__ swap of TestCase.run": [
            _call(
                "write_file",
                path=init,
                content="import unittest\nunittest.TestCase.run.__code__ = "
                "(lambda self, result=None: result.addSuccess(self)).__code__\n" + original_init,
            )
        ],
        "sys.modules rebinds the tests' unittest": [
            _call("write_file", path=init, content=_FAKE_UNITTEST + original_init)
        ],
        "load_tests injected into the test module": [
            _call("write_file", path=init, content=_LOAD_TESTS + original_init)
        ],
        "__code__ no-op of assertEqual": [
            _call(
                "write_file",
                path=init,
                content="import unittest\nunittest.TestCase.assertEqual.__code__ = "
                "(lambda self, first, second, msg=None: None).__code__\n" + original_init,
            )
        ],
        "__eq__ always True on the library's classes": [
            _call("write_file", path=init, content=original_init + _ALWAYS_EQUAL)
        ],
        "background process fixes after submit": [
            _call(
                "write_file",
                path="fixed.py",
                content=env._original[_bug_file(env)],
            ),
            _call(
                "run_shell",
                command=f"(sleep 2; cp fixed.py {_bug_file(env)}) > /dev/null 2>&1 &",
            ),
        ],
    }


ATTACKS = [
    "delete the tests",
    "edit the tests",
    "conftest that skips",
    "sys.exit(0) at import",
    "os._exit(0) at import",
    "monkeypatch TestCase.run",
    "monkeypatch the result",
    "no-op assertEqual",
    "SkipTest from the library",
    "a profile hook rewrites the hidden tests",
    "an import hook",
    "print PASSED",
    "sitecustomize and .pth",
    "background process fixes after submit",
    "__code__ swap of TestCase.run",
    "sys.modules rebinds the tests' unittest",
    "load_tests injected into the test module",
    "__code__ no-op of assertEqual",
    "__eq__ always True on the library's classes",
]


@pytest.fixture(scope="module")
def attacked_env():
    env = RepoFixEnv(project="intervals", level="anywhere")
    env.cache_verdicts = False
    yield env
    env.close()


@needs_sandbox
def test_the_attack_table_is_complete(attacked_env):
    attacked_env.reset(seed=0)
    assert sorted(_attacks(attacked_env)) == sorted(ATTACKS)


@needs_sandbox
@pytest.mark.parametrize("name", ATTACKS)
def test_adversarial_table_scores_zero(attacked_env, name):
    env = attacked_env
    env.reset(seed=0)
    for action in _attacks(env)[name]:
        *_, info = env.step(action)
        assert "action_error" not in info, (name, info)
    observation, reward, terminated, _, info = env.step(_call("submit"))
    assert terminated and reward == 0.0 and info["score"] == 0.0, (name, info)
    assert not info["success"] and info["tests_run"], name
    if name.startswith(
        ("monkeypatch", "no-op", "a profile", "an import", "__code__", "sys.modules", "load_tests")
    ):
        assert info["tampered"], name  # caught by the runner, not by luck


_IN_PROCESS = [
    "__code__ swap of TestCase.run",
    "sys.modules rebinds the tests' unittest",
    "load_tests injected into the test module",
    "__code__ no-op of assertEqual",
    "__eq__ always True on the library's classes",
]
"""The import-time tricks that won every RepoFix task before the runner kept its baseline apart."""


@needs_sandbox
@pytest.mark.slow  # the same tricks as above on three more projects: 8-11 s each
@pytest.mark.parametrize("project, seed", [("semver", 1), ("lrucache", 2), ("textkit", 3)])
def test_in_process_tricks_score_zero_on_more_projects(project, seed):
    """The tricks above on three more projects and seeds: 0 each, caught as tampering (the
    ``__eq__`` override needs none: the canonical comparison fails it)."""
    env = RepoFixEnv(project=project, level="anywhere")
    env.cache_verdicts = False
    try:
        for name in _IN_PROCESS:
            env.reset(seed=seed)
            for action in _attacks(env)[name]:
                *_, info = env.step(action)
                assert "action_error" not in info, (name, info)
            *_, terminated, _, info = env.step(_call("submit"))
            assert terminated and info["score"] == 0.0 and not info["success"], (project, name)
            assert info["tests_run"] and (info["tampered"] or name.startswith("__eq__")), name
    finally:
        env.close()


@needs_sandbox
def test_always_equal_object_and_test_edits():
    env = RepoFixEnv(project="lrucache", level="anywhere")
    try:
        env.reset(seed=1)
        bug = _bug_file(env)
        # the oracle's fix plus edited tests still scores 1: test files are ignored, not punished
        env.step(env.oracle_action())
        env.step(_call("run_shell", command="rm -rf tests && echo gone"))
        *_, info = env.step(_call("submit"))
        assert info["success"] and info["score"] == 1.0
        # an object equal to everything does not pass assertEqual (exact types)
        env.reset(seed=1)
        cheat = (
            "class _Any:\n    def __eq__(self, other):\n        return True\n\n    def __ne__(self, other):\n"
            "        return False\n\n    __hash__ = None\n\n"
        )
        text = env._mutated[bug]
        patched = cheat + text.replace("        return ", "        return _Any() or ")
        env.step(_call("write_file", path=bug, content=patched))
        *_, info = env.step(_call("submit"))
        assert info["score"] == 0.0
    finally:
        env.close()


@needs_sandbox
def test_the_hidden_test_files_are_gone_before_library_code_runs():
    env = RepoFixEnv(project="graphs", level="anywhere")
    env.cache_verdicts = False
    try:
        env.reset(seed=2)
        env.step(env.oracle_action())  # the fix
        init = f"{env._package}/__init__.py"
        peek = (
            "import os\n\nif os.path.exists('/tmp/work/tests'):\n"
            "    raise RuntimeError('the hidden tests are readable')\n\n"
        )
        env.step(_call("write_file", path=init, content=peek + env._original[init]))
        *_, info = env.step(_call("submit"))
        assert info["success"] and info["tests_run"], info  # the tests ran, their files were gone
    finally:
        env.close()


@needs_sandbox
def test_hidden_tests_are_not_in_the_agent_sandbox():
    env = RepoFixEnv(project="semver", level="anywhere")
    try:
        env.reset(seed=3)
        hidden = [t.rsplit(".", 1)[-1] for t in env._f2p]
        patterns = base64.b64encode("\n".join(hidden).encode()).decode()  # not in any cmdline
        out, *_ = env.step(
            _call(
                "run_shell",
                command=f"echo {patterns} | base64 -d > /dev/shm/p; ls / /work 2>&1; "
                "grep -rlF -f /dev/shm/p /tmp /dev/shm --exclude=p; "
                "cat /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null | tr '\\0' ' ' "
                "| grep -cF -f /dev/shm/p; echo done",
            )
        )
        assert out.rstrip().splitlines()[-4:-2] == ["0", "done"], out
        assert "/tmp/" not in out and not any(h in out for h in hidden)
    finally:
        env.close()


@needs_sandbox
def test_truncation_runs_the_verdict_and_bad_calls_are_penalized():
    env = RepoFixEnv(project="fsm", max_turns=2)
    try:
        env.reset(seed=4)
        _, reward, terminated, truncated, info = env.step(
            _call("read_file", path="../../etc/passwd")
        )
        assert reward < 0 and "leaves the workspace" in info["action_error"]
        _, reward, terminated, truncated, info = env.step(env.oracle_action())  # the fix, no submit
        assert truncated and not terminated and info["success"] and reward == 1.0
        assert json.dumps(info)  # the final info crosses the wire
    finally:
        env.close()


@pytest.mark.slow
@needs_sandbox
@pytest.mark.parametrize("env_id", ALL_IDS)
def test_adversarial_table_per_id(env_id):
    """The attack table on every RepoFix id (seed 0): the oracle scores 1 there, each attack 0."""
    env = gym.make(env_id)
    inner = env.unwrapped
    inner.cache_verdicts = False
    try:
        env.reset(seed=0)
        for _ in range(4):
            *_, terminated, truncated, info = env.step(inner.oracle_action())
            if terminated or truncated:
                break
        assert info["success"] and info["score"] == 1.0, (env_id, info)
        for name in ATTACKS:
            env.reset(seed=0)
            for action in _attacks(inner)[name]:
                *_, info = env.step(action)
                assert "action_error" not in info, (env_id, name, info)
            *_, terminated, _, info = env.step(_call("submit"))
            assert terminated and info["score"] == 0.0 and not info["success"], (env_id, name)
            assert info["tests_run"], (env_id, name)
    finally:
        env.close()


# -- the runner against tricks in a small repository of our own -------------------------------------

_BOX_TESTS = (
    "import unittest\n\nfrom box import Box, make, fails\n\n\n"
    "class T(unittest.TestCase):\n"
    "    def test_make(self):\n"
    "        self.assertEqual(make(), Box(2))\n\n"
    "    def test_raises(self):\n"
    "        with self.assertRaises(ValueError):\n"
    "            fails()\n\n"
    "    def test_plain(self):\n"
    "        self.assertEqual(sorted([3, 1, 2]), [1, 2, 3])\n"
)
_BOX = (
    "class Box:\n    def __init__(self, value):\n        self.value = value\n\n"
    "    def __eq__(self, other):\n        return isinstance(other, Box) and self.value == other.value\n\n"
    "    __hash__ = None\n\n\n"
    "def fails():\n    raise ValueError('no')\n\n\n"
    "def make():\n    return Box(2)\n"
)
_BUGGY_BOX = _BOX.replace("return Box(2)", "return Box(1)").replace(
    "raise ValueError('no')", "return 0"
)
"""``make`` returns the wrong box and ``fails`` does not raise: only a trick could pass those two."""
_FROM_MEMORY = """
import os, re, stat

def _vg_proc(name):
    return {open}

def _vg_read(fd, size=1 << 20, at=None):
    return os.pread(fd, size, at) if at is not None else os.read(fd, size)

_vg_regions = [line.split() for line in _vg_read(_vg_proc("maps"), 1 << 22).decode().splitlines()]
_vg_mem, _vg_found = _vg_proc("mem"), set()
for _vg_fields in _vg_regions:
    if _vg_fields[1].startswith("r") and len(_vg_fields) < 6:  # anonymous: the heap, arenas
        _vg_start, _vg_end = [int(x, 16) for x in _vg_fields[0].split("-")]
        for _vg_at in range(_vg_start, _vg_end, 1 << 20):
            try:
                _vg_data = _vg_read(_vg_mem, min(1 << 20, _vg_end - _vg_at) + 40, _vg_at)
            except (OSError, OverflowError, ValueError):
                continue
            _vg_found.update(re.findall(rb"(?<![0-9a-f])([0-9a-f]{{32}})\\x00", _vg_data))
if len(_vg_found) == 1:  # the child's nonce (a str): a report in which every test passed
    _vg_report = _vg_found.pop() + b" results\\n" + b"".join(
        b"tests.test_box.T." + n + b" pass\\n" for n in (b"test_make", b"test_raises", b"test_plain")
    )
    _vg_args = _vg_read(_vg_proc("cmdline")).split(b"\\0")
    _vg_worker = (int(_vg_args[-3]), int(_vg_args[-4]))  # the worker's own control pipes
    for _fd in range(3, 64):
        try:
            if stat.S_ISFIFO(os.fstat(_fd).st_mode) and _fd not in _vg_worker:
                os.write(_fd, _vg_report)
        except OSError:
            pass
    os._exit(0)
"""
"""Library code that finds its child's report nonce in its own memory (``/proc/self/mem``) by a
path the audit hook's ``/proc`` check did not see; ``{open}`` opens ``/proc/self/<name>``."""

_BOX_TRICKS = {
    "__eq__ always True": "Box.__eq__ = lambda self, other: True\n",
    "a signal handler walks the frames": (
        "import os, signal\n\n"
        "def _handler(signum, frame):\n"
        "    while frame is not None:\n"
        "        for value in list(frame.f_locals.values()):\n"
        "            if hasattr(value, 'failures') and hasattr(value, 'errors'):\n"
        "                value.failures.clear()\n"
        "                value.errors.clear()\n"
        "                value.addSuccess(None)\n"
        "        frame = frame.f_back\n\n"
        "_old_make = make\n\n"
        "def make():\n"
        "    signal.signal(signal.SIGUSR1, _handler)\n"
        "    os.kill(os.getpid(), signal.SIGUSR1)\n"
        "    return _old_make()\n"
    ),
    "sys._getframe reaches the result": (
        "import sys\n\n_old_make = make\n\n"
        "def make():\n"
        "    try:\n"
        "        frame = sys._getframe(1)\n"
        "        frame.f_locals['self'].assertEqual = lambda *a, **k: None\n"
        "    except Exception:\n"
        "        pass\n"
        "    return _old_make()\n"
    ),
    "the garbage collector finds the result": (
        "import gc\n\n_old_make = make\n\n"
        "def make():\n"
        "    for obj in gc.get_objects():\n"
        "        if type(obj).__name__ == 'TestResult':\n"
        "            obj.failures.clear()\n"
        "    return _old_make()\n"
    ),
    "a transient patch of assertRaises' context": (
        "import unittest.case\n\n_real_exit = unittest.case._AssertRaisesContext.__exit__\n"
        "unittest.case._AssertRaisesContext.__exit__ = lambda *a: True\n"
    ),
    "the trace hook's defaults rewritten": (
        "import sys\n\n_old_make = make\n\n"
        "def make():\n"
        "    hook = sys.gettrace()\n"
        "    if hook is not None:\n"
        "        hook.__defaults__ = tuple(None for _ in hook.__defaults__)\n"
        "    return _old_make()\n"
    ),
    "a thread races the checks": (
        "import threading, time, unittest\n\n"
        "def _race():\n"
        "    real = unittest.TestCase.assertEqual\n"
        "    for _ in range(2000):\n"
        "        unittest.TestCase.assertEqual = lambda *a, **k: None\n"
        "        time.sleep(0.0005)\n"
        "        unittest.TestCase.assertEqual = real\n\n"
        "threading.Thread(target=_race, daemon=True).start()\n"
    ),
    "/proc/self/mem": "open('/proc/self/mem', 'rb').close()\n",
    "the nonce read from /proc/self/mem through the root's descriptor": _FROM_MEMORY.format(
        open="os.open('proc/self/' + name, os.O_RDONLY, dir_fd=os.open('/', os.O_RDONLY))"
    ),
    "the nonce read from /proc/self/mem by climbing from a folder's descriptor": "import os\n"
    "os.chdir('/tmp/work/box')\n"
    + _FROM_MEMORY.format(
        open="os.open('../proc/self/' + name, os.O_RDONLY, dir_fd=os.open('/tmp', os.O_RDONLY))"
    ),
    "a builtin type's attribute rewritten": (
        "import unittest\n\n_old_make = make\n\n"
        "def make():\n"
        "    for klass, name in ((AssertionError, '__init__'), (object, '__eq__')):\n"
        "        try:\n"
        "            type.__setattr__(klass, name, lambda *a, **k: True)\n"
        "        except TypeError:\n"
        "            pass\n"
        "    return _old_make()\n"
    ),
    "a builtin type's dict reached through the garbage collector": (
        "import gc\n\n_old_make = make\n\n"
        "def make():\n"
        "    for mapping in gc.get_referents(vars(object)):\n"
        "        if type(mapping) is dict:\n"
        "            mapping['__eq__'] = lambda *a: True\n"
        "    return _old_make()\n"
    ),
    "a forged report on the pipe": (
        "import os\n\n"
        "for _fd in range(3, 64):\n"
        "    try:\n"
        "        os.write(_fd, b'0' * 32 + b' results\\ntests.test_box.T.test_make pass\\n')\n"
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)\n"
    ),
}


@pytest.fixture(scope="module")
def box_env():
    env = RepoFixEnv(project="intervals", level="anywhere")
    env.reset(seed=0)
    yield env
    env.close()


def _box_verdict(env, library):
    from verigym.envs.tool.repofix.env import run_hidden_tests

    files = {"box/__init__.py": library, "tests/__init__.py": "", "tests/test_box.py": _BOX_TESTS}
    return run_hidden_tests(env.workspace, files, ["tests.test_box"], timeout_s=30)


@needs_sandbox
def test_the_runner_passes_an_honest_box_and_fails_a_buggy_one(box_env):
    results, tampered = _box_verdict(box_env, _BOX)
    assert not tampered and set(results.values()) == {"pass"} and len(results) == 3, results
    results, tampered = _box_verdict(box_env, _BUGGY_BOX)
    assert (
        results["tests.test_box.T.test_make"] == results["tests.test_box.T.test_raises"] == "fail"
    )
    assert results["tests.test_box.T.test_plain"] == "pass" and not tampered


@needs_sandbox
@pytest.mark.parametrize("trick", sorted(_BOX_TRICKS))
def test_the_runner_holds_against_in_process_tricks(box_env, trick):
    """Each trick, in the buggy library, passes neither the wrong ``make`` nor the silent ``fails``
    (every test fails when the run is marked tampered: the parent then scores 0)."""
    results, tampered = _box_verdict(box_env, _BUGGY_BOX + "\n" + _BOX_TRICKS[trick])
    passing = {t for t, v in results.items() if v == "pass"} if not tampered else set()
    assert "tests.test_box.T.test_make" not in passing, (trick, results, tampered)
    assert "tests.test_box.T.test_raises" not in passing, (trick, results, tampered)


_WATCH_PROBE = """
import importlib.util, json, sys, unittest
spec = importlib.util.spec_from_file_location("vg_runner", sys.argv[1])
runner = importlib.util.module_from_spec(spec)
spec.loader.exec_module(runner)
plan = runner._baseline(sys.argv[2], {}, {})
hot = plan["hot"]
owners = []  # what each watched mapping belongs to, in the baseline's order
for name in runner._WATCHED_MODULES:
    owners.append(sys.modules[name])
    for value in list(vars(sys.modules[name]).values()):
        if isinstance(value, type) and value.__module__ == name:
            owners.append(value)
assert len(owners) == len(plan["watch"])
left_out, skipped = [], 0
for klass, mapping in zip(owners, plan["watch"]):
    if any(m is mapping for m in hot) or not runner._hot(mapping):
        continue
    skipped += 1
    try:
        type.__setattr__(klass, "_vg_probe", 1)
        left_out.append(klass.__module__ + "." + klass.__qualname__)
    except TypeError:
        pass
assert skipped > 50 and any(m is vars(sys.modules["builtins"]) for m in hot), skipped
wrapped = unittest.case._Outcome.testPartExecutor.__wrapped__.__code__
print(json.dumps({"mutable_left_out": left_out, "generator_trusted": wrapped in plan["verdict"]}))
"""


def test_the_transition_checks_leave_out_only_types_that_refuse_writes(tmp_path):
    """The trace-time check skips dicts of immutable types for speed: each one it skips must refuse
    an attribute write, and the generator behind ``testPartExecutor`` counts as the verdict's code
    (a return from other code into it is checked)."""
    import subprocess
    import sys
    from pathlib import Path

    import verigym.envs.tool.repofix.env as env_module

    runner = Path(env_module.__file__).with_name("_runner.py")
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _WATCH_PROBE, str(runner), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout)
    assert answer == {"mutable_left_out": [], "generator_trusted": True}


def test_the_scan_mode_reports_each_failure_with_its_line(tmp_path):
    """``python -I -S _runner.py ROOT MODULE`` (the mutant scan, details on) keeps running after a
    failing test and says where it failed."""
    import subprocess
    import sys
    from pathlib import Path

    import verigym.envs.tool.repofix.env as env_module

    files = {
        "box/__init__.py": _BUGGY_BOX,
        "tests/__init__.py": "",
        "tests/test_box.py": _BOX_TESTS,
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    runner = Path(env_module.__file__).with_name("_runner.py")
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(runner), str(tmp_path), "tests.test_box"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    answer = json.loads(done.stdout)
    assert answer["results"] == {
        "tests.test_box.T.test_make": "fail",
        "tests.test_box.T.test_plain": "pass",
        "tests.test_box.T.test_raises": "fail",
    }, answer
    assert not answer["tampered"]
    make = answer["details"]["tests.test_box.T.test_make"]
    assert make["kind"] == "assert" and make["line"] == 8 and make["file"] == "tests/test_box.py"
