"""A sandboxed file workspace with shell, file and patch tools (for repository and terminal tasks).

A :class:`Workspace` owns one :class:`verigym.sandbox.PythonSandbox` and keeps a directory tree at a
fixed path inside it (:data:`ROOT`, ``/tmp/work``: the sandbox's ``/tmp`` is a private, size-capped
tmpfs that starts empty each episode). :meth:`Workspace.reset` starts a new sandbox (nothing of the
last episode is left) and writes the tree in from a ``{relative path: text}`` dict. The tools, as
native tool calls (:data:`WORKSPACE_TOOLS`, OpenAI function-calling schemas):

* ``run_shell(command)``: ``/bin/sh -c command`` inside the sandbox (run by Python ``subprocess``
  from the sandbox's worker, in its own session, working directory :data:`ROOT`, a small fixed
  environment, killed with its process group at ``shell_timeout_s``). Output (stdout and stderr
  together, through an unlinked file, so a background process that keeps it open cannot hold the
  call) is capped at ``output_chars`` characters and says when it was cut. The sandbox call's own
  deadline is ``shell_timeout_s + 10`` s: a command that runs too long is reported in the
  observation (``[killed after N s]``), never as a dead sandbox.
* ``read_file(path, start_line, end_line)``: numbered lines of a text file (1-based, inclusive).
* ``write_file(path, content)``: create or replace a file (directories are made).
* ``apply_patch(diff)``: apply a unified diff, parsed by ``unidiff`` after our bounds on its
  headers (:func:`parse_unified_diff`), with verigym's own pure-Python applier
  (:func:`apply_unified_diff`; the ``patch`` binary is not used): every hunk's context and removed
  lines must match the file exactly at the stated line (or, failing that, at one unique place
  nearby); on any mismatch nothing is written and the error names the file, hunk and line.
* ``run_tests()``: the workspace's test command (a constructor argument) through ``run_shell``.
* ``submit()``: ends the episode (the env decides what that means).

Paths are relative to :data:`ROOT` (an absolute path inside it is accepted); ``..`` that leaves the
workspace, other absolute paths, and symbolic links that point outside are refused with an
:class:`~verigym.core.ActionParseError` (the env turns it into ``info["action_error"]``).

The code that runs in the sandbox's worker is ``envs/tool/_sandbox_shell.py`` (:data:`SANDBOX_SOURCE`).

What the sandbox answers is untrusted (agent processes ran there): :meth:`Workspace.snapshot` bounds
the number and size of the files it reads out and checks every value's type.
"""

from __future__ import annotations

import copy
import functools
import posixpath
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from verigym.core import ActionParseError
from verigym.sandbox import Limits, PythonSandbox
from verigym.toolcalls import Tool, ToolCall

__all__ = [
    "ROOT",
    "SANDBOX_SOURCE",
    "WORKSPACE_TOOLS",
    "PatchError",
    "Workspace",
    "apply_unified_diff",
    "unified_diff",
]

ROOT = "/tmp/work"
"""Where the tree lives inside the sandbox."""

SHELL_GRACE_S = 10.0
"""Seconds a ``run_shell`` sandbox call may last beyond the shell's own timeout (its deadline is
``timeout + SHELL_GRACE_S``): the shell is killed first and reported as the tool's observation."""

MAX_FILE_CHARS = 1 << 18
"""Largest file the tools write or read out (characters)."""

_PATH_CHARS = re.compile(r"^[A-Za-z0-9_.\-/ +@=,]+$")

