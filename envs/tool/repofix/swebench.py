"""RepoFix-Real instances as SWE-bench rows, and such rows read back as untrusted input.

:func:`instance_rows` writes each validated instance (``data/repofix_real.json``) in SWE-bench's
row format (``verigym export --format swebench``): ``instance_id``, ``repo``, ``version``,
``base_commit``, ``patch`` (the fix), ``test_patch`` (empty: the library's tests are unchanged),
``problem_statement``, ``hints_text``, ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` (lists of pytest node
ids), plus ``split``, ``test_files`` (the test files the verdict runs: SWE-bench's test directives)
and ``env_id`` (the id that poses the instance).

There is no git repository: ``repo`` is the library's PyPI name, ``version`` its pinned version,
and ``base_commit`` the SHA-256 of its vendored sdist (the content address of the pinned source).
The instance's starting tree is that sdist's checkout (``src/`` flattened, as the env lays it out)
with ``patch`` reversed; the paths in ``patch`` are relative to that checkout.

:func:`read_rows` takes such rows back (``verigym eval --instances FILE``). Each row is untrusted:
the file and each row are bounded, only the fields above are accepted, ``repo`` must be a vendored
library with validated instances and ``version``/``base_commit`` its pin, ``patch`` must touch only
that library's modules and apply to the pinned sdist, and the row must be an instance validated
offline (its patch, FAIL_TO_PASS and PASS_TO_PASS those of the data: a row's own lists never
decide a verdict). A bad row is refused with a message naming it; the others are kept.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verigym.envs.tool.repofix import real
from verigym.envs.tool.repofix.env import is_source_path
from verigym.envs.tool.repofix.mutations import Mutant, apply
from verigym.envs.tool.repofix.real_env import RepoFixRealEnv, load_real_data
from verigym.envs.tool.workspace import (
    PatchError,
    apply_unified_diff,
    parse_unified_diff,
    unified_diff,
)

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_ROWS",
    "ROW_FIELDS",
    "SelectedInstance",
    "instance_rows",
    "library_env_id",
    "read_rows",
]

ROW_FIELDS = (
    "instance_id",
    "repo",
    "version",
    "base_commit",
    "patch",
    "test_patch",
    "problem_statement",
    "hints_text",
    "created_at",
    "environment_setup_commit",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "split",
    "test_files",
    "env_id",
)
"""The fields a row may carry (SWE-bench's, plus verigym's ``split``, ``test_files``, ``env_id``);
any other field refuses the row."""
REQUIRED_FIELDS = ("instance_id", "repo", "version", "patch", "FAIL_TO_PASS", "PASS_TO_PASS")
"""Fields a row read back must have."""
MAX_FILE_BYTES = 64 << 20
"""Largest instances file read (bytes)."""
MAX_ROWS = 10_000
"""Most rows in one file."""
MAX_ROW_BYTES = 1 << 20
"""Largest row (bytes of its JSON line)."""
MAX_PATCH_CHARS = 256 << 10
"""Longest ``patch`` accepted (characters)."""
MAX_TEXT_CHARS = 64 << 10
"""Longest free-text field (``problem_statement``, ``hints_text``, ...)."""
MAX_TESTS = 20_000
"""Most test ids in one FAIL_TO_PASS/PASS_TO_PASS list."""
MAX_TEST_ID_CHARS = 1024
"""Longest test id."""
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def _sdist_sha256(name: str) -> str:
    return real._manifest()["libraries"][name]["sha256"]


def library_env_id(name: str) -> str:
    """The registered id that poses library ``name``'s instances alone (``verigym/RepoFix-<L>-v0``).

    Raises:
        KeyError: no id poses that library alone.
    """
    import verigym

    for row in verigym.rows("tool"):
        if ".repofix.real_env:" in row.entry_point and row.kwargs.get("library") == name:
            return row.id
    raise KeyError(f"no registered id poses the RepoFix-Real library {name!r}")


def _files(name: str, instance: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """(pinned sources, buggy sources): the library modules before and after the instance's bug."""
    packages = load_real_data()[name]["packages"]
    files = real.library_files(name)
    original = {p: t for p, t in files.items() if any(is_source_path(p, d) for d in packages)}
    mutant = Mutant(**{k: instance["mutant"][k] for k in Mutant.__dataclass_fields__})
    buggy = dict(original)
    buggy[mutant.file] = apply(original[mutant.file], mutant)
    return original, buggy


