"""Standings: the results store rendered as a terminal table, Markdown and a static HTML page.

An entry is an agent spec with its config hash. On a suite, an entry's number is the mean over the
suite's tasks of the per-task mean of the suite's metric. Only entries that played every episode
of every task (errors do not count as played) are ranked; a partial entry is never compared with
them by an overall number: it is listed apart, unranked, with its mean over the tasks it covers and
its name says what it covers (``ppo:ckpts (covers DoorKey-5x5-v0)``). Each per-task number comes
with its standard error over episodes. A reference row that cannot win every episode by design (the
oracle in a game against an opponent, where chance and the opponent decide some episodes) gets a
note that says so. On a task whose registration row says it has no scripted solver
(:attr:`verigym.registration.EnvRow.oracle` false), the ``oracle`` agent's cell reads
:data:`NO_ORACLE` when it has no ``ok`` row there (its rows are errors, or there are none), never a
0: those error rows leave its per-task cells and its mean over covered tasks (it stays partial).
A suite's reference columns (:mod:`verigym.leaderboards.reference`: published per-task numbers,
such as MiniWoB++'s human success rates) follow the entries in every per-task table, with a note
citing the paper and table; they are not entries and are never ranked.

What a row proves: only an ``ok`` row carries a verdict (``verigym reverify`` replays it). A
``timeout`` or ``error`` row was never replayed, so it carries no score: it counts as a failure in
every aggregate (score 0, not a success, and for the ``return`` metric its partial return capped at
0, so a timeout never earns more than playing on would have), whatever the row says. Rows recorded
with constructor kwargs of their own are another task: without a suite they get their own row,
labelled with the kwargs (:func:`task_label`); a suite keeps only rows of its own kwargs.
"""

from __future__ import annotations

import html
import json
import math
import pathlib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from verigym.leaderboards.agent_spec import display_name, split_display_name
from verigym.leaderboards.store import MAX_ABS_RETURN, EpisodeRow, ResultsStore
from verigym.leaderboards.suite import Suite

__all__ = [
    "NO_ORACLE",
    "Entry",
    "Standings",
    "agent_label",
    "compute_standings",
    "render_html",
    "render_markdown",
    "render_table",
    "task_label",
]

_METRIC_FIELD = {"score": "score", "success": "success", "return": "episode_return"}

NO_ORACLE = "no oracle"
"""The ``oracle`` agent's per-task cell on a task without a scripted solver."""


@dataclass
class Cell:
    """Per (entry, env) aggregate."""

    episodes: int
    mean: float
    stderr: float
    success_rate: float
    mean_score: float
    mean_return: float
    mean_length: float
    timeouts: int
    errors: int


@dataclass
class Entry:
    """One agent (spec + config hash) on the leaderboard.

    Attributes:
        overall: mean over all the tasks of the per-task means; NaN for a partial entry.
        coverage: fraction of the expected episodes played (error rows excluded), in [0, 1].
        rank: 1-based among complete entries; 0 for a partial entry (not ranked).
        covered_mean: mean of the per-task means over the tasks the entry has rows for.
        covers: the ids of those tasks, in the suite's order.
        tasks: how many tasks the standings have.
    """

    agent_spec: str
    config_hash: str
    cells: dict[str, Cell] = field(default_factory=dict)
    overall: float = math.nan
    coverage: float = 0.0
    rank: int = 0
    covered_mean: float = math.nan
    covers: list[str] = field(default_factory=list)
    tasks: int = 0

    @property
    def complete(self) -> bool:
        """Whether the entry played every expected episode (only complete entries are ranked)."""
        return self.coverage >= 1.0

    @property
    def name(self) -> str:
        """The spec's display name (``name=``, :func:`~verigym.leaderboards.agent_spec.display_name`),
        else the agent spec."""
        return display_name(self.agent_spec) or self.agent_spec

    @property
    def label(self) -> str:
        """The agent's name, plus what it covers when that is not every task."""
        if self.complete or not self.tasks:
            return self.name
        if 0 < len(self.covers) <= 3 and len(self.covers) < self.tasks:
            return f"{self.name} (covers {', '.join(map(_short_id, self.covers))})"
        if len(self.covers) < self.tasks:
            return f"{self.name} (covers {len(self.covers)} of {self.tasks} tasks)"
        return f"{self.name} ({self.coverage:.0%} of episodes)"


