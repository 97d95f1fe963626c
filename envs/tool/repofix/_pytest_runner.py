"""The pytest runner of RepoFix-Real that runs inside the verdict sandbox (stdlib only; never imported
by verigym).

Its source is sent to a :class:`verigym.sandbox.PythonSandbox` and :func:`run_pytest` is called there
through ``PythonSandbox.call``, so outcomes reach the parent as type-checked JSON. The process that
answers never imports repository code: it starts one ``python -I -S`` child that runs pytest (the
vendored copy written into the tree) on the named test files with a plugin of ours, which reports
each test's outcome over a pipe, each line prefixed by a nonce drawn for that child.

Before pytest collects anything (and so before any library module is imported) the child installs
an audit hook (PEP 578: it cannot be removed) that ends it with :data:`TAMPERED` on writes of
``__code__``/``__class__``, trace and profile hooks,
new audit hooks, the garbage collector's object walks, ``ctypes`` and opening ``/proc``; and it
fingerprints (by identity) the pytest functions and classes a report passes through, and the
plugin's own. Each report is checked against that fingerprint before it is sent; a mismatch, a
child that dies, a missing end line or a test reported twice marks the run tampered (every test
fails).
"""

import os
import secrets
import select
import subprocess
import sys
import time

TAMPERED = 86
_REPORT_CAP = 8 << 20

_CHILD = r"""
import os, sys
_fd, _nonce, _root, _deps = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
sys.path[:0] = [_deps, _root]
_exit, _write = os._exit, os.write
_SET = frozenset(("__code__", "__class__"))
_TRIP = frozenset(("sys.addaudithook", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
                   "sys._current_frames", "sys.monitoring.register_callback",
                   "sys.monitoring.use_tool_id", "sys.settrace", "sys.setprofile"))

def _audit(event, args, _exit=_exit, _set=_SET, _trip=_TRIP):
    if event == "object.__setattr__" or event == "object.__delattr__":
        if args[1] in _set:
            _exit(86)
        return
    if event in _trip or event.startswith("ctypes."):
        _exit(86)
    if event == "import" and str(args[0]).partition(".")[0] in ("ctypes", "_ctypes"):
        _exit(86)
    if event == "open" and isinstance(args[0], str) and (
        args[0].startswith("/proc") or args[0].startswith("/sys")
    ):
        _exit(86)

import pytest, _pytest.runner, _pytest.reports, _pytest.python, _pytest.main, pluggy
sys.addaudithook(_audit)

def _watch():
    out = []
    for module in (_pytest.runner, _pytest.reports, _pytest.python, _pytest.main, pytest):
        out.append((module, dict(vars(module))))
    for klass in (_pytest.reports.TestReport, _pytest.reports.BaseReport, pluggy.HookCaller,
                  pluggy.PluginManager):
        out.append((klass, dict(vars(klass))))
    return out

class _Plugin:
    def __init__(self):
        self.seen = set()
        self.failed = set()

    def pytest_runtest_logreport(self, report):
        _check(self)
        nodeid = report.nodeid
        outcome = object.__getattribute__(report, "outcome")
        when = object.__getattribute__(report, "when")
        if outcome == "failed":
            self.failed.add(nodeid)
            crash = getattr(report.longrepr, "reprcrash", None)
            message = str(getattr(crash, "message", "") or "")[:400]
            _send(nodeid + "\t" + message.replace("\n", " "), "fail")
        elif when == "call" and outcome == "passed" and nodeid not in self.failed:
            _send(nodeid, "pass")
        elif outcome == "skipped" and nodeid not in self.failed:
            _send(nodeid, "skip")

    def pytest_sessionfinish(self, session):
        _check(self)
        _send("", "end")

def _send(nodeid, outcome, _write=_write, _fd=_fd, _nonce=_nonce):
    _write(_fd, (_nonce + " " + outcome + " " + nodeid + "\n").encode("utf-8", "replace"))

_PLUGIN = _Plugin()
_WATCHED = _watch()
_OWN = {k: v for k, v in vars(_Plugin).items()}
_OWN_GLOBALS = {"_send": _send}

def _check(plugin, _watched=_WATCHED, _own=_OWN, _exit=_exit):
    for owner, table in _watched:
        now = vars(owner)
        for key, value in table.items():
            if now.get(key) is not value:
                _exit(86)
    if {k: v for k, v in vars(_Plugin).items()} != _own or type(plugin) is not _Plugin:
        _exit(86)
    if globals().get("_send") is not _OWN_GLOBALS["_send"]:
        _exit(86)

code = pytest.main(
    ["-q", "-p", "no:cacheprovider", "-p", "no:stepwise", "-p", "no:pastebin", "-p", "no:faulthandler",
     "--rootdir", _root, "-c", _root + "/.vg_pytest.ini", "-o", "python_files=test_*.py *_test.py",
     *sys.argv[5:]],
    plugins=[_PLUGIN],
)
_check(_PLUGIN)
_exit(0)
"""


def run_pytest(root, deps, files, timeout_s=60.0):
    """Run pytest on ``files`` (paths relative to ``root``) in a child; {"results", "tampered"}.

    ``results`` maps pytest node ids to ``"pass"``, ``"fail"`` or ``"skip"``; ``tampered`` is True
    when the child ended otherwise than by our plugin's end line and exit status 0.
    """
    with open(os.path.join(root, ".vg_pytest.ini"), "w") as f:
        f.write("[pytest]\n")
    read_fd, write_fd = os.pipe()
    nonce = secrets.token_hex(16)
    child = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", _CHILD, str(write_fd), nonce, root, deps, *files],
        pass_fds=(write_fd,),
        cwd=root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={"PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"},
    )
    os.close(write_fd)
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
    results, messages, ended, tampered = {}, {}, False, status != 0
    for line in b"".join(chunks).decode("utf-8", "replace").splitlines():
        head, _, rest = line.partition(" ")
        outcome, _, nodeid = rest.partition(" ")
        if head != nonce or ended:
            tampered = True
            continue
        if outcome == "end":
            ended = True
        elif outcome == "fail":
            nodeid, _, message = nodeid.partition("\t")
            results[nodeid] = "fail"
            messages.setdefault(nodeid, message)
        elif outcome in ("pass", "skip") and nodeid not in results:
            results[nodeid] = outcome
        elif outcome in ("pass", "skip"):
            tampered = tampered or results[nodeid] != "fail"
    return {"results": results, "messages": messages, "tampered": tampered or not ended}
