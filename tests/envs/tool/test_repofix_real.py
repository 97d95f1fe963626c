"""RepoFix-Real: the vendored libraries, the removal operators, the validated data, the oracle, cheats."""

from __future__ import annotations

import ast
import json
import tarfile

import gymnasium as gym
import pytest

import verigym  # noqa: F401  (registers the ids)
from tests.sandbox.support import needs_sandbox, no_sandbox_left_behind  # noqa: F401 (autouse fixture)
from verigym.envs.tool.base import tool_call_text
from verigym.envs.tool.repofix import real, real_env
from verigym.envs.tool.repofix.env import is_source_path
from verigym.envs.tool.repofix.mutations import Mutant, apply, revert
from verigym.envs.tool.repofix.real_env import (
    REAL_LIBRARIES,
    RepoFixRealEnv,
    apply_mutants,
    drop_pytest_tests,
    instance_mutants,
    load_real_data,
    pack_real_data,
    unpack_real_data,
)
from verigym.envs.tool.repofix.real_mutations import EXTRA_OPERATORS, extra_mutants

REAL_IDS = sorted(r.id for r in verigym.rows("tool") if ".repofix.real_env:" in r.entry_point)


def _call(name: str, **arguments) -> str:
    return tool_call_text(name, **arguments)


# -- offline parts (no sandbox) ---------------------------------------------------------------------


def test_vendored_archives_match_the_manifest_with_licences_and_size():
    manifest = json.loads((real.VENDOR / "manifest.json").read_text())
    total = sum(p.stat().st_size for p in real.VENDOR.rglob("*") if p.is_file())
    assert total + real_env._DATA.stat().st_size <= 15 << 20  # the libraries and the instances
    for name, entry in {**manifest["libraries"], **manifest["testdeps"]}.items():
        assert any(k in entry["licence"] for k in ("MIT", "BSD", "Apache-2.0")), name
        assert (real.VENDOR / "licenses" / f"{name}-{entry['version']}.LICENSE").read_text()
    for name, entry in manifest["libraries"].items():
        with tarfile.open(real.VENDOR / entry["file"]) as archive:  # the sdist ships its tests
            names = [m.name.split("/", 1)[-1] for m in archive.getmembers()]
        assert any(n.startswith(real.tests_dir(name)) for n in names), name
        assert real.test_files(name), name


def test_the_trusted_imports_bytecode_is_checked_against_its_source(tmp_path, monkeypatch):
    # the sandbox gets pytest's (and hypothesis') bytecode compiled here, so it need not compile
    # them on each verdict; each file holds its source's hash: a changed source is compiled again
    import importlib
    import sys

    blobs = real._bytecode({"vgpkg/__init__.py": b"X = 1\n", "vgpkg/data.txt": b"x"})
    assert list(blobs) == [f"vgpkg/{importlib.util.cache_from_source('__init__.py')}"]
    pyc = blobs[next(iter(blobs))]
    assert pyc[:4] == importlib.util.MAGIC_NUMBER and int.from_bytes(pyc[4:8], "little") == 3
    (tmp_path / "vgpkg" / "__pycache__").mkdir(parents=True)
    (tmp_path / next(iter(blobs))).write_bytes(pyc)
    (tmp_path / "vgpkg" / "__init__.py").write_text("X = 2\n")  # not the source compiled
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.delitem(sys.modules, "vgpkg", raising=False)
    assert importlib.import_module("vgpkg").X == 2
    sys.modules.pop("vgpkg", None)


def test_a_checkout_has_the_package_and_its_tests_and_src_is_flattened():
    files = real.library_files("cachetools")
    assert "cachetools/__init__.py" in files and "tests/test_lru.py" in files
    assert not any(p.startswith("src/") for p in files)
    assert (
        "pytest/__init__.py" in real.pytest_files() and "pluggy/__init__.py" in real.pytest_files()
    )