@dataclass
class Standings:
    title: str
    metric: str
    env_ids: list[str]
    entries: list[Entry]
    curves: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    ratings: list = field(default_factory=list)
    """For competitive suites: :class:`verigym.leaderboards.arena.Rating`, best first."""
    notes: list[str] = field(default_factory=list)
    """Why a reference row cannot reach the top score on some task (shown under the tables)."""
    summaries: dict[str, dict[str, float]] = field(default_factory=dict)
    """The suite's summaries (``"crafter_score"``) per entry, keyed ``"<agent spec>#<config hash>"``
    (:func:`verigym.leaderboards.achievements.suite_summaries`; also shown as a note)."""
    no_oracle: frozenset[str] = frozenset()
    """The tasks (``env_ids`` entries) whose registration row says they have no scripted solver."""
    references: list = field(default_factory=list)
    """The suite's reference columns (:class:`verigym.leaderboards.reference.ReferenceColumn`):
    published per-task numbers shown after the entries, never ranked."""

    @property
    def ranked(self) -> list[Entry]:
        """Complete entries, best first."""
        return [e for e in self.entries if e.complete]

    @property
    def partial(self) -> list[Entry]:
        """Entries that did not play every task (never ranked against complete ones)."""
        return [e for e in self.entries if not e.complete]


def task_label(env_id: str, env_kwargs: str) -> str:
    """The standings' name of the task a row was played on: its env id, with its kwargs when they
    are not the defaults (``verigym/GuessNumber-v0 {"max_number":2}``), or a note when the row
    predates rows naming their kwargs. Rows of two labels never share a cell.

    Args:
        env_id: the row's env id.
        env_kwargs: the row's canonical kwargs JSON (``""`` on a migrated row).
    """
    if env_kwargs == "{}":
        return env_id
    if not env_kwargs:
        return f"{env_id} (kwargs not recorded)"
    return f"{env_id} {env_kwargs}"


def _credited(row: EpisodeRow, metric: str) -> float:
    """What a row counts for in an aggregate: its own value when it is an ``ok`` row; a
    ``timeout``/``error`` row carries no verdict, so no credit (0, and a return capped at 0)."""
    if row.status == "ok":
        return float(getattr(row, _METRIC_FIELD[metric]))
    return min(0.0, row.episode_return) if metric == "return" else 0.0


def _aggregate(rows: Sequence[EpisodeRow], metric: str) -> Cell:
    values = [_credited(r, metric) for r in rows]
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return Cell(
        episodes=n,
        mean=mean,
        stderr=math.sqrt(var / n),
        success_rate=sum(_credited(r, "success") for r in rows) / n,
        mean_score=sum(_credited(r, "score") for r in rows) / n,
        mean_return=sum(_credited(r, "return") for r in rows) / n,
        mean_length=sum(r.length for r in rows) / n,
        timeouts=sum(r.status == "timeout" for r in rows),
        errors=sum(r.status == "error" for r in rows),
    )


def compute_standings(store: ResultsStore, suite: Suite | None = None) -> Standings:
    """Aggregate the store, restricted to a suite's envs, seeds and kwargs when given.

    Raises:
        StoreError: a stored row or match is invalid (:meth:`ResultsStore.rows`): standings are
            never computed from rows that were changed after they were written.
    """
    if suite is not None and suite.kind == "competitive":
        from verigym.leaderboards.arena import compute_ratings

        seeds = {t.env_id: set(t.seeds) for t in suite}
        matches = [m for m in store.matches(env_ids=list(seeds)) if m.seed in seeds[m.env_id]]
        return Standings(
            f"verigym arena: {suite.name}",
            "rating",
            [t.env_id for t in suite],
            [],
            ratings=compute_ratings(matches),
        )
    label = lambda row: row.env_id  # noqa: E731 - a suite's task: the suite fixes its kwargs
    if suite is not None:  # the suite's seeds and kwargs; every row is validated as it is read
        rows = store.suite_rows(suite)
        env_ids, metric, title = (
            [t.env_id for t in suite],
            suite.metric,
            f"verigym leaderboard: {suite.name}",
        )
    else:
        rows = store.rows()
        label = lambda row: task_label(row.env_id, row.env_kwargs)  # noqa: E731
        env_ids, metric, title = (
            sorted({label(r) for r in rows}),
            "score",
            "verigym leaderboard: all results",
        )
    grouped: dict[tuple[str, str], dict[str, list[EpisodeRow]]] = {}
    for row in rows:
        grouped.setdefault((row.agent_spec, row.config_hash), {}).setdefault(label(row), []).append(
            row
        )
    no_oracle = _no_oracle_tasks(env_ids)
    entries = []
    for (spec, config_hash), by_env in grouped.items():
        entry = Entry(
            spec,
            config_hash,
            {
                env_id: _aggregate(r, metric)
                for env_id, r in by_env.items()
                # the oracle's rows where there is none carry nothing: its cell says NO_ORACLE
                if not (
                    env_id in no_oracle
                    and _is_oracle(spec)
                    and not any(row.status == "ok" for row in r)
                )
            },
            tasks=len(env_ids),
        )
        entry.covers = [e for e in env_ids if e in entry.cells]
        played = {e: c.episodes - c.errors for e, c in entry.cells.items()}
        if suite is not None:
            expected = {t.env_id: t.episodes for t in suite}
            entry.coverage = sum(min(n, expected[e]) for e, n in played.items()) / sum(
                expected.values()
            )
        else:  # everything recorded: an entry covers the tasks it has error-free rows on
            entry.coverage = sum(
                1 for e in env_ids if played.get(e, 0) > 0 and entry.cells[e].errors == 0
            ) / len(env_ids)
        entry.covered_mean = (
            sum(c.mean for c in entry.cells.values()) / len(entry.cells)
            if entry.cells
            else math.nan
        )
        entry.overall = (
            sum(entry.cells[e].mean for e in env_ids) / len(env_ids) if entry.complete else math.nan
        )
        entries.append(entry)
    # complete entries by overall score; partial ones after them, unranked, by coverage
    entries.sort(
        key=lambda e: (not e.complete, -e.overall if e.complete else -e.coverage, e.agent_spec)
    )
    for rank, entry in enumerate((e for e in entries if e.complete), 1):
        entry.rank = rank
    from verigym.leaderboards.heldout import small_task_space_notes  # † small task spaces

    notes = _reference_notes(entries, env_ids) + small_task_space_notes(env_ids)
    from verigym.leaderboards.achievements import suite_summaries, summary_notes

    summaries = suite_summaries(store, suite, rows) if suite is not None else {}
    notes += summary_notes(summaries, entries)
    from verigym.leaderboards.reference import load_reference, reference_note

    references = [load_reference(key) for key in (suite.reference if suite is not None else ())]
    notes += [reference_note(column, env_ids) for column in references]
    return Standings(
        title,
        metric,
        env_ids,
        entries,
        notes=notes,
        summaries=summaries,
        no_oracle=no_oracle,
        references=references,
    )


