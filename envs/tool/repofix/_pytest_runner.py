"""The pytest runner of RepoFix-Real that runs inside the verdict sandbox (stdlib only; never imported
by verigym).

Its source is sent to a :class:`verigym.sandbox.PythonSandbox` and :func:`run_pytest` is called there
through ``PythonSandbox.call``, so outcomes reach the parent as type-checked JSON. The process that
answers never imports repository code: it starts one ``python -I -S`` child that runs pytest (the
vendored copy written into the tree) on the named test files and reports each test's outcome over a
pipe.

**The report's secret is in no Python object the library can reach** (docs/security.md, "RepoFix-Real's
runner"). The child's program reaches it over stdin (never argv, never the environment), and the nonce
and the report pipe's number are constants of one code object, ``_main``'s, compiled there. Nothing
else holds them: no variable, closure, default or plugin. ``_main`` drives pytest itself
(configuration, collection, the loop over items) and writes each line, numbered, after the item's
protocol handed back its outcome as an immutable tuple; it is one-shot (its first act installs the
audit hook, so a second call ends the child). The audit hook (PEP 578: it cannot be removed) ends the
child with :data:`TAMPERED` on reads of ``_main``'s code or defaults, on reads of the code of the
runner's frames from untrusted code, gc walks, ``sys._current_frames``, ``ctypes``, new audit hooks,
code objects made, unmarshalled (but the standard library's and pytest's caches) or run again under
other globals, trace and profile hooks and links from untrusted code, writes of ``__code__`` and its
kin, Python-level signal handlers and files under ``/proc``, ``/sys`` and ``/dev`` (``//proc``
included; the root and ``/dev`` themselves, and relative paths that climb with ``..``, since from a
folder's descriptor, which the hook does not see, they reach ``/proc``), and on the compilation of
a test module (a test file's folder, a ``conftest.py``) whose source is not the one read from disk
before any library code ran (the test files are on disk for pytest: the library could rewrite one
it has not yet collected). The tree itself is read-only to the child (:func:`_seal`; the library
runs as the files' owner), and a ``chmod`` or ``rename`` of it from library code (or one relative
to a folder's descriptor, or of an open descriptor) ends the child. After collection
and after every item the bindings of pytest's and pluggy's modules and of the classes on the report
path, ``builtins``, their ``sys.modules`` entries, the import hooks, every hook's implementations,
the item and the test modules' functions, classes and modules are compared by identity with the
baseline taken before any library code ran; a difference ends the child. The parent accepts only
lines with the nonce, numbered 0, 1, 2... without gaps, one per test, and an end line that counts
them, from a child that exited 0.
"""

import base64
import os
import secrets
import select
import subprocess
import sys
import time

TAMPERED = 86
_REPORT_CAP = 8 << 20

_BOOT = (
    "import os\n"
    "def _r():\n"
    "    chunks = []\n"
    "    while True:\n"
    "        chunk = os.read(0, 65536)\n"
    "        if not chunk:\n"
    "            break\n"
    "        chunks.append(chunk)\n"
    "    os.close(0)\n"
    "    return b''.join(chunks)\n"
    "exec(compile(_r(), '<vg-runner>', 'exec'), {'__name__': '__vg_runner__'})\n"
)
"""The child's command line: it reads the program from stdin and runs it; nothing secret stays bound."""

