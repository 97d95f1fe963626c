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
import shlex
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from verigym.envs.tool import _sandbox_shell
from verigym.envs.tool.workspace import SANDBOX_SOURCE
from verigym.workers import process_state

__all__ = [
    "Entry",
    "FileValue",
    "Runner",
    "Snapshot",
    "Template",
    "Verdict",
    "scored",
    "fresh_snapshot",
    "sandbox_tree",
    "host_snapshot",
    "snapshot_from_wire",
    "tree_command",
    "tree_payload",
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


def host_snapshot(path: str) -> Snapshot:
    """The tree at ``path`` read by this process (the sandbox-side ``_vg_snapshot`` of
    ``envs/tool/_sandbox_shell.py``: no link is followed, only regular files are opened, and it
    stops at :data:`MAX_FILES` entries and :data:`MAX_BYTES` bytes).

    For a sandbox's tree through ``/proc/<stopped worker pid>/root``: with every process of the
    sandbox stopped or killed nothing changes the tree while it is read, and no link is followed,
    so nothing outside the tree is read.
    """
    return snapshot_from_wire(_sandbox_shell._vg_snapshot(path, MAX_FILES, MAX_BYTES))


def sandbox_tree(box: Any, root: str, timeout: float) -> Snapshot:
    """The tree at ``root`` in ``box`` (a :class:`verigym.sandbox.PythonSandbox` whose last call
    has returned) read by this process through ``/proc/<worker>/root`` while the worker is stopped.

    Agent commands can write into the worker's memory, so nothing the worker computes or relays is
    asked for: a worker that is gone, not stopped or whose root this process cannot read (a
    non-root host once the worker was made non-dumpable) gives a snapshot with ``error`` set. Only
    without the sandbox (``unsafe``, where nothing is trusted anyway) a new ``python -I -S``
    process reads the tree (:func:`fresh_snapshot`).
    """
    if getattr(box, "unsafe", False):
        return fresh_snapshot(box, root, timeout)
    pid = box.notebook_pid
    if pid is None or process_state(pid) not in ("T", "t"):
        return Snapshot(error="the sandbox's worker is gone or was not stopped")
    if not os.path.isdir(f"/proc/{pid}/root/tmp"):
        return Snapshot(error="the sandbox's files are not readable from here")
    return host_snapshot(f"/proc/{pid}/root{root}")


def fresh_snapshot(box: Any, root: str, timeout: float) -> Snapshot:
    """The tree at ``root`` in ``box`` (a :class:`verigym.sandbox.PythonSandbox`) read by a new
    ``python -I -S`` process there and answered through the worker: for ``unsafe`` sandboxes only
    (:func:`sandbox_tree`), since agent commands can write into the worker's memory. A failure is
    a snapshot with ``error`` set.
    """
    loaded = box.run(SANDBOX_SOURCE, timeout=30.0)
    if not loaded.ok:
        return Snapshot(error="the snapshot could not start")
    taken = box.call(
        "_vg_fresh_snapshot",
        [SANDBOX_SOURCE, root, MAX_FILES, MAX_BYTES, timeout],
        timeout=timeout + 10.0,
    )
    return snapshot_from_wire(taken.value if taken.ok else None)


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


def tree_payload(files: Mapping[str, FileValue]) -> dict[str, list[Any]]:
    """``{path: [base64 bytes, mode]}``: the argument of the sandbox-side ``_vg_write_files``.

    Raises:
        ValueError: a path is absolute, climbs out with ``..`` or is empty.
    """
    return {
        path: [base64.b64encode(data).decode("ascii"), mode]
        for path, (data, mode) in normalize_files(files).items()
    }


def _packed(data: bytes) -> str:
    return base64.b64encode(zlib.compress(data, 9)).decode("ascii")


def tree_command(root: str, files: Mapping[str, FileValue]) -> str:
    """A shell command that creates ``root`` and writes ``files`` below it (modes applied after
    each write): ``python3 -I -S -c`` with a one-line bootstrap that runs the sandbox-side module
    (compressed) as a script; for a workspace that logs and replays its shell commands.

    Raises:
        ValueError: a path is absolute, climbs out with ``..`` or is empty.
    """
    payload = json.dumps(tree_payload(files)).encode("utf-8")
    source = _packed(SANDBOX_SOURCE.encode("utf-8"))
    bootstrap = f"import base64, zlib; exec(zlib.decompress(base64.b64decode('{source}')))"
    return f'python3 -I -S -c "{bootstrap}" --vg-write-files {shlex.quote(root)} {_packed(payload)}'


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
        setup = box.run(SANDBOX_SOURCE, timeout=30.0)
        if setup.ok:
            setup = box.call("_vg_write_files", [self.ROOT, tree_payload(files)], timeout=30.0)
        if not setup.ok:
            return -1, "", None
        result = box.call(
            "_vg_run", [command, self.ROOT, float(timeout), stdin], timeout=timeout + 5.0
        )
        value = result.value
        if not result.ok or not isinstance(value, list) or len(value) != 3:
            return -1, "", None
        status, out = value[0], value[1]
        # read by this process while the worker is stopped: the program that ran there could
        # have written into the worker's memory, so its answer is not asked for
        snap = sandbox_tree(box, self.ROOT, 30.0) if snapshot else None
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
