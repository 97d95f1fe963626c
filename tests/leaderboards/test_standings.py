"""Standings cannot mislead: partial entries are never ranked against complete ones, names say
what an entry covers, reference rows that cannot win by design say why, curves have titled,
ticked axes (issue 21)."""

from __future__ import annotations

import math
import re

import pytest

from tests.leaderboards.rows import TWO_TASKS, scored_row
from verigym.leaderboards.standings import (
    Cell,
    Entry,
    _line_chart,
    _reference_notes,
    _ticks,
    compute_standings,
    render_html,
    render_markdown,
    render_table,
)
from verigym.leaderboards.store import ResultsStore


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Rows of two complete entries and of a partial one that is perfect on the one task it played:
    ranked by an overall number it would come first."""
    out = tmp_path_factory.mktemp("results")
    scores = {"oracle": (1.0, 0.8), "random": (0.0, 0.2), "ppo:ckpts": (None, 1.0)}
    with ResultsStore(out) as store:
        for agent, per_task in scores.items():
            for task, score in zip(TWO_TASKS, per_task):
                for seed in task.seeds if score is not None else ():
                    assert store.add(scored_row(agent, task.env_id, seed, score))
    return out


def test_partial_entry_is_listed_apart_and_never_ranked(results, capsys):
    with ResultsStore(results) as store:
        standings = compute_standings(store, TWO_TASKS)
    assert [e.agent_spec for e in standings.ranked] == ["oracle", "random"]
    assert [e.rank for e in standings.ranked] == [1, 2]
    (ppo,) = standings.partial
    assert ppo.agent_spec == "ppo:ckpts" and ppo.rank == 0 and math.isnan(ppo.overall)
    assert ppo.coverage == 0.5 and ppo.covers == ["verigym/Treasure-7x7-v0"]
    assert ppo.covered_mean == 1.0 > standings.ranked[0].overall == 0.9
    assert ppo.label.endswith("(covers Treasure-7x7-v0)")
    assert standings.ranked[0].label == "oracle"

    markdown = render_markdown(standings)
    ranking = markdown.split("## Partial entries (not ranked)")[0]
    assert "| 1 | `oracle` |" in ranking and "| 2 | `random` |" in ranking and "ppo:" not in ranking
    assert "| Treasure-7x7-v0 |" in markdown.split("## Partial entries (not ranked)")[1]

    page = render_html(standings)
    standings_table = re.search(r'<table id="standings">.*?</table>', page, re.S).group(0)
    partial_table = re.search(r'<table id="partial">.*?</table>', page, re.S).group(0)
    assert "ppo:" not in standings_table and "oracle" in standings_table
    assert "ppo:" in partial_table and "Treasure-7x7-v0" in partial_table
    assert "not ranked" in page

    render_table(standings)
    out = " ".join(capsys.readouterr().out.split())
    assert "not ranked" in out and "on 1 of 2 tasks" in out


def test_without_a_suite_partial_coverage_is_by_task(results):
    with ResultsStore(results) as store:
        standings = compute_standings(store)
    assert [e.agent_spec for e in standings.ranked] == ["oracle", "random"]
    assert [e.agent_spec[:4] for e in standings.partial] == ["ppo:"]
    assert standings.partial[0].coverage == 0.5


def _cell(success_rate: float) -> Cell:
    return Cell(
        episodes=10,
        mean=success_rate,
        stderr=0.1,
        success_rate=success_rate,
        mean_score=success_rate,
        mean_return=0.0,
        mean_length=3.0,
        timeouts=0,
        errors=0,
    )


def test_oracle_in_a_game_against_an_opponent_says_why_it_cannot_win():
    env_ids = [
        "verigym/KuhnPoker-Equilibrium-v0",
        "verigym/GuessNumber-v0",
        "verigym/TicTacToe-Random-v0",
    ]
    oracle = Entry(
        "oracle",
        "h",
        {
            "verigym/KuhnPoker-Equilibrium-v0": _cell(0.4),
            "verigym/GuessNumber-v0": _cell(0.9),
            "verigym/TicTacToe-Random-v0": _cell(1.0),
        },
    )
    random_entry = Entry("random", "h", {"verigym/KuhnPoker-Equilibrium-v0": _cell(0.3)})
    notes = _reference_notes([oracle, random_entry], env_ids)
    assert len(notes) == 1  # not the single-agent env, not a game it won every time, not random
    assert notes[0].startswith("oracle on KuhnPoker-Equilibrium-v0 (success 40%)")
    assert "against Kuhn's equilibrium strategy" in notes[0] and "not a ceiling" in notes[0]


@pytest.mark.parametrize(
    ("lo", "hi"), [(0, 60_000), (-0.2, 0.97), (5, 5), (-1800, -150), (0, 1), (3e-4, 7e-4)]
)
def test_ticks_are_round_and_cover_the_range(lo, hi):
    ticks = _ticks(lo, hi)
    assert ticks[0] <= lo and ticks[-1] >= hi and 2 <= len(ticks) <= 7
    steps = {round(b - a, 9) for a, b in zip(ticks, ticks[1:])}
    assert len(steps) == 1
    mantissa = f"{steps.pop():e}".split("e")[0]
    assert float(mantissa) in (1.0, 2.0, 5.0)


def test_learning_curves_have_axis_titles_and_ticks():
    svg = _line_chart(
        "learning curves",
        {"ppo": [(0, -0.5), (30_000, 0.2), (60_000, 0.95)], "dqn": [(0, -1.0), (40_000, 0.5)]},
    )
    assert re.search(r'class="x-title"[^>]*>env steps<', svg) and re.search(
        r'class="y-title"[^>]*>episodic return<', svg
    )
    assert svg.count('class="x-tick"') >= 3 and svg.count('class="y-tick"') >= 3
    for label in ("0", "20k", "40k", "60k", "-1", "0.5", "1"):
        assert f">{label}</text>" in svg


def test_a_partial_entry_covering_most_tasks_is_described_by_what_it_lacks(tmp_path):
    """A long suite's partial entry is not a list of every id it covers: it says how many tasks it
    covers and names the few it lacks; one that covers every task (not every episode) says so."""
    from verigym.leaderboards.suite import Suite, Task

    ids = ["verigym/GuessNumber-v0", "verigym/Treasure-7x7-v0", "verigym/DoorKey-5x5-v0"]
    suite = Suite("three", tuple(Task(e, episodes=2) for e in ids))
    with ResultsStore(tmp_path) as store:
        first_seed = suite.tasks[0].seeds[0]
        for env_id in ids:  # "most": every episode of two tasks; "every": one episode of each
            for seed in suite.tasks[0].seeds if env_id != ids[2] else ():
                assert store.add(scored_row("most", env_id, seed, 1.0, suite="three"))
            assert store.add(scored_row("every", env_id, first_seed, 0.0, suite="three"))
        standings = compute_standings(store, suite)
    markdown = render_markdown(standings).split("## Partial entries (not ranked)")[1]
    markdown = markdown.split("## Per task")[0]
    assert "| 2 of 3 tasks; not DoorKey-5x5-v0 |" in markdown
    assert "| all 3 tasks |" in markdown and "GuessNumber-v0, Treasure-7x7-v0" not in markdown
    partial = re.search(r'<table id="partial">.*?</table>', render_html(standings), re.S).group(0)
    assert "2 of 3 tasks; not DoorKey-5x5-v0" in partial and "all 3 tasks" in partial
