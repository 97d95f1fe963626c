"""Suite-level metrics over achievements, computed from stored episodes (issue 39).

A suite file may name summaries (``"summary": ["crafter_score"]``) beside its per-task metric; the
standings compute them per entry from the suite's rows and show them as a note under the tables
(:attr:`verigym.leaderboards.standings.Standings.summaries` holds the numbers).

``crafter_score``: Hafner (2021)'s Crafter Score, the geometric mean of the per-achievement success
rates: ``exp(mean_i ln(1 + s_i)) - 1`` with ``s_i`` the percentage of the entry's episodes (over
the suite's Crafter tasks) that unlocked achievement ``i``, in percent (0 to 100). An episode's
achievements are the final ``info["achievements"]`` of its stored trajectory, read through
:func:`~verigym.leaderboards.trajectories.bound_trajectory` (the trajectory the row was written
with) and only when they agree with the row's verified score (unlocked / 22); an episode whose
achievements cannot be read that way, and a ``timeout`` or ``error`` row, counts as one that
unlocked nothing.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "SUMMARIES",
    "achievement_rates",
    "crafter_score",
    "final_achievements",
    "suite_summaries",
    "summary_notes",
]

SUMMARIES = ("crafter_score",)
"""The suite-level metrics a suite file may name in ``"summary"``."""


def crafter_score(rates: Iterable[float]) -> float:
    """The Crafter Score of per-achievement success rates.

    Args:
        rates: one success rate per achievement, each in [0, 1].

    Returns:
        ``exp(mean(ln(1 + 100 r))) - 1``, in percent [0, 100]; 0 for no rates.

    Raises:
        ValueError: a rate is outside [0, 1] or not finite.
    """
    values = list(rates)
    for r in values:
        if not (isinstance(r, (int, float)) and math.isfinite(r) and 0.0 <= r <= 1.0):
            raise ValueError(f"a success rate must be in [0, 1], got {r!r}")
    if not values:
        return 0.0
    return math.exp(sum(math.log1p(100.0 * r) for r in values) / len(values)) - 1.0


def achievement_rates(
    episodes: Sequence[Collection[str]], names: Sequence[str]
) -> dict[str, float]:
    """The fraction of ``episodes`` (each the set of achievements it unlocked) that unlocked each
    of ``names`` (0 for every name when there are no episodes)."""
    n = len(episodes)
    return {name: (sum(name in e for e in episodes) / n if n else 0.0) for name in names}


def final_achievements(store: Any, row: Any, names: Collection[str]) -> frozenset[str]:
    """The achievements a stored episode ended with; empty when they cannot be trusted.

    Read from the final step's ``info["achievements"]`` of the row's bound trajectory; kept only
    when every name is one of ``names``, none repeats, and their count over ``len(names)`` is the
    row's score (the verdict the row was written with).
    """
    from verigym.leaderboards.trajectories import UnboundTrajectory, bound_trajectory

    if row.status != "ok":
        return frozenset()
    try:
        doc = bound_trajectory(store, row)
    except (UnboundTrajectory, ValueError):
        return frozenset()
    steps = (doc or {}).get("steps") or []
    info = steps[-1].get("info") if steps and isinstance(steps[-1], Mapping) else None
    found = info.get("achievements") if isinstance(info, Mapping) else None
    if not isinstance(found, list) or not all(isinstance(a, str) and a in names for a in found):
        return frozenset()
    unlocked = frozenset(found)
    if len(unlocked) != len(found) or not math.isclose(
        len(unlocked) / len(names), row.score, abs_tol=1e-9
    ):
        return frozenset()
    return unlocked


def suite_summaries(store: Any, suite: Any, rows: Sequence[Any]) -> dict[str, dict[str, float]]:
    """The suite's summaries per entry: ``{summary: {"<agent spec>#<config hash>": value}}``.

    Args:
        store: the :class:`~verigym.leaderboards.store.ResultsStore` the rows come from.
        suite: a :class:`~verigym.leaderboards.suite.Suite` (its ``summary`` names the metrics).
        rows: the suite's rows (:meth:`ResultsStore.suite_rows`).
    """
    wanted = tuple(getattr(suite, "summary", ()) or ())
    if "crafter_score" not in wanted:
        return {}
    from verigym.envs.world.crafter import ACHIEVEMENTS
    from verigym.registration import rows as registered

    crafter_ids = {r.id for r in registered("world") if ".crafter:" in r.entry_point}
    episodes: dict[str, list[frozenset[str]]] = {}
    for row in rows:
        if row.env_id in crafter_ids:
            key = f"{row.agent_spec}#{row.config_hash}"
            episodes.setdefault(key, []).append(final_achievements(store, row, ACHIEVEMENTS))
    return {
        "crafter_score": {
            key: crafter_score(achievement_rates(found, ACHIEVEMENTS).values())
            for key, found in episodes.items()
        }
    }


def summary_notes(
    summaries: Mapping[str, Mapping[str, float]], entries: Iterable[Any]
) -> list[str]:
    """One standings note per summary, listing each entry's value (entries in standings order)."""
    notes = []
    for metric, values in summaries.items():
        if metric != "crafter_score" or not values:
            continue
        parts = []
        for entry in entries:
            key = f"{entry.agent_spec}#{entry.config_hash}"
            if key in values:
                label = getattr(entry, "label", entry.agent_spec)
                parts.append(f"{label} {values[key]:.1f}%")
        notes.append(
            "Crafter Score (Hafner 2021: geometric mean of the 22 achievement success rates over "
            "the Crafter episodes, in %): " + ", ".join(parts) + "."
        )
    return notes
