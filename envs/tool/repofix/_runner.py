"""The test runner that runs inside the verdict sandbox (stdlib only; never imported by verigym).

Its source is sent to a fresh :class:`verigym.sandbox.PythonSandbox` and :func:`run_suite` is then
called there through ``PythonSandbox.call``, so the outcomes reach the parent as type-checked JSON,
never as printed text. The offline mutant scan (``scripts/gen_repofix_mutants.py``) runs the same
file as a script (``python -I -S _runner.py ROOT MODULE...``; JSON on stdout).

**The process that answers never runs repository code.** It compiles the test sources (then, for a
verdict, deletes them), takes its baseline, and forks one child per test module (to list its tests)
and one per test. Only children import the repository. Each child reports over a pipe, prefixed by a
random nonce drawn for it; a child that reports nothing valid failed its test, and one that ends
with exit status :data:`TAMPERED` marks the run tampered (the parent scores it 0).

Inside a child, before any repository code runs:

* all signals are blocked and the test runs in a second thread: no signal handler (the one route to
  a frame object that audit hooks do not see) can run while it does;
* an audit hook (PEP 578: it cannot be removed) ends the child as tampered on writes of
  ``__code__``/``__defaults__``/``__kwdefaults__``/``__class__``/``__bases__``, trace or profile
  hooks, new audit hooks, the garbage collector's object walks, new code objects, ``marshal``,
  ``ctypes``, sub-interpreters and the test C modules, process creation, links, recursion-limit
  changes and opening anything under ``/proc``, ``/sys`` or ``/dev`` (or the root or ``/dev``
  themselves, or a relative path that climbs with ``..``: from a folder's descriptor, which the
  hook does not see, those reach ``/proc``); it refuses frame access
  (``sys._getframe``, ``tb_frame``, ``gi_frame``...) with the exception the standard library
  already tolerates;
* what the verdict relies on is fingerprinted: the bindings of ``builtins``, ``unittest``'s modules
  and classes, ``contextlib``, ``functools`` (by identity), their ``sys.modules`` entries, the import
  hooks, the thread count, then the test module's globals and classes and the contents of its
  mutable constants; their functions by code object (identity and content: bytes, constants,
  names), defaults, keyword defaults, globals and closure. It is checked after the test module (and
  so the repository) is imported, before and after the test, at the end and, through a trace hook,
  whenever control passes from other code (the repository, anything compiled after the baseline)
  into the verdict's code (the tests', ``unittest``'s and ``contextlib``'s, the generators behind
  their context managers included, the runner's): on such a call and on such a return. Those
  transition checks compare the values only, and skip the dicts of immutable types (the builtin
  ones): no attribute of those can be set, and their dict is reachable only as a read-only proxy
  (the garbage collector's walks and ``ctypes``, the ways around that, end the child);
* the test module must be what its source says: every global bound by importing a module the
  runner loaded is that very object, nothing is bound that the source does not bind (an injected
  ``load_tests``), every function's code is the compiled one, every test class derives only from the
  module's own classes and ``unittest.TestCase``;
* the test instance and the result get every method the run calls bound on themselves from the
  baseline, so rebinding a class attribute reaches nothing; ``TestCase.run`` itself is the
  baseline's function, called directly;
* ``assertEqual`` and its typed variants compare canonical forms built by the runner (exact builtin
  values; other objects by class identity and instance state read with ``object.__getattribute__``,
  plus the ``repr`` of C or baseline code), never through the repository's own ``__eq__``;
* a test passes only when the runner's result saw ``addSuccess`` for it and nothing else.

Functions that run in a child after the baseline make no global look-ups: what they use is bound
as default arguments, which the audit hook guards.
"""

import _thread
import ast
import builtins
import contextlib
import functools  # noqa: F401 (watched)
import gc
import importlib.util
import itertools
import json
import operator
import os
import pathlib
import re
import select
import signal
import sys
import time
import traceback
import types
import unittest
import unittest.case
import unittest.loader
import unittest.result
import unittest.signals
import unittest.suite
import unittest.util

