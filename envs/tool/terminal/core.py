"""The pieces every Terminal template shares: the template record, filesystem snapshots, the
fresh-sandbox runner of checkers, and small scoring helpers.

A template (:class:`Template`) is three pure functions and a name:

* ``generate(rng) -> (instruction, files, expect)``: the task text, the initial workspace
  (``{relative path: str | bytes | (str | bytes, mode)}``; directories are implied) and the hidden
  expectation (JSON values, never shown to the agent);
* ``check(expect, final, runner) -> (success, score, detail)``: the verdict from the final
  workspace (a :class:`Snapshot` taken by a fresh process after every agent process was killed)
  and, for tasks that ask for a program, runs of that program on new hidden inputs in a fresh
  sandbox (:class:`Runner`). It never reads what the agent printed;
* ``oracle(expect) -> list[str]``: shell commands, run in the workspace directory one per
  ``run_shell`` call, that solve the task.

Scores: ``score = fraction of the required items done x (no guard broken)``; the initial workspace
has no item done, so doing nothing (or only printing text) scores 0.
"""

from __future__ import annotations

import base64
import json
import os
import posixpath
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from verigym.workers import process_state

__all__ = [
    "Entry",
    "FileValue",
    "Runner",
    "Snapshot",
    "Template",
    "Verdict",
    "scored",
    "host_snapshot",
    "snapshot_from_wire",
    "tree_code",
    "tree_command",
    "SNAPSHOT_SOURCE",
]

FileValue = str | bytes | tuple[str | bytes, int]
"""An initial file: its text (UTF-8), bytes, or ``(content, permission bits)``."""

Verdict = tuple[bool, float, str]
"""``(success, score in [0, 1], detail for the episode info)``."""

MAX_FILES = 4000
"""Most entries a snapshot reads; more is reported as an error (the check fails)."""
MAX_BYTES = 32 << 20
"""Most file bytes a snapshot reads in all."""
MAX_TEXT_BYTES = 1 << 20
"""Largest file :meth:`Snapshot.text` decodes (a checker parses text: CSV rows, JSON; a 32 MiB
file of short lines would cost the env's process gigabytes as parsed rows). Larger is ``None``."""


@dataclass(frozen=True)
class Entry:
    """One path of a snapshot.

    Attributes:
        kind: ``"f"`` regular file, ``"d"`` directory, ``"l"`` symbolic link, ``"o"`` anything else.
        mode: permission bits (``0o7777`` mask; 0 for a link).
        data: the file's bytes (``None`` for non-files and for a file the snapshot could not read).
        target: a link's target (``""`` otherwise).
    """

    kind: str
    mode: int
    data: bytes | None = None
    target: str = ""


@dataclass
class Snapshot:
    """A workspace's tree: relative POSIX path -> :class:`Entry`; ``error`` when it was cut."""

    entries: dict[str, Entry] = field(default_factory=dict)
    error: str = ""

    def files(self, under: str = "") -> dict[str, Entry]:
        """Regular files (below the folder ``under``, when given), by relative path."""
        prefix = under.rstrip("/") + "/" if under else ""
        return {p: e for p, e in self.entries.items() if e.kind == "f" and p.startswith(prefix)}

    def data(self, path: str) -> bytes | None:
        """The bytes of the regular file ``path``; ``None`` when it is not one."""
        entry = self.entries.get(path)
        return entry.data if entry is not None and entry.kind == "f" else None

    def text(self, path: str) -> str | None:
        """The UTF-8 text of the regular file ``path``; ``None`` when missing, not UTF-8 or over
        :data:`MAX_TEXT_BYTES` (no task's answer is that large; what checkers parse stays small)."""
        raw = self.data(path)
        if raw is None or len(raw) > MAX_TEXT_BYTES:
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def mode(self, path: str) -> int | None:
        entry = self.entries.get(path)
        return entry.mode if entry is not None else None