_CHILD = r'''
import operator, os, sys

_PREIMPORT = (
    "abc", "argparse", "array", "ast", "asyncio", "base64", "binascii", "bisect", "calendar",
    "collections", "collections.abc", "contextlib", "copy", "copyreg", "csv", "dataclasses",
    "datetime", "decimal", "difflib", "doctest", "enum", "fnmatch", "fractions", "functools", "gc",
    "glob", "hashlib", "heapq", "inspect", "io", "itertools", "json", "keyword", "linecache",
    "locale", "logging", "math", "numbers", "operator", "os.path", "pathlib", "pickle", "pprint",
    "queue", "random", "re", "reprlib", "shlex", "shutil", "signal", "statistics", "string",
    "struct", "tempfile", "textwrap", "threading", "time", "timeit", "token", "tokenize",
    "traceback", "types", "typing", "unicodedata", "unittest", "unittest.mock", "uuid",
    "warnings", "weakref", "concurrent.futures",
)
_DENY_MODULES = frozenset((
    "ctypes", "_ctypes", "_testcapi", "_testinternalcapi", "_testbuffer", "_testmultiphase",
    "_testimportmultiple", "_testsinglephase", "_xxsubinterpreters", "_xxinterpchannels",
    "_interpreters", "_interpchannels", "_interpqueues", "_xxtestfuzz", "_lsprof", "_tracemalloc",
    "_signal", "_imp", "gc", "sys", "builtins",
))
_TRIP_EVENTS = frozenset((
    "sys.addaudithook", "gc.get_objects", "gc.get_referrers", "gc.get_referents", "gc.freeze",
    "marshal.load", "sys._current_frames",
    "sys._current_exceptions", "sys.monitoring.register_callback", "sys.monitoring.use_tool_id",
    "cpython.PyInterpreterState_New",
    "cpython._PySys_ClearAuditHooks", "os.fork", "os.forkpty",
))
_EXAMPLES = 10
"""Examples per hypothesis test (a test's own ``@settings(max_examples=...)`` still holds)."""
_TRIP_SET = frozenset(("__code__", "__class__", "__bases__"))
_GUARDED_SET = frozenset(("__defaults__", "__kwdefaults__"))
"""Written on a function of pytest's, pluggy's, the standard library's or ours, they end the child
(a library's own functions may have theirs set: boltons' ``copy_function`` does)."""
_SAFE_DEV = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")
_REPORT_PATH = frozenset((
    "_pytest.runner", "_pytest.reports", "_pytest.python", "_pytest.main", "_pytest.nodes",
    "_pytest.fixtures", "_pytest.outcomes", "_pytest.skipping", "_pytest.unittest",
    "_pytest.python_api", "_pytest.raises", "_pytest.assertion.rewrite", "_pytest.assertion.util",
    "_pytest.config", "_pytest.warnings", "_pytest.logging", "_pytest.capture", "_pytest._code.code",
    "pluggy._hooks", "pluggy._manager", "pluggy._callers", "pluggy._result", "pluggy._execution",
    "_pytest.subtests",
))
"""The modules whose classes' bindings are checked (every pytest and pluggy module's are)."""


def _code_ids(objects, out, _type=type, _isinstance=isinstance, _id=id, _getattr=getattr):
    """Add to ``out`` the ids of every code object behind ``objects`` (functions, classes' methods,
    properties, nested code); the code objects themselves are kept alive by ``out[None]``."""
    keep = out.setdefault(None, [])
    stack = list(objects)
    seen = set()
    while stack:
        value = stack.pop()
        if _id(value) in seen:
            continue
        seen.add(_id(value))
        kind = _type(value)
        if kind is _CODE:
            out[_id(value)] = True
            keep.append(value)
            stack.extend(c for c in value.co_consts if _type(c) is _CODE)
        elif kind is _FUNCTION:
            stack.append(value.__code__)
            stack.extend(f for f in _getattr(value, "__dict__", {}).values() if _type(f) is _FUNCTION)
        elif kind in (staticmethod, classmethod):
            stack.append(value.__func__)
        elif kind is property:
            stack.extend(f for f in (value.fget, value.fset, value.fdel) if f is not None)
        elif _isinstance(value, type):
            try:
                stack.extend(vars(value).values())
            except TypeError:
                pass
        else:
            # a wrapper of a function (pytest's fixture definitions, functools' partial and
            # cached_property, contextlib's managers): its functions, one level deep
            inner = _getattr(value, "__dict__", None)
            if _type(inner) is dict:
                for f in inner.values():
                    if _type(f) is _FUNCTION:
                        stack.append(f)
            f = _getattr(value, "func", None)
            if _type(f) is _FUNCTION:
                stack.append(f)
    return out


_CODE = type(_code_ids.__code__)
_FUNCTION = type(_code_ids)


def _bindings(owner, _vars=vars, _skip=("_", "__warningregistry__")):
    """An owner's bindings (its ``vars``), without ``_`` (the interactive display hook that doctest
    uses writes it into ``builtins``) and ``__warningregistry__`` (``warnings`` adds it to the
    module a warning comes from)."""
    now = _vars(owner)
    if "_" in now or "__warningregistry__" in now:
        now = {k: v for k, v in now.items() if k not in _skip}
    return now


def _ident(a, b, _len=len, _all=all, _map=map, _is=operator.is_):
    """Whether tuples ``a`` and ``b`` hold the very same objects, in order. Never ``id()``: each
    call of it is an audit event, which our hook would see thousands of times per test."""
    return _len(a) == _len(b) and _all(_map(_is, a, b))


def _watch(owners, _tuple=tuple, _map=map, _id=id, _bindings=_bindings):
    """An immutable baseline of each owner's bindings: (owner, keys, values, the keys' ids); the
    objects are held, so their ids stay theirs."""
    out = []
    for owner in owners:
        now = _bindings(owner)
        keys, values = _tuple(now), _tuple(now.values())
        out.append((owner, keys, values, _tuple(_map(_id, keys))))
    return _tuple(out)


def _same(table, _tuple=tuple, _id=id, _bindings=_bindings, _type=type, _len=len,
          _plain=(bool, int, str, type(None)), _ident=_ident):
    """Whether every owner still binds the very keys and values (by identity) of ``table``; a new
    key may only bind a plain value (pytest marks a class once it warned about it)."""
    for owner, keys, values, key_ids in table:
        now = _bindings(owner)
        if _ident(_tuple(now), keys) and _ident(_tuple(now.values()), values):
            continue
        if _len(now) < _len(keys):
            return False
        for key, value in zip(keys, values):
            if now.get(key, now) is not value:
                return False
        known = set(key_ids)
        for key, value in now.items():
            if _id(key) not in known and _type(value) not in _plain:
                return False
    return True


def _same_code(table, _bindings=_bindings, _type=type, _plain=(bool, int, str, float, type(None))):
    """Whether every owner still binds the very values of ``table`` (by identity) but plain ones,
    which may be rebound to plain values, and binds nothing new but plain values (a suite may set
    ``unittest.TestCase.maxDiff``; it may not replace ``assertEqual``)."""
    for owner, keys, values, _key_ids in table:
        now = _bindings(owner)
        for key, value in zip(keys, values):
            new = now.get(key, now)
            if new is not value and not (_type(value) in _plain and _type(new) in _plain):
                return False
        for key, value in now.items():
            if key not in keys and _type(value) not in _plain:
                return False
    return True


def _code_table(owners, _vars=vars, _type=type, _isinstance=isinstance, _tuple=tuple):
    """Each owner's bindings of code: (owner, keys, values, their set, all its keys, all its
    values) of its functions, classes, modules and the static/class methods and properties
    wrapping functions (their other values are state; all of them are held for a quick check)."""
    kinds = (_FUNCTION, staticmethod, classmethod, property, type(sys), type(len))
    out = []
    for owner in owners:
        now = _vars(owner)
        keys = _tuple(k for k, v in now.items() if _type(v) in kinds or _isinstance(v, type))
        out.append((owner, keys, _tuple(now[k] for k in keys), frozenset(keys), _tuple(now),
                    _tuple(now.values())))
    return _tuple(out)


def _same_callables(table, _vars=vars, _type=type, _isinstance=isinstance, _zip=zip,
                    _kinds=(_FUNCTION, staticmethod, classmethod, property, type(sys), type(len)),
                    _tuple=tuple, _ident=_ident):
    """Whether every owner of ``table`` still binds the very code it bound (by identity) and binds
    no new code (state may change: hypothesis keeps its own in module globals)."""
    for owner, keys, values, known, all_keys, all_values in table:
        now = _vars(owner)
        if _ident(_tuple(now), all_keys) and _ident(_tuple(now.values()), all_values):
            continue  # nothing rebound since the baseline
        for key, value in _zip(keys, values):
            if now.get(key, now) is not value:
                return False
        for key, value in now.items():
            if key not in known and (_type(value) in _kinds or _isinstance(value, type)):
                return False
    return True


def _same_but_legacy(table, allowed, _bindings=_bindings, _type=type, _id=id,
                     _plain=(bool, int, str, type(None))):
    """Whether every owner still binds the values of ``table`` (by identity) but where pytest's
    ``legacypath`` plugin, configuring, binds its own functions (``allowed``: their ids, taken
    before any library code ran) or properties of them (``Config.rootdir``, ``Node.fspath``...)."""

    def legacy(value):
        if _type(value) is property:
            return (
                _id(value.fget) in allowed and value.fdel is None
                and (value.fset is None or _id(value.fset) in allowed)
            )
        return _type(value) is _FUNCTION and _id(value) in allowed

    for owner, keys, values, _key_ids in table:
        now = _bindings(owner)
        for key, value in zip(keys, values):
            new = now.get(key, now)
            if new is not value and not legacy(new):
                return False
        for key, value in now.items():
            if key not in keys and _type(value) not in _plain and not legacy(value):
                return False
    return True


def _fields(obj, _vars=vars, _tuple=tuple, _type=type, _getattr=getattr, _str=str):
    """An object's bound values: those of its dict, or of its slots."""
    try:
        return _tuple(_vars(obj).values())
    except TypeError:
        names = []
        for klass in _type(obj).__mro__:
            slots = _getattr(klass, "__slots__", ())
            names.extend((slots,) if _type(slots) is _str else slots)
        return _tuple(_getattr(obj, n, _fields) for n in names)


def _hooks(pm, _tuple=tuple, _getattr=getattr, _vars=vars, _map=map, _id=id,
           _function=operator.attrgetter("function"), _sorted=sorted, _len=len):
    """Every hook's implementations: ((name, caller, the callers' fields, its implementations,
    their functions), ...), the objects held (compared by identity, never by ``id()``)."""
    out = []
    for name, caller in _sorted(_vars(pm.hook).items()):
        impls = _getattr(caller, "_hookimpls", None)
        if impls is not None:
            out.append((name, caller, _fields(caller), _tuple(impls),
                        _tuple(_map(_function, impls))))
    return _tuple(out), pm.hook, _len(_vars(pm.hook))


def _same_hooks(table, pm, _vars=vars, _len=len, _tuple=tuple, _map=map, _ident=_ident,
                _function=operator.attrgetter("function")):
    """Whether the hooks still have the very implementations (and functions) of ``table``."""
    rows, relay, size = table
    now = _vars(relay)
    if pm.hook is not relay or _len(now) != size:
        return False
    for name, caller, fields, impls, functions in rows:
        if now.get(name) is not caller or not _ident(_fields(caller), fields):
            return False
        current = _tuple(caller._hookimpls)
        if not _ident(current, impls) or not _ident(_tuple(_map(_function, current)), functions):
            return False
    return True


def _protocol(item, nextitem, _run=None, _ga=object.__getattribute__, _report=None, _type=type,
              _str=str, _tuple=tuple, _getattr=getattr):
    """Our one hook implementation (``pytest_runtest_protocol``, tried first): run the item's
    protocol and return its phases as ``((nodeid, when, outcome, message), ...)``. It holds no
    secret: whoever calls it gets an honest run's outcome back, and only ``_main`` writes lines."""
    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    rows = ()
    for report in _run(item, nextitem=nextitem):
        if _type(report) is not _report:
            rows = rows + (("", "", "", ""),)
            continue
        nodeid, when, outcome = _ga(report, "nodeid"), _ga(report, "when"), _ga(report, "outcome")
        message = ""
        if outcome == "failed":
            crash = _getattr(_ga(report, "longrepr"), "reprcrash", None)
            text = _getattr(crash, "message", "")
            message = text if _type(text) is _str else ""
        rows = rows + ((nodeid, when, outcome, message),)
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return rows


class _SubtestFailed(BaseException):
    """Raised where pytest logs a failed subtest's report, so the test's own call phase fails."""


def _subtest(report, _sub=None, _ga=object.__getattribute__, _type=type, _str=str,
             _getattr=getattr, _failed=_SubtestFailed):
    """Our log hook (``pytest_runtest_logreport``, tried first): a failed subtest's report
    (``unittest``'s ``subTest``, pytest's ``subtests`` fixture) never reaches the item's protocol,
    which returns only the setup, call and teardown reports; raising here, inside the subtest's
    exit, fails the test's call phase, so its one line reads ``fail``. It holds no state: calling
    it can only fail a test."""
    if _sub is not None and _type(report) is _sub and _ga(report, "outcome") == "failed":
        crash = _getattr(_ga(report, "longrepr"), "reprcrash", None)
        text = _getattr(crash, "message", "")
        raise _failed("a subtest failed: " + (text if _type(text) is _str else ""))


def _main():
    write, exit_ = os.write, os._exit
    root, deps, files = sys.argv[1], sys.argv[2], tuple(sys.argv[3:])
    sys.path[:0] = [deps]  # the checkout joins after the trusted imports: none may load its code
    for name in _PREIMPORT:
        try:
            __import__(name)
        except Exception:
            pass
    import logging
    logging._srcfile = None  # records need no caller frame (it would be refused to library code)
    import pkgutil
    import pluggy
    import _pytest
    import pytest
    for info in list(pkgutil.walk_packages(_pytest.__path__, "_pytest.")) + list(
        pkgutil.iter_modules(pluggy.__path__, "pluggy.")
    ):
        if info.name.split(".")[-1] not in ("pytester", "pytester_assertions", "debugging"):
            try:
                __import__(info.name)
            except Exception:
                pass
    try:  # written into the tree only for a suite that needs it (hypothesis is not vendored)
        import hypothesis
    except ImportError:
        hypothesis = None
    if hypothesis is not None:
        # Loaded before the audit hook, so its code is trusted like pytest's (its explain phase
        # sets a trace function; its first seeded run walks gc.get_referrers): every module
        # but hypothesis.extra's, whose dependencies are not here.
        for info in list(pkgutil.walk_packages(hypothesis.__path__, "hypothesis.")):
            if not info.name.startswith("hypothesis.extra."):
                try:
                    __import__(info.name)
                except Exception:
                    pass
        from hypothesis import Phase, settings
        from hypothesis.internal.entropy import deterministic_PRNG
        # One verdict per tree: examples drawn from each test's own digest (no database, no
        # deadline, which the machine's load would decide; 10 examples a test, as hypothesis' own
        # "dev" profile, not 100: a verdict's time); profiles a suite registers inherit it.
        settings.register_profile(
            "_vg", derandomize=True, database=None, deadline=None, print_blob=False,
            phases=[p for p in Phase if p is not Phase.explain], max_examples=_EXAMPLES,
        )
        settings.load_profile("_vg")
        with deterministic_PRNG():  # registers hypothesis' Random now (it walks the gc)
            pass
    sys.path.insert(1, root)
    import _imp, _signal, _thread, builtins, signal
    import _pytest.config, _pytest.main, _pytest.reports, _pytest.runner, _pytest.python
    runner, reports = _pytest.runner, _pytest.reports
    watched_modules = tuple(
        m for n, m in sorted(sys.modules.items())
        if m is not None and (n.partition(".")[0] in ("_pytest", "pluggy", "pytest"))
    ) + (builtins, _signal, signal, _imp)
    watched_classes = {}  # the classes a test's outcome passes through (checked after each test)
    for module in watched_modules[:-4]:
        for value in vars(module).values():
            if isinstance(value, type) and getattr(value, "__module__", "") in _REPORT_PATH:
                watched_classes[id(value)] = value
    values = []
    for module in list(sys.modules.values()):
        try:
            values.extend(vars(module).values())
        except TypeError:
            pass
    trusted = _code_ids(values, {})
    del values
    _code_ids([_code_ids, _bindings, _ident, _watch, _same, _same_code, _code_table, _same_callables,
               _same_but_legacy, _fields, _hooks, _same_hooks, _protocol,
               _subtest, _SubtestFailed, _main], trusted)
    frame = sys._getframe()
    while frame is not None:  # the command line's code and this program's, below _main
        _code_ids([frame.f_code], trusted)
        frame = frame.f_back
    del frame
    spaces = frozenset(id(vars(m)) for m in list(sys.modules.values()) if hasattr(m, "__dict__"))
    spaces = spaces | {id(globals())}  # the namespaces whose functions' defaults are guarded
    prefix = root.rstrip("/") + "/"
    folders = frozenset(f.rpartition("/")[0] for f in files)  # the tests' helper modules live there
    written = {}  # the test modules as they are on disk before any library code runs
    for folder in folders:
        here = (prefix + folder).rstrip("/")
        for name in sorted(os.listdir(here)):
            if name.endswith(".py"):
                with open(here + "/" + name, "rb") as handle:
                    written[here + "/" + name] = handle.read()
    for here, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if "conftest.py" in names:
            with open(here + "/conftest.py", "rb") as handle:
                written[here + "/conftest.py"] = handle.read()
    import types
    written = types.MappingProxyType(written)
    state = [False, frozenset(k for k in trusted if k is not None), tuple(trusted[None])]
    ns = globals()
    real_signal, real_create = _signal.signal, _imp.create_builtin
    defaults = (_signal.SIG_DFL, _signal.SIG_IGN, _signal.default_int_handler)

    def _signal_guard(signalnum, handler, _real=real_signal, _ok=defaults, _exit=exit_):
        if not any(handler is h for h in _ok) and type(handler) is not int:
            _exit(86)  # a Python handler would be handed a frame without any audit event
        return _real(signalnum, handler)

    def _create_guard(spec, _real=real_create, _exit=exit_, _modules=sys.modules):
        if getattr(spec, "name", None) in _modules:
            _exit(86)  # a second copy of a loaded builtin module (an unguarded _signal)
        return _real(spec)

    _signal.signal = _signal_guard
    _imp.create_builtin = _create_guard
    _code_ids([_signal_guard, _create_guard], trusted)

    def _test_path(path, _prefix=prefix, _folders=folders, _type=type, _str=str):
        """Whether ``path`` is a test module of the checkout (a test file's folder, conftest.py)."""
        if _type(path) is not _str or not path.startswith(_prefix) or "/../" in path:
            return False
        inner = path[len(_prefix):]
        return inner.rpartition("/")[0] in _folders or inner.endswith("conftest.py")

    def _trusted_stack(_state=state, _getframe=sys._getframe, _id=id, _test=_test_path):
        """Whether every frame below the audited operation runs trusted code: the baseline's (the
        standard library, pytest, pluggy, this runner) or the checkout's tests'."""
        _state[0] = True
        try:
            frame = _getframe(2)  # 0: here, 1: the hook, 2: the frame doing the audited operation
            while frame is not None:
                code = frame.f_code
                if _id(code) not in _state[1] and not _test(code.co_filename):
                    return False
                frame = frame.f_back
            return True
        finally:
            _state[0] = False

    import _frozen_importlib_external as external

    def _cached_bytecode(_state=state, _getframe=sys._getframe, _type=type, _str=str,
                         _compile=external._compile_bytecode.__code__,
                         _loader=external.SourceFileLoader,
                         _prefixes=(os.path.dirname(os.__file__) + "/", deps.rstrip("/") + "/")):
        """Whether ``marshal.loads`` runs for the import system on a cached module of the standard
        library or of pytest's tree (read-only there, see _seal; a library could write its own)."""
        _state[0] = True
        try:
            frame = _getframe(2)  # the frame that called marshal.loads
            if frame.f_code is not _compile:
                return False
            caller = frame.f_back.f_locals
            path = caller.get("bytecode_path")
            return (
                _type(caller.get("self")) is _loader and _type(path) is _str
                and "/../" not in path and path.startswith(_prefixes)
            )
        finally:
            _state[0] = False

    import typing

    def _namedtuple_bases(_state=state, _getframe=sys._getframe,
                          _new=getattr(getattr(typing, "NamedTupleMeta", None), "__new__", None)):
        """Whether ``__bases__`` is written by ``typing.NamedTupleMeta.__new__`` (on the class it
        just made: a ``class X(NamedTuple)`` statement, e.g. pyparsing's ``version_info``)."""
        _state[0] = True
        try:
            return _new is not None and _getframe(2).f_code is _new.__code__
        finally:
            _state[0] = False

    def _relabel(target, new, _state=state, _code=_CODE, _function=_FUNCTION, _type=type):
        """Whether a ``__code__`` write only relabels a function: the new code object runs the very
        bytecode, constants and names of the old one (hypothesis' ``impersonate`` gives its @given
        wrapper the test's file name and line)."""
        _state[0] = True
        try:
            if _type(target) is not _function or _type(new) is not _code:
                return False
            old = target.__code__
            return (
                new.co_code == old.co_code and new.co_consts == old.co_consts
                and new.co_names == old.co_names and new.co_varnames == old.co_varnames
                and new.co_freevars == old.co_freevars and new.co_cellvars == old.co_cellvars
            )
        finally:
            _state[0] = False

    for value in vars(external).values():
        if isinstance(value, type):
            watched_classes[id(value)] = value

    def _audit(event, args, _state=state, _exit=exit_, _ns=ns, _me=_main, _trip=_TRIP_EVENTS,
               _set=_TRIP_SET, _deny=_DENY_MODULES, _safe=_SAFE_DEV,
               _ok=_trusted_stack, _test=_test_path, _id=id, _guarded=_GUARDED_SET,
               _spaces=spaces, _getattr=getattr, _type=type, _str=str, _bytes=bytes,
               _fsdecode=os.fsdecode, _normpath=os.path.normpath, _getcwd=os.getcwd,
               _realpath=os.path.realpath,
               _code=_CODE, _bytecode=_cached_bytecode, _nt_bases=_namedtuple_bases,
               _relabel=_relabel, _written=written, _sealed=(prefix, deps.rstrip("/") + "/"),
               _trusted_only=frozenset((
                   "sys.settrace", "sys.setprofile", "os.symlink", "os.link", "code.__new__"
               ))):
        if event == "builtins.id" or _state[0]:
            return  # the commonest event (hypothesis' caches), or one raised by the stack walk
        if event == "object.__getattr__":
            name, target = args[1], args[0]
            if name == "f_code":
                if target.f_globals is _ns and not _ok():
                    _exit(86)  # the runner's own frame, from library code
            elif target is _me:
                _exit(86)  # the code or defaults of _main (the nonce is a constant there)
            return
        if event == "compile":
            if _test(args[1]):
                if not _ok():
                    _exit(86)  # code that would pass for a test's (its frames are trusted)
                source = args[0]
                if _type(source) is _str:
                    source = source.encode("utf-8", "surrogatepass")
                if _type(source) is _bytes and _written.get(args[1]) != source:
                    _exit(86)  # a test module the library wrote (or rewrote) before it was loaded
            return
        if event == "object.__setattr__" or event == "object.__delattr__":
            if args[1] in _set and not (args[1] == "__bases__" and _nt_bases()) and not (
                event == "object.__setattr__" and args[1] == "__code__"
                and _relabel(args[0], args[2]) and _ok()
            ):
                _exit(86)
            if args[1] in _guarded and _id(_getattr(args[0], "__globals__", None)) in _spaces:
                _exit(86)
            return
        if event in _trip or event.startswith("ctypes."):
            _exit(86)
        if event in _trusted_only:
            if not _ok():
                _exit(86)  # doctest restores the trace function it saved, pytest's tmp_path
                # links, hypothesis relabels its @given wrapper's code (all from trusted code only)
            return
        if event == "marshal.loads":
            if not _bytecode():
                _exit(86)  # code objects from bytes: only the standard library's and pytest's caches
            return
        if event == "exec" or event == "function.__new__":
            if _type(args[0]) is _code and _id(args[0]) in _state[1]:
                _exit(86)  # trusted code run again, under globals of someone else's choosing
            return
        if event == "import":
            name = args[0]
            if _type(name) is not _str or name.partition(".")[0] in _deny:
                _exit(86)
            return
        if event == "os.chmod" or event == "os.rename":
            # the tree is read-only (_seal): library code must not make it writable again
            paths = args[:1] if event == "os.chmod" else args[:2]
            fds = args[2:3] if event == "os.chmod" else args[2:4]
            if not _ok():
                for fd in fds:
                    if fd != -1:
                        _exit(86)  # relative to a folder's descriptor: anywhere
                for path in paths:
                    if _type(path) is _bytes:
                        path = _fsdecode(path)
                    if _type(path) is not _str:
                        _exit(86)  # an open descriptor (fchmod): of anything
                    if not path.startswith("/"):
                        path = _getcwd() + "/" + path
                    _state[0] = True
                    try:
                        path = _realpath(path)
                    finally:
                        _state[0] = False
                    for sealed in _sealed:  # "/tmp/work/", its folder as "/tmp/work" too
                        if path.startswith(sealed) or path + "/" == sealed:
                            _exit(86)
            return
        if event == "open" or event == "os.listdir" or event == "os.scandir" or event == "os.chdir":
            path = args[0]
            if _type(path) is _bytes:
                path = _fsdecode(path)
            if _type(path) is _str:
                if not path.startswith("/"):
                    path = _normpath(path)
                    if path == ".." or path.startswith("../"):
                        _exit(86)  # from a folder's descriptor (dir_fd, unseen here) it climbs anywhere
                    path = _getcwd() + "/" + path
                path = _normpath("/" + path.lstrip("/"))  # "//proc" is /proc; normpath keeps "//"
                _state[0] = True
                try:
                    real = _realpath(path)  # a link into /proc (none is shipped; a host may have)
                finally:
                    _state[0] = False
                for path in (path, real):
                    if (
                        path == "/" or path == "/dev"  # their descriptors reach /proc relatively
                        or path == "/proc" or path.startswith("/proc/") or path == "/sys"
                        or path.startswith("/sys/")
                        or (path.startswith("/dev/") and path not in _safe)
                    ):
                        _exit(86)
            elif path is not None and _type(path) is not int:
                _exit(86)

    _code_ids([_test_path, _trusted_stack, _cached_bytecode, _namedtuple_bases, _relabel, _audit],
              trusted)
    state[1] = frozenset(k for k in trusted if k is not None)
    state[2] = tuple(trusted[None])
    owners = watched_modules + tuple(watched_classes.values())
    early = _watch(owners)
    legacy = frozenset(
        id(v) for v in vars(sys.modules.get("_pytest.legacypath", _signal)).values()
        if type(v) is _FUNCTION
    )
    import unittest.case, unittest.util
    unit = _watch((unittest.case, unittest.util) + tuple(
        v for v in vars(unittest.case).values()
        if isinstance(v, type) and getattr(v, "__module__", "") == "unittest.case"
    ))  # the assertions of TestCase-style suites: a library that rebinds them reads as tampered
    hypo_modules = tuple(
        m for n, m in sorted(sys.modules.items())
        if m is not None and n.partition(".")[0] in ("hypothesis", "sortedcontainers")
    )
    hypo = _code_table(hypo_modules + tuple(
        v for m in hypo_modules for v in vars(m).values()
        if isinstance(v, type) and getattr(v, "__module__", "") == m.__name__
    ))  # hypothesis runs a @given test's body: a library that rebinds its code reads as tampered
    del hypo_modules
    _str, _type, _len, _tuple, _frozenset = str, type, len, tuple, frozenset
    _isinstance, _vars, _getattr, _sorted, _id = isinstance, vars, getattr, sorted, id
    _module_type = type(sys)
    _same_, _hooks_, _same_hooks_, _watch_ = _same, _hooks, _same_hooks, _watch
    report_type = reports.TestReport

    def _proto(item, nextitem, _run=runner.runtestprotocol, _report=report_type, _p=_protocol):
        return _p(item, nextitem, _run=_run, _report=_report)

    def _sublog(report, _sub=_getattr(sys.modules.get("_pytest.subtests"), "SubtestReport", None),
                _s=_subtest):
        return _s(report, _sub=_sub)

    sys.addaudithook(_audit)  # the first call only: a second _main ends here (the hook trips)
    # Nothing the hook relies on stays bound here: library code may read this frame's locals.
    del _audit, _trusted_stack, _cached_bytecode, _namedtuple_bases, _relabel, _test_path, state
    del trusted
    del watched_classes

    plugin = type(sys)("_vg_protocol")
    plugin.pytest_runtest_protocol = pytest.hookimpl(tryfirst=True)(_proto)
    plugin.pytest_runtest_logreport = pytest.hookimpl(tryfirst=True)(_sublog)
    args = [
        "-p", "no:cacheprovider", "-p", "no:stepwise", "-p", "no:pastebin",
        "-p", "no:faulthandler", "-p", "no:terminal", "-p", "no:junitxml",
        "--rootdir", root, "-c", root + "/.vg_pytest.ini", "-o", "python_files=test_*.py *_test.py",
        *files,
    ]
    try:
        config = _pytest.config._prepareconfig(args, [plugin])
        pm = config.pluginmanager
        session = _pytest.main.Session.from_config(config)
        config._do_configure()
        config.hook.pytest_sessionstart(session=session)
        if hypothesis is not None:  # a conftest may load its own profile (attrs': a 400-ms deadline)
            settings.register_profile(
                "_vg_final", parent=settings.default, derandomize=True, database=None,
                deadline=None, max_examples=_EXAMPLES,
            )
            settings.load_profile("_vg_final")
        # pytest's configuration changes its own classes; the baseline is taken after it. Where a
        # module of the library was imported meanwhile (by a conftest), the early one must still
        # hold but for what legacypath binds (its own functions, as properties too).
        library = [
            m for m in _tuple(sys.modules.values())
            if _str(_getattr(m, "__file__", "") or "").startswith(prefix)
            and _str(_getattr(m, "__file__", "") or "")[len(prefix):].rpartition("/")[0]
            not in folders
            and not _str(_getattr(m, "__file__", "") or "").endswith("conftest.py")
        ]
        if library and not _same_but_legacy(early, legacy):
            exit_(86)  # library code changed pytest before the baseline below (legacypath may)
        base = _watch_(owners)
        del library, early
        entries = _tuple((n, m) for n, m in sys.modules.items() if m in watched_modules)
        imports = (sys.meta_path, _tuple(sys.meta_path), sys.path_hooks, _tuple(sys.path_hooks))
        plugins = _frozenset(_id(p) for p in pm.get_plugins())

        finders = _tuple({_id(_type(f)): _type(f) for f in sys.path_importer_cache.values()
                          if f is not None}.values())

        def intact(base=base, entries=entries, imports=imports, _modules=sys.modules,
                   _same=_same_, _tuple=_tuple, _sys=sys, finders=finders, _type=_type,
                   unit=unit, hypo=hypo, _same_code=_same_code, _same_callables=_same_callables):
            if (
                not _same(base) or not _same_code(unit) or not _same_callables(hypo)
                or _sys.modules is not _modules
            ):
                return False
            for name, module in entries:
                if _modules.get(name) is not module:
                    return False
            meta, metas, hooks, hookss = imports
            for finder in _sys.path_importer_cache.values():
                if finder is not None and not any(_type(finder) is t for t in finders):
                    return False  # a finder of the library's for a folder of the checkout
            # A finder appended after pytest's and the path finder only sees what they do not
            # claim (tlz adds one for its virtual package); one in front could rewrite tests.
            return (
                _sys.meta_path is meta and _tuple(meta[: len(metas)]) == metas
                and _sys.path_hooks is hooks and _tuple(hooks[: len(hookss)]) == hookss
            )

        config.hook.pytest_collection(session=session)
        if not intact():
            exit_(86)
        prefix = root.rstrip("/") + "/"
        for p in pm.get_plugins():  # new since collection began: only the checkout's conftests
            if _id(p) not in plugins and not (
                _type(p) is _module_type
                and _str(_getattr(p, "__file__", "")).startswith(prefix)
                and _str(_getattr(p, "__file__", "")).endswith("/conftest.py")
            ):
                exit_(86)
        hooks = _hooks_(pm)
        items = _tuple(session.items)
        tests = []
        folders = _frozenset(f.rpartition("/")[0] for f in files)  # the tests' helper modules
        for name, module in _sorted(sys.modules.items()):
            path = _str(_getattr(module, "__file__", "") or "")
            if path.startswith(prefix) and (
                path[len(prefix):] in files or path.endswith("/conftest.py")
                or path[len(prefix):].rpartition("/")[0] in folders
            ):
                tests.append(module)
        code_type, function_type = _CODE, _FUNCTION
        test_table = []
        for m in tests:  # their functions, classes and modules (a test may rebind its data)
            keys = _tuple(k for k, v in _vars(m).items()
                          if _type(v) in (function_type, _module_type) or _isinstance(v, type))
            values = _tuple(_vars(m)[k] for k in keys)
            test_table.append((m, keys, values))
        test_table = _tuple(test_table)
        item_table = _watch_(items)
        for item in items:
            if _str(_type(item).__module__).partition(".")[0] != "_pytest":
                exit_(86)

        def everything(hooks=hooks, pm=pm, test_table=test_table, intact=intact,
                       _same_hooks=_same_hooks_, _count=_thread._count, _threads=_thread._count(),
                       _getsignal=_signal.getsignal, _signals=_tuple(_signal.valid_signals()),
                       _ok=defaults, _vars=_vars, _gettrace=sys.gettrace,
                       _getprofile=sys.getprofile, _map=map, _ident=_ident, _tuple=_tuple):
            if not intact() or not _same_hooks(hooks, pm):
                return False
            if _gettrace() is not None or _getprofile() is not None:
                return False
            for module, keys, values in test_table:
                if not _ident(_tuple(_map(_vars(module).get, keys)), values):
                    return False
            for number in _signals:
                handler = _getsignal(number)
                if handler is not None and _type(handler) is not int and not any(
                    handler is h for h in _ok
                ):
                    return False
            return True

        count = _len(items)
        if not everything():
            exit_(86)
        for index in range(count):
            item = items[index]
            if not _same_((item_table[index],)):
                exit_(86)
            rows = item.ihook.pytest_runtest_protocol(
                item=item, nextitem=items[index + 1] if index + 1 < count else None
            )
            if not everything() or _type(rows) is not _tuple:
                exit_(86)
            nodeid = item.nodeid
            outcome, message, called = "", "", False
            for row in rows:
                if _type(row) is not _tuple or _len(row) != 4 or row[0] != nodeid:
                    exit_(86)
                if row[2] == "failed" and outcome != "fail":
                    outcome, message = "fail", row[3]
                elif row[2] == "skipped" and outcome == "":
                    outcome = "skip"
                elif row[1] == "call" and row[2] == "passed":
                    called = True
            if outcome == "":
                outcome = "pass" if called else "fail"
            if _type(nodeid) is not _str or _type(message) is not _str or "\n" in nodeid:
                exit_(86)
            line = _str(index) + " " + outcome + " " + nodeid + "\t" + message.replace("\n", " ")[:400]
            write(@@FD@@, b"@@NONCE@@ " + (line + "\n").encode("utf-8", "replace"))
        if not everything():
            exit_(86)
        write(@@FD@@, b"@@NONCE@@ " + (_str(count) + " end " + _str(count) + "\n").encode())
    except BaseException:
        exit_(86)
    exit_(0)


_main()
'''