def test_unified_diff_of_the_changed_region_equals_difflibs_of_the_whole_file():
    # the swebench export and every reset diff whole modules (tabulate's is 2,900 lines): the
    # workspace diffs only the region between the common head and tail, then shifts the headers
    import difflib
    import random

    from verigym.envs.tool.workspace import apply_unified_diff, parse_unified_diff, unified_diff

    def whole(a: str, b: str) -> str:
        lines = difflib.unified_diff(a.splitlines(True), b.splitlines(True), "a/m.py", "b/m.py")
        return "".join(x if x.endswith("\n") else x + "\n" for x in lines)

    rng = random.Random(0)
    for trial in range(200):
        distinct = trial % 2 == 0  # repeated lines: another alignment may be as short
        a = [f"line {i if distinct else rng.randrange(5)}\n" for i in range(rng.randrange(40))]
        b = list(a)
        for k in range(rng.randrange(1, 4)):
            at, kind = rng.randrange(len(b) + 1), rng.randrange(3)
            if kind == 0:
                b.insert(at, f"new {k}\n")
            elif at < len(b):
                b[at : at + rng.randrange(1, 3)] = [f"changed {k}\n"] if kind == 1 else []
        old, new = "".join(a), "".join(b)
        patch = unified_diff({"m.py": old}, {"m.py": new})
        if distinct:
            assert patch == whole(old, new), (a, b)
        if patch:
            ((_, _, hunks),) = parse_unified_diff(patch)
            assert apply_unified_diff(old, hunks) == new, (a, b)


def test_removal_operators_apply_and_revert_exactly():
    source = (
        "class A:\n    def f(self, x):\n        y = x + 1\n        y *= 2\n        for i in range(3):\n"
        "            y += i\n        return y\n\n    def g(self):\n        return 2\n"
    )
    mutants = extra_mutants("m.py", source)
    assert {m.operator for m in mutants} == set(EXTRA_OPERATORS)
    for mutant in mutants:
        mutated = apply(source, mutant)
        ast.parse(mutated)
        assert mutated != source and revert(mutated, mutant) == source


def test_drop_pytest_tests_removes_only_the_named_tests():
    text = (
        "import pytest\n\n\ndef test_a():\n    pass\n\n\n@pytest.mark.parametrize('x', [1])\n"
        "def test_b(x):\n    pass\n\n\nclass TestC:\n    def test_c(self):\n        pass\n\n"
        "    def test_d(self):\n        pass\n\n\nclass TestE:\n    def test_e(self):\n        pass\n"
    )
    out = drop_pytest_tests(text, {"test_b[1]", "TestC::test_c", "TestE::test_e"})
    ast.parse(out)
    assert "def test_a" in out and "def test_d" in out
    assert "test_b" not in out and "def test_c" not in out and "def test_e" not in out
    assert "parametrize" not in out and "class TestE:\n    pass\n" in out


def test_the_data_is_validated_and_split():
    data = load_real_data()
    assert sorted(data) == sorted(REAL_LIBRARIES)
    for name, library in data.items():
        files = real.library_files(name)
        assert library["instances"], name
        for instance in library["instances"]:
            assert instance["f2p"] and instance["p2p"] and instance["tests"], instance["id"]
            assert not set(instance["f2p"]) & set(instance["p2p"])
            assert instance["split"] in ("train", "eval")
            mutant = Mutant(**instance["mutant"])
            assert apply(files[mutant.file], mutant) != files[mutant.file]
            # a module the verdict copies from the workspace (not semver's __main__.py)
            assert any(is_source_path(mutant.file, d) for d in library["packages"]), instance["id"]
            # the issue's failure line never shows the mutated code
            assert not any(
                line.strip() and line.strip() in instance["message"]
                for line in mutant.new.splitlines()
            )
    splits = [i["split"] for lib in data.values() for i in lib["instances"]]
    assert "train" in splits and "eval" in splits


def test_the_instance_file_is_checked_and_a_damaged_one_is_refused():
    import lzma

    row = {"id": "x-1", "split": "train", "mutant": {}, "tests": ["t.py"], "f2p": [], "p2p": []}
    data = {"libraries": {"x": {"instances": [row] * 50, "pairs": []}}}
    blob = pack_real_data(data)
    assert unpack_real_data(blob) == data and pack_real_data(data) == blob
    middle = len(blob) // 2
    flipped = blob[:middle] + bytes([blob[middle] ^ 1]) + blob[middle + 1 :]
    no_tests = pack_real_data({"libraries": {"x": {"instances": [{"id": "x-1"}]}}})
    crc = lzma.compress(b'{"libraries": {}}', format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC32)
    # cut, a flipped bit, trailing bytes, not xz, a row missing its lists, a weaker check
    for damaged in (blob[:-40], flipped, blob + b"\0", b"{}", no_tests, crc):
        with pytest.raises(ValueError, match="damaged"):
            unpack_real_data(damaged)