def instance_rows(library: str | None = None, split: str = "train") -> Iterator[dict[str, Any]]:
    """SWE-bench rows of the validated instances of ``library`` (None: every library) in ``split``.

    Args:
        library: a library of ``data/repofix_real.json`` or None for all of them.
        split: ``"train"`` (the default), ``"eval"`` or ``"all"``: evaluation instances are
            written only when asked for.

    Yields:
        One dict per instance, the fields of :data:`ROW_FIELDS` (``FAIL_TO_PASS``/``PASS_TO_PASS``
        lists of str; the others str), in the data's order.

    Raises:
        ValueError: an unknown library or split.
    """
    data = load_real_data()
    if library is not None and library not in data:
        raise ValueError(f"unknown RepoFix-Real library {library!r}; choose from {sorted(data)}")
    if split not in ("train", "eval", "all"):
        raise ValueError(f"split must be 'train', 'eval' or 'all', got {split!r}")
    manifest = real._manifest()["libraries"]
    for name in [library] if library else sorted(data):
        try:
            env_id = library_env_id(name)
        except KeyError:
            env_id = "verigym/RepoFix-Real-v0"
        for instance in data[name]["instances"]:
            if split != "all" and instance["split"] != split:
                continue
            original, buggy = _files(name, instance)
            yield {
                "instance_id": instance["id"],
                "repo": name,
                "version": manifest[name]["version"],
                "base_commit": _sdist_sha256(name),
                "patch": unified_diff(buggy, original),
                "test_patch": "",
                # the env's own text (its _issue reads nothing of the env's state)
                "problem_statement": RepoFixRealEnv._issue(
                    None,  # type: ignore[arg-type]
                    name,
                    instance["mutant"]["file"],
                    instance,
                ),
                "hints_text": "",
                "FAIL_TO_PASS": list(instance["f2p"]),
                "PASS_TO_PASS": list(instance["p2p"]),
                "split": instance["split"],
                "test_files": list(instance["tests"]),
                "env_id": env_id,
            }


@dataclass(frozen=True)
class SelectedInstance:
    """A row read back: the validated instance it names."""

    library: str
    index: int
    """Its position among the library's instances (all splits, the data's order)."""
    instance_id: str


def _tests(row: dict[str, Any], key: str) -> list[str]:
    value = row[key]
    if isinstance(value, str):  # SWE-bench's own files store the lists as JSON text
        if len(value) > MAX_TESTS * (MAX_TEST_ID_CHARS + 4):
            raise ValueError(f"{key} is too long")
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError(f"{key} is text that is not a JSON list") from None
    if not isinstance(value, list) or len(value) > MAX_TESTS:
        raise ValueError(f"{key} must be a list of at most {MAX_TESTS} test ids")
    if not all(isinstance(t, str) and 0 < len(t) <= MAX_TEST_ID_CHARS for t in value):
        raise ValueError(f"{key} must hold test ids (text of 1 to {MAX_TEST_ID_CHARS} characters)")
    return value


def _check_row(row: Any, index: dict[str, tuple[str, int]]) -> SelectedInstance:
    """The instance a row names, or ``ValueError`` saying what is wrong with it (one line)."""
    if not isinstance(row, dict):
        raise ValueError(f"a row must be a JSON object, got {type(row).__name__}")
    unknown = sorted(str(k)[:40] for k in row if k not in ROW_FIELDS)
    if unknown:
        raise ValueError(f"unknown fields {unknown[:5]} (allowed: {', '.join(ROW_FIELDS)})")
    missing = [k for k in REQUIRED_FIELDS if k not in row]
    if missing:
        raise ValueError(f"missing fields {missing}")
    for key in ROW_FIELDS:
        if key in ("FAIL_TO_PASS", "PASS_TO_PASS", "test_files") or key not in row:
            continue
        limit = MAX_PATCH_CHARS if key in ("patch", "test_patch") else MAX_TEXT_CHARS
        if not isinstance(row[key], str) or len(row[key]) > limit:
            raise ValueError(f"{key} must be text of at most {limit} characters")
    data = load_real_data()
    repo = row["repo"]
    if repo not in data:
        raise ValueError(
            f"repo {repo[:80]!r} is not a vendored RepoFix-Real library (one of {', '.join(sorted(data))})"
        )
    pin = real._manifest()["libraries"][repo]
    if row["version"] != pin["version"]:
        raise ValueError(
            f"{repo} version {row['version'][:40]!r} is not the pinned {pin['version']}"
        )
    if row.get("base_commit", pin["sha256"]) != pin["sha256"]:
        raise ValueError(f"base_commit is not the SHA-256 of {repo}'s pinned sdist")
    if row.get("test_patch", ""):
        raise ValueError("test_patch must be empty: the library's own tests judge, unchanged")
    if "test_files" in row and (
        not isinstance(row["test_files"], list)
        or len(row["test_files"]) > MAX_TESTS
        or not all(isinstance(t, str) and len(t) <= MAX_TEST_ID_CHARS for t in row["test_files"])
    ):
        raise ValueError("test_files must be a list of paths")
    f2p, p2p = _tests(row, "FAIL_TO_PASS"), _tests(row, "PASS_TO_PASS")
    if not f2p:
        raise ValueError("FAIL_TO_PASS is empty: an instance needs a failing test to fix")
    # the patch: only this library's modules, and it applies to the pinned sdist (reversed)
    packages = data[repo]["packages"]
    try:
        parsed = parse_unified_diff(row["patch"])
    except PatchError as exc:
        raise ValueError(f"patch is not a unified diff: {exc}") from None
    files = real.library_files(repo)
    for old, new, hunks in parsed:
        if old != new or old is None or not any(is_source_path(old, d) for d in packages):
            raise ValueError(
                f"patch touches {str(old or new)[:120]!r}, not a module of {repo} "
                f"({', '.join(packages)}; no tests, no new or removed files)"
            )
        reverse = [
            (start, [{"+": "-", "-": "+"}.get(b[0], b[0]) + b[1:] for b in body])
            for start, body in hunks
        ]
        try:
            apply_unified_diff(files[old], reverse, old)
        except PatchError as exc:
            raise ValueError(f"patch does not apply to {repo} {pin['version']}: {exc}") from None
    instance_id = row["instance_id"]
    if not _ID.fullmatch(instance_id) or instance_id not in index:
        raise ValueError(
            f"instance {instance_id[:80]!r} is not a validated {repo} instance (new instances are "
            "validated by their library's suite: scripts/gen_repofix_real.py)"
        )
    library, position = index[instance_id]
    instance = data[library]["instances"][position]
    if library != repo:
        raise ValueError(f"instance {instance_id} belongs to {library}, not {repo}")
    original, buggy = _files(library, instance)
    try:
        fixed = dict(buggy)
        for old, _, hunks in parsed:
            fixed[old] = apply_unified_diff(buggy[old], hunks, old)
    except PatchError as exc:
        raise ValueError(f"patch does not apply to instance {instance_id}'s tree: {exc}") from None
    if fixed != original:
        raise ValueError(
            f"patch is not instance {instance_id}'s fix (it does not give the pinned sdist)"
        )
    if sorted(f2p) != sorted(instance["f2p"]) or sorted(p2p) != sorted(instance["p2p"]):
        raise ValueError(
            f"FAIL_TO_PASS/PASS_TO_PASS differ from instance {instance_id}'s validated lists"
        )
    return SelectedInstance(library, position, instance_id)


