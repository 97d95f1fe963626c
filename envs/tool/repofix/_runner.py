"""The test runner that runs inside the verdict sandbox (stdlib only; never imported by verigym).

Its source is sent to a fresh :class:`verigym.sandbox.PythonSandbox` and :func:`run_suite` is then
called there through ``PythonSandbox.call``, so the outcomes reach the parent as type-checked JSON,
never as printed text. The offline mutant scan (``scripts/gen_repofix_mutants.py``) runs the same
file as a script (``python -I -S _runner.py ROOT MODULE...``; JSON on stdout).

Defences, set up before any code of the repository is imported:

* ``assertEqual`` and its aliases compare with exact types, recursively through lists, tuples,
  dicts and sets (an object whose ``__eq__`` always answers True fails);
* the functions and classes that decide an outcome (``unittest.TestCase`` and ``TestResult``
  methods, the case/result/suite modules' dicts, ``builtins``) are fingerprinted; any change at the
  end of the run marks it ``tampered`` and the parent scores it 0;
* a test passes only when the runner's own result object saw ``addSuccess`` for it; skips,
  expected failures, unexpected successes, errors at import (``sys.exit`` included) are failures.
"""

import builtins
import json
import os
import re
import sys
import traceback
import types
import unittest
import unittest.case
import unittest.loader
import unittest.result
import unittest.suite

_EXACT = (type(None), bool, int, float, complex, str, bytes)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _strict_equal(a, b, depth=0):
    if depth > 50:
        return False
    if type(a) is not type(b):
        return False
    if type(a) in _EXACT:
        return a == b
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(_strict_equal(x, y, depth + 1) for x, y in zip(a, b))
    if type(a) is dict:
        if len(a) != len(b) or set(a) != set(b):
            return False
        return all(_strict_equal(a[k], b[k], depth + 1) for k in a)
    if type(a) in (set, frozenset):
        return a == b
    return a == b  # the repository's own types (both sides made by its code)


def _short(value):
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001
        text = "<unrepresentable>"
    text = _ADDRESS.sub("", text)  # "<X object at 0x7f...>" -> "<X object>": the same every run
    return text if len(text) <= 300 else text[:297] + "..."


def _strict_assert_equal(self, first, second, msg=None):
    if not _strict_equal(first, second):
        error = self.failureException(msg or f"{_short(first)} != {_short(second)}")
        error.vg_values = (_short(first), _short(second))
        raise error


def _namespace_ids(owner, parts, label):
    """(label, name, id) of every binding of a module or class dict, and of the classes in it."""
    for key, value in sorted(vars(owner).items(), key=lambda kv: kv[0]):
        parts.append((label, key, id(value)))
        if isinstance(value, type) and label.count(".") < 8:
            for inner_key, inner in sorted(vars(value).items(), key=lambda kv: kv[0]):
                parts.append((label + "." + key, inner_key, id(inner)))


def _fingerprint(modules=()):
    """Identities of everything that decides a test's outcome: unittest's modules and classes,
    builtins, the import and trace hooks, and the loaded test modules with their classes."""
    parts = []
    for module in (
        unittest,
        unittest.case,
        unittest.result,
        unittest.suite,
        unittest.loader,
        builtins,
    ):
        _namespace_ids(module, parts, module.__name__)
    for module in modules:
        _namespace_ids(module, parts, "test:" + module.__name__)
    parts.append(("sys", "meta_path", tuple(id(f) for f in sys.meta_path)))
    parts.append(("sys", "trace", id(sys.gettrace()), id(sys.getprofile())))
    return parts


unittest.TestCase.assertEqual = _strict_assert_equal
unittest.TestCase.assertEquals = _strict_assert_equal
_ORIGINAL = _fingerprint()
_ADD_SUCCESS = unittest.TestResult.addSuccess


def _test_ids(suite):
    out = []
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            out.extend(_test_ids(item))
        else:
            out.append(item)
    return out


def _failure_detail(test, error, root):
    """Where and how a test failed: the innermost line in a test file, the values compared."""
    exc_type, exc, tb = error
    frames = traceback.extract_tb(tb)
    inner = outer = None
    for frame in frames:
        if frame.filename.startswith(root + "/tests/"):
            outer = outer or frame
            inner = frame
    detail = {
        "kind": "assert" if isinstance(exc, AssertionError) else "error",
        "error": _ADDRESS.sub("", exc_type.__name__ + ": " + str(exc))[:300],
        "line": inner.lineno if inner else 0,
        "outer_line": outer.lineno if outer else 0,
        "file": os.path.relpath(inner.filename, root) if inner else "",
    }
    values = getattr(exc, "vg_values", None)
    if isinstance(values, tuple) and len(values) == 2:
        detail["got"], detail["expected"] = values
    return detail