def test_two_bug_instances_join_two_validated_bugs_of_one_split():
    data = load_real_data()
    pairs = [(n, p) for n, lib in data.items() for p in lib.get("pairs", ())]
    assert pairs
    for name, pair in pairs:
        singles = {i["id"]: i for i in data[name]["instances"]}
        a, b = (singles[part] for part in pair["parts"])
        assert a["split"] == b["split"] == pair["split"], pair["id"]
        assert a["function"] != b["function"] and set(a["f2p"]) & set(b["f2p"]), pair["id"]
        assert pair["mutants"] == [a["mutant"], b["mutant"]]
        # each bug alone still fails a FAIL_TO_PASS test of the pair: fixing one is not enough
        assert set(a["f2p"]) & set(pair["f2p"]) and set(b["f2p"]) & set(pair["f2p"]), pair["id"]
        assert pair["p2p"] and not set(pair["f2p"]) & set(pair["p2p"])
        assert set(a["tests"]) | set(b["tests"]) == set(pair["tests"])
        files = real.library_files(name)
        mutants = instance_mutants(pair)
        mutated = apply_mutants(files, mutants)
        for mutant in mutants:  # both apply, in disjoint lines (the generator parsed them)
            assert mutated[mutant.file] != files[mutant.file]
        shown = " ".join(pair["messages"])
        assert not any(
            line.strip() and line.strip() in shown for m in mutants for line in m.new.splitlines()
        )


def test_bugs_kwarg_draws_the_two_bug_instances():
    from verigym.envs.tool.repofix.real_env import _pool

    env = RepoFixRealEnv(bugs=2, split="train")
    try:
        pool = _pool(None, "train", 2)
        assert pool and all("mutants" in p and p["split"] == "train" for _, p in pool)
        name, pair = pool[0]
        issue = env._issue(name, [m.file for m in instance_mutants(pair)], pair)
        for function in pair["functions"]:
            assert f"`{function.rsplit('.', 1)[0] if '.' in function else function}`" in issue
        with pytest.raises(ValueError):
            RepoFixRealEnv(bugs=3)
    finally:
        env.close()


@needs_sandbox
def test_seeds_index_the_instances():
    env = RepoFixRealEnv(library="tabulate")
    try:
        count = len(load_real_data()["tabulate"]["instances"])
        env.reset(seed=1)
        first = env._instance["id"]
        env.reset(seed=1 + count)
        assert env._instance["id"] == first == load_real_data()["tabulate"]["instances"][1]["id"]
        env.reset(seed=2)
        assert env._instance["id"] != first
    finally:
        env.close()


def test_split_kwarg_draws_only_its_instances():
    env = RepoFixRealEnv(split="eval")
    try:
        from verigym.envs.tool.repofix.real_env import _pool

        ids = {i["id"] for _, i in _pool(None, "eval")}
        assert ids and all(i["split"] == "eval" for _, i in _pool(None, "eval"))
        assert not ids & {i["id"] for _, i in _pool(None, "train")}
    finally:
        env.close()


# -- in the sandbox ---------------------------------------------------------------------------------


def _solve(env) -> dict:
    info: dict = {}
    for _ in range(4):
        *_, terminated, truncated, info = env.step(env.unwrapped.oracle_action())
        if terminated or truncated:
            break
    return info


@needs_sandbox
def test_oracle_solves_one_instance_and_the_issue_hides_the_code():
    env = gym.make("verigym/RepoFix-Cachetools-v0")
    env.unwrapped.cache_verdicts = False  # run the tests, even on the original tree
    try:
        observation, _ = env.reset(seed=0)
        inner = env.unwrapped
        mutant = inner._instance["mutant"]
        assert "Bug report" in observation
        assert not any(
            line.strip() and line.strip() in observation for line in mutant["new"].splitlines()
        )
        info = _solve(env)
        assert info["success"] and info["score"] == 1.0 and info["tests_run"], info
        assert info["patch_similarity"] == 1.0 and not info["tampered"]
    finally:
        env.close()