def read_rows(path: str | Path) -> tuple[list[SelectedInstance], list[str]]:
    """Read SWE-bench rows (JSON Lines, or one JSON array) back; each row is checked on its own.

    Returns:
        (the validated instances named, in the file's order without repeats; one line per refused
        row, ``"row N (instance_id ...): why"``).

    Raises:
        ValueError: the file itself is unreadable: missing, over :data:`MAX_FILE_BYTES`, not UTF-8,
            over :data:`MAX_ROWS` rows, or holding no row.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ValueError(f"--instances {path}: {exc.strerror or exc}") from None
    if size > MAX_FILE_BYTES:
        raise ValueError(f"--instances {path}: {size} bytes, over {MAX_FILE_BYTES}")
    try:
        with path.open("rb") as handle:
            text = handle.read(MAX_FILE_BYTES + 1).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"--instances {path}: cannot read it as UTF-8 text ({exc})") from None
    rows: list[tuple[int, Any]] = []
    refused: list[tuple[int, str]] = []
    if text.lstrip().startswith("["):
        try:
            array = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"--instances {path}: not a JSON array ({exc})") from None
        if not isinstance(array, list):
            raise ValueError(f"--instances {path}: not a JSON array")
        rows = list(enumerate(array[: MAX_ROWS + 1], 1))
    else:
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            if len(rows) + len(refused) > MAX_ROWS:
                break
            if len(line.encode("utf-8")) > MAX_ROW_BYTES:
                refused.append((number, f"row {number}: over {MAX_ROW_BYTES} bytes"))
                continue
            try:
                rows.append((number, json.loads(line)))
            except (ValueError, RecursionError):
                refused.append((number, f"row {number}: not a JSON object"))
    if len(rows) + len(refused) > MAX_ROWS:
        raise ValueError(f"--instances {path}: more than {MAX_ROWS} rows")
    if not rows and not refused:
        raise ValueError(f"--instances {path}: no rows")
    data = load_real_data()
    index = {
        instance["id"]: (name, position)
        for name in data
        for position, instance in enumerate(data[name]["instances"])
    }
    selected: list[SelectedInstance] = []
    seen: set[str] = set()
    for number, row in rows:
        name = row.get("instance_id") if isinstance(row, dict) else None
        label = f"row {number}" + (f" ({name[:80]})" if isinstance(name, str) else "")
        try:
            chosen = _check_row(row, index)
        except (ValueError, TypeError, KeyError, RecursionError) as exc:
            refused.append((number, f"{label}: {exc}"))
            continue
        if chosen.instance_id not in seen:
            seen.add(chosen.instance_id)
            selected.append(chosen)
    return selected, [why for _, why in sorted(refused)]


def fingerprint(rows: list[SelectedInstance]) -> str:
    """A short name for a set of instances (the suite name of ``verigym eval --instances``)."""
    digest = hashlib.sha256("\n".join(r.instance_id for r in rows).encode()).hexdigest()
    return f"instances-{digest[:10]}"