_RUNNER_FILE = sys._getframe().f_code.co_filename
_EXACT = (type(None), bool, int, float, complex, str, bytes)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_IMMUTABLE_TYPE = 1 << 8
"""``Py_TPFLAGS_IMMUTABLETYPE``: setting or deleting an attribute of such a type raises TypeError."""
TAMPERED = 86
"""Exit status of a child that caught the repository tampering with the verdict's machinery."""
_PER_MODULE_S = 60.0
_REPORT_CAP = 1 << 20
_MAX_TESTS = 2000
_PREIMPORT = (
    "abc", "bisect", "collections", "copy", "csv", "dataclasses", "datetime", "decimal", "enum",
    "fractions", "heapq", "io", "itertools", "math", "numbers", "operator", "random", "shlex",
    "statistics", "string", "textwrap", "typing", "unicodedata", "weakref",
)  # fmt: skip
"""Standard modules loaded before forking (the repository then finds them loaded, compiled by us)."""
_WATCHED_MODULES = (
    "builtins", "unittest", "unittest.case", "unittest.result", "unittest.util", "contextlib",
)  # fmt: skip
"""Modules whose bindings (and their classes') a test's run relies on (the loader runs before)."""
_DENY_MODULES = frozenset(
    (
        "ctypes", "_ctypes", "_testcapi", "_testinternalcapi", "_testbuffer", "_testmultiphase",
        "_testimportmultiple", "_testsinglephase", "_xxsubinterpreters", "_xxinterpchannels",
        "_interpreters", "_interpchannels", "_interpqueues", "_xxtestfuzz", "_posixsubprocess",
        "_lsprof", "_tracemalloc",
    )
)  # fmt: skip
_TRIP_EVENTS = frozenset(
    (
        "sys.addaudithook", "gc.get_objects", "gc.get_referrers",
        "gc.get_referents", "gc.freeze", "code.__new__", "marshal.loads", "marshal.load",
        "sys._current_frames", "sys._current_exceptions", "os.fork", "os.forkpty", "os.exec",
        "os.posix_spawn", "os.spawn", "os.system", "subprocess.Popen", "pty.spawn", "os.symlink",
        "os.link", "sys.monitoring.register_callback", "sys.monitoring.use_tool_id",
        "cpython.PyInterpreterState_New", "cpython._PySys_ClearAuditHooks",
        "os.chroot", "os.fchdir",
    )
)  # fmt: skip
_TRIP_SET = frozenset(("__code__", "__defaults__", "__kwdefaults__", "__class__", "__bases__"))
_DENY_GET = frozenset(("tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"))
_SAFE_DEV = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")
_STRICT = (
    "assertEqual", "assertEquals", "failUnlessEqual", "assertListEqual", "assertTupleEqual",
    "assertDictEqual", "assertSetEqual", "assertSequenceEqual",
)  # fmt: skip


def _short(value):
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001
        text = "<unrepresentable>"
    text = _ADDRESS.sub("", text)  # "<X object at 0x7f...>" -> "<X object>": the same every run
    return text if len(text) <= 300 else text[:297] + "..."


# -- sealed functions: they run in a child after the baseline and make no global look-ups --------


def _canon(
    value,
    path,
    budget,
    canon,
    trusted,
    shallow=False,
    _type=type,
    _id=id,
    _tuple=tuple,
    _sorted=sorted,
    _repr=repr,
    _len=len,
    _exact=_EXACT,
    _containers=(list, tuple, dict, set, frozenset),
    _list=list,
    _dict=dict,
    _set=set,
    _frozenset=frozenset,
    _getattribute=object.__getattribute__,
    _type_getattribute=type.__getattribute__,
    _object=object,
    _function=types.FunctionType,
    _attribute_error=AttributeError,
    _isinstance=isinstance,
    _str=str,
    _enumerate=enumerate,
):
    """A form of ``value`` made only of exact builtin values and tuples, built without running any
    ``__eq__``, ``__hash__`` or ``__iter__`` of the repository: equal forms mean equal values."""
    budget[0] -= 1
    kind = _type(value)
    if kind in _exact:
        return (kind.__name__, value)
    if budget[0] < 0 or _len(path) > 200:
        return ("<too large>", _id(value))  # never equal to another object's form
    key = _id(value)
    for depth, seen in _enumerate(path):
        if seen == key:
            return ("<cycle>", _len(path) - depth)
    if _isinstance(value, _type):
        return ("<class>", key)
    if shallow and kind not in _containers:
        return ("<ref>", key)  # the checks run no code of anyone's: other objects by identity
    path.append(key)
    try:
        mro = _type_getattribute(kind, "__mro__")
        base = None
        for klass in mro:
            if klass in _containers or klass in _exact:
                base = klass
                break
        body = None
        if base is _list or base is _tuple:
            body = (
                base.__name__,
                _tuple(
                    [canon(x, path, budget, canon, trusted, shallow) for x in base.__iter__(value)]
                ),
            )
        elif base is _dict:
            pairs = [
                (
                    canon(k, path, budget, canon, trusted, shallow),
                    canon(v, path, budget, canon, trusted, shallow),
                )
                for k, v in _dict.items(value)
            ]
            body = ("dict", _tuple(_sorted(pairs, key=_repr)))
        elif base is _set or base is _frozenset:
            items = [canon(x, path, budget, canon, trusted, shallow) for x in base.__iter__(value)]
            body = (base.__name__, _tuple(_sorted(items, key=_repr)))
        elif base is not None:
            body = (base.__name__, base.__repr__(value))
        if kind is base:
            return body
        state = []
        try:
            attributes = _getattribute(value, "__dict__")
        except _attribute_error:
            attributes = None
        if _isinstance(attributes, _dict):
            for k, v in _dict.items(attributes):
                state.append(
                    (
                        canon(k, path, budget, canon, trusted, shallow),
                        canon(v, path, budget, canon, trusted, shallow),
                    )
                )
        shown = None
        for klass in mro:
            own = _type_getattribute(klass, "__dict__")
            slots = own.get("__slots__", ())
            if _isinstance(slots, _str):
                slots = (slots,)
            for name in slots:
                if _type(name) is not _str or name == "__dict__" or name == "__weakref__":
                    continue
                try:
                    item = canon(_getattribute(value, name), path, budget, canon, trusted, shallow)
                except _attribute_error:
                    item = ("<unset>",)
                state.append((("str", name), item))
            if klass is not _object and shown is None and "__repr__" in own:
                method = own["__repr__"]
                if not _isinstance(method, _function) or _id(method.__code__) in trusted:
                    shown = method  # C code or the baseline's code: it shows hidden C state
        if body is None and shown is not None:
            text = shown(value)
            body = ("repr", text if _type(text) is _str else None)
        return ("<object>", _id(kind), body, _tuple(_sorted(state, key=_repr)))
    finally:
        path.pop()