_P = {"type": "object"}
WORKSPACE_TOOLS: dict[str, Tool] = {
    "run_shell": Tool(
        "run_shell",
        f"Run a shell command (/bin/sh -c) in the sandbox, in {ROOT} (the repository). python3 and "
        "the usual POSIX tools are there; no network. Returns stdout and stderr together (cut when long) "
        "and the exit status.",
        {
            **_P,
            "properties": {"command": {"type": "string", "description": "shell command line"}},
            "required": ["command"],
        },
    ),
    "read_file": Tool(
        "read_file",
        "Read a text file of the workspace with line numbers; optionally only lines start_line..end_line "
        "(1-based, inclusive).",
        {
            **_P,
            "properties": {
                "path": {"type": "string", "description": "path relative to the workspace"},
                "start_line": {"type": "integer", "description": "first line (default 1)"},
                "end_line": {"type": "integer", "description": "last line (default: the end)"},
            },
            "required": ["path"],
        },
    ),
    "write_file": Tool(
        "write_file",
        "Create or overwrite a text file of the workspace with the given content.",
        {
            **_P,
            "properties": {
                "path": {"type": "string", "description": "path relative to the workspace"},
                "content": {"type": "string", "description": "the complete new file content"},
            },
            "required": ["path", "content"],
        },
    ),
    "apply_patch": Tool(
        "apply_patch",
        "Apply a unified diff (as `diff -u` or `git diff` write it, paths relative to the workspace; "
        "a/ and b/ prefixes are accepted). All or nothing: on a mismatch nothing changes.",
        {
            **_P,
            "properties": {"diff": {"type": "string", "description": "the unified diff"}},
            "required": ["diff"],
        },
    ),
    "run_tests": Tool(
        "run_tests",
        "Run the repository's visible test suite and show its output.",
        {**_P, "properties": {}},
        cost=2.0,
    ),
    "submit": Tool(
        "submit",
        "Submit the workspace as it is now; the episode ends and your changes are verified.",
        {**_P, "properties": {}},
    ),
}
"""The workspace tools by name (an env offers the ones it wants)."""


class PatchError(ValueError):
    """A unified diff is malformed or does not apply; the message names the file, hunk and line."""


# -- the pure-Python unified-diff applier (runs in the parent on agent text: bounded, no I/O) --------

_HUNK = re.compile(r"^@@ -(\d{1,9})(?:,(\d{1,9}))? \+(\d{1,9})(?:,(\d{1,9}))? @@")
_HUNK_DIGITS = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")

MAX_PATCH_HUNKS = 1000
"""Most hunks one patch may hold, over all its files (more is a :class:`PatchError`)."""
MAX_PATCH_FILES = 100
"""Most file headers one patch may hold."""
MAX_MATCH_LINES = 2_000_000
"""Most lines :func:`apply_unified_diff` compares while looking for the hunks of one file (each
place tried costs the hunk's old lines): the search is bounded whatever the patch asks."""


def _bounds(lines: list[str]) -> int:
    """Check the diff's headers before any parsing; the number of file headers.

    Counts ``--- ``/``+++ `` header pairs (an upper bound: a removed line ``-- x`` right before an
    added line ``++ y`` counts too) and hunk headers, in the order they come.

    Raises:
        PatchError: a hunk before any file header, an empty hunk, a hunk header with a number over
            9 digits, more than :data:`MAX_PATCH_HUNKS` hunks or :data:`MAX_PATCH_FILES` files.
    """
    files = hunks = 0
    for i, line in enumerate(lines):
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            files += 1
            if files > MAX_PATCH_FILES:
                raise PatchError(f"more than {MAX_PATCH_FILES} files in one patch")
        elif line.startswith("@@ -"):
            match = _HUNK.match(line)
            if match is None:
                if _HUNK_DIGITS.match(line):
                    raise PatchError(f"line {i + 1}: a hunk header number has over 9 digits")
                continue  # not a hunk header: the parser reads it as text
            if not files:
                raise PatchError(
                    f"line {i + 1}: a hunk before any '--- a/file' / '+++ b/file' header"
                )
            hunks += 1
            if hunks > MAX_PATCH_HUNKS:
                raise PatchError(f"more than {MAX_PATCH_HUNKS} hunks in one patch")
            old_len = int(match.group(2)) if match.group(2) is not None else 1
            new_len = int(match.group(4)) if match.group(4) is not None else 1
            if old_len == new_len == 0:
                raise PatchError(
                    f"line {i + 1}: hunk '{line.strip()}' is empty (no old, no new lines)"
                )
    return files


def _diff_path(name: str) -> str | None:
    """The path of a ``---``/``+++`` file name (``None`` for ``/dev/null``), a/ b/ prefixes dropped."""
    name = name.strip()
    if name == "/dev/null":
        return None
    if name.startswith(("a/", "b/")):
        name = name[2:]
    return name