def _is_oracle(spec: str) -> bool:
    """Whether an agent spec is the ``oracle`` agent (with or without a display name)."""
    try:
        return split_display_name(spec)[0] == "oracle"
    except ValueError:
        return False


def _no_oracle_tasks(env_ids: Sequence[str]) -> frozenset[str]:
    """The tasks among ``env_ids`` (an id, or an id and its kwargs: :func:`task_label`) whose
    registration row says ``oracle=False``; an id not registered here is assumed to have one."""
    from verigym.registration import rows

    without = {r.id for r in rows() if not r.oracle}
    return frozenset(e for e in env_ids if e.partition(" ")[0] in without)


def _reference_notes(entries: Sequence[Entry], env_ids: Sequence[str]) -> list[str]:
    """Notes for the oracle row on tasks it cannot win every episode of by design: games against an
    opponent (family ``multiagent``), where the deal, the dice or the opponent decide episodes."""
    from verigym.registration import rows

    known = {r.id: r for r in rows()}
    notes = []
    for entry in entries:
        if entry.agent_spec != "oracle":
            continue
        for env_id in env_ids:
            cell, row = entry.cells.get(env_id), known.get(env_id)
            if (
                cell is None
                or cell.success_rate >= 1.0
                or row is None
                or row.family != "multiagent"
            ):
                continue
            notes.append(
                f"oracle on {_short_id(env_id)} (success {cell.success_rate:.0%}): a game against an opponent "
                f"({row.description.rstrip('.')}); chance and the opponent's play decide some games, so no strategy "
                "wins them all: the oracle is a reference, not a ceiling."
            )
    return notes


MAX_CURVE_POINTS = 10_000
"""Points kept per learning curve: a longer log is thinned evenly as it is read, so neither the
memory nor the chart grows with the log."""
MAX_CURVE_STEP = 1e15
"""Largest step a learning-curve point may have (a bigger one, or a return beyond
``±MAX_ABS_RETURN``, is not a point of a real run: its line is skipped)."""


def load_curves(paths: Iterable[pathlib.Path]) -> dict[str, list[tuple[float, float]]]:
    """Learning curves from training logs: JSONL lines with a step (``global_step`` or ``step``)
    and a return (``charts/episodic_return``, ``episodic_return`` or ``return``).

    A line that is not such a record is skipped: not a JSON object, or a step or return that is
    not a finite number (steps in ``[0, MAX_CURVE_STEP]``, returns within
    ``±``:data:`~verigym.leaderboards.store.MAX_ABS_RETURN`); bytes that are not UTF-8 are
    replaced. Each curve keeps at most :data:`MAX_CURVE_POINTS` points, evenly spaced.

    Raises:
        ValueError: a file cannot be read (the message names it).
    """
    curves = {}
    for path in paths:
        points: list[tuple[float, float]] = []
        stride, seen = 1, 0
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    point = _curve_point(line)
                    if point is None:
                        continue
                    if seen % stride == 0:
                        points.append(point)
                    seen += 1
                    if len(points) >= 2 * MAX_CURVE_POINTS:
                        points, stride = points[::2], stride * 2
        except OSError as exc:
            raise ValueError(f"{path}: cannot be read ({exc.strerror or exc})") from None
        if points:
            curves[path.parent.name if path.name == "metrics.jsonl" else path.stem] = points[
                :: math.ceil(len(points) / MAX_CURVE_POINTS)
            ]
    return curves