def _check(
    watch=(),
    keys=(),
    values=(),
    names=(),
    modules=(),
    meta=(),
    hooks=(),
    threads=0,
    constants=(),
    forms=(),
    _modules=sys.modules,
    _meta=sys.meta_path,
    _hooks=sys.path_hooks,
    _count=_thread._count,
    _map=map,
    _tuple=tuple,
    _all=all,
    _is=operator.is_,
    _len=len,
    _sum=sum,
    _zip=zip,
    _chain=itertools.chain.from_iterable,
    _values=operator.methodcaller("values"),
    _items=None,
    _exit=os._exit,
    _status=TAMPERED,
):
    """End the child as tampered unless every watched binding is the very object the baseline
    recorded (compared with ``is``: no ``__eq__`` runs, and ``id`` would raise audit events)."""
    # the values: counted, then compared as they stream (no tuple is built on the hot path)
    if _sum(_map(_len, watch)) != _len(values) or not _all(
        _map(_is, _chain(_map(_values, watch)), values)
    ):
        _exit(_status)
    for now, then in (
        (_tuple(_chain(watch)) if keys is not None else None, keys),
        (_tuple(_map(_modules.get, names)), modules),
        (_tuple(_meta), meta),
        (_tuple(_hooks), hooks),
    ):
        if now is None:
            continue  # the hot check compares values only (a new key changes their count)
        if _len(now) != _len(then) or not _all(_map(_is, now, then)):
            _exit(_status)
    if _count() != threads:
        _exit(_status)
    for container, then in _zip(constants, forms):
        now = _items(container)
        if _len(now) != _len(then) or not _all(_map(_is, now, then)):
            _exit(_status)


def _items_form(
    container,
    _tuple=tuple,
    _type=type,
    _dict=dict,
    _list=list,
    _set=set,
    _chain=itertools.chain.from_iterable,
):
    """What a test module's list, dict or set holds (one level), to compare with ``is``."""
    if _type(container) is _dict:
        return _tuple(_chain((_dict.keys(container), _dict.values(container))))
    if _type(container) is _set:
        return _tuple(_set.__iter__(container))
    return _tuple(_list.__iter__(container))


def _trace(
    frame,
    event,
    arg,
    spaces=(),
    codes=frozenset(),
    check=None,
    local=None,
    _any=any,
    _map=map,
    _is=operator.is_,
    _repeat=itertools.repeat,
):
    """The child's trace hook. Control passing from other code into the verdict's code (the
    tests', ``unittest``'s, the runner's: ``codes``, run with the globals ``spaces``) runs the
    fingerprint check first: on a call here, on a return in ``local`` (other code's frames get it,
    with line events off)."""
    back = frame.f_back
    if _any(_map(_is, _repeat(frame.f_globals), spaces)) and frame.f_code in codes:
        if back is not None and not (
            _any(_map(_is, _repeat(back.f_globals), spaces)) and back.f_code in codes
        ):
            check()
        return None
    frame.f_trace_lines = False
    return local