SNAPSHOT_SOURCE = r"""
import base64 as _b64, os as _os, stat as _stat

def _vg_snapshot(root, max_files, max_bytes):
    entries, total, error = {}, 0, ""
    try:
        top = _os.lstat(root)
    except OSError:
        return {"error": "the workspace folder is gone", "entries": {}}
    if not _stat.S_ISDIR(top.st_mode):  # a link in its place would make another folder count
        return {"error": "the workspace folder was replaced by something else", "entries": {}}
    stack = [""]
    while stack and not error:
        rel_dir = stack.pop()
        here = _os.path.join(root, rel_dir) if rel_dir else root
        try:
            names = sorted(_os.listdir(here))
        except OSError as exc:
            entries[rel_dir or "."] = ["d", 0, "", "unreadable: " + type(exc).__name__]
            continue
        for name in names:
            rel = rel_dir + "/" + name if rel_dir else name
            path = _os.path.join(here, name)
            if len(entries) >= max_files:
                error = "more than %d entries" % max_files
                break
            try:
                st = _os.lstat(path)
            except OSError:
                continue
            mode = _stat.S_IMODE(st.st_mode)
            if _stat.S_ISLNK(st.st_mode):
                entries[rel] = ["l", 0, "", _os.readlink(path)]
            elif _stat.S_ISDIR(st.st_mode):
                entries[rel] = ["d", mode, "", ""]
                stack.append(rel)
            elif _stat.S_ISREG(st.st_mode):
                if total + st.st_size > max_bytes:
                    error = "more than %d bytes of files" % max_bytes
                    break
                try:
                    fd = _os.open(path, _os.O_RDONLY | _os.O_NOFOLLOW | _os.O_NONBLOCK)
                except OSError:
                    entries[rel] = ["f", mode, None, ""]
                    continue
                with _os.fdopen(fd, "rb") as handle:
                    raw = handle.read(st.st_size + 1)[: max_bytes - total]
                total += len(raw)
                entries[rel] = ["f", mode, _b64.b64encode(raw).decode("ascii"), ""]
            else:
                entries[rel] = ["o", mode, "", ""]
    return {"error": error, "entries": entries}
"""
"""Source of ``_vg_snapshot(root, max_files, max_bytes)``, run inside a sandbox: it never follows
a link, never opens anything but a regular file (``O_NOFOLLOW | O_NONBLOCK``) and stops at the caps."""

_HOST: dict[str, Any] = {}
exec(compile(SNAPSHOT_SOURCE, "<verigym terminal snapshot>", "exec"), _HOST)  # our own source


def host_snapshot(path: str) -> Snapshot:
    """The tree at ``path`` read by this process (see :data:`SNAPSHOT_SOURCE` for what is read).

    For a sandbox's tree through ``/proc/<stopped worker pid>/root``: with every process of the
    sandbox stopped or killed nothing changes the tree while it is read, and no link is followed,
    so nothing outside the tree is read.
    """
    return snapshot_from_wire(_HOST["_vg_snapshot"](path, MAX_FILES, MAX_BYTES))


SNAPSHOT_CALL = (
    "import json as _json, subprocess as _sp, sys as _sys\n"
    "def _vg_fresh_snapshot(root, max_files, max_bytes, timeout):\n"
    "    # a new interpreter reads the tree: nothing the agent's commands did to this process counts\n"
    "    code = _VG_SOURCE + '\\nimport json, sys\\nsys.stdout.write(json.dumps(_vg_snapshot(*json.loads(sys.argv[1]))))'\n"
    "    done = _sp.run([_sys.executable, '-I', '-S', '-c', code, _json.dumps([root, max_files, max_bytes])],\n"
    "                   capture_output=True, timeout=timeout, stdin=_sp.DEVNULL)\n"
    "    if done.returncode != 0:\n"
    "        return {'error': 'snapshot failed: ' + done.stderr.decode('utf-8', 'replace')[-300:], 'entries': {}}\n"
    "    return _json.loads(done.stdout)\n"
)
"""Source of ``_vg_fresh_snapshot(root, max_files, max_bytes, timeout)``: the snapshot taken by a
new ``python -I -S`` process (prepend ``_VG_SOURCE = <repr of SNAPSHOT_SOURCE>``)."""


def snapshot_setup_code() -> str:
    """Python cell that defines ``_vg_fresh_snapshot`` in a sandbox notebook."""
    return f"_VG_SOURCE = {SNAPSHOT_SOURCE!r}\n{SNAPSHOT_CALL}"


def snapshot_from_wire(value: Any) -> Snapshot:
    """A :class:`Snapshot` from the JSON a sandbox returned; anything malformed is an error.

    Never raises: the value came from a process the agent shared a machine with.
    """
    snap = Snapshot()
    if not isinstance(value, dict) or not isinstance(value.get("entries"), dict):
        snap.error = "no snapshot"
        return snap
    error = value.get("error")
    snap.error = error[:300] if isinstance(error, str) else "malformed snapshot"
    for rel, item in list(value["entries"].items())[:MAX_FILES]:
        if (
            not isinstance(rel, str)
            or not isinstance(item, list)
            or len(item) != 4
            or item[0] not in ("f", "d", "l", "o")
            or type(item[1]) is not int
        ):
            snap.error = snap.error or "malformed snapshot entry"
            continue
        kind, mode, payload, target = item
        data = None
        if kind == "f" and isinstance(payload, str):
            try:
                data = base64.b64decode(payload.encode("ascii"), validate=True)
            except (ValueError, UnicodeEncodeError):
                data = None
        snap.entries[rel] = Entry(
            kind, mode & 0o7777, data, target if isinstance(target, str) else ""
        )
    return snap