def _curve_point(line: str) -> tuple[float, float] | None:
    """(step, return) of one training-log line, or ``None`` when it is not such a record."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict):
        return None
    step = record.get("global_step", record.get("step"))
    value = next(
        (record[k] for k in ("charts/episodic_return", "episodic_return", "return") if k in record),
        None,
    )
    if _number_in(step, 0, MAX_CURVE_STEP) and _number_in(value, -MAX_ABS_RETURN, MAX_ABS_RETURN):
        return float(step), float(value)
    return None


def _number_in(value: Any, low: float, high: float) -> bool:
    """``value`` is an int or float (not a bool) in ``[low, high]`` (NaN is in no range)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and low <= value <= high


def _number(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.3f}"


def _rank_text(entry: Entry) -> str:
    return f"#{entry.rank}" if entry.complete else "not ranked"


def _overall_text(entry: Entry) -> str:
    """The overall cell: the score of a ranked entry; a partial one's mean on what it covers."""
    if entry.complete:
        return _number(entry.overall)
    return f"{_number(entry.covered_mean)} on {len(entry.covers)} of {entry.tasks} tasks ({entry.coverage:.0%} of episodes; not ranked)"


def _covers_text(standings: Standings, entry: Entry) -> str:
    """What a partial entry covers, in the shorter of two forms: the tasks it has rows on, or (when
    those are more than the ones it lacks) how many, and the tasks it lacks."""
    missing = [e for e in standings.env_ids if e not in entry.cells]
    if not missing:
        return f"all {len(standings.env_ids)} tasks"
    if len(entry.covers) <= len(missing):
        return ", ".join(map(_short_id, entry.covers))
    return f"{len(entry.covers)} of {len(standings.env_ids)} tasks; not {', '.join(map(_short_id, missing))}"


def _task_text(standings: Standings, entry: Entry, env_id: str) -> str:
    """An entry's per-task cell: :func:`_cell_text`, or :data:`NO_ORACLE` for the ``oracle``
    agent on a task without one (where it has no ``ok`` row)."""
    cell = entry.cells.get(env_id)
    if cell is None and env_id in standings.no_oracle and _is_oracle(entry.agent_spec):
        return NO_ORACLE
    return _cell_text(cell)


def _cell_text(cell: Cell | None) -> str:
    if cell is None:
        return "—"
    text = f"{cell.mean:.3f} ± {cell.stderr:.3f}"
    if cell.timeouts or cell.errors:
        text += f" ({cell.timeouts} timeout, {cell.errors} error: no credit)"
    return text


def _short_id(env_id: str) -> str:
    return env_id.removeprefix("verigym/")


def _markdown_code(text: str) -> str:
    """``text`` as Markdown inline code in a table cell or list item: a backtick in a stored spec
    cannot close it, nor a line break or other control character end the line."""
    plain = "".join(c if c.isprintable() else " " for c in text.replace("`", "'"))
    return "`" + _markdown_cell(plain) + "`"


def _markdown_agent(entry: Entry) -> str:
    """An entry's agent cell: its display name (allow-listed: no markup), else its spec as code."""
    name = display_name(entry.agent_spec)
    return name if name else _markdown_code(entry.agent_spec)


def _markdown_cell(text: str) -> str:
    """``text`` safe in a Markdown table cell (a task label's kwargs may hold ``|``)."""
    return text.replace("|", "\\|")


LABEL_LENGTH = 24
"""Characters of an agent's short label in the HTML standings (the full spec is its tooltip)."""