def write_blobs(root, files):
    """Write ``{relative path: base64 text}`` below ``root`` (binary files: hypothesis' compiled
    module); the count. Paths must stay inside ``root``."""
    base = os.path.realpath(root)
    for rel, text in files.items():
        path = os.path.realpath(os.path.join(base, rel))
        if not path.startswith(base + "/"):
            raise ValueError("path outside the tree: " + rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(base64.b64decode(text))
    return len(files)


def _seal(root):
    """Make the tree read-only (files 0o444, folders 0o555) before the child starts: the library
    must not rewrite a test's data file or a module the tests import (the child's audit hook ends
    it on a ``chmod`` or ``rename`` of the tree from library code). Without effect for root."""
    for here, _, names in os.walk(root, topdown=False):
        for name in names:
            path = os.path.join(here, name)
            if not os.path.islink(path):
                os.chmod(path, 0o444)
        os.chmod(here, 0o555)


def run_pytest(root, deps, files, timeout_s=60.0):
    """Run pytest on ``files`` (paths relative to ``root``) in a child; {"results", "messages",
    "tampered"}.

    ``results`` maps pytest node ids to ``"pass"``, ``"fail"`` or ``"skip"``, ``messages`` a failing
    test to the first line of its failure; ``tampered`` is True unless the child ended with exit
    status 0 after an end line, every line carrying the nonce and numbered in order, each test once.
    """
    with open(os.path.join(root, ".vg_pytest.ini"), "w") as f:
        f.write("[pytest]\n")
    _seal(root)
    _seal(deps)  # pytest's tree too: its cached bytecode is trusted (marshal) and it leads sys.path
    read_fd, write_fd = os.pipe()
    nonce = secrets.token_hex(16)
    program = _CHILD.replace("@@NONCE@@", nonce).replace("@@FD@@", str(write_fd)).encode()
    child = subprocess.Popen(
        [sys.executable, "-I", "-S", "-B", "-c", _BOOT, root, deps, *files],
        pass_fds=(write_fd,),
        cwd=root,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={"PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"},
    )
    os.close(write_fd)
    try:
        child.stdin.write(program)
        child.stdin.close()
    except OSError:
        pass
    chunks, size, deadline = [], 0, time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            child.kill()
            break
        ready, _, _ = select.select([read_fd], [], [], left)
        if not ready:
            continue
        data = os.read(read_fd, 65536)
        if not data:
            break
        size += len(data)
        if size > _REPORT_CAP:
            child.kill()
            break
        chunks.append(data)
    os.close(read_fd)
    try:
        status = child.wait(timeout=5)
    except subprocess.TimeoutExpired:
        child.kill()
        status = -9
    return _parse(b"".join(chunks), nonce, status)


def _parse(data, nonce, status):
    """The results of a child's report (see :func:`run_pytest`)."""
    results, messages, ended, tampered, count = {}, {}, False, status != 0, 0
    for line in data.decode("utf-8", "replace").split("\n")[:-1]:
        parts = line.split(" ", 3)
        if len(parts) != 4 or parts[0] != nonce or ended or parts[1] != str(count):
            tampered = True
            continue
        outcome, rest = parts[2], parts[3]
        if outcome == "end":
            ended = rest == str(count)
            continue
        count += 1
        nodeid, _, message = rest.partition("\t")
        if outcome not in ("pass", "fail", "skip") or nodeid in results:
            tampered = True
            continue
        results[nodeid] = outcome
        if outcome == "fail":
            messages[nodeid] = message
    return {"results": results, "messages": messages, "tampered": tampered or not ended}
