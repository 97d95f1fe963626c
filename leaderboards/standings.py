"""Standings: the results store rendered as a terminal table, Markdown and a static HTML page.

An entry is an agent spec with its config hash. On a suite, an entry's number is the mean over the
suite's tasks of the per-task mean of the suite's metric; entries that have not finished every
task are listed with their coverage and ranked after complete ones. Each per-task number comes
with its standard error over episodes.
"""

from __future__ import annotations

import html
import json
import math
import pathlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from verigym.leaderboards.store import EpisodeRow, ResultsStore
from verigym.leaderboards.suite import Suite

__all__ = ["Entry", "Standings", "compute_standings", "render_html", "render_markdown", "render_table"]

_METRIC_FIELD = {"score": "score", "success": "success", "return": "episode_return"}


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
    """One agent (spec + config hash) on the leaderboard."""

    agent_spec: str
    config_hash: str
    cells: dict[str, Cell] = field(default_factory=dict)
    overall: float = math.nan
    coverage: float = 0.0
    rank: int = 0


@dataclass
class Standings:
    title: str
    metric: str
    env_ids: list[str]
    entries: list[Entry]
    curves: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    ratings: list = field(default_factory=list)
    """For competitive suites: :class:`verigym.leaderboards.arena.Rating`, best first."""


def _aggregate(rows: Sequence[EpisodeRow], metric: str) -> Cell:
    values = [float(getattr(r, _METRIC_FIELD[metric])) for r in rows]
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return Cell(
        episodes=n, mean=mean, stderr=math.sqrt(var / n),
        success_rate=sum(r.success for r in rows) / n, mean_score=sum(r.score for r in rows) / n,
        mean_return=sum(r.episode_return for r in rows) / n, mean_length=sum(r.length for r in rows) / n,
        timeouts=sum(r.status == "timeout" for r in rows), errors=sum(r.status == "error" for r in rows),
    )


def compute_standings(store: ResultsStore, suite: Suite | None = None) -> Standings:
    """Aggregate the store, restricted to a suite's envs and seeds when given."""
    if suite is not None and suite.kind == "competitive":
        from verigym.leaderboards.arena import compute_ratings

        seeds = {t.env_id: set(t.seeds) for t in suite}
        matches = [m for m in store.matches(env_ids=list(seeds)) if m.seed in seeds[m.env_id]]
        return Standings(f"verigym arena: {suite.name}", "rating", [t.env_id for t in suite], [], ratings=compute_ratings(matches))
    if suite is not None:
        seeds = {t.env_id: set(t.seeds) for t in suite}
        rows = [r for r in store.rows(env_ids=list(seeds)) if r.seed in seeds[r.env_id]]
        env_ids, metric, title = [t.env_id for t in suite], suite.metric, f"verigym leaderboard: {suite.name}"
    else:
        rows = store.rows()
        env_ids, metric, title = sorted({r.env_id for r in rows}), "score", "verigym leaderboard: all results"
    grouped: dict[tuple[str, str], dict[str, list[EpisodeRow]]] = {}
    for row in rows:
        grouped.setdefault((row.agent_spec, row.config_hash), {}).setdefault(row.env_id, []).append(row)
    entries = []
    for (spec, config_hash), by_env in grouped.items():
        entry = Entry(spec, config_hash, {env_id: _aggregate(r, metric) for env_id, r in by_env.items()})
        if suite is not None:
            expected = {t.env_id: t.episodes for t in suite}
            done = sum(min(c.episodes, expected[e]) for e, c in entry.cells.items())
            entry.coverage = done / sum(expected.values())
        else:
            entry.coverage = 1.0
        entry.overall = sum(c.mean for c in entry.cells.values()) / len(env_ids) if entry.coverage >= 1.0 else math.nan
        entries.append(entry)
    entries.sort(key=lambda e: (-(e.coverage >= 1.0), -(e.overall if not math.isnan(e.overall) else -math.inf), e.agent_spec))
    for rank, entry in enumerate(entries, 1):
        entry.rank = rank
    return Standings(title, metric, env_ids, entries)


