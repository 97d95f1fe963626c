"""``TerminalEnv``: shell tasks in the sandbox, judged by the filesystem state they leave."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from verigym.core import ActionParseError
from verigym.envs.tool.base import ToolEnv, tool_call_text
from verigym.envs.tool.terminal.core import (
    Entry,
    Runner,
    Snapshot,
    Template,
    normalize_files,
    sandbox_tree,
    tree_command,
)
from verigym.envs.tool.terminal.templates import GROUPS, TEMPLATES, pool
from verigym.envs.tool.workspace import (
    MAX_FILE_CHARS,
    ROOT,
    WORKSPACE_TOOLS,
    PatchError,
    Workspace,
    parse_unified_diff,
    unified_diff,
)
from verigym.kwargs_policy import FloatRange, IntRange, OneOf, client, operator_only
from verigym.sandbox import Limits, PythonSandbox
from verigym.toolcalls import FinalAnswer, Tool, ToolCall
from verigym.validation import check_bool, check_choice, check_number

__all__ = ["TerminalEnv", "changes_diff"]

PATCH_CHARS = 20000
"""Longest ``info["patch"]``, characters (a longer diff is cut and ends with ``[patch cut]``)."""
_DIFF_FILE_BYTES = 1 << 18
"""Files larger than this are not diffed line by line (``Large files ... differ``)."""
_DIFF_LINES = 1000
"""Files with more lines than this (either side) are not diffed line by line: ``difflib`` is
quadratic on lines that repeat (4,000 lines of 150 values took 6 s of the env's CPU)."""
_DIFF_TOTAL_LINES = 4000
"""Most lines diffed line by line in one :func:`changes_diff`; later files get a ``differ`` line."""
_NOT_DIFFED = (".git", "__pycache__")
"""Path parts whose entries the diff leaves out (git's own database, bytecode caches)."""
_TYPE_BITS = {"f": "100", "l": "120", "d": "040", "o": "000"}


def _mode(entry: Entry) -> str:
    """``git diff``'s mode text: the type, then the permission bits (``100755``)."""
    return f"{_TYPE_BITS[entry.kind]}{entry.mode:03o}"


def _quoted(path: str) -> str:
    """A path as the diff names it: JSON-quoted (ASCII) when it holds a control character or a
    quote (a file name chosen by the agent must not start a line of its own) or a lone surrogate
    (a name that is not UTF-8: no env text may hold one)."""
    if any(ord(c) < 32 or c in '"\\\x7f' or "\ud800" <= c <= "\udfff" for c in path):
        return json.dumps(path)
    return path


def _content(entry: Entry | None) -> bytes | None:
    """What a path holds for the diff: ``None`` when missing or a folder."""
    if entry is None or entry.kind == "d":
        return None
    if entry.kind == "l":
        return f"symbolic link to {entry.target}\n".encode("utf-8", "backslashreplace")
    return entry.data or b""


def _path_diff(path: str, old: Entry | None, new: Entry | None, budget: list[int]) -> str:
    """The ``git diff``-style text of one changed path: mode lines, then the content's hunks."""
    name = _quoted(path)
    sides = f"{'/dev/null' if old is None else 'a/' + name} and {'/dev/null' if new is None else 'b/' + name}"
    lines = [f"diff --git a/{name} b/{name}"]
    if old is not None and new is not None:
        if (old.kind, old.mode) != (new.kind, new.mode):
            lines += [
                f"old mode {_mode(old)}",
                f"new mode {_mode(new)}",
            ]
    elif new is not None:
        lines.append(f"new file mode {_mode(new)}")
    elif old is not None:
        lines.append(f"deleted file mode {_mode(old)}")
    before, after = _content(old), _content(new)
    if before == after:
        return "\n".join(lines) + "\n"
    sizes = [len(b) for b in (before, after) if b is not None]
    if max(sizes) > _DIFF_FILE_BYTES:
        lines.append(f"Large files {sides} differ ({' -> '.join(map(str, sizes))} bytes)")
        return "\n".join(lines) + "\n"
    try:
        texts = [None if b is None else b.decode("utf-8") for b in (before, after)]
    except UnicodeDecodeError:
        lines.append(f"Binary files {sides} differ")
        return "\n".join(lines) + "\n"
    counts = [0 if t is None else t.count("\n") + 1 for t in texts]
    if max(counts) > _DIFF_LINES or sum(counts) > budget[0]:
        lines.append(f"Large files {sides} differ ({' -> '.join(map(str, counts))} lines)")
        return "\n".join(lines) + "\n"
    budget[0] -= sum(counts)
    old_files = {} if texts[0] is None else {name: texts[0]}
    new_files = {} if texts[1] is None else {name: texts[1]}
    return "\n".join(lines) + "\n" + unified_diff(old_files, new_files)


def changes_diff(before: Snapshot, after: Snapshot, *, limit: int = PATCH_CHARS) -> str:
    """A unified diff (``git diff`` style) from the ``before`` tree to the ``after`` tree.

    Text files get their hunks (``difflib``); binary files, files over 256 KiB or 1,000 lines (and
    all text files past 4,000 diffed lines in all) a ``Binary files``/``Large files ... differ``
    line, so the env's cost stays bounded whatever the agent wrote; permission changes ``old mode``/``new mode`` lines;
    links their target. Paths below ``.git`` or ``__pycache__`` are left out, and a folder only
    shows when its mode changed. Paths are sorted; names holding control characters are
    JSON-quoted.

    Args:
        before, after: trees read by the env itself (:class:`Snapshot`), never text the agent sent.
        limit: longest result, characters; a longer diff is cut there and ends with
            ``[patch cut]``.

    Returns:
        The diff text ("" when nothing changed).
    """
    chunks, size, budget = [], 0, [_DIFF_TOTAL_LINES]
    for path in sorted(set(before.entries) | set(after.entries)):
        if any(part in _NOT_DIFFED for part in path.split("/")):
            continue
        old, new = before.entries.get(path), after.entries.get(path)
        if old == new:
            continue
        folders = (old is None or old.kind == "d") and (new is None or new.kind == "d")
        if folders and (old is None or new is None or old.mode == new.mode):
            continue  # a folder made or removed: the files in it say so
        chunks.append(_path_diff(path, old, new, budget))
        size += len(chunks[-1])
        if size > limit:
            break
    text = "".join(chunks)
    return text if len(text) <= limit else text[:limit].rstrip("\n") + "\n[patch cut]\n"


def _precheck(call: ToolCall) -> None:
    """Refuse a workspace call whose arguments are wrong on their own (no sandbox needed).

    Raises:
        ActionParseError: a bad path, an oversized file, a malformed diff.
    """
    args = call.arguments
    if call.name in ("read_file", "write_file"):
        Workspace.resolve(args["path"])
    if call.name == "write_file" and len(args["content"]) > MAX_FILE_CHARS:
        raise ActionParseError(f"content is over {MAX_FILE_CHARS} characters")
    if call.name == "apply_patch":
        try:
            for old, new, _ in parse_unified_diff(args["diff"]):
                Workspace.resolve(new or old or "")
        except PatchError as exc:
            raise ActionParseError(f"the patch does not apply: {exc}") from None


_TOOL_NAMES = ("run_shell", "read_file", "write_file", "apply_patch", "submit")
_LISTED = 40
"""Most initial files the reset observation lists (the rest are counted)."""


def _listing(files: dict[str, Any]) -> str:
    """The initial files as ``path (N bytes)`` lines, sorted, at most :data:`_LISTED` of them.

    What ``ls -lR`` would show first (the git templates' ``.git`` is made after it); the sizes
    come from the seed's contents, so two seeds of one template start from different text.
    """
    entries = sorted(normalize_files(files).items())
    lines = [f"  {path} ({len(data)} bytes)" for path, (data, _) in entries[:_LISTED]]
    if len(entries) > _LISTED:
        lines.append(f"  ... and {len(entries) - _LISTED} more")
    return f"Files at the start ({len(entries)}):\n" + "\n".join(lines)


class TerminalEnv(ToolEnv):
    """Shell tasks in the spirit of Terminal-Bench, checked by the resulting filesystem state.

    ## Description
    A task template (32 in 8 groups: log and text processing, CSV/JSON transformation,
    find-and-fix across many files, archives and directory surgery, a program the checker runs on
    new inputs, git on a local repository, file permissions, a failing config or build to repair;
    :mod:`verigym.envs.tool.terminal.templates`) is drawn and randomized by the reset seed. Its
    files are written to ``/tmp/work`` in a new :class:`verigym.sandbox.PythonSandbox` (no network,
    read-only system, the agent's commands as an unprivileged user); the agent works there with
    native tool calls (``run_shell``, ``read_file``, ``write_file``, ``apply_patch``) and ends with
    ``submit`` (an ``<answer>`` does the same; its text is ignored).

    Verdict (source: Terminal-Bench's "the tests read the container's state" design): after the
    last call every agent process has been killed and the sandbox's worker is stopped (the
    sandbox does both between calls); the env reads the workspace tree itself through
    ``/proc/<worker>/root`` (agent commands can write into the worker's memory, so nothing the
    worker would compute or relay is trusted; where that path is unreadable, as on a non-root host
    once the worker was made non-dumpable, the workspace cannot be read and scores 0), never
    following a link, opening only regular files, at most 4,000
    entries and 32 MiB; a workspace folder replaced by a link is an error. The sandbox is then
    discarded, and the template's checker compares that tree with the expectation drawn at reset,
    which never entered the sandbox. Where the task asks for a program, only that program is copied
    into another new sandbox and run on hidden inputs there. Nothing the agent printed is read.

    ## Action Space
    ``UnicodeText``: one tool call a reply (Hermes ``<tool_call>`` text or an OpenAI assistant
    message), e.g. ``<tool_call>{"name": "run_shell", "arguments": {"command": "ls"}}</tool_call>``.

    ## Observation Space
    ``UnicodeText``: the task on reset, with the initial files and their sizes (at most 40 listed);
    then the tool's result (output capped and marked when cut).

    ## Rewards
    On ``submit``: ``score`` = the fraction of the task's required items done (lines of a report,
    files changed, hidden inputs passed, ...) times "no guard broken" (files that had to stay
    unchanged, no extra output); ``success`` = score 1; reward = score. ``invalid_action_reward``
    for a malformed reply or a failed tool call; running out of turns scores 0. The final ``info``
    of a submit adds ``verdict`` (the checker's detail), ``template`` and ``patch``: the changes of
    the episode as a unified diff (:func:`changes_diff`: from the tree after the task's setup to the
    tree the verdict read, both read by the env; capped at :data:`PATCH_CHARS`).

    ## Starting State
    Template, parameters, files and hidden expectation from the reset seed (git repositories are
    built with fixed authors and dates, so commit ids repeat too).

    ## Episode End
    Terminated at ``submit`` (or an ``<answer>``); truncated after ``max_turns`` replies.

    ## Arguments
    * ``template`` (str | None): one template by name (the ids ``Terminal-<Template>-v0`` set it, e.g.
      ``Terminal-CsvJoin-v0``); ``group`` (str | None): one group (``Terminal-Text-v0`` ...); neither:
      all templates. Templates whose program (``git``) is missing in the sandbox are left out of a
      mixed draw (a warning says so; seeds then map to other tasks than on a machine with git);
      asking for them alone raises ``ValueError`` here, at make, naming the missing program.
    * ``shell_timeout_s`` (float): wall-clock limit of one shell command and of each checker run.
    * ``unsafe`` (bool): run without bubblewrap (never for untrusted agents).
    * ``max_turns`` (default 20), ``invalid_action_reward``, ``max_action_length``: see :class:`ToolEnv`.

    ## Version History
    * v0: initial version (issue 30, section 2). Verifier fix (version kept): a workspace the env
      cannot read through ``/proc/<worker>/root`` scores 0, no longer a tree relayed by the
      worker, which agent commands can write into; a folder the env cannot list (mode 0, read
      by a non-root env) makes the workspace unreadable (score 0), no longer a folder whose
      files read as absent.
    """

    metadata = {"render_modes": ["ansi"], "family": "tool"}

    remote_kwargs = {
        "template": client(OneOf((None, *sorted(TEMPLATES)))),
        "group": client(OneOf((None, *GROUPS))),
        "shell_timeout_s": operator_only(
            FloatRange(0.5, 60.0), why="wall-clock seconds of each shell command"
        ),
        "max_turns": operator_only(IntRange(1, 64), why="raises the cost of an episode"),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(
        self,
        *,
        template: str | None = None,
        group: str | None = None,
        shell_timeout_s: float = 10.0,
        max_turns: int = 20,
        unsafe: bool = False,
        **kwargs: Any,
    ):
        super().__init__(max_turns=max_turns, **kwargs)
        self.template = check_choice("template", template, (None, *sorted(TEMPLATES)))
        self.group = check_choice("group", group, (None, *GROUPS))
        self.unsafe = check_bool("unsafe", unsafe)
        timeout = check_number("shell_timeout_s", shell_timeout_s, 0, 600, low_open=True)
        self.limits = Limits(timeout_s=timeout)
        """Deadline of one shell command and of each checker run (``timeout_s``), read at reset."""
        self._pool: list[Template] = pool(template, group)  # raises when nothing can be drawn
        self._workspace: Workspace | None = None
        self._runner: Runner | None = None
        self._task: Template | None = None
        self._files: dict[str, Any] = {}
        self._expect: dict[str, Any] = {}
        self._oracle: list[str] = []
        self._log: list[ToolCall] = []  # the workspace calls of this episode (replayed by a copy)
        self._stale = False  # a copy whose sandbox must be rebuilt before its next call
        self._touched = False  # a workspace call was made this episode (the tree may differ)
        self.verdict = ""
        """The checker's detail of the last verdict (also ``info["verdict"]``)."""
        self._baseline: Snapshot | None = None  # the tree after setup, before any agent call
        self._patch = ""

    # -- the sandboxes ---------------------------------------------------------------------------
    def _ws(self) -> Workspace:
        shell = float(self.limits.timeout_s)
        deadline = shell + min(10.0, shell)  # the sandbox kills a call that outlives its shell
        if self._workspace is not None and self._workspace.sandbox.limits.timeout_s != deadline:
            # the shell timeout changed (verigym check cuts it): a sandbox with the new deadline
            self._workspace.close()
            self._workspace = None
            self._stale = self._task is not None
        if self._workspace is None:
            self._workspace = Workspace(
                shell_timeout_s=shell,
                output_chars=8000,
                limits=Limits(timeout_s=deadline, max_processes=48, tmp_mb=64),
                unsafe=self.unsafe,
            )
        self._workspace.shell_timeout_s = shell
        if self._stale:
            self._stale = False
            self._build()
            for call in self._log:
                try:
                    self._workspace.call_tool(call)
                except ActionParseError:
                    pass
        return self._workspace

    def _build(self) -> None:
        """Write the task's files into a new sandbox and run the template's setup commands.

        Both go through the workspace's ``run_shell``, which logs them: a workspace whose sandbox
        died (a command killed at its deadline) is rebuilt from that log with the task's files.
        """
        ws = self._workspace
        assert ws is not None and self._task is not None
        ws.reset({})
        setup = self._task.setup(self._expect) if self._task.setup else []
        for command in [tree_command(ROOT, self._files), *setup]:
            try:
                output = ws.run_shell(command, timeout_s=30.0)
            except ActionParseError as exc:
                output = str(exc)
            if not output.endswith("[exit status 0]"):
                raise RuntimeError(f"the setup of {self._task.name} failed: {output[-500:]!r}")
        if self._baseline is None:  # nothing of the agent has run yet (a rebuild keeps the first)
            self._baseline = self._read_tree(ws.sandbox)

    def _check_runner(self) -> Runner:
        if self._runner is None:
            unsafe = self.unsafe
            self._runner = Runner(
                lambda: PythonSandbox(
                    Limits(timeout_s=30.0, max_processes=48, tmp_mb=64), unsafe=unsafe
                )
            )
        self._runner.timeout_s = float(self.limits.timeout_s)
        return self._runner

    # -- ToolEnv ---------------------------------------------------------------------------------
    def _task_instructions(self) -> str:
        return (
            f"You work in a Linux sandbox (no network) in the directory {ROOT}; python3 and the usual command-line "
            "tools are there. Carry out the task with the tools; paths are relative to the workspace. When the "
            "files are as the task asks, call submit: the resulting files (not what you print) are checked."
        )

    def _tools(self) -> Sequence[Tool]:
        return tuple(WORKSPACE_TOOLS[name] for name in _TOOL_NAMES)

    def _generate(self) -> str:
        rng = self.np_random
        self._task = self._pool[int(rng.integers(len(self._pool)))]
        instruction, files, expect = self._task.generate(rng)
        self._files, self._expect = files, expect
        self._oracle = list(self._task.oracle(expect))
        self._log = []
        self._touched = False
        self._stale = True  # the sandbox is built at the first call that needs it
        self.verdict = ""
        self._baseline, self._patch = None, ""
        return (
            f"Task ({self._task.group}/{self._task.name}): {instruction}\nWorkspace: {ROOT}\n"
            + _listing(files)
        )

    def parse_action(self, text: str) -> ToolCall | FinalAnswer:
        parsed = super().parse_action(text)
        if isinstance(parsed, ToolCall) and parsed.name == "submit":
            return FinalAnswer("")
        return parsed

    def _call_tool(self, call: ToolCall) -> str:
        _precheck(call)  # a call refused on its arguments alone starts no sandbox
        ws = self._ws()
        self._touched = True  # before the call: one that fails half-way may have written files
        self._log.append(call)
        return ws.call_tool(call)

    def _snapshot(self) -> Snapshot:
        """The workspace tree after every agent process was killed.

        Read by this process through ``/proc/<worker>/root`` while the sandbox's worker is stopped
        (agent commands can write into the worker's memory, so nothing it would compute or relay
        is trusted); where that path is not readable the snapshot is an error (score 0).
        """
        return self._read_tree(self._ws().sandbox)

    @staticmethod
    def _read_tree(box: PythonSandbox) -> Snapshot:
        return sandbox_tree(box, ROOT, 20.0)

    def _verify(self, answer: str) -> tuple[bool, float]:
        assert self._task is not None
        if not self._touched:
            # no tool call changed anything: the workspace is the initial one, which scores 0 for
            # every template (tests/envs/tool/test_terminal.py), so no sandbox is started for it
            self.verdict = "the workspace was not changed (no tool call succeeded)"
            return False, 0.0
        snap = self._snapshot()
        # the agent's sandbox is done: kill it now (nothing it left can act on the verdict)
        self._ws().sandbox.fresh()
        self._stale = False
        if snap.error:
            self.verdict = f"the workspace could not be read: {snap.error}"
            return False, 0.0
        if self._baseline is not None and not self._baseline.error:
            self._patch = changes_diff(self._baseline, snap)
        try:
            success, score, detail = self._task.check(self._expect, snap, self._check_runner())
        except Exception as exc:  # noqa: BLE001 -- a checker bug must not crash the episode
            success, score, detail = False, 0.0, f"checker error {type(exc).__name__}: {exc}"
        # a checker's detail may name the agent's files: a name that is not UTF-8 is escaped
        self.verdict = str(detail)[:500].encode("utf-8", "backslashreplace").decode("utf-8")
        return bool(success), float(min(max(score, 0.0), 1.0))

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = super().step(action)
        if terminated:
            info["verdict"] = self.verdict
            info["template"] = self._task.name if self._task else ""
            info["patch"] = self._patch
        return observation, reward, terminated, truncated, info

    def oracle_action(self) -> str:
        """The template's next scripted shell command (one a turn), then ``submit``.

        Counted by the workspace calls made this episode, so a malformed reply before (which made
        no call) does not skip a command.
        """
        done = len(self._log)
        if done < len(self._oracle):
            return tool_call_text("run_shell", command=self._oracle[done])
        return tool_call_text("submit")

    # -- copies: the sandbox is rebuilt from the task and replayed calls ---------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_workspace"] = None
        state["_runner"] = None
        state["_stale"] = self._task is not None  # rebuilt (files, setup, replayed calls) when used
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __deepcopy__(self, memo: dict) -> TerminalEnv:
        clone = TerminalEnv.__new__(TerminalEnv)
        memo[id(self)] = clone
        clone.__setstate__(copy.deepcopy(self.__getstate__(), memo))
        return clone

    def close(self) -> None:
        for part in (self._workspace, self._runner):
            if part is not None:
                part.close()
        self._workspace = None
        self._runner = None
        super().close()