def _trace_return(
    frame,
    event,
    arg,
    spaces=(),
    codes=frozenset(),
    check=None,
    _any=any,
    _map=map,
    _is=operator.is_,
    _repeat=itertools.repeat,
):
    """The local trace of frames outside the verdict's code: their return into it runs the check."""
    if event == "return":
        back = frame.f_back
        if (
            back is not None
            and _any(_map(_is, _repeat(back.f_globals), spaces))
            and back.f_code in codes
        ):
            check()
    return None


def _audit(
    event,
    args,
    state=None,
    _exit=os._exit,
    _status=TAMPERED,
    _trip=_TRIP_EVENTS,
    _set=_TRIP_SET,
    _get=_DENY_GET,
    _deny=_DENY_MODULES,
    _safe=_SAFE_DEV,
    _type=type,
    _str=str,
    _bytes=bytes,
    _realpath=os.path.realpath,
    _fsdecode=os.fsdecode,
    _fspath=os.fspath,
    _paths=(pathlib.PurePosixPath, pathlib.PosixPath),
    _isinstance=isinstance,
    _runtime_error=RuntimeError,
    _value_error=ValueError,
    _int=int,
    _normpath=os.path.normpath,
):
    """The child's audit hook. ``state``: [busy, frames allowed, one setprofile allowed]."""
    if state[0]:
        return  # an event raised by this hook's own work (realpath)
    if event == "object.__getattr__":
        if args[1] in _get and not state[1]:
            raise _runtime_error("frames are not available in the verdict runner")
        return
    if event == "object.__setattr__" or event == "object.__delattr__":
        if args[1] in _set:
            _exit(_status)
        return
    if event == "sys._getframe" or event == "sys._getframemodulename":
        if not state[1]:
            raise _value_error("call stack is not deep enough")
        return
    if event == "sys.settrace" or event == "sys.setprofile":
        if not state[2]:
            _exit(_status)
        state[2] = False
        return
    if event in _trip or event.startswith("ctypes."):
        _exit(_status)
    if event == "import":
        name = args[0]
        if _type(name) is not _str or name.partition(".")[0] in _deny:
            _exit(_status)
        return
    if event == "open" or event == "os.chdir" or event == "os.listdir" or event == "os.scandir":
        path = args[0]
        if _type(path) in _paths:
            path = _fspath(path)  # the standard path classes (another __fspath__ could lie)
        if _type(path) is _bytes:
            path = _fsdecode(path)
        if _type(path) is _str:
            if not path.startswith("/"):
                climbs = _normpath(path)
                if climbs == ".." or climbs.startswith("../"):
                    _exit(_status)  # from a folder's descriptor (dir_fd, unseen here): anywhere
            state[0] = True
            try:
                real = _realpath(path)
            finally:
                state[0] = False
            if (
                real == "/"  # the root's and /dev's descriptors reach /proc by relative paths
                or real == "/dev"
                or real == "/proc"
                or real.startswith("/proc/")
                or real == "/sys"
                or real.startswith("/sys/")
                or (real.startswith("/dev/") and real not in _safe)
            ):
                _exit(_status)
        elif path is not None and _type(path) is not _int:
            _exit(_status)


def _assert_equal(
    self,
    first,
    second,
    msg=None,
    equal=True,
    canon=None,
    trusted=frozenset(),
    check=None,
    short=_short,
    _error=AssertionError,
    **options,
):
    """``assertEqual`` (``equal`` True) or ``assertNotEqual`` on the runner's canonical forms
    (``options``, such as ``assertSequenceEqual``'s ``seq_type``, are accepted and ignored). The
    trace hook checked the fingerprint when control last came back from other code."""
    same = canon(first, [], [100000], canon, trusted) == canon(second, [], [100000], canon, trusted)
    if same is not equal:
        got, expected = short(first), short(second)
        error = _error(msg or (got + (" != " if equal else " == ") + expected))
        error.vg_values = (got, expected)
        raise error


_SEALED_GLOBALS = {"__builtins__": {}}
"""The globals of every sealed copy: nothing (a global look-up there fails)."""


def _sealed(function, name, **bound):
    """A copy of ``function`` whose defaults bind ``bound`` and whose globals are empty."""
    code = function.__code__
    names = code.co_varnames[code.co_argcount - len(function.__defaults__) : code.co_argcount]
    defaults = tuple(bound.get(n, d) for n, d in zip(names, function.__defaults__))
    return types.FunctionType(code, _SEALED_GLOBALS, name, defaults)