def load_curves(paths: Iterable[pathlib.Path]) -> dict[str, list[tuple[float, float]]]:
    """Learning curves from training logs: JSONL lines with a step (``global_step`` or ``step``)
    and a return (``charts/episodic_return``, ``episodic_return`` or ``return``)."""
    curves = {}
    for path in paths:
        points = []
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            step = record.get("global_step", record.get("step"))
            value = next((record[k] for k in ("charts/episodic_return", "episodic_return", "return") if k in record), None)
            if isinstance(step, (int, float)) and isinstance(value, (int, float)):
                points.append((float(step), float(value)))
        if points:
            curves[path.parent.name if path.name == "metrics.jsonl" else path.stem] = points
    return curves


def _number(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.3f}"


def _cell_text(cell: Cell | None) -> str:
    if cell is None:
        return "—"
    text = f"{cell.mean:.3f} ± {cell.stderr:.3f}"
    if cell.timeouts or cell.errors:
        text += f" ({cell.timeouts} timeout, {cell.errors} error)"
    return text


def _short_id(env_id: str) -> str:
    return env_id.removeprefix("verigym/")


_RATING_HEADER = ["#", "agent", "config", "ordinal (mu - 3 sigma)", "mu", "sigma", "matches", "wins", "draws", "losses"]


def _rating_cells(rank: int, r: Any) -> list[str]:
    return [str(rank), r.agent_spec, r.config_hash[:8], f"{r.ordinal:.2f}", f"{r.mu:.2f}", f"{r.sigma:.2f}", str(r.matches), str(r.wins), str(r.draws), str(r.losses)]


