"""The Crafter Score, a suite-level summary computed from stored episodes (issue 39)."""

from __future__ import annotations

import math
import sqlite3

import pytest

from verigym.leaderboards.achievements import achievement_rates, crafter_score
from verigym.leaderboards.suite import Suite, Task

pytest.importorskip("crafter", reason="the crafter extra is not installed")


def test_crafter_score_is_the_geometric_mean_of_the_success_rates_in_percent():
    assert crafter_score([1.0] * 22) == pytest.approx(100.0)
    assert crafter_score([0.0] * 22) == 0.0
    # Hafner 2021: exp(mean ln(1 + s_i)) - 1 with s_i in percent
    assert crafter_score([0.5, 0.0]) == pytest.approx(math.sqrt(51.0) - 1.0)
    assert achievement_rates([{"a"}, {"a", "b"}, set(), set()], ["a", "b", "c"]) == {
        "a": 0.5,
        "b": 0.25,
        "c": 0.0,
    }
    with pytest.raises(ValueError):
        crafter_score([1.5])


def _store_scripted_episodes(folder, suite):
    """Play the scripted agent on the suite's seeds in this process and store rows and
    trajectories as ``verigym eval`` does (no worker pool: the test stays cheap)."""
    from types import SimpleNamespace

    from tests.leaderboards.rows import episode_row
    from verigym.leaderboards.episode import make_env, run_episode
    from verigym.leaderboards.store import ResultsStore
    from verigym.leaderboards.trajectories import Recorder

    store = ResultsStore(folder)
    (task,) = suite.tasks
    for seed in task.seeds:
        env = make_env(task.env_id, {}, False)
        agent = SimpleNamespace(
            act=lambda obs, info, deterministic=True, env=env: env.unwrapped.oracle_action()
        )
        recorder = Recorder(
            env, agent, env_id=task.env_id, env_kwargs={}, seed=seed, text_view=False
        )
        result = run_episode(agent, env, seed, recorder=recorder)
        env.close()
        row = episode_row(
            suite=suite.name,
            env_id=task.env_id,
            seed=seed,
            agent_spec="oracle",
            config_hash="c",
            score=result["score"],
            success=result["success"],
            episode_return=result["episode_return"],
            length=result["length"],
        )
        store.add(row, recorder.finish()[0], ())
    return store


def test_suite_summary_comes_from_the_stored_trajectories_and_ignores_a_forged_one(tmp_path):
    """Two scripted episodes of Crafter-v0 end with collect_wood, place_table, make_wood_pickaxe:
    those three rates are 100%, the others 0. A row whose stored trajectory was replaced (no
    longer bound to the row) counts as an episode that unlocked nothing."""
    from verigym.leaderboards.standings import compute_standings, render_markdown
    from verigym.leaderboards.store import ResultsStore

    suite = Suite(
        "crafter-mini", (Task("verigym/Crafter-v0", episodes=2),), summary=("crafter_score",)
    )
    store = _store_scripted_episodes(tmp_path, suite)
    standings = compute_standings(store, suite)
    ((key, value),) = standings.summaries["crafter_score"].items()
    rows = store.rows()
    assert key == "oracle#c" and [round(r.score * 22) for r in rows] == [3, 3]
    assert value == pytest.approx(101.0 ** (3 / 22) - 1.0)
    assert f"oracle {value:.1f}%" in render_markdown(standings)
    store.close()
    with sqlite3.connect(tmp_path / "results.sqlite") as db:  # forge one trajectory blob
        db.execute("UPDATE trajectories SET data = x'00' WHERE seed = ?", (rows[0].seed,))
    forged = compute_standings(ResultsStore(tmp_path), suite).summaries["crafter_score"][key]
    assert forged == pytest.approx(51.0 ** (3 / 22) - 1.0)


def test_a_suite_names_only_known_summaries():
    with pytest.raises(ValueError, match="summary"):
        Suite("x", (Task("verigym/Crafter-v0"),), summary=("elo",))
    with pytest.raises(ValueError, match="summary"):
        Suite.from_dict({"name": "x", "tasks": [{"env_id": "verigym/Crafter-v0"}], "summary": 3})