# -- the runner (the process that answers; never imports the repository) --------------------------


def _code_objects(code, out):
    out.append(code)
    for const in code.co_consts:
        if type(const) is types.CodeType:
            _code_objects(const, out)
    return out


def _function_form(function):
    """What a function runs with, by identity: its code, defaults, keyword defaults, globals, cells."""
    return (
        id(function.__code__),
        id(function.__defaults__),
        id(function.__kwdefaults__),
        id(function.__globals__),
        tuple(id(c.cell_contents) for c in function.__closure__ or ()),
    )


def _code_form(function):
    """A function's code by content: bytecode, constants, names."""
    code = function.__code__
    return (code.co_code, repr(code.co_consts), code.co_names, code.co_varnames)


def _bindings(source):
    """Top-level names the test source binds: {name: None (code) | ("module", m) | ("from", m, a)}."""
    names = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = None
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.partition(".")[0]
                names[bound] = ("module", alias.name if alias.asname else bound)
            continue
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    names["*"] = None
                elif node.level == 0 and node.module:
                    names[alias.asname or alias.name] = ("from", node.module, alias.name)
                else:
                    names[alias.asname or alias.name] = None
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                names.setdefault(sub.id, None)
    return names


def _in_repository(root, top):
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return True
    origin = getattr(spec, "origin", None) or ""
    locations = list(getattr(spec, "submodule_search_locations", None) or ())
    return spec is None or any(
        str(p).startswith(root + os.sep) for p in [origin, *locations] if isinstance(p, str)
    )


def _hot(mapping):
    """Whether a watched mapping is read while a test runs: module dicts other than the
    ``unittest`` package's, and classes other than those whose methods the runner binds on the
    test and the result (and the loader's, the suite's, which ran before)."""
    if mapping is vars(unittest):
        return False
    owner = mapping.get("__module__")
    if owner is None or type(mapping) is dict:
        return True
    name = mapping.get("__qualname__", "")
    if owner == "contextlib":
        return name in ("_GeneratorContextManager", "_GeneratorContextManagerBase")
    return name not in ("TestCase", "FunctionTestCase", "TestResult", "_ShouldStop")


def _baseline(root, compiled, bindings):
    """What every child checks against, taken in this process (which never runs repository
    code), after the standard modules the tests import are loaded."""
    for name in _PREIMPORT:
        try:
            __import__(name)
        except ImportError:
            pass
    for names in bindings.values():
        for origin in names.values():
            if isinstance(origin, tuple):
                top = origin[1].partition(".")[0]
                if top not in sys.modules and not _in_repository(root, top):
                    try:
                        __import__(origin[1])
                    except ImportError:
                        pass
    verdict = []
    for function in list(globals().values()):  # the runner's own code
        if type(function) is types.FunctionType and function.__code__.co_filename == _RUNNER_FILE:
            _code_objects(function.__code__, verdict)
    trusted = []
    for obj in gc.get_objects():
        if type(obj) is types.FunctionType:
            _code_objects(obj.__code__, trusted)
    for code in compiled.values():
        if type(code) is types.CodeType:
            _code_objects(code, trusted)
    watch, functions, frozen = [], [], []
    for name in _WATCHED_MODULES:
        module = sys.modules[name]
        watch.append(vars(module))
        for value in list(vars(module).values()):
            if isinstance(value, type) and value.__module__ == name:
                watch.append(vars(value))
                if value.__flags__ & _IMMUTABLE_TYPE:
                    frozen.append(watch[-1])
                functions.extend(v for v in vars(value).values() if type(v) is types.FunctionType)
            elif type(value) is types.FunctionType:
                functions.append(value)
    for function in functions:  # unittest's and contextlib's (the run enters its managers)
        if function.__module__.startswith("unittest") or function.__module__ == "contextlib":
            _code_objects(function.__code__, verdict)
            inner = getattr(function, "__wrapped__", None)  # a @contextmanager's generator
            while type(inner) is types.FunctionType and inner.__module__ == function.__module__:
                _code_objects(inner.__code__, verdict)
                inner = getattr(inner, "__wrapped__", None)
    for code in compiled.values():
        if type(code) is types.CodeType:
            _code_objects(code, verdict)
    gc.collect()
    gc.freeze()  # the children share these objects: their collections never walk (and copy) them
    loaded = dict(sys.modules)
    imported = {}
    for names in bindings.values():
        for origin in names.values():
            if isinstance(origin, tuple) and origin[0] == "from" and origin[1] in loaded:
                imported[origin[1:]] = getattr(loaded[origin[1]], origin[2], None)
    return {
        "root": root,
        "compiled": compiled,
        "bindings": bindings,
        "trusted": frozenset(id(c) for c in trusted),
        "verdict": frozenset(verdict),
        "spaces": (
            globals(),
            _SEALED_GLOBALS,
            vars(contextlib),
            *(vars(sys.modules[n]) for n in sys.modules if n.startswith("unittest")),
        ),
        "alive": (tuple(trusted), tuple(verdict)),  # keeps the ids above from being reused
        "watch": tuple(watch),
        # immutable types (the builtin ones: int, str, the exceptions...) refuse every attribute
        # write and their dict is reachable only as a read-only proxy (gc and ctypes, the only
        # ways to its dict, end the child): checked after import and at the end, not in between
        "hot": tuple(m for m in watch if _hot(m) and not any(m is f for f in frozen)),
        "functions": tuple(functions),
        "forms": tuple(_function_form(f) for f in functions),
        "contents": tuple(_code_form(f) for f in functions),
        "modules": loaded,
        "imported": imported,
    }


