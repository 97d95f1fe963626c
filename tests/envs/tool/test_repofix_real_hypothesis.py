"""RepoFix-Real's runner with hypothesis in the tree (issue 40: suites that need hypothesis).

hypothesis is MPL-2.0, so it is never vendored: where it is importable (the ``test`` extra) it is
copied into the sandbox's tree and the runner loads it before its audit hook and baseline, as it
does pytest. Before that, a ``@given`` test ended the run as tampered (hypothesis relabels its
wrapper's code, registers a Random by walking the gc and, in its explain phase, sets a trace
function). These cases show that an honest property test is graded, deterministically, and that
library code under a ``@given`` test is still caught setting a trace function or rebinding
hypothesis' code. The runner runs without bubblewrap here, as in test_repofix_real_runner.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.envs.tool.real_runner import run_tree, write_deps

pytest.importorskip("hypothesis")

BAD, OK = "tests/test_x.py::test_bad", "tests/test_x.py::test_ok"
TEST = (
    "from hypothesis import given, strategies as st\n\nfrom lib import f\n\n\n"
    "@given(st.integers(0, 10))\ndef test_ok(x):\n    assert f(0) == 0\n\n\n"
    "@given(st.integers(1, 10))\ndef test_bad(x):\n    assert f(x) == 2 * x\n"
)
"""Two property tests: ``f`` must double; ``test_bad`` fails on the identity."""


@pytest.fixture(scope="module")
def deps(tmp_path_factory) -> str:
    return write_deps(tmp_path_factory.mktemp("vgdeps"), hypothesis=True)


def _run(tmp_path: Path, deps: str, library: str) -> dict:
    return run_tree(tmp_path, deps, {"tests/test_x.py": TEST, "lib.py": library}, 120.0)


def test_a_property_test_is_graded(tmp_path, deps):
    # the runner before hypothesis loaded ahead of its baseline read this honest run as tampered
    out = _run(tmp_path, deps, "def f(x):\n    return x\n")
    assert not out["tampered"], out
    assert out["results"] == {OK: "pass", BAD: "fail"}


@pytest.mark.slow  # one child more (~5 s of CPU): the default run has the honest case
def test_library_code_under_a_given_test_cannot_set_a_trace_function(tmp_path, deps):
    # hypothesis' own trace function is allowed (trusted code, loaded before the baseline); a
    # library's, called from a @given test, still ends the run
    out = _run(
        tmp_path,
        deps,
        "import sys\n\n\ndef f(x):\n    sys.settrace(lambda *a: None)\n    sys.settrace(None)\n"
        "    return x\n",
    )
    assert out["tampered"] or out["results"].get(BAD) != "pass", out


@pytest.mark.slow
def test_library_code_cannot_rebind_hypothesis(tmp_path, deps):
    # hypothesis runs a @given test's body and raises its failure: a library that replaced the
    # engine's entry point passed every property test before the runner watched hypothesis' code
    library = (
        "import hypothesis.core\n\n"
        "hypothesis.core.StateForActualGivenExecution.run_engine = (\n"
        "    lambda self: setattr(self, 'ever_executed', True)\n)\n\n\n"
        "def f(x):\n    return x\n"
    )
    out = _run(tmp_path, deps, library)
    assert out["tampered"] or out["results"].get(BAD) != "pass", out


@pytest.mark.slow
def test_a_fixed_library_passes_the_same_examples_twice(tmp_path, deps):
    # derandomized: two runs of one tree draw the same examples (the verdict repeats validation)
    first = _run(tmp_path / "a", deps, "def f(x):\n    return 2 * x\n")
    second = _run(tmp_path / "b", deps, "def f(x):\n    return 2 * x\n")
    assert not first["tampered"] and first == second
    assert first["results"] == {OK: "pass", BAD: "pass"}


@pytest.mark.slow
def test_library_code_cannot_relabel_its_code_as_a_tests(tmp_path, deps):
    # the runner lets trusted code (hypothesis' impersonate) give a function the test file's name,
    # and frames of that name count as the tests': a library function relabelled so (at import)
    # would set a trace function with only trusted-looking frames on the stack
    library = (
        "import sys\n\n\ndef f(x):\n    sys.settrace(lambda *a: None)\n    sys.settrace(None)\n"
        "    return 2 * x\n\n\n"
        "_test = next(m for m in list(sys.modules.values())\n"
        "             if str(getattr(m, '__file__', '')).endswith('tests/test_x.py'))\n"
        "f.__code__ = f.__code__.replace(co_filename=_test.__file__)\n"
    )
    out = _run(tmp_path, deps, library)
    assert out["tampered"], out


@pytest.mark.slow
def test_a_property_test_runs_the_verdicts_examples_over_a_conftests_profile(tmp_path, deps):
    # the verdict's profile draws 10 examples a test (not hypothesis' 100: the verdict's time),
    # also where the suite's conftest loads a profile of its own asking for more
    conftest = (
        "from hypothesis import settings\n\n\ndef pytest_configure(config):\n"
        "    settings.register_profile('own', max_examples=500)\n"
        "    settings.load_profile('own')\n"
    )
    test = (
        "from hypothesis import given, strategies as st\n\nSEEN = []\n\n\n"
        "@given(st.integers())\ndef test_draw(x):\n    SEEN.append(x)\n\n\n"
        "def test_count():\n    assert 1 <= len(SEEN) <= 10, len(SEEN)\n"
    )
    out = run_tree(
        tmp_path, deps, {"tests/test_x.py": test, "tests/conftest.py": conftest, "lib.py": ""}, 120
    )
    assert not out["tampered"], out
    assert out["results"] == {
        "tests/test_x.py::test_draw": "pass",
        "tests/test_x.py::test_count": "pass",
    }, out
