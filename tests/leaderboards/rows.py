"""A stored episode row for the store and standings tests: a finished GuessNumber episode of the
random agent on the first evaluation seed, any field overridden."""

from __future__ import annotations

from typing import Any

from verigym.leaderboards.runner import provenance
from verigym.leaderboards.store import EpisodeRow
from verigym.leaderboards.suite import EVAL_SEED_START


def episode_row(**overrides: Any) -> EpisodeRow:
    values: dict[str, Any] = dict(
        suite="s",
        env_id="verigym/GuessNumber-v0",
        env_version=0,
        seed=EVAL_SEED_START,
        agent_spec="random",
        config_hash="abc",
        status="ok",
        score=1.0,
        success=True,
        episode_return=1.0,
        length=3,
        time_s=0.1,
        error="",
        **provenance(),
    )
    values.update(overrides)
    return EpisodeRow(**values)