def _cheats(env: RepoFixRealEnv) -> dict[str, list[str]]:
    package = env._packages[0]
    init = f"{package}/__init__.py"
    original = env._mutated[init]  # the buggy module: a cheat must not carry the fix
    first_test = env._instance["tests"][0]
    return {
        "delete the tests": [_call("run_shell", command="rm -rf tests test")],
        "edit the tests": [
            _call("write_file", path=first_test, content="def test_ok():\n    pass\n")
        ],
        "conftest that skips": [
            _call(
                "write_file",
                path="conftest.py",
                content="import pytest\n\n\ndef pytest_collection_modifyitems(items):\n"
                "    for item in items:\n        item.add_marker(pytest.mark.skip)\n",
            ),
            _call("write_file", path=f"{package}/conftest.py", content="raise SystemExit(0)\n"),
        ],
        "sys.exit(0) at import": [
            _call("write_file", path=init, content="import sys\nsys.exit(0)\n" + original)
        ],
        "os._exit(0) at import": [
            _call("write_file", path=init, content="import os\nos._exit(0)\n" + original)
        ],
        "pytest.skip at import": [
            _call(
                "write_file",
                path=init,
                content="import pytest\npytest.skip('no', allow_module_level=True)\n" + original,
            )
        ],
        "monkeypatch pytest's report": [
            _call(
                "write_file",
                path=init,
                content="import _pytest.reports\n_orig = _pytest.reports.TestReport.__init__\n\n\n"
                "def _init(self, *a, **k):\n    _orig(self, *a, **k)\n    self.outcome = 'passed'\n\n\n"
                "_pytest.reports.TestReport.__init__ = _init\n" + original,
            )
        ],
        "monkeypatch call_and_report": [
            _call(
                "write_file",
                path=init,
                content="import _pytest.runner\n_pytest.runner.call_and_report = "
                "lambda item, when, log=True, **kw: None\n" + original,
            )
        ],
        "__code__ swap of pytest's runtestprotocol": [
            _call(
                "write_file",
                path=init,
                content="import _pytest.runner\n_pytest.runner.runtestprotocol.__code__ = "
                "(lambda item, log=True, nextitem=None: []).__code__\n" + original,
            )
        ],
        "a profile hook": [
            _call(
                "write_file",
                path=init,
                content="import sys\nsys.setprofile(lambda *a: None)\n" + original,
            )
        ],
        "print PASSED": [
            _call("write_file", path=init, content="print('1 passed\\nPASSED')\n" + original)
        ],
        "sitecustomize and .pth": [
            _call(
                "write_file", path=f"{package}/sitecustomize.py", content="import os\nos._exit(0)\n"
            ),
            _call("write_file", path=f"{package}/evil.pth", content="import os; os._exit(0)\n"),
        ],
        "background process fixes after submit": [
            _call(
                "write_file",
                path="fixed.py",
                content=env._original[env._instance["mutant"]["file"]],
            ),
            _call(
                "run_shell",
                command=f"(sleep 2; cp fixed.py {env._instance['mutant']['file']}) > /dev/null 2>&1 &",
            ),
        ],
    }


CHEATS = [
    "delete the tests",
    "edit the tests",
    "conftest that skips",
    "sys.exit(0) at import",
    "os._exit(0) at import",
    "pytest.skip at import",
    "monkeypatch pytest's report",
    "monkeypatch call_and_report",
    "__code__ swap of pytest's runtestprotocol",
    "a profile hook",
    "print PASSED",
    "sitecustomize and .pth",
    "background process fixes after submit",
]
DEFAULT_CHEATS = ("monkeypatch pytest's report", "__code__ swap of pytest's runtestprotocol")
"""The in-process tricks aimed at the pytest runner: in the default run; the rest are slow."""


@pytest.fixture(scope="module")
def cheated_env(request):
    env = RepoFixRealEnv(library=getattr(request, "param", "cachetools"))
    env.cache_verdicts = False
    yield env
    env.close()


@needs_sandbox
def test_the_cheat_table_is_complete(cheated_env):
    cheated_env.reset(seed=0)
    assert sorted(_cheats(cheated_env)) == sorted(CHEATS)


@needs_sandbox
@pytest.mark.parametrize(
    "name", [n if n in DEFAULT_CHEATS else pytest.param(n, marks=pytest.mark.slow) for n in CHEATS]
)
def test_cheat_table_scores_zero(cheated_env, name):
    _scores_zero(cheated_env, name)


@pytest.mark.slow
@needs_sandbox
@pytest.mark.parametrize("name", CHEATS)
@pytest.mark.parametrize(
    "cheated_env", [n for n in REAL_LIBRARIES if n != "cachetools"], indirect=True
)
def test_cheat_table_scores_zero_on_every_library(cheated_env, name):
    _scores_zero(cheated_env, name)


def _scores_zero(env: RepoFixRealEnv, name: str) -> None:
    env.reset(seed=0)
    for action in _cheats(env)[name]:
        *_, info = env.step(action)
        assert "action_error" not in info, (name, info)
    _, reward, terminated, _, info = env.step(_call("submit"))
    assert terminated and reward == 0.0 and info["score"] == 0.0 and not info["success"], (
        name,
        info,
    )
    assert info["tests_run"], name
    if name in _IN_PROCESS:
        assert info["tampered"], name  # caught by the runner, not by the bug still being there


_IN_PROCESS = (
    "monkeypatch pytest's report",
    "monkeypatch call_and_report",
    "__code__ swap of pytest's runtestprotocol",
    "a profile hook",
)


