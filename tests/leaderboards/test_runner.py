"""Leaderboards: suites, the results store, the resumable runner, standings."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

import verigym
from tests.leaderboards.rows import episode_row
from verigym.leaderboards.runner import ResultsExistError, evaluate, provenance
from verigym.leaderboards.standings import compute_standings, render_html, render_markdown
from verigym.leaderboards.store import EpisodeRow, ResultsStore
from verigym.leaderboards.suite import EVAL_SEED_START, Suite, Task, list_suites, load_suite

ROOT = pathlib.Path(__file__).resolve().parents[2]


CHEAP = Suite(
    "cheap",
    (Task("verigym/GuessNumber-v0", episodes=6), Task("verigym/Treasure-7x7-v0", episodes=6)),
)


def _write_suite(path: pathlib.Path, suite: Suite) -> pathlib.Path:
    path.write_text(
        json.dumps(
            {
                "name": suite.name,
                "metric": suite.metric,
                "tasks": [
                    {
                        "env_id": t.env_id,
                        "episodes": t.episodes,
                        "seed_start": t.seed_start,
                        "time_limit_s": t.time_limit_s,
                    }
                    for t in suite
                ],
            }
        )
    )
    return path


def _key_rows(out) -> list[tuple]:
    with ResultsStore(out) as store:
        return [
            (
                r.agent_spec,
                r.env_id,
                r.seed,
                r.status,
                r.score,
                r.success,
                r.episode_return,
                r.length,
            )
            for r in store.rows()
        ]


# ---- suites ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list_suites())
def test_shipped_suites_are_valid_and_registered(name):
    suite = load_suite(name)
    assert suite.missing_ids() == [], f"suite {name} names unregistered ids"
    for task in suite:
        assert all(seed >= EVAL_SEED_START for seed in task.seeds), (
            "evaluation seeds must be held out"
        )


def test_starter_suite_covers_every_family_with_envs():
    families = {r.family for r in verigym.rows() if r.api == "gymnasium"}
    starter = {verigym.registration.row(t.env_id).family for t in load_suite("starter")}
    assert families <= starter, f"starter suite misses families {families - starter}"


@pytest.mark.parametrize(
    "bad",
    [
        {"env_id": "verigym/GuessNumber", "episodes": 1},
        {"env_id": "verigym/GuessNumber-v0", "episodes": 0},
        {"env_id": "verigym/GuessNumber-v0", "episodes": 5, "seed_start": 3},
    ],
)
def test_bad_tasks_are_refused(bad):
    with pytest.raises(ValueError):
        Task(**bad)


def test_unknown_suite_lists_the_shipped_ones():
    with pytest.raises(FileNotFoundError, match="starter"):
        load_suite("nope")


# ---- store -------------------------------------------------------------------------------------


def _row(**overrides) -> EpisodeRow:
    return episode_row(**overrides)


@pytest.mark.parametrize(
    "field, value",
    [("git_sha", ""), ("packages", "{}"), ("config_hash", " "), ("env_version", 3), ("score", 1.5)],
)
def test_store_refuses_rows_without_provenance(tmp_path, field, value):
    with ResultsStore(tmp_path) as store, pytest.raises(ValueError):
        store.add(_row(**{field: value}))


def test_store_never_duplicates_and_exports(tmp_path):
    with ResultsStore(tmp_path) as store:
        assert store.add(_row()) is True
        assert store.add(_row(score=0.0)) is False
        assert len(store.rows()) == 1 and store.rows()[0].score == 1.0
        data = json.loads(store.export(tmp_path / "rows.json").read_text())
        assert data[0]["git_sha"] == provenance()["git_sha"]
        assert store.export(tmp_path / "rows.csv").read_text().startswith("suite,env_id,")
        with pytest.raises(ValueError):
            store.export(tmp_path / "rows.xlsx")
    mode = sqlite3.connect(tmp_path / "results.sqlite").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


# ---- runner ------------------------------------------------------------------------------------


def test_same_agent_and_seeds_give_the_same_rows(tmp_path):
    evaluate("random", CHEAP, out=tmp_path / "a", workers=2, progress=False)
    evaluate("random", CHEAP, out=tmp_path / "b", workers=1, progress=False)
    a, b = _key_rows(tmp_path / "a"), _key_rows(tmp_path / "b")
    assert len(a) == CHEAP.episodes and a == b


def test_oracle_beats_random_and_standings_rank_it_first(tmp_path):
    for agent in ("random", "oracle"):
        evaluate(agent, CHEAP, out=tmp_path, workers=2, progress=False)
    with ResultsStore(tmp_path) as store:
        standings = compute_standings(store, CHEAP)
    assert [e.agent_spec for e in standings.entries] == ["oracle", "random"]
    assert standings.entries[0].overall == 1.0 > standings.entries[1].overall
    markdown = render_markdown(standings)
    assert "| 1 | `oracle` |" in markdown
    page = render_html(standings)
    assert (
        page.count("<svg") == 2
        and "<table" in page
        and "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    )


def test_existing_results_need_resume(tmp_path):
    evaluate("random", CHEAP, out=tmp_path, workers=2, progress=False)
    with pytest.raises(ResultsExistError, match="--resume"):
        evaluate("random", CHEAP, out=tmp_path, workers=2, progress=False)
    summary = evaluate("random", CHEAP, out=tmp_path, workers=2, progress=False, resume=True)
    assert summary.ran == 0 and summary.skipped == CHEAP.episodes


def test_hanging_agent_times_out_and_the_run_completes(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    # 8 s: a replacement worker's start (a spawned interpreter importing the agent and the env) counts
    # against the limit, and takes seconds on a 2-core machine running two pytest-xdist workers
    suite = Suite("hang", (Task("verigym/Treasure-7x7-v0", episodes=6, time_limit_s=8.0),))
    summary = evaluate(
        "tests.leaderboard_agents:hangs", suite, out=tmp_path, workers=2, progress=False
    )
    rows = {r.seed: r for r in ResultsStore(tmp_path).rows()}
    assert len(rows) == 6
    for seed, row in rows.items():
        assert row.status == ("timeout" if seed % 5 == 0 else "ok"), (seed, row.status, row.error)
    assert summary.statuses["timeout"] == sum(1 for s in suite.tasks[0].seeds if s % 5 == 0)


def test_time_limit_scale_lets_a_slow_agent_finish(tmp_path, monkeypatch):
    """An agent that thinks 3 s times out under a 1.5 s limit and finishes under 1.5 s x 20."""
    monkeypatch.chdir(ROOT)
    suite = Suite("slow", (Task("verigym/Treasure-7x7-v0", episodes=1, time_limit_s=1.5),))
    evaluate(
        "tests.leaderboard_agents:thinks_3s",
        suite,
        out=tmp_path / "plain",
        workers=1,
        progress=False,
    )
    assert [r.status for r in ResultsStore(tmp_path / "plain").rows()] == ["timeout"]
    evaluate(
        "tests.leaderboard_agents:thinks_3s",
        suite,
        out=tmp_path / "scaled",
        workers=1,
        progress=False,
        time_limit_scale=20,
    )
    assert [r.status for r in ResultsStore(tmp_path / "scaled").rows()] == ["ok"]
    with pytest.raises(ValueError, match="time_limit_scale"):
        evaluate("random", suite, out=tmp_path / "bad", progress=False, time_limit_scale=0)


def test_resume_after_kill_9_loses_and_duplicates_nothing(tmp_path):
    suite = Suite(
        "killed",
        (Task("verigym/Treasure-7x7-v0", episodes=8), Task("verigym/GuessNumber-v0", episodes=8)),
    )
    suite_file = _write_suite(tmp_path / "killed.json", suite)
    command = [
        sys.executable,
        "-m",
        "verigym",
        "eval",
        "--agent",
        "tests.leaderboard_agents:slow_random",
        "--suite",
        str(suite_file),
        "--workers",
        "2",
        "--no-progress",
    ]
    killed_out = tmp_path / "killed"
    process = subprocess.Popen(
        [*command, "--out", str(killed_out)], cwd=ROOT, start_new_session=True
    )
    database = killed_out / "results.sqlite"
    deadline = time.monotonic() + 120
    recorded = 0
    while time.monotonic() < deadline:
        if database.exists():
            try:
                recorded = (
                    sqlite3.connect(database).execute("SELECT COUNT(*) FROM episodes").fetchone()[0]
                )
            except sqlite3.OperationalError:
                recorded = 0
            if recorded >= 3:
                break
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)  # the parent and its workers, mid-run
    process.wait()
    assert 3 <= recorded < suite.episodes, f"kill landed at {recorded} rows"
    subprocess.run(
        [*command, "--out", str(killed_out), "--resume"], cwd=ROOT, check=True, timeout=300
    )
    subprocess.run([*command, "--out", str(tmp_path / "clean")], cwd=ROOT, check=True, timeout=300)
    resumed, clean = _key_rows(killed_out), _key_rows(tmp_path / "clean")
    assert len(resumed) == suite.episodes == len(set(resumed))
    assert resumed == clean
    with sqlite3.connect(database) as db:  # every row has its trajectory, written with it, once
        keys = "agent_spec, config_hash, env_id, seed"
        assert (
            db.execute(f"SELECT {keys} FROM trajectories ORDER BY {keys}").fetchall()
            == db.execute(f"SELECT {keys} FROM episodes ORDER BY {keys}").fetchall()
        )


# slow: a Ray cluster's start is ~10 s of the default run; the backend contract (an episode per
# job, a dead worker replaced, time-outs) is tested on the local backend (test_backends.py, here)
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ray_backend_gives_the_same_rows_as_local(tmp_path):
    pytest.importorskip("ray", reason='the Ray backend needs pip install "verigym[ray]"')
    suite = Suite(
        "ray",
        (Task("verigym/Treasure-7x7-v0", episodes=4), Task("verigym/GuessNumber-v0", episodes=4)),
    )
    evaluate("random", suite, out=tmp_path / "local", workers=2, progress=False)
    evaluate("random", suite, out=tmp_path / "ray", workers=2, backend="ray", progress=False)
    assert _key_rows(tmp_path / "local") == _key_rows(tmp_path / "ray")


# ---- the page in a real browser ------------------------------------------------------------------


@pytest.mark.gui
def test_html_page_renders_table_and_plots_in_chromium(tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    from PIL import Image

    for agent in ("random", "oracle"):
        evaluate(agent, CHEAP, out=tmp_path, workers=2, progress=False)
    with ResultsStore(tmp_path) as store:
        page = tmp_path / "page.html"
        page.write_text(render_html(compute_standings(store, CHEAP)))
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1200,900",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    image = Image.open(shot).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20)
    # the bars use the palette's first two colours; a blank page would be one colour
    assert len(colours) > 20
    pixels = {c for _, c in colours}
    assert (0x4E, 0x79, 0xA7) in pixels and (0xF2, 0x8E, 0x2B) in pixels


# ---- competitive suites ------------------------------------------------------------------------


def test_arena_ratings_rank_perfect_play_first_and_resume(tmp_path):
    from verigym.leaderboards.arena import compute_ratings, play_arena

    suite = Suite(
        "ttt", (Task("verigym/TicTacToe-v0", episodes=8),), metric="rating", kind="competitive"
    )
    summary = play_arena(["random", "oracle"], suite, out=tmp_path, progress=False)
    assert summary.ran == 8 and summary.unavailable == []
    with ResultsStore(tmp_path) as store:
        matches = store.matches()
    # minimax never loses a game of TicTacToe
    for m in matches:
        oracle_payoff = m.first_payoff if m.first_spec == "oracle" else m.second_payoff
        assert oracle_payoff >= 0, m
    ratings = compute_ratings(matches)
    assert [r.agent_spec for r in ratings] == ["oracle", "random"]
    with pytest.raises(ResultsExistError):
        play_arena(["random", "oracle"], suite, out=tmp_path, progress=False)
    again = play_arena(["random", "oracle"], suite, out=tmp_path, progress=False, resume=True)
    assert again.ran == 0 and again.skipped == 8
    with ResultsStore(tmp_path) as store:
        assert len(store.matches()) == 8


def test_perfect_play_against_itself_always_draws():
    from verigym.leaderboards.arena import play_match

    for seed in range(EVAL_SEED_START, EVAL_SEED_START + 5):
        payoffs, moves, error = play_match(
            "verigym/TicTacToe-v0", seed, [("oracle", None), ("oracle", None)]
        )
        assert payoffs == [0.0, 0.0] and moves == 9 and error == ""


def test_folder_of_saved_agents_covers_only_their_envs(tmp_path):
    import gymnasium as gym

    from verigym import agents

    env = gym.make("verigym/Treasure-7x7-v0")
    agents.make("ppo", env, seed=0).save(tmp_path / "ckpts" / "treasure")
    summary = evaluate(
        f"ppo:{tmp_path / 'ckpts'}", CHEAP, out=tmp_path / "out", workers=1, progress=False
    )
    assert summary.not_covered == ["verigym/GuessNumber-v0"]
    rows = ResultsStore(tmp_path / "out").rows()
    assert {r.env_id for r in rows} == {"verigym/Treasure-7x7-v0"} and all(
        r.status == "ok" for r in rows
    )
    with ResultsStore(tmp_path / "out") as store:
        entry = compute_standings(store, CHEAP).entries[0]
    assert entry.coverage == 0.5


def test_spec_errors_are_clear(tmp_path):
    from verigym.leaderboards.agent_spec import parse_agent_spec

    with pytest.raises(ValueError, match="not a directory"):
        parse_agent_spec("ppo:/nonexistent/dir")
    with pytest.raises(ValueError, match="holds no saved agent"):
        parse_agent_spec(f"ppo:{tmp_path}")
    with pytest.raises(ValueError, match="openai:<base url>#<model>"):
        parse_agent_spec("openai:http://127.0.0.1:1/v1")
    assert parse_agent_spec("openai:http://127.0.0.1:1/v1#tiny").text_view
    assert parse_agent_spec("tests.leaderboard_agents:hangs").kind == "factory"