_HINTS = {
    "Unexpected hunk found": " (a hunk must follow its file's '---'/'+++' header or another hunk)",
    "Target without source": " (a '+++' line must follow its '---' line)",
}
"""What to add to ``unidiff``'s terse errors (keyed by the text before their colon)."""


def parse_unified_diff(
    diff: str,
) -> list[tuple[str | None, str | None, list[tuple[int, list[str]]]]]:
    """Parse a unified diff into ``(old path, new path, [(old start line, hunk lines)])`` per file.

    The headers are bounded first (:func:`_bounds`); then ``unidiff`` parses. Hunk lines keep their
    first character (``' '``, ``'-'``, ``'+'``); ``\\ No newline`` lines are skipped; an empty line
    inside a hunk is an empty context line. Files without a ``---``/``+++`` pair (a ``diff --git``
    rename or mode change alone, a binary file) are left out. Costs O(length of ``diff``).

    Raises:
        PatchError: no file header, a hunk outside a file, a hunk whose line counts do not match
            its body, an empty hunk, more than :data:`MAX_PATCH_HUNKS` hunks or
            :data:`MAX_PATCH_FILES` files.
    """
    lines = diff.splitlines()
    if not _bounds(lines):
        raise PatchError(
            "no file header found: a unified diff starts with '--- a/path' and '+++ b/path'"
        )
    where = {"line": 0, "hunk": "", "file": ""}

    def feed() -> Iterator[str]:  # records where the library is, for its error messages
        target = ""
        for number, line in enumerate(lines, 1):
            where["line"] = number
            if line.startswith("+++ "):
                target = line[4:].split("\t")[0]
            elif _HUNK.match(line):
                where["hunk"], where["file"] = line.strip(), target
            yield line + "\n"

    try:
        patch = PatchSet(feed())
    except (UnidiffParseError, ValueError) as exc:
        reason = str(exc).split(":")[0]
        match = _HUNK.match(where["hunk"])
        if match is not None and reason.startswith("Hunk"):
            old_len = match.group(2) if match.group(2) is not None else "1"
            new_len = match.group(4) if match.group(4) is not None else "1"
            name = _diff_path(where["file"]) or where["file"].strip()
            raise PatchError(
                f"hunk '{where['hunk']}' of {name}: the header promises {old_len} old and "
                f"{new_len} new lines, the body does not match them ({reason.lower()}, at line "
                f"{where['line']})"
            ) from None
        hint = _HINTS.get(reason, "")
        raise PatchError(f"line {where['line']}: {reason.lower()}{hint}") from None
    files: list[tuple[str | None, str | None, list[tuple[int, list[str]]]]] = []
    for patched in patch:
        if patched.is_binary_file or not lines[patched.diff_line_no - 1].startswith(
            ("+++ ", "diff --git ")
        ):
            continue
        hunks = [
            (
                hunk.source_start,
                [
                    line.line_type + line.value.removesuffix("\n")
                    for line in hunk
                    if line.line_type in (" ", "-", "+")
                ],
            )
            for hunk in patched
        ]
        if lines[patched.diff_line_no - 1].startswith("diff --git ") and not hunks:
            continue  # a rename or mode change alone: no '---'/'+++' lines, nothing to write
        files.append((_diff_path(patched.source_file), _diff_path(patched.target_file), hunks))
    if not files:
        raise PatchError(
            "no file header found: a unified diff starts with '--- a/path' and '+++ b/path'"
        )
    return files


