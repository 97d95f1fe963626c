"""A stored episode row (and its trajectory document) for the store and standings tests: a finished
GuessNumber episode of the random agent on the first evaluation seed, any field overridden."""

from __future__ import annotations

from typing import Any

from verigym.leaderboards.runner import provenance
from verigym.leaderboards.store import EpisodeRow
from verigym.leaderboards.suite import EVAL_SEED_START, Suite, Task

TWO_TASKS = Suite(
    "two", (Task("verigym/GuessNumber-v0", episodes=2), Task("verigym/Treasure-7x7-v0", episodes=2))
)
"""A suite of two tasks, two episodes each, for the standings tests."""


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


def scored_row(agent: str, env_id: str, seed: int, score: float, suite: str = "two") -> EpisodeRow:
    """A complete ``ok`` row of ``agent`` on ``env_id`` (success when the score is 1)."""
    return episode_row(
        suite=suite,
        env_id=env_id,
        seed=seed,
        agent_spec=agent,
        config_hash=f"{abs(hash(agent)):016x}"[:16],
        score=score,
        success=score == 1.0,
        episode_return=score,
        length=5,
    )


def trajectory_doc(step: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """A one-step GuessNumber trajectory document (before compression), ``step`` overriding the
    step's fields and ``fields`` the document's."""
    base = {
        "action": 5,
        "observation": "x",
        "digest": "0",
        "reward": 0.0,
        "terminated": True,
        "truncated": False,
        "info": {},
    }
    doc = {
        "format": 1,
        "env_id": "verigym/GuessNumber-v0",
        "env_kwargs": {},
        "seed": EVAL_SEED_START,
        "text_view": False,
        "instructions": "go",
        "reset": {"observation": "start", "digest": "0", "info": {}},
        "steps": [{**base, **(step or {})}],
        "messages": [],
    }
    doc.update(fields)
    return doc