def agent_label(spec: str, limit: int = LABEL_LENGTH) -> str:
    """A short label for an agent spec, for table headers and legends.

    The kind prefix is kept and a path, URL or option string is cut to its last part:
    ``llm:/models/Qwen2.5-0.5B?temperature=0.7`` -> ``llm:Qwen2.5-0.5B?…``,
    ``openai:http://host:8000/v1#org/model`` -> ``openai:model``; what is still longer than
    ``limit`` characters keeps its start and end around an ellipsis.

    Args:
        spec: an agent spec as stored (any string: it comes from the results store).
        limit: the most characters of the label (>= 8).

    A spec with a display name (``name=``) is labelled by its name, whole (at most
    :data:`~verigym.leaderboards.agent_spec.MAX_NAME_LENGTH` characters).

    Returns:
        The label, at most ``limit`` characters (a display name: at most its own length).
    """
    name = display_name(spec)
    if name:
        return name
    kind, sep, rest = spec.partition(":")
    if sep and rest:
        rest = rest.rpartition("#")[2] or rest
        rest, query, _ = rest.partition("?")
        last = rest.rstrip("/").rpartition("/")[2] or rest
        label = f"{kind}:{last}" + ("?…" if query else "")
    else:
        label = spec
    if len(label) <= limit:
        return label
    tail = max(1, limit // 3)
    return label[: limit - tail - 1] + "…" + label[-tail:]


def _labels(entries: Sequence[Entry]) -> dict[int, str]:
    """``id(entry)`` -> its short label, with the config hash added where two labels would be equal."""
    labels = {id(e): agent_label(e.agent_spec) for e in entries}
    counts = Counter(labels.values())
    return {
        id(e): f"{labels[id(e)]} {e.config_hash[:6]}"
        if counts[labels[id(e)]] > 1
        else labels[id(e)]
        for e in entries
    }


_RATING_HEADER = [
    "#",
    "agent",
    "config",
    "ordinal (mu - 3 sigma)",
    "mu",
    "sigma",
    "matches",
    "wins",
    "draws",
    "losses",
]


def _rating_cells(rank: int, r: Any) -> list[str]:
    return [
        str(rank),
        r.agent_spec,
        r.config_hash[:8],
        f"{r.ordinal:.2f}",
        f"{r.mu:.2f}",
        f"{r.sigma:.2f}",
        str(r.matches),
        str(r.wins),
        str(r.draws),
        str(r.losses),
    ]


def render_table(standings: Standings) -> None:
    """Print the standings as a rich table."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    if standings.metric == "rating":
        table = Table(
            title=f"{standings.title} (openskill Plackett-Luce; games: {', '.join(map(_short_id, standings.env_ids))})"
        )
        for column in _RATING_HEADER:
            table.add_column(column)
        for rank, r in enumerate(standings.ratings, 1):
            table.add_row(*(escape(c) for c in _rating_cells(rank, r)))
        Console(width=140).print(table)
        return

    # one column per agent, one row per task: readable however many tasks a suite has
    table = Table(
        title=f"{standings.title} (metric: {standings.metric}, mean ± s.e. over episodes)",
        caption="Ranked: entries that played every task. Partial entries are not ranked; their number is over the tasks they cover."
        if standings.partial
        else None,
    )
    table.add_column("task")
    for e in standings.entries:
        table.add_column(
            f"{_rank_text(e)} {escape(e.label)} [dim]{e.config_hash[:8]}[/dim]", justify="right"
        )
    for column in standings.references:
        table.add_column(
            f"{escape(_reference_header(column))} [dim]not ranked[/dim]", justify="right"
        )
    table.add_row(
        "[bold]overall[/bold]",
        *(
            (f"[bold]{_number(e.overall)}[/bold]" if e.complete else escape(_overall_text(e)))
            for e in standings.entries
        ),
        *("" for _ in standings.references),
        end_section=True,
    )
    for env_id in standings.env_ids:
        table.add_row(
            escape(_short_id(env_id)),
            *(escape(_task_text(standings, e, env_id)) for e in standings.entries),
            *(escape(column.cell(env_id)) for column in standings.references),
        )
    columns = len(standings.entries) + len(standings.references)
    console = Console(width=max(100, 34 + 26 * columns))
    console.print(table)
    for note in standings.notes:
        console.print(f"Note: {escape(note)}")


def render_markdown(standings: Standings) -> str:
    """The standings as a Markdown document (a table, then per-task details)."""
    if standings.metric == "rating":
        lines = [
            f"# {standings.title}",
            "",
            "Ranked by the openskill (Plackett-Luce) ordinal mu - 3 sigma over all matches.",
            "",
            "| " + " | ".join(_RATING_HEADER) + " |",
            "|" + "---|" * len(_RATING_HEADER),
        ]
        lines += [
            "| " + " | ".join(_rating_cells(rank, r)) + " |"
            for rank, r in enumerate(standings.ratings, 1)
        ]
        return "\n".join(lines) + "\n"
    lines = [
        f"# {standings.title}",
        "",
        f"Metric: **{standings.metric}** (mean ± standard error over episodes).",
        "",
    ]
    lines += ["| # | agent | config | overall | coverage |", "|---|---|---|---|---|"]
    lines += [
        f"| {e.rank} | {_markdown_agent(e)} | {e.config_hash[:8]} | {_number(e.overall)} | {e.coverage:.0%} |"
        for e in standings.ranked
    ]
    if standings.partial:
        lines += [
            "",
            "## Partial entries (not ranked)",
            "",
            "They did not play every task, so an overall score would not compare with the ranked ones; "
            "the mean is over the tasks each covers.",
            "",
            "| agent | config | covers | mean on covered tasks | coverage |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {_markdown_agent(e)} | {e.config_hash[:8]} | {_markdown_cell(_covers_text(standings, e))} | {_number(e.covered_mean)} | {e.coverage:.0%} |"
            for e in standings.partial
        ]
    named = [e for e in standings.entries if display_name(e.agent_spec)]
    if named:  # a display name hides the spec in the tables: here is each one's spec and config
        lines += ["", "## Agents", ""]
        lines += [
            f"* {e.name} (config {e.config_hash[:8]}): {_markdown_code(e.agent_spec)}"
            for e in named
        ]
    if standings.notes:
        lines += ["", "## Notes", ""] + [f"* {note}" for note in standings.notes]
    lines += _markdown_task_table(
        "Per task", standings, lambda e, env_id: _task_text(standings, e, env_id)
    )
    lines += _markdown_task_table(
        "Success rate",
        standings,
        lambda e, env_id: (
            f"{e.cells[env_id].success_rate:.0%}"
            if env_id in e.cells
            else _task_text(standings, e, env_id)
        ),
    )
    return "\n".join(lines) + "\n"


def _markdown_task_table(
    title: str, standings: Standings, cell: Callable[[Entry, str], str]
) -> list[str]:
    """A Markdown section: a row per task, a column per entry, ``cell(entry, env_id)`` in each."""
    references = standings.references
    lines = [
        "",
        f"## {title}",
        "",
        "| task | "
        + " | ".join(
            [f"`{e.label}`" for e in standings.entries]
            + [_markdown_cell(_reference_header(c)) for c in references]
        )
        + " |",
        "|---|" + "---|" * (len(standings.entries) + len(references)),
    ]
    for env_id in standings.env_ids:
        lines.append(
            f"| {_markdown_cell(_short_id(env_id))} | "
            + " | ".join(
                [cell(e, env_id).replace("|", "\\|") for e in standings.entries]
                + [_markdown_cell(c.cell(env_id)) for c in references]
            )
            + " |"
        )
    return lines


def _reference_header(column: Any) -> str:
    """A reference column's header: its name and what its numbers are (published, not played)."""
    return f"{column.name} ({column.metric}, published)"


# ---- HTML with inline SVG plots --------------------------------------------------------------

_PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)