def normalize_files(files: Mapping[str, FileValue]) -> dict[str, tuple[bytes, int]]:
    """``{path: (bytes, mode)}`` from a template's initial files (default mode ``0o644``).

    Raises:
        ValueError: a path is absolute, climbs out with ``..`` or is empty.
    """
    out = {}
    for path, value in files.items():
        norm = posixpath.normpath(path)
        if not path or norm.startswith(("/", "..")) or norm == ".":
            raise ValueError(f"initial file path {path!r} is not inside the workspace")
        content, mode = value if isinstance(value, tuple) else (value, 0o644)
        out[norm] = (content.encode("utf-8") if isinstance(content, str) else content, mode)
    return out


def tree_code(root: str, files: Mapping[str, FileValue]) -> str:
    """Python source that creates ``root`` and writes ``files`` below it (modes applied last)."""
    payload = {
        path: [base64.b64encode(data).decode("ascii"), mode]
        for path, (data, mode) in normalize_files(files).items()
    }
    return (
        "import base64 as _b, json as _j, os as _o\n"
        f"_root = {root!r}\n"
        "_o.makedirs(_root, exist_ok=True)\n"
        f"for _p, (_d, _m) in _j.loads({json.dumps(payload)!r}).items():\n"
        "    _f = _o.path.join(_root, _p)\n"
        "    _o.makedirs(_o.path.dirname(_f), exist_ok=True)\n"
        "    with open(_f, 'wb') as _h:\n"
        "        _h.write(_b.b64decode(_d))\n"
        "    _o.chmod(_f, _m)\n"
    )


def tree_command(root: str, files: Mapping[str, FileValue]) -> str:
    """A shell command (``python3 -c``, compressed) that does what :func:`tree_code` does; for a
    workspace that logs and replays its shell commands."""
    packed = base64.b64encode(zlib.compress(tree_code(root, files).encode("utf-8"), 9))
    return (
        'python3 -I -S -c "import base64, zlib; '
        f"exec(zlib.decompress(base64.b64decode('{packed.decode('ascii')}')))\""
    )


RUN_SOURCE = r"""
import os as _vg_os, subprocess as _vg_sp, sys as _vg_sys
_vg_os.makedirs("/tmp/.bin", exist_ok=True)
for _vg_name in ("python", "python3"):
    if not _vg_os.path.lexists("/tmp/.bin/" + _vg_name):
        _vg_os.symlink(_vg_sys.executable, "/tmp/.bin/" + _vg_name)
def _vg_shell(command, cwd, timeout, stdin_text):
    # output to a file, not a pipe: a process that left the group cannot hold the call open
    import signal as _vg_signal
    with open("/tmp/.vg_in", "wb") as handle:
        handle.write(stdin_text.encode("utf-8"))
    with open("/tmp/.vg_in", "rb") as stdin, open("/tmp/.vg_out", "wb") as out:
        process = _vg_sp.Popen(["/bin/sh", "-c", command], cwd=cwd, stdin=stdin, stdout=out,
                               stderr=_vg_sp.DEVNULL, start_new_session=True,
                               env={"PATH": "/tmp/.bin:/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"})
        try:
            status = process.wait(timeout=timeout)
        except _vg_sp.TimeoutExpired:
            try:
                _vg_os.killpg(process.pid, _vg_signal.SIGKILL)
            except OSError:
                pass
            process.wait()
            status = -1
    with open("/tmp/.vg_out", "rb") as handle:
        data = handle.read(1 << 20)
    return [status, data.decode("utf-8", "replace"), ""]
"""


