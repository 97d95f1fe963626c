"""Issue 19: trajectories recorded with the rows, re-verified by replay, exported, viewed."""

from __future__ import annotations

import json
import math
import pathlib
import shutil
import sqlite3

import numpy as np
import pytest

from verigym.cli import main
from verigym.leaderboards.episode import make_env
from verigym.leaderboards.runner import evaluate, provenance
from verigym.leaderboards.store import ResultsStore
from verigym.leaderboards.suite import EVAL_SEED_START, Suite, Task
from verigym.leaderboards.trajectories import (
    Recorder,
    decode,
    decode_value,
    digest,
    encode_value,
    replay,
    reverify,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
FAMILIES = (
    "verigym/GuessNumber-v0",
    "verigym/Calculator-v0",
    "verigym/DoorKey-5x5-v0",
    "verigym/Reach-2Link-v0",
    "verigym/TicTacToe-Random-v0",
    "verigym/ClickButton-v0",
)


def _rebuild(env_id, kwargs, text_view):
    return make_env(env_id, kwargs, text_view)


@pytest.mark.parametrize(
    "value",
    [
        "text",
        3,
        -2.5,
        True,
        None,
        math.nan,
        np.int64(7),
        np.float32(0.1),
        np.bool_(True),
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.array([[1, 2]], dtype=np.uint8),
        (1, np.array([0.5])),
        {"image": np.zeros((2, 2, 3), np.uint8), "mission": "go"},
        [1, "a", (2, 3)],
    ],
)
def test_values_round_trip_exactly(value):
    tree = json.loads(json.dumps(encode_value(value)))
    back = decode_value(tree)
    assert digest(back) == digest(value)
    assert type(back) is type(value) or isinstance(value, float)


def test_a_100_step_text_episode_with_its_chat_history_fits_in_20_kb():
    from verigym.agents.llm.agent import ChatHistory

    env = make_env("verigym/Treasure-7x7-v0", {}, True)

    class ChattyAgent:  # keeps its conversation like the LLM agents and reports token ids
        def __init__(self):
            self.history = ChatHistory(
                lambda messages: sum(len(m["content"]) for m in messages), 100_000
            )
            self.last_generation = None

        def act(self, observation, info):
            self.history.observe(observation, info)
            reply = "I will keep pressing against the wall above me.\nup"
            self.history.reply(reply)
            self.last_generation = {
                "token_ids": list(range(12)),
                "usage": {"prompt_tokens": 300, "completion_tokens": 12},
            }
            return reply

    agent = ChattyAgent()
    recorder = Recorder(
        env,
        agent,
        env_id="verigym/Treasure-7x7-v0",
        env_kwargs={},
        seed=EVAL_SEED_START,
        text_view=True,
    )
    observation, info = env.reset(seed=EVAL_SEED_START)
    recorder.reset(observation, info)
    for _ in range(100):
        action = agent.act(observation, info)
        observation, reward, terminated, truncated, info = env.step(action)
        recorder.step(action, observation, reward, terminated, truncated, info)
        assert not (terminated or truncated)
    blob, frames = recorder.finish()
    doc = decode(blob)
    assert len(doc["steps"]) == 100 and frames == []
    assert len(doc["messages"]) == 201 and doc["steps"][0]["generation"]["completion_tokens"] == 12
    assert doc["steps"][-1]["action"].endswith("up") and "A" in doc["steps"][-1]["observation"]
    assert len(blob) <= 20 * 1024, f"{len(blob)} bytes"


@pytest.mark.slow
@pytest.mark.gui
def test_every_row_has_its_trajectory_and_replay_reproduces_it_on_one_id_per_family(tmp_path):
    suite = Suite("families", tuple(Task(env_id, episodes=1) for env_id in FAMILIES))
    evaluate("random", suite, out=tmp_path, workers=2, progress=False, record_frames=3)
    with ResultsStore(tmp_path) as store:
        rows = store.rows()
        assert {r.env_id for r in rows} == set(FAMILIES) and all(r.status == "ok" for r in rows), [
            (r.env_id, r.error) for r in rows
        ]
        for row in rows:
            doc = decode(store.trajectory(row))
            assert len(doc["steps"]) == row.length
            assert sum(float(decode_value(s["reward"])) for s in doc["steps"]) == pytest.approx(
                row.episode_return
            )
            result = replay(doc, _rebuild)
            assert result.diverged_at is None, (row.env_id, result)
            assert (result.success, result.score) == (row.success, row.score)
        assert store.frames([r for r in rows if r.env_id == "verigym/DoorKey-5x5-v0"][0]), (
            "the grid env renders frames"
        )
        report = reverify(store, rows, _rebuild, current=provenance())
    assert report.summary() == f"{len(FAMILIES)} episodes re-verified, 0 changed"


def test_reverify_catches_a_changed_verifier(tmp_path, monkeypatch, capsys):
    suite = Suite("guess", (Task("verigym/GuessNumber-v0", episodes=3),))
    evaluate("oracle", suite, out=tmp_path, workers=1, progress=False)
    assert main(["reverify", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip().endswith("3 episodes re-verified, 0 changed")

    import verigym.envs.text.guess_number as guess_number

    honest = guess_number.episode_end
    monkeypatch.setattr(
        guess_number,
        "episode_end",
        lambda info, *, success, score: honest(info, success=False, score=0.5 * score),
    )
    assert main(["reverify", "--out", str(tmp_path)]) == 1
    text = capsys.readouterr().out
    assert (
        text.count("CHANGED oracle verigym/GuessNumber-v0") == 3 and "the verifier changed" in text
    )
    assert "success True -> False, score 1 -> 0.5" in text
    assert text.strip().endswith("3 episodes re-verified, 3 changed")


def test_export_loads_with_datasets_and_filters_by_success(tmp_path, capsys):
    datasets = pytest.importorskip("datasets")
    suite = Suite("treasure", (Task("verigym/Treasure-7x7-v0", episodes=4),))
    evaluate("random", suite, out=tmp_path, workers=1, progress=False)
    with ResultsStore(tmp_path) as store:
        successes = sum(r.success for r in store.rows())
    assert 0 < successes < 4, "these seeds give random play both outcomes"
    for fmt, loader in (("jsonl", "json"), ("parquet", "parquet")):
        path = tmp_path / f"all.{fmt}"
        assert main(["export", "--out", str(tmp_path), "--format", fmt, "--path", str(path)]) == 0
        table = datasets.load_dataset(loader, data_files=str(path), split="train")
        assert len(table) == 4
        row = table[0]
        assert {"messages", "reward", "success", "env_id", "seed", "agent", "provenance"} <= set(
            table.column_names
        )
        assert (
            row["messages"][0]["role"] == "system"
            and row["messages"][1]["role"] == "user"
            and row["messages"][2]["role"] == "assistant"
        )
        assert json.loads(row["provenance"])["git_sha"] == provenance()["git_sha"]
    only = tmp_path / "wins.jsonl"
    assert main(["export", "--out", str(tmp_path), "--path", str(only), "--success", "only"]) == 0
    wins = datasets.load_dataset("json", data_files=str(only), split="train")
    assert len(wins) == successes and all(wins["success"])
    capsys.readouterr()


def test_trajectories_survive_a_resume_and_are_never_duplicated(tmp_path):
    suite = Suite("guess", (Task("verigym/GuessNumber-v0", episodes=4),))
    evaluate(
        "random",
        Suite("guess", (Task("verigym/GuessNumber-v0", episodes=2),)),
        out=tmp_path,
        workers=1,
        progress=False,
    )
    evaluate("random", suite, out=tmp_path, workers=1, progress=False, resume=True)
    with sqlite3.connect(tmp_path / "results.sqlite") as db:
        keys = db.execute(
            "SELECT agent_spec, config_hash, env_id, seed FROM trajectories ORDER BY seed"
        ).fetchall()
        rows = db.execute(
            "SELECT agent_spec, config_hash, env_id, seed FROM episodes ORDER BY seed"
        ).fetchall()
    assert keys == rows and len(rows) == 4


@pytest.mark.gui
def test_episode_viewer_opens_from_the_standings_page_in_chromium(tmp_path, capsys):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    playwright = pytest.importorskip("playwright.sync_api")
    from PIL import Image

    suite = Suite(
        "view",
        (Task("verigym/GuessNumber-v0", episodes=2), Task("verigym/Treasure-7x7-v0", episodes=1)),
    )
    for agent in ("random", "oracle"):
        evaluate(agent, suite, out=tmp_path, workers=1, progress=False, record_frames=1)
    assert main(["leaderboard", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto((tmp_path / "leaderboard.html").as_uri())
        page.locator("#per-task a").first.click()  # a score of the per-task table
        page.wait_for_load_state()
        assert page.url.split("/")[-1].startswith("index.html#")
        shown = int(page.inner_text("#count"))
        assert 0 < shown < 6, "the link opens the episodes of one agent on one task"
        page.select_option("#agent", "oracle")
        page.select_option("#task", "verigym/GuessNumber-v0")
        page.select_option("#success", "1")
        assert page.inner_text("#count") == "2"
        page.locator("#episodes tbody tr:visible a").first.click()
        page.wait_for_load_state()
        transcript = page.inner_text("#transcript")
        assert "I am thinking of an integer" in transcript and "ASSISTANT" in transcript.upper()
        assert "success" in page.inner_text("#verdict")
        shot = tmp_path / "episode.png"
        page.screenshot(path=str(shot))
        page.goto(
            (tmp_path / "episodes" / "index.html").as_uri()
            + "#task=verigym/Treasure-7x7-v0&agent=oracle"
        )
        page.locator("#episodes tbody tr:visible a").first.click()
        page.wait_for_load_state()
        assert page.locator("#filmstrip img").count() >= 2, "the grid episode's frames"
        assert page.locator("#steps tbody tr").count() >= 1
        browser.close()
    colours = Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 20)
    assert len(colours) > 20, "the screenshot is blank"


def test_progress_bar_shows_rate_success_rate_and_eta():
    from rich.console import Console

    from verigym.leaderboards.runner import _Progress
    from verigym.leaderboards.store import EpisodeRow

    bar = _Progress(4, "random on starter", enabled=True)
    bar.progress.live.console = Console(record=True, width=160, force_terminal=False)
    with bar:
        for success in (True, False):
            bar.advance(
                EpisodeRow(
                    "s",
                    "verigym/GuessNumber-v0",
                    0,
                    EVAL_SEED_START,
                    "random",
                    "abc",
                    "ok",
                    float(success),
                    success,
                    0.0,
                    3,
                    0.1,
                    "",
                    "0",
                    "{}",
                    "sha",
                    "3.11",
                )
            )
    fields = bar.progress.tasks[0].fields
    assert fields["success"] == "50%" and fields["score"] == "0.500" and float(fields["rate"]) > 0
    text = bar.progress.console.export_text()
    assert "2/4" in text and "success 50%" in text and "ETA" in text


def test_actions_read_as_plain_text_in_the_transcript():
    from verigym.leaderboards.trajectories import show_action

    assert show_action(encode_value("up")) == "up"
    assert show_action(encode_value(np.int64(2))) == "2"
    assert show_action(encode_value(np.array([0.5, -1.0], dtype=np.float32))) == "[0.5, -1.0]"
    assert json.loads(
        show_action(encode_value({"op": 2, "xy": np.array([3, 4]), "text": "q"}))
    ) == {"op": 2, "xy": [3, 4], "text": "q"}