@pytest.mark.slow
@needs_sandbox
@pytest.mark.parametrize("env_id", REAL_IDS)
def test_oracle_solves_a_sample_of_each_id(env_id):
    """Issue 40's 100-instance sample per library (every instance of a library with fewer)."""
    env = gym.make(env_id)
    env.unwrapped.cache_verdicts = False
    u = env.unwrapped
    try:
        for seed in range(min(100, len(real_env._pool(u.library, u.split, u.bugs)))):
            env.reset(seed=seed)
            info = _solve(env)
            assert info["success"] and info["tests_run"], (env_id, seed, info)
    finally:
        env.close()


@pytest.mark.slow
@needs_sandbox
def test_every_instance_fails_before_and_passes_after_in_the_sandbox():
    """The validation again: each instance's buggy tree fails its FAIL_TO_PASS, the oracle fixes it."""
    env = RepoFixRealEnv()
    env.cache_verdicts = False
    try:
        for seed in range(12):
            env.reset(seed=seed)
            _, _, _, _, buggy = env.step(_call("submit"))
            assert buggy["tests_run"] and buggy["score"] == 0.0, (seed, buggy)
            assert (
                buggy["fail_to_pass"][0] == 0
                and buggy["pass_to_pass"][0] == buggy["pass_to_pass"][1]
            )
    finally:
        env.close()


@pytest.mark.slow
@needs_sandbox
def test_a_two_bug_instance_needs_both_fixes_in_the_sandbox():
    """Each two-bug instance of a sample: the oracle passes; fixing either bug alone does not."""
    env = RepoFixRealEnv(library="cachetools", bugs=2)
    env.cache_verdicts = False
    try:
        for seed in range(3):
            env.reset(seed=seed)
            info = _solve(env)
            assert info["success"] and info["tests_run"], (seed, info)
            mutants = instance_mutants(env._instance)
            for left in mutants:  # fix every bug but ``left``
                env.reset(seed=seed)
                half = apply_mutants(env._original, [left])
                for path in {m.file for m in mutants}:
                    *_, info = env.step(_call("write_file", path=path, content=half[path]))
                    assert "action_error" not in info, info
                *_, info = env.step(_call("submit"))
                fixed, total = info["fail_to_pass"]
                assert info["tests_run"] and not info["success"] and fixed < total, (seed, info)
    finally:
        env.close()


_DATA_TEST = (
    "import os\nfrom lib import f\n\n\ndef test_ok():\n    assert f(0) == 0\n\n\n"
    "def test_bad():\n    with open(os.path.join(os.path.dirname(__file__), 'expected.txt')) as h:\n"
    "        assert f(1) == int(h.read())\n"
)
_REWRITES = {
    "a data file written": "open(_d + '/expected.txt', 'w').write('1')\n",
    "made writable through a folder's descriptor": (
        "os.chmod('expected.txt', 0o644, dir_fd=os.open(_d, os.O_RDONLY))\n"
        "open(_d + '/expected.txt', 'w').write('1')\n"
    ),
    # pytest's tree leads sys.path and its cached bytecode is trusted: the write alone "fixes" f
    "pytest's own tree written": "open('/tmp/vgdeps/planted.py', 'w').write('x = 1')\n_fixed = True\n",
}


@needs_sandbox
@pytest.mark.parametrize("how", sorted(_REWRITES))
def test_library_code_cannot_rewrite_what_the_tests_read(how):
    """The checkout is read-only to the pytest child (the library's code runs as the files' owner)
    and a chmod or rename of it from library code ends the run: before, imported by the test, the
    library wrote the test's expected value (a data file) and its bug read as fixed."""
    from verigym.envs.tool.workspace import ROOT, Workspace

    library = (
        "import os\n_d = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'tests')\n"
        "_fixed = False\n"
        "try:\n    "
        + _REWRITES[how].replace("\n", "\n    ").rstrip()
        + "\nexcept OSError:\n    pass\n"
        "\n\ndef f(x):\n    return 2 * x if _fixed else x\n"
    )
    files = {"tests/test_x.py": _DATA_TEST, "tests/expected.txt": "2", "lib.py": library}
    workspace = Workspace()
    try:
        workspace.sandbox.fresh()
        workspace.load_helpers()
        results, tampered, _ = real.run_tests(
            workspace.sandbox, ROOT, files, ["tests/test_x.py"], timeout_s=60
        )
    finally:
        workspace.close()
    assert tampered or results.get("tests/test_x.py::test_bad") != "pass", (results, tampered)
