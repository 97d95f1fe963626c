"""RepoFix-Real's pytest runner against library code that attacks the report (issue 40).

Each case is a tiny library whose one test (``test_bad``) fails on the bug; the library's code, at
import time or when the test calls it, tries to make that test read as passed by forging the report:
finding the nonce or the writer (argv, module globals, pytest's plugin manager, code constants,
frames, a signal handler, the garbage collector), registering a hook, patching pytest's reporting,
ending the process early or writing to the report pipe. Every case must leave ``test_bad`` not
passing or the run marked tampered (the verdict scores both 0). The runner runs here as it does in
the sandbox (a ``python -I -S`` child of the calling process), without bubblewrap: the code is ours.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.envs.tool.real_runner import load_runner, run_tree, write_deps

BAD, OK = "tests/test_x.py::test_bad", "tests/test_x.py::test_ok"
TEST = (
    "from lib import f\n\n\ndef test_ok():\n    assert f(0) == 0\n\n\n"
    "def test_bad():\n    assert f(1) == 2\n"
)
BUGGY = "def f(x):\n    {call}\n    return x\n"
"""``f`` is wrong (the identity, where doubling is expected); ``{call}`` is the attack at call time."""

FORGE = '''
import os, re, stat, sys

def _fds():
    for fd in range(3, 256):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                yield fd
        except OSError:
            pass

def _forge(nonce):
    """Write a report in which both tests passed, in the runner's format, and leave."""
    if sys.argv[1:2] and sys.argv[1].isdigit():  # the runner before issue 40's fix
        report = (
            f"{nonce} pass tests/test_x.py::test_ok\\n{nonce} pass tests/test_x.py::test_bad\\n"
            f"{nonce} end \\n"
        )
    else:
        report = (
            f"{nonce} 0 pass tests/test_x.py::test_ok\\t\\n"
            f"{nonce} 1 pass tests/test_x.py::test_bad\\t\\n{nonce} 2 end 2\\n"
        )
    for fd in _fds():
        try:
            os.write(fd, report.encode())
        except OSError:
            pass
    os._exit(0)

_HEX = re.compile(r"^[0-9a-f]{32}$")

def _scan(value, depth=0, seen=None):
    """A 32-hex-digit string (the nonce) anywhere below ``value``, or None."""
    seen = set() if seen is None else seen
    if id(value) in seen or depth > 4 or len(seen) > 20000:
        return None
    seen.add(id(value))
    if isinstance(value, (str, bytes)):
        text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
        for word in re.split(r"[^0-9a-f]+", text):
            if _HEX.match(word):
                return word
        return None
    children = []
    if isinstance(value, dict):
        children = list(value.values())
    elif isinstance(value, (list, tuple, set, frozenset)):
        children = list(value)
    elif callable(value) or hasattr(value, "__dict__"):
        for name in ("__globals__", "__closure__", "__defaults__", "__kwdefaults__", "__self__",
                     "__func__", "__dict__", "cell_contents", "__code__", "co_consts",
                     "f_locals", "f_globals", "f_code", "f_back"):
            try:
                children.append(getattr(value, name))
            except Exception:
                pass
    for child in children:
        found = _scan(child, depth + 1, seen)
        if found:
            return found
    return None