def apply_unified_diff(
    text: str, hunks: Sequence[tuple[int, list[str]]], name: str = "file"
) -> str:
    """``text`` with ``hunks`` (from :func:`parse_unified_diff`) applied.

    Each hunk must match at its stated line or, when the file moved, at the nearest place within
    200 lines where its old lines match exactly. Costs O(len(text) + hunk lines x 401) at most,
    and never more than :data:`MAX_MATCH_LINES` line comparisons.

    Raises:
        PatchError: a hunk's old lines are nowhere near its stated line (names the first
            differing line), or the search would compare more than :data:`MAX_MATCH_LINES` lines.
    """
    lines = text.splitlines(keepends=True)
    stripped = [line.rstrip("\n").rstrip("\r") for line in lines]  # once: O(len(text))
    trailing_newline = text.endswith("\n") or not text
    out: list[str] = []
    cursor = 0
    budget = MAX_MATCH_LINES
    for number, (start, body) in enumerate(hunks, 1):
        old = [b[1:] for b in body if b[0] != "+"]
        new = [b[1:] for b in body if b[0] != "-"]
        want = max(start - 1, 0) if old else max(start, 0)
        at = None
        for delta in range(0, 201):
            for candidate in (want + delta, want - delta) if delta else (want,):
                if not cursor <= candidate <= len(lines) - len(old):
                    continue
                budget -= max(len(old), 1)
                if budget < 0:
                    raise PatchError(
                        f"{name}: hunk {number} (at line {start}): finding the hunks would compare "
                        f"more than {MAX_MATCH_LINES} lines; send a smaller patch"
                    )
                if stripped[candidate : candidate + len(old)] == old:
                    at = candidate
                    break
            if at is not None:
                break
        if at is None:
            detail = ""
            for k, expected in enumerate(old):
                actual = stripped[want + k] if want + k < len(stripped) else "<end of file>"
                if actual != expected:
                    detail = f"; line {want + k + 1} is {actual[:120]!r}, the hunk expects {expected[:120]!r}"
                    break
            raise PatchError(f"{name}: hunk {number} (at line {start}) does not match{detail}")
        out.extend(lines[cursor:at])
        out.extend(line + "\n" for line in new)
        cursor = at + len(old)
    out.extend(lines[cursor:])
    result = "".join(out)
    if not trailing_newline and result.endswith("\n") and cursor >= len(lines):
        result = result[:-1]
    return result


def unified_diff(old: Mapping[str, str], new: Mapping[str, str], context: int = 3) -> str:
    """A unified diff (``a/`` and ``b/`` prefixes) from ``old`` to ``new`` file dicts, sorted by path.

    Each file's diff is difflib's over the lines between its common head and tail (plus the
    context), its hunk headers shifted back, so it costs the changed region rather than the file
    (the swebench export diffs a whole module per row): the text of difflib's diff of the whole
    file wherever the alignment is unique (repeated lines may align elsewhere, as minimally).
    """
    import difflib

    chunks = []
    for path in sorted(set(old) | set(new)):
        before, after = old.get(path), new.get(path)
        if before == after:
            continue
        a = (before or "").splitlines(keepends=True)
        b = (after or "").splitlines(keepends=True)
        shortest = min(len(a), len(b))
        head = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), shortest)
        tail = next(
            (i for i, (x, y) in enumerate(zip(reversed(a), reversed(b))) if x != y), shortest
        )
        tail = min(tail, shortest - head)
        start = max(head - context - 1, 0)  # one line more than the context: hunks match
        stop = max(tail - context - 1, 0)
        lines = difflib.unified_diff(
            a[start : len(a) - stop],
            b[start : len(b) - stop],
            f"a/{path}" if before is not None else "/dev/null",
            f"b/{path}" if after is not None else "/dev/null",
            n=context,
        )
        chunks.extend(_HUNK_HEADER.sub(functools.partial(_shifted, offset=start), x) for x in lines)
    return "".join(line if line.endswith("\n") else line + "\n" for line in chunks)


_HUNK_HEADER = re.compile(r"^@@ -(\d+)((?:,\d+)?) \+(\d+)((?:,\d+)?) @@")


def _shifted(match: re.Match, offset: int) -> str:
    """A hunk header of a diff of lines ``offset:`` with its line numbers shifted by ``offset``."""
    old, old_len, new, new_len = match.groups()
    return f"@@ -{int(old) + offset}{old_len} +{int(new) + offset}{new_len} @@"


SANDBOX_SOURCE = (Path(__file__).with_name("_sandbox_shell.py")).read_text()
"""The sandbox-side code of the workspace and Terminal (``envs/tool/_sandbox_shell.py``, stdlib
only): sent to the sandbox's worker as one cell by :meth:`Workspace.load_helpers`."""