def run_suite(root, modules, details=False):
    """Run the unittest modules ``modules`` (dotted names under ``root``) one test at a time.

    Returns ``{"results": {test id: "pass" | "fail"}, "tampered": bool, "details": {...}}``
    (``details`` only when asked for: the failing line and the compared values). Without
    ``details`` (the verdict) the test files are deleted once compiled, before any repository code
    runs, so that code cannot read the expected values from them.
    """
    outcomes = {}
    failures = {}

    class _Result(unittest.TestResult):
        def addSuccess(self, test):  # noqa: N802
            _ADD_SUCCESS(self, test)
            outcomes[test.id()] = "pass"

        def _fail(self, test, error):
            outcomes[test.id()] = "fail"
            if details and error is not None and test.id() not in failures:
                try:
                    failures[test.id()] = _failure_detail(test, error, root)
                except Exception:  # noqa: BLE001
                    pass

        def addFailure(self, test, err):  # noqa: N802
            self._fail(test, err)

        def addError(self, test, err):  # noqa: N802
            self._fail(test, err)

        def addSubTest(self, test, subtest, err):  # noqa: N802
            if err is not None:
                self._fail(test, err)

        def addSkip(self, test, reason):  # noqa: N802
            self._fail(test, None)

        def addExpectedFailure(self, test, err):  # noqa: N802
            self._fail(test, None)

        def addUnexpectedSuccess(self, test):  # noqa: N802
            self._fail(test, None)

    if root not in sys.path:
        sys.path.insert(0, root)
    os.chdir(root)
    # every test source is read and compiled before any code of the repository runs, and executed
    # into module objects made here: an import hook the repository installs cannot rewrite them
    compiled = {}
    for name in modules:
        path = os.path.join(root, *name.split(".")) + ".py"
        try:
            with open(path, encoding="utf-8") as handle:
                compiled[name] = compile(handle.read(), path, "exec")
        except BaseException as exc:  # noqa: BLE001
            compiled[name] = exc
    if not details:
        import shutil

        shutil.rmtree(os.path.join(root, "tests"), ignore_errors=True)
    package = types.ModuleType("tests")
    package.__path__ = [os.path.join(root, "tests")]
    package.__file__ = os.path.join(root, "tests", "__init__.py")
    sys.modules["tests"] = package
    loader = unittest.TestLoader()
    loaded = []
    suites = []
    for name in modules:
        code = compiled[name]
        module = types.ModuleType(name)
        module.__file__ = os.path.join(root, *name.split(".")) + ".py"
        module.__package__ = "tests"
        sys.modules[name] = module
        try:
            if isinstance(code, BaseException):
                raise code
            exec(code, module.__dict__)
            tests = _test_ids(loader.loadTestsFromModule(module))
        except BaseException as exc:  # noqa: BLE001 -- sys.exit at import included
            outcomes["import:" + name] = "fail"
            failures["import:" + name] = {
                "kind": "import",
                "error": type(exc).__name__ + ": " + str(exc)[:300],
            }
            continue
        loaded.append(module)
        suites.append(tests)
    before = _fingerprint(loaded)
    for tests in suites:
        for test in tests:
            result = _Result()
            outcomes[test.id()] = "fail"  # until addSuccess says otherwise
            try:
                test(result)
            except BaseException:  # noqa: BLE001
                outcomes[test.id()] = "fail"
            if result.failures or result.errors or result.skipped or result.unexpectedSuccesses:
                outcomes[test.id()] = "fail"
    tampered = _fingerprint() != _ORIGINAL or _fingerprint(loaded) != before
    return {"results": outcomes, "tampered": tampered, "details": failures if details else {}}


if __name__ == "__main__" and sys.argv[0].endswith("_runner.py"):
    _root, _modules = sys.argv[1], sys.argv[2:]
    _real_stdout = os.dup(1)
    _null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(_null, 1)
    os.dup2(_null, 2)
    _answer = run_suite(_root, _modules, details=True)
    os.write(_real_stdout, json.dumps(_answer).encode())