'''

_FROM_MEMORY = """
def _proc(name):
    return {open}

def _nonces():
    found = set()
    with open(_proc("maps")) as maps:
        regions = [line.split() for line in maps]
    with open(_proc("mem"), "rb", buffering=0) as mem:
        for fields in regions:
            if fields[1].startswith("r") and len(fields) < 6:  # anonymous: the heap, arenas
                start, end = (int(x, 16) for x in fields[0].split("-"))
                for at in range(start, end, 1 << 20):
                    try:
                        mem.seek(at)
                        data = mem.read(min(1 << 20, end - at) + 40)
                    except (OSError, OverflowError, ValueError):
                        continue
                    found.update(re.findall(rb"(?<![0-9a-f])([0-9a-f]{{32}}) \\x00", data))
    return found

_found = _nonces()
if len(_found) == 1:  # the report's prefix, a bytes constant of the runner's code
    _forge(_found.pop().decode())
"""
"""Library code that finds the nonce in its own memory (``/proc/self/mem``) by a path the audit
hook's ``/proc`` check did not see; ``{open}`` opens ``/proc/self/<name>``."""

ATTACKS = {
    "the nonce in argv": FORGE
    + "found = _scan(list(sys.argv) + list(getattr(sys, 'orig_argv', [])))\n"
    "if found:\n    _forge(found)\n",
    "the nonce in a module's globals": FORGE + "for _m in list(sys.modules.values()):\n"
    "    found = _scan(getattr(_m, '__dict__', {}))\n"
    "    if found:\n        _forge(found)\n",
    "the nonce behind pytest's plugin manager": FORGE
    + "cfg = next(f.config for f in sys.meta_path if getattr(f, 'config', None) is not None)\n"
    "for plugin in cfg.pluginmanager.get_plugins():\n"
    "    if str(getattr(plugin, '__name__', '')).startswith(('_pytest', 'pytest', 'pluggy')):\n"
    "        continue\n"
    "    names = list(getattr(plugin, '__dict__', {})) + list(vars(type(plugin)))\n"
    "    for name in names:\n"
    "        attr = getattr(plugin, name, None)\n"
    "        func = getattr(attr, '__func__', attr)\n"
    "        if not callable(func):\n            continue\n"
    "        places = [getattr(func, '__defaults__', None), getattr(func, '__closure__', None)]\n"
    "        for value in (getattr(func, '__globals__', None) or {}).values():\n"
    "            places.append(value)\n"
    "            places.append(getattr(value, '__defaults__', None))\n"
    "            code = getattr(value, '__code__', None)\n"
    "            places.append(getattr(code, 'co_consts', None))\n"
    "        found = _scan(places, 2)\n"
    "        if found:\n            _forge(found)\n",
    "the nonce from frames": FORGE + "def _walk(frame):\n"
    "    while frame is not None:\n"
    "        found = _scan(frame.f_globals, 2) or _scan(frame.f_locals, 2) "
    "or _scan(frame.f_code.co_consts, 2)\n"
    "        if found:\n            _forge(found)\n"
    "        frame = frame.f_back\n"
    "try:\n    _walk(sys._getframe())\nexcept (ValueError, RuntimeError):\n    pass\n"
    "try:\n    raise KeyError\nexcept KeyError as e:\n"
    "    try:\n        _walk(e.__traceback__.tb_frame)\n    except RuntimeError:\n        pass\n",
    "the nonce from a signal handler's frame": FORGE + "import signal\n"
    "def _handler(signum, frame):\n"
    "    while frame is not None:\n"
    "        found = _scan(frame.f_globals, 2) or _scan(frame.f_locals, 2) "
    "or _scan(frame.f_code.co_consts, 2)\n"
    "        if found:\n            _forge(found)\n"
    "        frame = frame.f_back\n"
    "signal.signal(signal.SIGUSR1, _handler)\n"
    "signal.raise_signal(signal.SIGUSR1)\n",
    "the nonce from the garbage collector": FORGE + "import gc\nfor _o in gc.get_objects():\n"
    "    found = _scan(_o, 3)\n    if found:\n        _forge(found)\n",
    "a hook wrapper that passes every report": "import sys, pytest\n"
    "cfg = next(f.config for f in sys.meta_path if getattr(f, 'config', None) is not None)\n"
    "class _P:\n"
    "    @pytest.hookimpl(wrapper=True)\n"
    "    def pytest_runtest_makereport(self, item, call):\n"
    "        report = yield\n"
    "        report.outcome, report.longrepr = 'passed', None\n"
    "        return report\n"
    "cfg.pluginmanager.register(_P())\n",
    "TestReport patched": "import _pytest.reports\n"
    "_init = _pytest.reports.TestReport.__init__\n"
    "def _passed(self, *a, **k):\n    _init(self, *a, **k)\n"
    "    self.outcome, self.longrepr = 'passed', None\n"
    "_pytest.reports.TestReport.__init__ = _passed\n",
    "runtestprotocol patched": "import _pytest.runner\n"
    "_run = _pytest.runner.runtestprotocol\n"
    "def _passed(item, log=True, nextitem=None):\n"
    "    reports = _run(item, log=log, nextitem=nextitem)\n"
    "    for r in reports:\n        r.outcome, r.longrepr = 'passed', None\n"
    "    return reports\n"
    "_pytest.runner.runtestprotocol = _passed\n",
    "the nonce read from its own memory through //proc": FORGE
    + _FROM_MEMORY.format(open='os.open("//proc/self/" + name, os.O_RDONLY)'),
    "the nonce read from its own memory through the root's descriptor": FORGE
    + _FROM_MEMORY.format(open='os.open("proc/self/" + name, os.O_RDONLY, dir_fd=os.open("/", 0))'),
    "os._exit(0) when called": {"call": "import os; os._exit(0)"},
    "a report written to every pipe": FORGE + "_forge('0' * 32)\n",
}
DEFAULT = (
    "the nonce in argv",
    "the nonce read from its own memory through //proc",
    "the nonce read from its own memory through the root's descriptor",
    "the nonce from frames",
    "a hook wrapper that passes every report",
)
"""The cases in the default run (one child each, about 2 s); the others are slow."""


@pytest.fixture(scope="module")
def deps(tmp_path_factory) -> str:
    return write_deps(tmp_path_factory.mktemp("vgdeps"))


def _run(tmp_path: Path, deps: str, library: str) -> dict:
    return run_tree(tmp_path, deps, {"tests/test_x.py": TEST, "lib.py": library})


def test_an_honest_run_reports_each_test_with_its_failure(tmp_path, deps):
    out = _run(tmp_path, deps, BUGGY.format(call="pass"))
    assert out == {
        "results": {OK: "pass", BAD: "fail"},
        "messages": {BAD: "assert 1 == 2  +  where 1 = f(1)"},
        "tampered": False,
    }


@pytest.mark.parametrize(
    "name", [n if n in DEFAULT else pytest.param(n, marks=pytest.mark.slow) for n in ATTACKS]
)
def test_library_code_cannot_forge_a_pass(tmp_path, deps, name):
    attack = ATTACKS[name]
    if isinstance(attack, dict):
        library = BUGGY.format(call=attack["call"])
    else:  # at import time, then once more when the test calls the library
        body = attack.replace("\n", "\n    ")
        library = attack + "\n\ndef f(x):\n    " + body + "\n    return x\n"
    out = _run(tmp_path, deps, library)
    assert out["tampered"] or out["results"].get(BAD) != "pass", (name, out)


def test_a_link_into_proc_is_followed_by_the_check(tmp_path, deps):
    """A symbolic link on the machine that leads into ``/proc`` (none is shipped in the sandbox's
    ``/usr``; a host's may hold one) reads as ``/proc``: the check resolves links."""
    link = tmp_path / "tree" / "lnk"
    link.parent.mkdir()
    link.symlink_to("/proc/self")
    attack = FORGE + _FROM_MEMORY.format(open=f"os.open({str(link)!r} + '/' + name, os.O_RDONLY)")
    library = attack + "\n\ndef f(x):\n    return x\n"
    out = run_tree(tmp_path / "tree", deps, {"tests/test_x.py": TEST, "lib.py": library})
    assert out["tampered"] or out["results"].get(BAD) != "pass", out


def test_library_code_cannot_rewrite_a_test_module_before_it_is_collected(tmp_path, deps):
    """The test files are on disk for pytest: imported by the first test module, the library
    rewrote the next one (``assert f(1) == 2`` -> ``assert True``) and its bug read as fixed."""
    rewrite = (
        "import os\n"
        "_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'tests', 'test_x.py')\n"
        "with open(_path) as _h:\n    _text = _h.read()\n"
        "with open(_path, 'w') as _h:\n    _h.write(_text.replace('assert f(1) == 2', 'assert True'))\n"
    )
    files = {
        "tests/test_a.py": "from lib import f\n\n\ndef test_zero():\n    assert f(0) == 0\n",
        "tests/test_x.py": TEST,
        "lib.py": rewrite + BUGGY.format(call="pass"),
    }
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    out = load_runner().run_pytest(str(tmp_path), deps, ["tests/test_a.py", "tests/test_x.py"], 60)
    assert out["tampered"] or out["results"].get(BAD) != "pass", out


def test_the_report_protocol_refuses_gaps_repeats_and_a_missing_end():
    runner = load_runner()
    nonce = "ab" * 16

    def parse(*lines, status=0):
        return runner._parse("".join(f"{nonce} {line}\n" for line in lines).encode(), nonce, status)

    good = parse(f"0 pass {OK}\t", f"1 fail {BAD}\tboom", "2 end 2")
    assert good == {
        "results": {OK: "pass", BAD: "fail"},
        "messages": {BAD: "boom"},
        "tampered": False,
    }
    assert parse(f"0 pass {OK}\t", f"2 pass {BAD}\t", "2 end 2")["tampered"]  # a gap
    assert parse(f"0 fail {BAD}\t", f"1 pass {BAD}\t", "2 end 2")["tampered"]  # a repeat
    assert parse(f"0 pass {OK}\t")["tampered"]  # no end line
    assert parse(f"0 pass {OK}\t", "1 end 1", status=1)["tampered"]  # a failed exit
    assert parse(f"0 pass {OK}\t", "1 end 2")["tampered"]  # a wrong count
    forged = runner._parse(f"{'0' * 32} 0 pass {BAD}\t\n".encode(), nonce, 0)
    assert forged["tampered"]


SUBTESTS = (
    "import unittest\n\nfrom lib import f\n\n\nclass T(unittest.TestCase):\n"
    "    def test_sub(self):\n        for x in (0, 1):\n"
    "            with self.subTest(x=x):\n                self.assertEqual(f(x), 2 * x)\n\n\n"
    "def test_fixture(subtests):\n    for x in (0, 1):\n"
    "        with subtests.test(x=x):\n            assert f(x) == 2 * x\n\n\n"
    "def test_ok():\n    assert f(0) == 0\n"
)
"""A unittest ``subTest`` and pytest's ``subtests`` fixture: ``f(1)`` fails a subtest in each."""


def _run_subtests(tmp_path: Path, deps: str, library: str) -> dict:
    return run_tree(tmp_path, deps, {"tests/test_x.py": SUBTESTS, "lib.py": library})


def test_a_failed_subtest_fails_its_test(tmp_path, deps):
    # pytest logs a subtest's report apart from the test's own (the call phase passed): before
    # the runner's log hook a test whose subtests failed read as passed
    out = _run_subtests(tmp_path, deps, BUGGY.format(call="pass"))
    assert not out["tampered"], out
    assert out["results"] == {
        "tests/test_x.py::T::test_sub": "fail",
        "tests/test_x.py::test_fixture": "fail",
        "tests/test_x.py::test_ok": "pass",
    }
    assert "a subtest failed" in out["messages"]["tests/test_x.py::T::test_sub"]


@pytest.mark.slow
def test_passing_subtests_pass(tmp_path, deps):
    out = _run_subtests(tmp_path, deps, "def f(x):\n    return 2 * x\n")
    assert not out["tampered"] and set(out["results"].values()) == {"pass"}, out


@pytest.mark.slow  # one child more (~2 s): the default run has the subtest case's
def test_library_code_cannot_rebind_unittest_assertions(tmp_path, deps):
    # a TestCase-style suite (more-itertools', pyparsing's) asserts through unittest.TestCase's
    # methods: before the runner watched unittest.case, rebinding assertEqual passed every test
    test = (
        "import unittest\n\nfrom lib import f\n\n\nclass T(unittest.TestCase):\n"
        "    def test_bad(self):\n        self.assertEqual(f(1), 2)\n"
    )
    library = (
        "import unittest\n\nunittest.TestCase.maxDiff = None  # a plain value: allowed\n"
        "unittest.TestCase.assertEqual = lambda self, a, b, msg=None: None\n\n\n"
        "def f(x):\n    return x\n"
    )
    out = run_tree(tmp_path, deps, {"tests/test_x.py": test, "lib.py": library})
    assert out["tampered"] or out["results"].get("tests/test_x.py::T::test_bad") != "pass", out


def _run_with_conftest(tmp_path: Path, deps: str, library: str) -> dict:
    conftest = "import lib  # noqa: F401\n"
    files = {"tests/conftest.py": conftest, "tests/test_x.py": TEST, "lib.py": library}
    return run_tree(tmp_path, deps, files)


@pytest.mark.slow
def test_a_conftest_may_import_a_library_that_makes_a_named_tuple(tmp_path, deps):
    # click's conftest imports click before pytest's legacypath plugin binds its properties on
    # Config and Node; pyparsing makes a typing.NamedTuple, which writes __bases__: both read as
    # tampered before
    library = (
        "from typing import NamedTuple\n\n\nclass Version(NamedTuple):\n    major: int\n\n\n"
        + BUGGY.format(call="pass")
    )
    out = _run_with_conftest(tmp_path, deps, library)
    assert out == {
        "results": {OK: "pass", BAD: "fail"},
        "messages": {BAD: "assert 1 == 2  +  where 1 = f(1)"},
        "tampered": False,
    }


@pytest.mark.slow
def test_a_library_imported_by_a_conftest_cannot_rebind_pytest(tmp_path, deps):
    library = (
        "import _pytest.reports\n\n_pytest.reports.TestReport.passed = property(lambda self: True)\n"
        + BUGGY.format(call="pass")
    )
    out = _run_with_conftest(tmp_path, deps, library)
    assert out["tampered"], out