def render_table(standings: Standings) -> None:
    """Print the standings as a rich table."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    if standings.metric == "rating":
        table = Table(title=f"{standings.title} (openskill Plackett-Luce; games: {', '.join(map(_short_id, standings.env_ids))})")
        for column in _RATING_HEADER:
            table.add_column(column)
        for rank, r in enumerate(standings.ratings, 1):
            table.add_row(*(escape(c) for c in _rating_cells(rank, r)))
        Console(width=140).print(table)
        return

    # one column per agent, one row per task: readable however many tasks a suite has
    table = Table(title=f"{standings.title} (metric: {standings.metric}, mean ± s.e. over episodes)")
    table.add_column("task")
    for e in standings.entries:
        table.add_column(f"#{e.rank} {escape(e.agent_spec)} [dim]{e.config_hash[:8]}[/dim]", justify="right")
    table.add_row("[bold]overall[/bold]", *(f"[bold]{_number(e.overall)}[/bold]" + ("" if e.coverage >= 1 else f" ({e.coverage:.0%} of episodes)") for e in standings.entries), end_section=True)
    for env_id in standings.env_ids:
        table.add_row(escape(_short_id(env_id)), *(escape(_cell_text(e.cells.get(env_id))) for e in standings.entries))
    Console(width=max(100, 34 + 26 * len(standings.entries))).print(table)


def render_markdown(standings: Standings) -> str:
    """The standings as a Markdown document (a table, then per-task details)."""
    if standings.metric == "rating":
        lines = [f"# {standings.title}", "", "Ranked by the openskill (Plackett-Luce) ordinal mu - 3 sigma over all matches.", "",
                 "| " + " | ".join(_RATING_HEADER) + " |", "|" + "---|" * len(_RATING_HEADER)]
        lines += ["| " + " | ".join(_rating_cells(rank, r)) + " |" for rank, r in enumerate(standings.ratings, 1)]
        return "\n".join(lines) + "\n"
    lines = [f"# {standings.title}", "", f"Metric: **{standings.metric}** (mean ± standard error over episodes).", ""]
    lines += ["| # | agent | config | overall | coverage |", "|---|---|---|---|---|"]
    lines += [f"| {e.rank} | `{e.agent_spec}` | {e.config_hash[:8]} | {_number(e.overall)} | {e.coverage:.0%} |" for e in standings.entries]
    lines += ["", "## Per task", "", "| task | " + " | ".join(f"`{e.agent_spec}`" for e in standings.entries) + " |", "|---|" + "---|" * len(standings.entries)]
    for env_id in standings.env_ids:
        lines.append(f"| {_short_id(env_id)} | " + " | ".join(_cell_text(e.cells.get(env_id)).replace("|", "\\|") for e in standings.entries) + " |")
    lines += ["", "## Success rate", "", "| task | " + " | ".join(f"`{e.agent_spec}`" for e in standings.entries) + " |", "|---|" + "---|" * len(standings.entries)]
    for env_id in standings.env_ids:
        lines.append(f"| {_short_id(env_id)} | " + " | ".join(f"{e.cells[env_id].success_rate:.0%}" if env_id in e.cells else "—" for e in standings.entries) + " |")
    return "\n".join(lines) + "\n"


# ---- HTML with inline SVG plots --------------------------------------------------------------

_PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")


def _bar_chart(title: str, env_ids: Sequence[str], entries: Sequence[Entry], value: str, top: float = 1.0) -> str:
    """Grouped vertical bars: one group per env, one bar per entry; values in [0, top]."""
    width, height, left, bottom = max(480, 90 * len(env_ids) + 80), 300, 50, 90
    group = (width - left - 20) / max(len(env_ids), 1)
    bar = group * 0.8 / max(len(entries), 1)
    plot_h = height - bottom - 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" aria-label="{html.escape(title)}">',
             f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14" font-weight="bold">{html.escape(title)}</text>']
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = 30 + plot_h * (1 - tick)
        parts.append(f'<line x1="{left}" x2="{width - 20}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="10">{tick * top:g}</text>')
    for i, env_id in enumerate(env_ids):
        x0 = left + i * group + group * 0.1
        for j, entry in enumerate(entries):
            cell = entry.cells.get(env_id)
            if cell is None:
                continue
            v = max(0.0, min(top, getattr(cell, value))) / top
            h = plot_h * v
            parts.append(f'<rect x="{x0 + j * bar:.1f}" y="{30 + plot_h - h:.1f}" width="{bar * 0.92:.1f}" height="{h:.1f}" fill="{_PALETTE[j % len(_PALETTE)]}">'
                         f"<title>{html.escape(entry.agent_spec)} on {html.escape(env_id)}: {getattr(cell, value):.3f}</title></rect>")
        label_x = left + i * group + group / 2
        parts.append(f'<text x="{label_x:.1f}" y="{height - bottom + 14}" font-size="10" text-anchor="end" transform="rotate(-35 {label_x:.1f} {height - bottom + 14})">{html.escape(_short_id(env_id))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _line_chart(title: str, curves: dict[str, list[tuple[float, float]]]) -> str:
    width, height, left, bottom = 640, 300, 60, 40
    xs = [x for points in curves.values() for x, _ in points]
    ys = [y for points in curves.values() for _, y in points]
    x_lo, x_hi = min(xs), max(xs) or 1.0
    y_lo, y_hi = min(ys), max(ys)
    if y_hi == y_lo:
        y_hi = y_lo + 1.0
    plot_w, plot_h = width - left - 20, height - bottom - 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" aria-label="{html.escape(title)}">',
             f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14" font-weight="bold">{html.escape(title)}</text>',
             f'<rect x="{left}" y="30" width="{plot_w}" height="{plot_h}" fill="none" stroke="#ccc"/>',
             f'<text x="{left}" y="{height - 10}" font-size="10">step {x_lo:g}</text>',
             f'<text x="{width - 20}" y="{height - 10}" font-size="10" text-anchor="end">{x_hi:g}</text>',
             f'<text x="{left - 4}" y="36" font-size="10" text-anchor="end">{y_hi:.3g}</text>',
             f'<text x="{left - 4}" y="{30 + plot_h}" font-size="10" text-anchor="end">{y_lo:.3g}</text>']
    for j, (name, points) in enumerate(sorted(curves.items())):
        coords = " ".join(f"{left + plot_w * (x - x_lo) / max(x_hi - x_lo, 1e-9):.1f},{30 + plot_h * (1 - (y - y_lo) / (y_hi - y_lo)):.1f}" for x, y in sorted(points))
        colour = _PALETTE[j % len(_PALETTE)]
        parts.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"><title>{html.escape(name)}</title></polyline>')
        parts.append(f'<text x="{left + 8}" y="{46 + 14 * j}" font-size="11" fill="{colour}">{html.escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _episodes_link(text: str, href: str | None, **filters: str) -> str:
    """``text`` (escaped) as a link to the episode viewer, filtered (``#agent=...&task=...``)."""
    if href is None:
        return html.escape(text)
    from urllib.parse import urlencode

    return f'<a href="{html.escape(href)}#{html.escape(urlencode(filters))}">{html.escape(text)}</a>'


def render_html(standings: Standings, *, episodes_href: str | None = None) -> str:
    """One self-contained HTML page: the table, score and success-rate charts, learning curves.

    Args:
        standings: what to show.
        episodes_href: the episode viewer's index (relative URL, e.g. ``episodes/index.html``);
            when given, every score links to the episodes behind it.
    """
    if standings.metric == "rating":
        rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in _rating_cells(rank, r)) + "</tr>" for rank, r in enumerate(standings.ratings, 1))
        header = "".join(f"<th>{html.escape(h)}</th>" for h in _RATING_HEADER)
        return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(standings.title)}</title></head>'
                f'<body style="font-family: system-ui, sans-serif"><h1>{html.escape(standings.title)}</h1>'
                f'<table id="standings" border="1" cellpadding="4">{header}{rows}</table></body></html>\n')
    complete = list(standings.entries)
    legend = "".join(f'<span class="key"><i style="background:{_PALETTE[j % len(_PALETTE)]}"></i>{html.escape(e.agent_spec)}</span>' for j, e in enumerate(complete))
    ranking = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in [str(e.rank), e.agent_spec, e.config_hash[:8]])
        + f"<td>{_episodes_link(_number(e.overall), episodes_href, agent=e.agent_spec)}</td><td>{e.coverage:.0%}</td></tr>"
        for e in standings.entries
    )
    per_task_header = "<th>task</th>" + "".join(f"<th>#{e.rank} {html.escape(e.agent_spec)}</th>" for e in standings.entries)
    per_task = "".join(
        f"<tr><td>{html.escape(_short_id(env_id))}</td>" + "".join(f"<td>{_episodes_link(_cell_text(e.cells.get(env_id)), episodes_href, agent=e.agent_spec, task=env_id)}</td>" for e in standings.entries) + "</tr>"
        for env_id in standings.env_ids
    )
    charts = [_bar_chart(f"mean {standings.metric} per task" if standings.metric != "return" else "mean score per task", standings.env_ids, complete,
                         "mean" if standings.metric != "return" else "mean_score"),
              _bar_chart("success rate per task", standings.env_ids, complete, "success_rate")]
    if standings.curves:
        charts.append(_line_chart("learning curves (episodic return)", standings.curves))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(standings.title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; font-size: 13px; }}
th, td {{ border: 1px solid #ccc; padding: 4px 8px; text-align: right; }}
th {{ background: #f0f0f0; }} #standings td:nth-child(2), #per-task td:first-child {{ text-align: left; font-family: monospace; }}
.charts svg {{ margin: 1em 1em 0 0; border: 1px solid #eee; }}
.key {{ margin-right: 1.2em; font-size: 13px; }} .key i {{ display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: middle; }}
</style></head><body>
<h1>{html.escape(standings.title)}</h1>
<p>Metric: <b>{html.escape(standings.metric)}</b>, mean ± standard error over episodes on held-out seeds.</p>
<table id="standings"><thead><tr><th>#</th><th>agent</th><th>config</th><th>overall</th><th>coverage</th></tr></thead><tbody>{ranking}</tbody></table>
<table id="per-task"><thead><tr>{per_task_header}</tr></thead><tbody>{per_task}</tbody></table>
<div>{legend}</div>
<div class="charts">{"".join(charts)}</div>
</body></html>
"""