class Runner:
    """Runs what a task asked the agent to write, in a sandbox that no agent code has touched.

    Each :meth:`shell` call starts from a **new** sandbox holding only the given files (the
    agent's program copied from the final snapshot, plus hidden inputs), runs one ``/bin/sh -c``
    command there and returns its exit status, its stdout and the tree afterwards. Created by the
    env per verdict; ``sandbox_factory`` makes a :class:`verigym.sandbox.PythonSandbox`.
    """

    ROOT = "/tmp/check"

    def __init__(self, sandbox_factory: Callable[[], Any]):
        self._factory = sandbox_factory
        self._box: Any = None
        self.calls = 0
        self.timeout_s = 10.0
        """Cap of every command's wall-clock seconds (the env sets it from its shell timeout)."""

    def shell(
        self,
        files: Mapping[str, FileValue],
        command: str,
        *,
        timeout: float = 5.0,
        stdin: str = "",
        snapshot: bool = False,
    ) -> tuple[int, str, Snapshot | None]:
        """``(exit status, stdout, snapshot or None)``; a sandbox failure is status ``-1``."""
        self.calls += 1
        timeout = min(float(timeout), self.timeout_s)
        if self._box is None:
            self._box = self._factory()
        box = self._box
        box.fresh()
        setup = box.run(
            tree_code(self.ROOT, files) + RUN_SOURCE + snapshot_setup_code(), timeout=30.0
        )
        if not setup.ok:
            return -1, "", None
        result = box.call(
            "_vg_shell", [command, self.ROOT, float(timeout), stdin], timeout=timeout + 5.0
        )
        value = result.value
        if not result.ok or not isinstance(value, list) or len(value) != 3:
            return -1, "", None
        status, out = value[0], value[1]
        snap = None
        pid = box.notebook_pid
        if snapshot and pid is not None and os.path.isdir(f"/proc/{pid}/root/tmp"):
            # read by this process while the worker is stopped: the program that ran there could
            # have written into the worker's memory, so its answer is not asked for
            if process_state(pid) in ("T", "t"):
                snap = host_snapshot(f"/proc/{pid}/root{self.ROOT}")
        if snapshot and snap is None:
            taken = box.call(
                "_vg_fresh_snapshot", [self.ROOT, MAX_FILES, MAX_BYTES, 30.0], timeout=40.0
            )
            snap = snapshot_from_wire(taken.value if taken.ok else None)
        return (status if type(status) is int else -1), (out if isinstance(out, str) else ""), snap

    def close(self) -> None:
        if self._box is not None:
            self._box.close()
            self._box = None


@dataclass(frozen=True)
class Template:
    """A Terminal task template (see the module docstring).

    Attributes:
        name: the template's id (``template=`` kwarg of the env), lowercase with underscores.
        group: its family: ``text``, ``data``, ``refactor``, ``files``, ``script``, ``git``,
            ``perms``, ``repair``.
        generate, check, oracle: the three functions.
        needs: programs that must exist inside the sandbox (``("git",)``); a template whose
            program is missing is left out of the draw.
        setup: shell commands (from the expectation) run in the workspace after the files are
            written and before the agent's first turn (e.g. ``git init`` and commits with fixed
            dates, so the repository is the same for a seed); ``None`` for none.
    """

    name: str
    group: str
    generate: Callable[[np.random.Generator], tuple[str, dict[str, FileValue], dict[str, Any]]]
    check: Callable[[dict[str, Any], Snapshot, Runner], Verdict]
    oracle: Callable[[dict[str, Any]], list[str]]
    needs: tuple[str, ...] = ()
    setup: Callable[[dict[str, Any]], list[str]] | None = None


def scored(items: Sequence[bool], guards: Sequence[bool] = (), detail: str = "") -> Verdict:
    """``score = mean(items) x all(guards)``; success when the score is 1."""
    if not items:
        return False, 0.0, detail or "nothing to check"
    score = (sum(bool(i) for i in items) / len(items)) if all(guards) else 0.0
    done = sum(bool(i) for i in items)
    text = f"{done}/{len(items)} items" + ("" if all(guards) else ", a guard failed (score 0)")
    return score == 1.0, float(score), f"{text}{'; ' + detail if detail else ''}"


def choice(rng: np.random.Generator, seq: Sequence[Any]) -> Any:
    """One element of ``seq`` drawn with ``rng``."""
    return seq[int(rng.integers(len(seq)))]


def sample(rng: np.random.Generator, seq: Sequence[Any], k: int) -> list[Any]:
    """``k`` distinct elements of ``seq`` in a random order."""
    return [seq[int(i)] for i in rng.permutation(len(seq))[:k]]


def is_mode(entry: Entry | None, bits: int) -> bool:
    """Whether ``entry`` is a file or folder whose 12 permission bits (setuid, setgid and sticky
    included: ``0o7777``) are exactly ``bits``."""
    return entry is not None and entry.kind in ("f", "d") and entry.mode & 0o7777 == bits


WORDS = (
    "amber apple arrow aspen bacon badge basil beach birch blaze bloom brick brook cabin cable cedar "
    "chalk cider clove cobalt comet coral crane delta denim dune ember fable fern flint frost gable "
    "glade grove harbor hazel heron iris ivory jade juniper kelp lagoon lark lemon lilac linen "
    "lotus maple marsh meadow mint moss nectar nova oak olive onyx opal orchid otter pearl pebble "
    "pine plum poppy quartz quill raven reed ridge river robin rowan sage sand sierra slate sparrow "
    "spruce stone swan thistle thorn tide topaz tulip umber vale velvet willow wren yarrow zephyr"
).split()
"""Vocabulary for generated names and text."""
