"""Differential probes: run a test's code with its assertions recording values (stdlib only).

Its source is sent to a fresh :class:`verigym.sandbox.PythonSandbox` (the RepoFix verdict) and
:func:`_vg_run_probes` is called there through ``PythonSandbox.call``; the offline check generator
(:mod:`verigym.envs.tool.repofix.differential`) runs the same file as a script on trusted trees.
Never imported by verigym.

A probe is a test method (or a plain test function) of a test module whose source may carry edited
inputs. It runs with every ``assert*`` method and every ``assert`` statement replaced by a recorder:
the compared values are written down in a canonical text form (:func:`_vg_canon`: builtin values by
their repr with sets and dicts sorted, other objects by type name and attributes, memory addresses
never), ``assertRaises`` records which exception was raised and goes on. The probe's outcome is the
list of these texts joined; the parent compares its digest with the one the original code gave
offline, so nothing computed here is trusted beyond being a string.
"""

import ast
import json
import os
import signal
import sys
import types
import unittest

_MAX_TEXT = 20000
_MAX_DEPTH = 12
_MAX_ITEMS = 2000


def _vg_canon(value, depth=0, seen=None):
    """A canonical, address-free text of ``value`` (the same for equal values in every process)."""
    seen = set() if seen is None else seen
    kind = type(value)
    if depth > _MAX_DEPTH:
        return "<deep>"
    if value is None or kind in (bool, int, float, complex, str, bytes):
        return repr(value)
    if id(value) in seen:
        return "<cycle>"
    seen = seen | {id(value)}
    name = kind.__module__ + "." + kind.__qualname__
    if kind in (list, tuple):
        items = [_vg_canon(v, depth + 1, seen) for v in list(value)[:_MAX_ITEMS]]
        return ("[%s]" if kind is list else "(%s)") % ", ".join(items)
    if kind in (set, frozenset):
        items = sorted(_vg_canon(v, depth + 1, seen) for v in list(value)[:_MAX_ITEMS])
        return kind.__name__ + "{" + ", ".join(items) + "}"
    if kind is dict or isinstance(value, dict):
        items = sorted(
            _vg_canon(k, depth + 1, seen) + ": " + _vg_canon(v, depth + 1, seen)
            for k, v in list(value.items())[:_MAX_ITEMS]
        )
        return name + "{" + ", ".join(items) + "}"
    if isinstance(value, BaseException):
        return name + _vg_canon(tuple(value.args), depth + 1, seen)
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
        return "<" + getattr(value, "__qualname__", "?") + ">"
    if kind.__module__ in ("fractions", "decimal", "datetime", "uuid", "ipaddress", "pathlib"):
        return name + "(" + str(value) + ")"
    fields = []
    for base in (int, float, str, bytes, tuple, list, set, frozenset):
        if isinstance(value, base):  # a subclass of a builtin: its builtin value
            fields.append("=" + _vg_canon(base(value), depth + 1, seen))
            break
    state = getattr(value, "__dict__", None)
    if isinstance(state, dict):
        for key in sorted(k for k in state if isinstance(k, str)):
            fields.append(key + "=" + _vg_canon(state[key], depth + 1, seen))
    for klass in kind.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for slot in slots if isinstance(slots, (tuple, list)) else ():
            if isinstance(slot, str) and slot not in ("__dict__", "__weakref__"):
                try:
                    fields.append(slot + "=" + _vg_canon(getattr(value, slot), depth + 1, seen))
                except AttributeError:
                    fields.append(slot + "=<unset>")
    if not fields and hasattr(kind, "__iter__") and hasattr(kind, "__next__"):
        return name + "<iterator>"
    return name + "(" + ", ".join(fields) + ")"


class _VgTimeout(BaseException):
    pass


class _VgRecorder:
    def __init__(self):
        self.out = []
        self.size = 0

    def add(self, text):
        if self.size > _MAX_TEXT:
            return
        text = str(text)
        self.size += len(text) + 1
        self.out.append(text if self.size <= _MAX_TEXT else "<cut>")

    def values(self, *values):
        for value in values:
            try:
                self.add(_vg_canon(value))
            except _VgTimeout:
                raise
            except BaseException as exc:  # noqa: BLE001 -- an unrepresentable value is an outcome
                self.add("<canon:" + type(exc).__name__ + ">")


class _VgRaises:
    """``assertRaises`` as a context manager: records what was raised and swallows it."""

    def __init__(self, recorder):
        self.recorder = recorder
        self.exception = None

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if kind is not None and issubclass(kind, _VgTimeout):
            return False
        if kind is None:
            self.recorder.add("raised:nothing")
            return False
        self.exception = exc
        self.recorder.add("raised:" + kind.__name__)
        return issubclass(kind, Exception)


