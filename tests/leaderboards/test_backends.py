"""The runner's backends and how an episode reaches its env: workers get every setting as an
argument (spawned processes see none of the parent's objects), never through the environment."""

from __future__ import annotations

import functools
import os

import pytest

from verigym.leaderboards.backends import run_local
from verigym.leaderboards.episode import EpisodePlayer, Job
from verigym.leaderboards.runner import evaluate
from verigym.leaderboards.store import ResultsStore
from verigym.leaderboards.suite import EVAL_SEED_START, Suite, Task

TEXT = "verigym/GuessNumber-v0"


def test_a_worker_that_dies_is_an_error_and_a_new_worker_plays_on():
    jobs = [Job(TEXT, {}, EVAL_SEED_START + n, 60.0) for n in range(4)]
    results: dict[int, dict] = {}
    run_local(
        jobs,
        functools.partial(EpisodePlayer, "tests.leaderboards.agents:exits_on_odd_seeds"),
        2,
        lambda job, result: results.setdefault(job.seed, result),
    )
    assert sorted(results) == [job.seed for job in jobs]
    for seed, result in results.items():
        if seed % 2:
            assert result["status"] == "error"
            assert result["error"] == "the worker process died (exit code 3)"
        else:
            assert result["status"] == "ok" and result["length"] > 0, result["error"]


def test_env_url_and_token_reach_the_workers_as_arguments(tmp_path, monkeypatch):
    pytest.importorskip("uvicorn")
    import verigym.serve

    monkeypatch.delenv("VERIGYM_TOKEN", raising=False)
    suite = Suite(TEXT, (Task(TEXT, episodes=2),))
    with verigym.serve.start(TEXT, token="s3cret") as server:
        before = server.app.state.server.steps
        refused = evaluate(
            "random",
            suite,
            out=tmp_path / "no-token",
            workers=1,
            env_url=server.url,
            progress=False,
        )
        assert refused.statuses == {"error": 2}
        with ResultsStore(tmp_path / "no-token") as store:
            assert all("token" in row.error for row in store.rows())
        summary = evaluate(
            "random",
            suite,
            out=tmp_path / "token",
            workers=1,
            env_url=server.url,
            env_token="s3cret",
            progress=False,
        )
        assert summary.statuses == {"ok": 2}
        assert server.app.state.server.steps > before  # the served env took the steps
    assert not [name for name in os.environ if name.startswith("VERIGYM_ENV")]