def _spawn(child, args, timeout):
    """Fork ``child(write_fd, nonce, *args)``: (its exit status or None, its report or None)."""
    nonce = os.urandom(16).hex()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child never returns
        try:
            os.close(read_fd)
            child(write_fd, nonce, *args)
        finally:
            os._exit(1)
    os.close(write_fd)
    chunks, size, end = [], 0, time.monotonic() + timeout
    try:
        while size <= _REPORT_CAP:
            left = end - time.monotonic()
            if left <= 0 or not select.select([read_fd], [], [], left)[0]:
                break
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(read_fd)
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    _, status = os.waitpid(pid, 0)
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    data = b"".join(chunks)
    prefix = (nonce + " ").encode()
    if size > _REPORT_CAP or not data.startswith(prefix):
        return code, None
    return code, data[len(prefix) :].decode("utf-8", "replace")


def _child(write_fd, nonce, plan, name, details):
    """The forked child: block every signal, run :func:`_body` in a second thread, wait forever."""
    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    gc.disable()  # a child lives for one test
    hold = _thread.allocate_lock()
    hold.acquire()
    _thread.start_new_thread(_body, (write_fd, nonce, plan, name, details))
    del nonce
    hold.acquire()  # never released: the body ends the process


def _body(write_fd, nonce, plan, name, details, _write=os.write, _exit=os._exit):
    try:
        report = _run(plan, name, details)
    except BaseException as exc:  # noqa: BLE001 -- anything else is a failure
        report = "fail"
        if details:
            try:
                error = type(exc).__name__ + ": " + str(exc)[:300]
                report += "\n" + json.dumps({"kind": "import", "error": error})
            except BaseException:  # noqa: BLE001
                pass
    try:
        _write(write_fd, (nonce + " " + report).encode("utf-8", "replace"))
    finally:
        _exit(0)