def _bar_chart(
    title: str, env_ids: Sequence[str], entries: Sequence[Entry], value: str, top: float = 1.0
) -> str:
    """Grouped vertical bars: one group per env, one bar per entry; values in [0, top]."""
    width, height, left, bottom = max(480, 90 * len(env_ids) + 80), 300, 50, 90
    group = (width - left - 20) / max(len(env_ids), 1)
    bar = group * 0.8 / max(len(entries), 1)
    plot_h = height - bottom - 30
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(title)}">',
        f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14" font-weight="bold">{html.escape(title)}</text>',
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = 30 + plot_h * (1 - tick)
        parts.append(
            f'<line x1="{left}" x2="{width - 20}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>'
        )
        parts.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="10">{tick * top:g}</text>'
        )
    for i, env_id in enumerate(env_ids):
        x0 = left + i * group + group * 0.1
        for j, entry in enumerate(entries):
            cell = entry.cells.get(env_id)
            if cell is None:
                continue
            v = max(0.0, min(top, getattr(cell, value))) / top
            h = plot_h * v
            parts.append(
                f'<rect x="{x0 + j * bar:.1f}" y="{30 + plot_h - h:.1f}" width="{bar * 0.92:.1f}" height="{h:.1f}" fill="{_PALETTE[j % len(_PALETTE)]}">'
                f"<title>{html.escape(entry.agent_spec)} on {html.escape(env_id)}: {getattr(cell, value):.3f}</title></rect>"
            )
        label_x = left + i * group + group / 2
        parts.append(
            f'<text x="{label_x:.1f}" y="{height - bottom + 14}" font-size="10" text-anchor="end" transform="rotate(-35 {label_x:.1f} {height - bottom + 14})">{html.escape(_short_id(env_id))}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values (1, 2 or 5 times a power of ten apart) covering [lo, hi]."""
    span = hi - lo if hi > lo else abs(hi) or 1.0
    raw = span / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    ticks = [round(math.floor(lo / step) * step, 12)]
    while ticks[-1] < hi - step * 1e-9 or len(ticks) < 2:
        ticks.append(round(ticks[-1] + step, 12))
    return ticks


def _tick_label(value: float) -> str:
    if value != 0 and (abs(value) >= 1e4 or abs(value) < 1e-3):
        return (
            f"{value:.3g}"
            if abs(value) < 1e4
            else (f"{value / 1e3:g}k" if abs(value) < 1e6 else f"{value / 1e6:g}M")
        )
    return f"{value:g}"


def _line_chart(
    title: str,
    curves: dict[str, list[tuple[float, float]]],
    *,
    x_title: str = "env steps",
    y_title: str = "episodic return",
) -> str:
    """Learning curves as an SVG line chart with titled, ticked axes and a legend."""
    width, height, left, bottom, top, right = 660, 330, 72, 56, 30, 20
    xs = [x for points in curves.values() for x, _ in points]
    ys = [y for points in curves.values() for _, y in points]
    # x spans the data exactly (ticks inside it); y is padded out to round ticks
    x_lo, x_hi = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1.0
    x_ticks = [
        x
        for x in _ticks(x_lo, x_hi)
        if x_lo - 1e-9 * (x_hi - x_lo) <= x <= x_hi + 1e-9 * (x_hi - x_lo)
    ]
    y_ticks = _ticks(min(ys), max(ys))
    y_lo, y_hi = y_ticks[0], y_ticks[-1]
    plot_w, plot_h = width - left - right, height - bottom - top

    def px(x: float) -> float:
        return left + plot_w * (x - x_lo) / (x_hi - x_lo)

    def py(y: float) -> float:
        return top + plot_h * (1 - (y - y_lo) / (y_hi - y_lo))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(title)}">',
        f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14" font-weight="bold">{html.escape(title)}</text>',
    ]
    for x in x_ticks:
        parts.append(
            f'<line class="x-tick" x1="{px(x):.1f}" x2="{px(x):.1f}" y1="{top}" y2="{top + plot_h + 4}" stroke="#e4e4e4"/>'
        )
        parts.append(
            f'<text x="{px(x):.1f}" y="{top + plot_h + 16}" font-size="10" text-anchor="middle">{_tick_label(x)}</text>'
        )
    for y in y_ticks:
        parts.append(
            f'<line class="y-tick" x1="{left - 4}" x2="{left + plot_w}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#e4e4e4"/>'
        )
        parts.append(
            f'<text x="{left - 7}" y="{py(y) + 3.5:.1f}" font-size="10" text-anchor="end">{_tick_label(y)}</text>'
        )
    parts += [
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>',
        f'<text class="x-title" x="{left + plot_w / 2:.1f}" y="{height - 12}" font-size="12" text-anchor="middle">{html.escape(x_title)}</text>',
        f'<text class="y-title" x="16" y="{top + plot_h / 2:.1f}" font-size="12" text-anchor="middle" transform="rotate(-90 16 {top + plot_h / 2:.1f})">{html.escape(y_title)}</text>',
    ]
    for j, (name, points) in enumerate(sorted(curves.items())):
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in sorted(points))
        colour = _PALETTE[j % len(_PALETTE)]
        parts.append(
            f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"><title>{html.escape(name)}</title></polyline>'
        )
        parts.append(
            f'<text x="{left + 8}" y="{top + 16 + 14 * j}" font-size="11" fill="{colour}">{html.escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _episodes_link(text: str, href: str | None, **filters: str) -> str:
    """``text`` (escaped) as a link to the episode viewer, filtered (``#agent=...&task=...``); a
    missing value ("—": no episodes behind it; :data:`NO_ORACLE`) is plain text, never a link to an empty filter."""
    if href is None or text in ("—", NO_ORACLE):
        return html.escape(text)
    from urllib.parse import urlencode

    return (
        f'<a href="{html.escape(href)}#{html.escape(urlencode(filters))}">{html.escape(text)}</a>'
    )


def _agent_cell(entry: Entry, label: str, href: str | None) -> str:
    """The agent's short label with its full spec as tooltip, linked to its episodes (the agent's
    page: the viewer filtered to it, which shows the full spec)."""
    tip = f"{entry.agent_spec} (config {entry.config_hash[:8]})"
    text = f'<span class="agent" title="{html.escape(tip)}">{html.escape(label)}</span>'
    if href is None:
        return text
    from urllib.parse import urlencode

    return f'<a href="{html.escape(href)}#{html.escape(urlencode({"agent": entry.agent_spec}))}">{text}</a>'


def render_html(standings: Standings, *, episodes_href: str | None = None) -> str:
    """One self-contained HTML page: the table, score and success-rate charts, learning curves.

    Args:
        standings: what to show.
        episodes_href: the episode viewer's index (relative URL, e.g. ``episodes/index.html``);
            when given, every score links to the episodes behind it.
    """
    if standings.metric == "rating":
        rows = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in _rating_cells(rank, r)) + "</tr>"
            for rank, r in enumerate(standings.ratings, 1)
        )
        header = "".join(f"<th>{html.escape(h)}</th>" for h in _RATING_HEADER)
        return (
            f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(standings.title)}</title></head>'
            f'<body style="font-family: system-ui, sans-serif"><h1>{html.escape(standings.title)}</h1>'
            f'<table id="standings" border="1" cellpadding="4">{header}{rows}</table></body></html>\n'
        )
    complete = list(standings.entries)
    labels = _labels(standings.entries)
    legend = "".join(
        f'<span class="key" title="{html.escape(e.label)}"><i style="background:{_PALETTE[j % len(_PALETTE)]}"></i>{html.escape(labels[id(e)])}</span>'
        for j, e in enumerate(complete)
    )
    ranking = "".join(
        f"<tr><td>{e.rank}</td><td>{_agent_cell(e, labels[id(e)], episodes_href)}</td><td>{html.escape(e.config_hash[:8])}</td>"
        f"<td>{_episodes_link(_number(e.overall), episodes_href, agent=e.agent_spec)}</td><td>{e.coverage:.0%}</td></tr>"
        for e in standings.ranked
    )
    partial = ""
    if standings.partial:
        partial = (
            "<h2>Partial entries (not ranked)</h2><p>They did not play every task, so an overall score would not compare with the ranked ones; "
            'the mean is over the tasks each covers.</p><div class="wide"><table id="partial"><thead><tr><th>agent</th><th>config</th><th>covers</th>'
            "<th>mean on covered tasks</th><th>coverage</th></tr></thead><tbody>"
            + "".join(
                f"<tr><td>{_agent_cell(e, labels[id(e)], episodes_href)}</td><td>{html.escape(e.config_hash[:8])}</td>"
                f'<td class="covers">{html.escape(_covers_text(standings, e))}</td>'
                f"<td>{_episodes_link(_number(e.covered_mean), episodes_href, agent=e.agent_spec)}</td><td>{e.coverage:.0%}</td></tr>"
                for e in standings.partial
            )
            + "</tbody></table></div>"
        )
    notes = (
        (
            '<h2>Notes</h2><ul id="notes">'
            + "".join(f"<li>{html.escape(n)}</li>" for n in standings.notes)
            + "</ul>"
        )
        if standings.notes
        else ""
    )
    per_task_header = (
        "<th>task</th>"
        + "".join(
            f'<th title="{html.escape(e.label)}">{html.escape(_rank_text(e))}<br>{html.escape(labels[id(e)])}</th>'
            for e in standings.entries
        )
        + "".join(
            f'<th class="reference" title="{html.escape(c.citation)}">not ranked<br>{html.escape(_reference_header(c))}</th>'
            for c in standings.references
        )
    )
    per_task = "".join(
        f"<tr><td>{html.escape(_short_id(env_id))}</td>"
        + "".join(
            f"<td>{_episodes_link(_task_text(standings, e, env_id), episodes_href, agent=e.agent_spec, task=env_id)}</td>"
            for e in standings.entries
        )
        + "".join(
            f'<td class="reference">{html.escape(c.cell(env_id))}</td>'
            for c in standings.references
        )
        + "</tr>"
        for env_id in standings.env_ids
    )
    charts = [
        _bar_chart(
            f"mean {standings.metric} per task"
            if standings.metric != "return"
            else "mean score per task",
            standings.env_ids,
            complete,
            "mean" if standings.metric != "return" else "mean_score",
        ),
        _bar_chart("success rate per task", standings.env_ids, complete, "success_rate"),
    ]
    if standings.curves:
        charts.append(_line_chart("learning curves (episodic return)", standings.curves))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(standings.title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
h1 {{ overflow-wrap: anywhere; }}
table {{ border-collapse: collapse; margin: 1em 0; font-size: 13px; }}
th, td {{ border: 1px solid #ccc; padding: 4px 8px; text-align: right; white-space: nowrap; }}
th {{ background: #f0f0f0; }} #standings td:nth-child(2), #per-task td:first-child, #partial td:first-child {{ text-align: left; font-family: monospace; }}
td.covers {{ white-space: normal; text-align: left; }}
td.reference, th.reference {{ color: #555; font-style: italic; }}
.wide {{ max-width: 100%; overflow-x: auto; }}
.charts svg {{ margin: 1em 1em 0 0; border: 1px solid #eee; max-width: 100%; height: auto; }}
.key {{ margin-right: 1.2em; font-size: 13px; }} .key i {{ display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: middle; }}
</style></head><body>
<h1>{html.escape(standings.title)}</h1>
<p>Metric: <b>{html.escape(standings.metric)}</b>, mean ± standard error over episodes on held-out seeds.</p>
<div class="wide"><table id="standings"><thead><tr><th>#</th><th>agent</th><th>config</th><th>overall</th><th>coverage</th></tr></thead><tbody>{ranking}</tbody></table></div>
{partial}{notes}
<div class="wide"><table id="per-task"><thead><tr>{per_task_header}</tr></thead><tbody>{per_task}</tbody></table></div>
<div>{legend}</div>
<div class="charts">{"".join(charts)}</div>
</body></html>
"""