class _VgAsserts(ast.NodeTransformer):
    """``assert a <op> b`` -> ``_vg_record(a, b)``; ``assert x`` -> ``_vg_record(x)``."""

    def visit_Assert(self, node):  # noqa: N802
        test = node.test
        args = [test.left, *test.comparators] if isinstance(test, ast.Compare) else [test]
        call = ast.Call(ast.Name("_vg_record", ast.Load()), args, [])
        return ast.copy_location(ast.Expr(call), node)


def _vg_patch_case(case, recorder, compare=False):
    """Replace the assertion methods of one TestCase instance by recorders (``compare``: the
    outcome of ``first == second`` too, for a bug in the repository's own ``__eq__``)."""

    def record(*args, **kwargs):
        kwargs.pop("msg", None)
        recorder.values(*args, *[kwargs[k] for k in sorted(kwargs)])
        if compare and len(args) >= 2:
            try:
                recorder.add("eq:" + repr(bool(args[0] == args[1])))
            except _VgTimeout:
                raise
            except BaseException as exc:  # noqa: BLE001
                recorder.add("eq:" + type(exc).__name__)

    def raises(expected=None, *args, **kwargs):
        manager = _VgRaises(recorder)
        if args and callable(args[0]):
            function, rest = args[0], args[1:]
            with manager:
                function(*rest, **kwargs)
            return None
        return manager

    def raises_regex(expected=None, pattern=None, *args, **kwargs):
        return raises(expected, *args, **kwargs)

    def fail(msg=None):
        recorder.add("fail")

    for name in dir(unittest.TestCase):
        if name.startswith("assert") and callable(getattr(unittest.TestCase, name, None)):
            setattr(case, name, record)
    for name in ("assertRaises", "assertWarns"):
        setattr(case, name, raises)
    for name in ("assertRaisesRegex", "assertWarnsRegex"):
        setattr(case, name, raises_regex)
    case.fail = fail
    case.skipTest = lambda reason=None: recorder.add("skip")


def _vg_alarm(signum, frame):
    raise _VgTimeout()


def _vg_one(root, probe, seconds):
    recorder = _VgRecorder()
    name = str(probe["module"])
    module = types.ModuleType(name)
    module.__file__ = os.path.join(root, *name.split(".")) + ".py"
    module.__package__ = name.rpartition(".")[0]
    module.__dict__["_vg_record"] = recorder.values
    try:
        signal.signal(signal.SIGALRM, _vg_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    except (ValueError, OSError):  # not the main thread: the call's deadline bounds it
        pass
    try:
        tree = _VgAsserts().visit(ast.parse(str(probe["source"]), module.__file__))
        sys.modules[name] = module
        exec(compile(ast.fix_missing_locations(tree), module.__file__, "exec"), module.__dict__)
        owner, _, function = str(probe["test"]).rpartition(".")
        if owner:
            klass = module.__dict__[owner]
            case = klass(function)
            _vg_patch_case(case, recorder, bool(probe.get("compare")))
            klass.setUpClass()
            case.setUp()
            try:
                getattr(case, function)()
            finally:
                case.tearDown()
        else:
            module.__dict__[function]()
        recorder.add("end")
    except _VgTimeout:
        recorder.add("timeout")
    except BaseException as exc:  # noqa: BLE001 -- an error is an outcome (its type only)
        recorder.add("error:" + type(exc).__name__)
    finally:
        try:
            signal.setitimer(signal.ITIMER_REAL, 0)
        except (ValueError, OSError):
            pass
    return "\n".join(recorder.out)


def _vg_run_probes(root, probes, seconds=2.0):
    """Each probe's outcome text, in order (``probes``: ``{"module", "source", "test"}`` dicts,
    ``test`` being ``Class.method`` or a function name, and an optional ``compare`` flag)."""
    if root not in sys.path:
        sys.path.insert(0, root)
    os.chdir(root)
    out = []
    for probe in probes:
        try:
            out.append(_vg_one(root, probe, float(seconds)))
        except BaseException as exc:  # noqa: BLE001
            out.append("crash:" + type(exc).__name__)
    return out


if __name__ == "__main__" and sys.argv[0].endswith("_probe.py"):
    _request = json.loads(sys.stdin.read())
    _real_stdout = os.dup(1)
    _null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(_null, 1)
    os.dup2(_null, 2)
    _answer = _vg_run_probes(_request["root"], _request["probes"], _request.get("seconds", 2.0))
    os.write(_real_stdout, json.dumps(_answer).encode())