def _run(plan, name, details):
    """Import test module ``name`` (and so the repository) and run its tests one by one. Returns
    the report (``results``, then ``<test id> pass|fail [detail JSON]`` per line)."""
    _exit, _status, _id, _type, _len, _tuple = os._exit, TAMPERED, id, type, len, tuple
    _isinstance, _issubclass, _getattr, _vars, _sorted = (
        isinstance,
        issubclass,
        getattr,
        vars,
        sorted,
    )
    _function, _method, _code_type = types.FunctionType, types.MethodType, types.CodeType
    _classmethod, _staticmethod, _dir, _zip = classmethod, staticmethod, dir, zip
    _form, _exec, _modules, _builtins = _function_form, exec, sys.modules, builtins.__dict__
    testcase, result = unittest.TestCase, unittest.TestResult()
    real_run, get_names = testcase.run, unittest.TestLoader().getTestCaseNames
    testcase_mro = testcase.__mro__
    module_code = plan["compiled"][name]
    if _type(module_code) is not _code_type:
        raise ImportError("the test source does not compile")
    test_codes = frozenset(_id(c) for c in _code_objects(module_code, []))
    trusted, verdict = plan["trusted"], plan["verdict"]
    canon = _sealed(_canon, "canon")
    functions, forms = plan["functions"], plan["forms"]
    names = _WATCHED_MODULES + ("sys", "os", "tests", name)
    module_names = plan["modules"]
    imported = plan["imported"]
    bound = plan["bindings"][name]

    items_form = _sealed(_items_form, "items_form")

    def make_check(watch, constants, keys=True):
        chain = itertools.chain.from_iterable
        return _sealed(
            _check,
            "check",
            watch=watch,
            keys=_tuple(chain(watch)) if keys else None,
            values=_tuple(chain(m.values() for m in watch)),
            names=names,
            modules=_tuple(map(sys.modules.get, names)),
            meta=_tuple(sys.meta_path),
            hooks=_tuple(sys.path_hooks),
            threads=_thread._count(),
            constants=constants,
            forms=_tuple(map(items_form, constants)),
            _items=items_form,
        )

    audit_state = [False, bool(details), False]
    package = types.ModuleType("tests")
    package.__path__ = [os.path.join(plan["root"], "tests")]
    package.__file__ = os.path.join(plan["root"], "tests", "__init__.py")
    sys.modules["tests"] = package
    module = types.ModuleType(name)
    module.__file__ = os.path.join(plan["root"], *name.split(".")) + ".py"
    module.__package__ = "tests"
    namespace = module.__dict__
    sys.modules[name] = module
    check = make_check(plan["watch"], ())  # while the repository is imported: everything
    spaces = plan["spaces"] + (namespace,)

    def full_check(checker):
        checker()
        for function, form in _zip(functions, forms):
            if _form(function) != form:
                _exit(_status)

    # arm: from here on the repository may run
    sys.dont_write_bytecode = True
    sys.pycache_prefix = (
        "/nonexistent/vg-runner"  # imports compile sources: marshal is never needed
    )
    sys.addaudithook(_sealed(_audit, "audit", state=audit_state))
    _exec(module_code, namespace)
    full_check(check)
    for function, content in _zip(functions, plan["contents"]):
        if _code_form(function) != content:
            _exit(_status)
    # the module holds only what its source binds, as its source binds it
    star = "*" in bound
    for key, value in _tuple(namespace.items()):
        if key == "__builtins__":
            if value is not _builtins and value is not builtins:
                _exit(_status)
            continue
        if key in ("__name__", "__file__", "__package__", "__doc__", "__spec__", "__loader__"):
            continue
        if key not in bound:
            if not star or key == "load_tests" or _type(value) is _function:
                _exit(_status)
            continue
        origin = bound[key]
        if _type(origin) is _tuple and origin[0] == "module" and origin[1] in module_names:
            if value is not module_names[origin[1]]:
                _exit(_status)
        elif _type(origin) is _tuple and origin[0] == "from" and origin[1:] in imported:
            if value is not imported[origin[1:]]:
                _exit(_status)
        elif origin is None and _type(value) is _function:
            if _id(value.__code__) not in test_codes or value.__globals__ is not namespace:
                _exit(_status)
    classes = {}
    for key, value in _tuple(namespace.items()):
        if not _isinstance(value, _type):
            continue
        own = _vars(value)
        if own.get("__module__") != name:
            if _issubclass(value, testcase) and bound.get(key, 0) is None:
                _exit(_status)  # a name the source binds to its own class holds another one
            continue
        if key not in bound or bound[key] is not None or _type(value) is not _type:
            _exit(_status)
        for attribute in own.values():
            if _isinstance(attribute, (_classmethod, _staticmethod)):
                attribute = attribute.__func__
            if _type(attribute) is _function:
                if (
                    _id(attribute.__code__) not in test_codes
                    or attribute.__globals__ is not namespace
                ):
                    _exit(_status)
            elif callable(attribute) and not _isinstance(attribute, _type):
                _exit(_status)
        classes[key] = value
    for klass in classes.values():
        for ancestor in klass.__mro__:
            if ancestor not in testcase_mro and classes.get(ancestor.__name__) is not ancestor:
                _exit(_status)
    # from here on the module's bindings, its classes and its mutable constants are watched too
    watch = plan["hot"] + (namespace,) + _tuple(_vars(k) for k in classes.values())
    constants = _tuple(
        v for k, v in namespace.items() if _type(v) in (list, dict, set) and not k.startswith("__")
    )
    check = make_check(watch, constants, keys=False)  # the hot part, at every transition
    wide = make_check(plan["watch"] + watch[_len(plan["hot"]) :], constants)
    local = _sealed(_trace_return, "trace_return", spaces=spaces, codes=verdict, check=check)
    tracer = _sealed(_trace, "trace", spaces=spaces, codes=verdict, check=check, local=local)
    audit_state[2] = True
    sys.settrace(tracer)
    check()
    testresult = _type(result)
    strict = _sealed(_assert_equal, "assertEqual", canon=canon, trusted=trusted, check=check)
    differ = _sealed(
        _assert_equal, "assertNotEqual", equal=False, canon=canon, trusted=trusted, check=check
    )
    ids = []
    for key in _sorted(classes):
        if _issubclass(classes[key], testcase):
            ids.extend((key, m) for m in get_names(classes[key]))
    lines = ["results"]
    for class_name, method_name in ids:
        klass = classes[class_name]
        test_id = name + "." + class_name + "." + method_name
        test = klass(method_name)
        # every method the run calls is bound on the instance and the result, from the baseline
        for attribute in _sorted(set(_dir(klass))):
            value = _getattr(klass, attribute, None)
            if _type(value) is _function:
                test.__dict__[attribute] = _method(value, test)
        for attribute in _STRICT:
            test.__dict__[attribute] = _method(strict, test)
        test.__dict__["assertNotEqual"] = test.__dict__["assertNotEquals"] = _method(differ, test)
        result = testresult()
        for attribute in _sorted(set(_dir(testresult))):
            value = _getattr(result, attribute, None)
            if _type(value) is _method:
                result.__dict__[attribute] = value
        successes, errors = [], []
        result.__dict__["addSuccess"] = successes.append
        if details:  # called as (err, test): keep err (exc_type, exc, tb) for _failure_detail

            def keep(err, test, _append=errors.append):
                _append(err)
                return ""

            result.__dict__["_exc_info_to_string"] = keep
        else:
            result.__dict__["_exc_info_to_string"] = _noop
        check()
        real_run(test, result)
        check()
        passed = (
            _len(successes) == 1
            and not result.failures
            and not result.errors
            and not result.skipped
            and not result.expectedFailures
            and not result.unexpectedSuccesses
        )
        if passed:
            lines.append(test_id + " pass")
        elif details and errors:
            lines.append(test_id + " fail " + json.dumps(_failure_detail(errors[0], plan["root"])))
        else:
            lines.append(test_id + " fail")
    full_check(wide)
    return "\n".join(lines)


