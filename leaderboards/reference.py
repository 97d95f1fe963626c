"""Reference columns: published per-task numbers shown beside a suite's standings (issue 38).

A suite file may name reference columns (``"reference": ["miniwob_human"]``). Each is a data file
in ``leaderboards/references/`` holding numbers someone published for the suite's tasks, with the
paper and table they come from. They were not played here: the standings show them as one more
column of the per-task tables and a note that cites them, never as an entry, never ranked.

``miniwob_human``: the per-task human success rates published for MiniWoB++ (``references/
miniwob_human.json``: the "Human" column of the Synapse paper's Table 3, taken from CC-Net's human
participants, Humphreys et al. 2022). Its keys are upstream task names (``click-button``), each
one a task the ``miniwob`` package registers (:data:`verigym.envs.gui.miniwob.catalog.TASKS`),
shown on that task's id (``verigym/MiniWoB-ClickButton-v0``).

A reference file is shipped data, still read as untrusted input: at most
:data:`MAX_REFERENCE_BYTES`, only the known fields, every key a known task, every number finite
and in [0, 1], text bounded.
"""

from __future__ import annotations

import math
import pathlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from verigym.leaderboards.suite import json_file_errors, read_json

__all__ = [
    "REFERENCES",
    "ReferenceColumn",
    "load_reference",
    "reference_note",
]

REFERENCES = ("miniwob_human",)
"""The reference columns a suite file may name in ``"reference"``."""

REFERENCES_DIR = pathlib.Path(__file__).resolve().parent / "references"
MAX_REFERENCE_BYTES = 1 << 16
"""A reference file larger than this is refused before it is parsed."""
MAX_TEXT_CHARS = 1000
"""Longest text field of a reference file (its name: :data:`MAX_NAME_CHARS`)."""
MAX_NAME_CHARS = 32
_FIELDS = {"name", "metric", "description", "source", "scores"}
_SOURCE_FIELDS = {"paper", "table", "origin", "read_from", "omitted"}


@dataclass(frozen=True)
class ReferenceColumn:
    """Published per-task numbers for a suite's tasks.

    Attributes:
        key: the name a suite file gives it (``miniwob_human``).
        name: the column's header (``human``).
        metric: what the numbers are (``success rate``).
        values: env id -> the published number, in [0, 1].
        source: ``paper``, ``table``, ``origin``, ``read_from`` (text) and ``omitted`` (task ->
            why the table's number for it is not carried).
    """

    key: str
    name: str
    metric: str
    values: dict[str, float]
    source: dict[str, Any] = field(default_factory=dict)

    @property
    def citation(self) -> str:
        """The paper and table, in one line."""
        return f"{self.source['paper']} {self.source['table']}"

    def cell(self, env_id: str) -> str:
        """The column's per-task cell: the number as published (two decimals), or "—"."""
        value = self.values.get(env_id)
        return "—" if value is None else f"{value:.2f}"


def _text(value: Any, what: str, limit: int = MAX_TEXT_CHARS) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= limit or not value.isprintable():
        raise ValueError(f"{what} must be printable text of 1 to {limit} characters")
    return value


def _miniwob_ids(names: Iterable[str]) -> dict[str, str]:
    """Upstream MiniWoB++ task name -> its verigym id; a name ``miniwob`` does not register is refused."""
    from verigym.envs.gui.miniwob.catalog import TASKS, env_name

    known = set(TASKS)
    ids = {}
    for name in names:
        if name not in known:
            raise ValueError(
                f"{str(name)[:80]!r} is not a task the miniwob package registers (catalog.TASKS)"
            )
        ids[name] = f"verigym/{env_name(name)}-v0"
    return ids


def load_reference(key: str, path: pathlib.Path | None = None) -> ReferenceColumn:
    """Read and check a reference column.

    Args:
        key: one of :data:`REFERENCES`.
        path: the file (default: ``references/<key>.json``; tests give another).

    Raises:
        ValueError: an unknown key, or a file that is not a valid reference (one line saying why).
    """
    if key not in REFERENCES:
        raise ValueError(f"no reference column {str(key)[:80]!r}; known: {', '.join(REFERENCES)}")
    path = path or REFERENCES_DIR / f"{key}.json"
    with json_file_errors(path):
        data = read_json(path, MAX_REFERENCE_BYTES, "a reference file")
        if not isinstance(data, dict) or set(data) != _FIELDS:
            raise ValueError(f"a reference file is an object with exactly {sorted(_FIELDS)}")
        source = data["source"]
        if not isinstance(source, dict) or set(source) != _SOURCE_FIELDS:
            raise ValueError(f"source must be an object with exactly {sorted(_SOURCE_FIELDS)}")
        for name in ("paper", "table", "origin", "read_from"):
            _text(source[name], f"source.{name}")
        omitted = source["omitted"]
        if not isinstance(omitted, dict) or len(omitted) > 1000:
            raise ValueError("source.omitted must be an object (task -> why it is left out)")
        for task, why in omitted.items():
            _text(task, "an omitted task", 100)
            _text(why, f"why {task!r} is omitted")
        scores = data["scores"]
        if not isinstance(scores, dict) or not 0 < len(scores) <= 1000:
            raise ValueError("scores must be an object of 1 to 1000 task -> number")
        for task, value in scores.items():
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not (math.isfinite(value) and 0.0 <= value <= 1.0)
            ):
                raise ValueError(f"scores[{str(task)[:80]!r}] must be a number in [0, 1]")
        ids = _miniwob_ids(scores)
        return ReferenceColumn(
            key=key,
            name=_text(data["name"], "name", MAX_NAME_CHARS),
            metric=_text(data["metric"], "metric", MAX_NAME_CHARS),
            values={ids[task]: float(value) for task, value in scores.items()},
            source=dict(source),
        )


def reference_note(column: ReferenceColumn, env_ids: Sequence[str]) -> str:
    """The standings' note for a reference column: what it is, what it covers, where it is from."""
    shown = [column.values[e] for e in env_ids if e in column.values]
    mean = f" (mean {sum(shown) / len(shown):.3f} over those)" if shown else ""
    return (
        f"{column.name} column: published per-task {column.metric}s, not played here and not "
        f"ranked; {len(shown)} of the {len(env_ids)} tasks have one{mean}, '—' where the table "
        f"has none. Source: {column.citation} Originally: {column.source['origin']} "
        f"Read from {column.source['read_from']}."
    )