class Workspace:
    """A directory tree in a sandbox, with the tools of :data:`WORKSPACE_TOOLS`.

    Args:
        test_command: the shell command ``run_tests`` runs in :data:`ROOT`.
        shell_timeout_s: wall-clock seconds of one shell command (its process group is killed).
        output_chars: characters of command output shown before it is cut.
        limits: the sandbox's limits (default: a call deadline of ``shell_timeout_s + 10`` s,
            64 MiB ``/tmp``, 48 processes).
        unsafe: run without bubblewrap (never for untrusted agents).

    Raises (on the first tool call): :class:`verigym.sandbox.SandboxError` when the sandbox cannot
    start here.
    """

    def __init__(
        self,
        *,
        test_command: str = "python -m unittest -q",
        shell_timeout_s: float = 10.0,
        output_chars: int = 8000,
        limits: Limits | None = None,
        unsafe: bool = False,
    ):
        self.test_command = str(test_command)
        self.shell_timeout_s = float(shell_timeout_s)
        self.output_chars = int(output_chars)
        self.limits = limits or Limits(
            timeout_s=self.shell_timeout_s + 10.0, max_processes=48, tmp_mb=64
        )
        self.unsafe = bool(unsafe)
        self.sandbox = PythonSandbox(self.limits, unsafe=self.unsafe)
        self._log: list[tuple[str, list[Any], float | None]] = []
        self._pending: list[tuple[str, list[Any], float | None]] = []
        self._pristine = False  # no tool call since the sandbox's fresh(): reset may reuse it
        self._own_calls = -1  # the sandbox's call count after this workspace's last own call

    # -- copies: a new sandbox that replays the changes -------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("sandbox", "_pending")}
        state["_log"] = list(self._pending) + list(self._log)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._pristine = False
        self.sandbox = PythonSandbox(self.limits, unsafe=self.unsafe)
        self._pending, self._log = list(state["_log"]), []

    def __deepcopy__(self, memo: dict) -> Workspace:
        clone = Workspace.__new__(Workspace)
        clone.__setstate__(copy.deepcopy(self.__getstate__(), memo))
        return clone

    def _replay(self, *, restarted: bool = False) -> None:
        """Load the helpers and replay the pending tree changes into the sandbox (nothing when
        none are pending, unless the worker ``restarted`` and lost the helpers)."""
        if not self._pending and not restarted:
            return
        pending, self._pending = self._pending, []
        self.load_helpers()
        for name, args, timeout in pending:
            self._call(name, args, timeout, changes=True)

    # -- lifecycle -------------------------------------------------------------------------------
    def reset(self, files: Mapping[str, str]) -> None:
        """New sandbox (nothing of the last episode left); write ``files`` under :data:`ROOT`.

        Raises:
            ValueError: a path is not a plain relative path inside the workspace.
            SandboxError: the sandbox cannot start here.
        """
        checked = {self.resolve(path): str(text) for path, text in files.items()}
        reuse = (
            self._pristine
            and not self._pending
            and self.sandbox.alive
            and self.sandbox.calls == self._own_calls  # nobody else used the sandbox directly
        )
        self._log, self._pending = [], []
        if not reuse:
            self.sandbox.fresh()
            self.load_helpers()
        try:
            # a sandbox where nothing but these helpers ran (no tool call since its fresh()) is
            # still new: it only gets its tree replaced, which saves a sandbox start per episode
            self._call("_vgw_write_tree", [ROOT, checked, reuse], changes=True)
            self._pristine = True
            self._own_calls = self.sandbox.calls
        except ActionParseError as exc:
            raise RuntimeError(f"could not write the workspace: {exc}") from None

    def load_helpers(self) -> None:
        """Define the workspace helpers in the sandbox's worker (after a ``fresh()``)."""
        loaded = self.sandbox.run(SANDBOX_SOURCE)
        if not loaded.ok:
            raise RuntimeError(f"the workspace helpers did not load: {loaded.text()}")

    def _call(
        self, name: str, args: list[Any], timeout: float | None = None, *, changes: bool = False
    ) -> Any:
        """``name(*args)`` in the sandbox; its JSON value.

        A call that ``changes`` the tree is logged: a pickled or deep-copied workspace replays the
        log into its own new sandbox before its first call, so it holds the same tree.

        A sandbox that died (a call killed at its deadline, out of memory) is rebuilt from the
        log in a new one: the tree is as it was before the killed call.

        Raises:
            ActionParseError: the helper raised (a bad path, a missing file), or the call was
                killed (the message says so; the workspace is rebuilt for the next call).
        """
        self._replay()
        result = self.sandbox.call(name, args, timeout=timeout)
        if not result.ok and result.error and "no function named" in result.error:
            # the worker restarted since the last call (it died between calls): rebuild, retry
            self._pending, self._log = list(self._log), []
            self._replay(restarted=True)  # also with nothing logged yet (a reset's first write)
            result = self.sandbox.call(name, args, timeout=timeout)
        if result.killed:
            self._pending, self._log = list(self._log), []
            raise ActionParseError(
                f"{(result.error or 'killed').split(';')[0]}; the sandbox was restarted and the "
                "workspace rebuilt as it was before this call"
            )
        if changes and result.ok:
            self._log.append((name, args, timeout))
        if self._pristine:
            self._own_calls = self.sandbox.calls
        if not result.ok:
            raise ActionParseError(result.error or "the call failed")
        return result.value

    def mark_used(self) -> None:
        """Something other than the helpers may run in the sandbox: the next reset starts a new one."""
        self._pristine = False

    def close(self) -> None:
        """Kill the sandbox (idempotent)."""
        self.sandbox.close()

    # -- paths -----------------------------------------------------------------------------------
    @staticmethod
    def resolve(path: str) -> str:
        """``path`` as a normalized path relative to :data:`ROOT`.

        Raises:
            ActionParseError: empty, not a string, odd characters, absolute outside the workspace,
                or ``..`` leaving it.
        """
        if not isinstance(path, str) or not path.strip():
            raise ActionParseError("path must be a non-empty string")
        path = path.strip()
        if len(path) > 512 or not _PATH_CHARS.match(path):
            raise ActionParseError(f"path {path[:80]!r} has characters outside [A-Za-z0-9_.-/]")
        if path.startswith("/"):
            if path != ROOT and not path.startswith(ROOT + "/"):
                raise ActionParseError(f"path {path!r} is outside the workspace {ROOT}")
            path = posixpath.relpath(path, ROOT)
        normal = posixpath.normpath(path)
        if normal == ".." or normal.startswith("../") or normal.startswith("/") or normal == ".":
            raise ActionParseError(f"path {path!r} leaves the workspace")
        return normal

    # -- tools -----------------------------------------------------------------------------------
    def run_shell(self, command: str, timeout_s: float | None = None) -> str:
        """Run ``command`` with ``/bin/sh -c`` in :data:`ROOT`; exit status and capped output."""
        timeout = self.shell_timeout_s if timeout_s is None else float(timeout_s)
        self.mark_used()
        value = self._call(
            "_vgw_shell",
            [ROOT, str(command), timeout, self.output_chars],
            timeout=timeout + SHELL_GRACE_S,
            changes=True,
        )
        if not isinstance(value, dict):
            raise ActionParseError("the shell answered nothing")
        output = value.get("output") if isinstance(value.get("output"), str) else ""
        chars = value.get("chars") if type(value.get("chars")) is int else len(output)
        text = output.rstrip("\n")
        if chars > len(output):
            text += f"\n[output cut: {len(output)} of {chars} characters shown]"
        if value.get("timed_out") is True:
            text += f"\n[killed after {timeout:g} s]"
        status = value.get("status")
        return f"{text}\n[exit status {status if type(status) is int else '?'}]".lstrip("\n")

    def read_file(
        self, path: str, start_line: int | None = None, end_line: int | None = None
    ) -> str:
        """Lines ``start_line..end_line`` (1-based, inclusive) of ``path``, numbered, capped."""
        rel = self.resolve(path)
        value = self._call("_vgw_read", [ROOT, rel, MAX_FILE_CHARS])
        if not isinstance(value, dict) or value.get("missing") is True:
            raise ActionParseError(f"no such file: {rel}")
        text = value.get("text") if isinstance(value.get("text"), str) else ""
        lines = text.splitlines()
        first = 1 if start_line is None else max(1, int(start_line))
        last = len(lines) if end_line is None else min(len(lines), int(end_line))
        if lines and first > len(lines):
            raise ActionParseError(
                f"{rel} has {len(lines)} lines; start_line {first} is past its end"
            )
        shown = [f"{n:>5}  {lines[n - 1]}" for n in range(first, last + 1)]
        body = "\n".join(shown)
        if len(body) > self.output_chars:
            body = body[: self.output_chars] + "\n[cut: ask for a smaller line range]"
        header = f"{rel} (lines {first}-{last} of {len(lines)})"
        return f"{header}\n{body}" if shown else f"{header}\n(empty)"

    def read_text(self, path: str) -> str | None:
        """The whole text of ``path`` (``None`` when missing); for envs, not an agent tool."""
        value = self._call("_vgw_read", [ROOT, self.resolve(path), MAX_FILE_CHARS])
        if not isinstance(value, dict) or not isinstance(value.get("text"), str):
            return None
        return value["text"]

    def write_file(self, path: str, content: str) -> str:
        """Create or replace ``path`` with ``content`` (at most :data:`MAX_FILE_CHARS`)."""
        rel = self.resolve(path)
        if len(content) > MAX_FILE_CHARS:
            raise ActionParseError(f"content is over {MAX_FILE_CHARS} characters")
        self.mark_used()
        self._call("_vgw_write", [ROOT, rel, content], changes=True)
        return f"wrote {rel} ({len(content.splitlines())} lines)"

    def apply_patch(self, diff: str) -> str:
        """Apply a unified diff to the workspace, all files or none (see :func:`apply_unified_diff`)."""
        try:
            files = parse_unified_diff(diff)
            results: dict[str, str | None] = {}
            for old_path, new_path, hunks in files:
                target = self.resolve(new_path or old_path or "")
                if new_path is None:  # deletion
                    results[target] = None
                    continue
                source = self.read_text(self.resolve(old_path)) if old_path is not None else ""
                if source is None:
                    raise PatchError(f"{old_path}: no such file")
                results[target] = apply_unified_diff(source, hunks, target)
        except PatchError as exc:
            raise ActionParseError(f"the patch does not apply: {exc}") from None
        self.mark_used()
        for target, text in results.items():
            if text is None:
                self.run_shell(f"rm -f -- '{target}'")
            else:
                self._call("_vgw_write", [ROOT, target, text], changes=True)
        return "patched " + ", ".join(sorted(results))

    def run_tests(self) -> str:
        """Run the visible tests (``test_command``)."""
        return self.run_shell(self.test_command)

    def snapshot(
        self, *, max_files: int = 400, max_chars: int = MAX_FILE_CHARS, under: str = ""
    ) -> dict[str, str]:
        """Every regular file of the workspace (or of its folder ``under``) as ``{relative path:
        text}`` (symlinks, oversized files and files past ``max_files`` are left out); values
        checked, paths normalized and relative to :data:`ROOT`."""
        folder = self.resolve(under) if under else ""
        value = self._call("_vgw_snapshot", [ROOT, max_files, max_chars, folder])
        files = value.get("files") if isinstance(value, dict) else None
        if not isinstance(files, dict):
            return {}
        out: dict[str, str] = {}
        for path, text in list(files.items())[:max_files]:
            if not isinstance(text, str) or len(text) > max_chars:
                continue
            try:
                out[self.resolve(path)] = text
            except ActionParseError:
                continue
        return out

    def call_tool(self, call: ToolCall) -> str:
        """Run one schema-checked workspace tool call (not ``submit``) and return its text.

        Raises:
            ActionParseError: a bad path, a patch that does not apply, a missing file.
        """
        args = call.arguments
        if call.name == "run_shell":
            return self.run_shell(args["command"])
        if call.name == "read_file":
            return self.read_file(args["path"], args.get("start_line"), args.get("end_line"))
        if call.name == "write_file":
            return self.write_file(args["path"], args["content"])
        if call.name == "apply_patch":
            return self.apply_patch(args["diff"])
        if call.name == "run_tests":
            return self.run_tests()
        raise ActionParseError(f"{call.name} is not a workspace tool")