def _noop(*args):
    return ""


def _failure_detail(error, root):
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
    """Run the unittest modules ``modules`` (dotted names under ``root``), one child per module.

    Returns ``{"results": {test id: "pass" | "fail"}, "tampered": bool, "details": {...}}``
    (``details`` only when asked for: the failing line and the compared values). Without
    ``details`` (the verdict) the test files are deleted once compiled, before any repository code
    runs, so that code cannot read the expected values from them.
    """
    outcomes, failures, tampered = {}, {}, False
    if root not in sys.path:
        sys.path.insert(0, root)
    os.chdir(root)
    compiled, bindings = {}, {}
    for name in modules:
        path = os.path.join(root, *name.split(".")) + ".py"
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
            compiled[name] = compile(text, path, "exec")
            bindings[name] = _bindings(text)
        except BaseException as exc:  # noqa: BLE001
            compiled[name], bindings[name] = exc, {}
    if not details:
        import shutil

        shutil.rmtree(os.path.join(root, "tests"), ignore_errors=True)
    plan = _baseline(root, compiled, bindings)
    for name in modules:
        code, report = _spawn(_child, (plan, name, details), _PER_MODULE_S)
        tampered = tampered or code == TAMPERED
        lines = (report or "").split("\n")
        if lines[0] != "results" or code != 0:
            outcomes["import:" + name] = "fail"
            detail = _parse_detail(lines[1] if lines[0] == "fail" and len(lines) > 1 else "")
            failures["import:" + name] = detail or {"kind": "import", "error": ""}
            continue  # every test of the module is missing: each reads as failing
        for line in lines[1 : _MAX_TESTS + 1]:
            test_id, _, rest = line.partition(" ")
            outcome, _, detail = rest.partition(" ")
            if not test_id.startswith(name + ".") or outcome not in ("pass", "fail"):
                continue
            outcomes[test_id] = outcome
            if details and outcome == "fail":
                failures[test_id] = _parse_detail(detail) or {"kind": "error", "error": ""}
    return {"results": outcomes, "tampered": tampered, "details": failures if details else {}}


def _parse_detail(text):
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


if __name__ == "__main__" and sys.argv[0].endswith("_runner.py"):
    _root, _modules = sys.argv[1], sys.argv[2:]
    _real_stdout = os.dup(1)
    _null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(_null, 1)
    os.dup2(_null, 2)
    _answer = run_suite(_root, _modules, details=True)
    os.write(_real_stdout, json.dumps(_answer).encode())
