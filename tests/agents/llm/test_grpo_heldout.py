"""GRPO never trains on an evaluation task: a training seed that draws one is skipped."""

from __future__ import annotations

import pytest

import verigym  # noqa: F401 - registers the ids
from verigym.agents.llm.grpo import GRPOTrainer
from verigym.leaderboards.heldout import reset_task_hash


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VERIGYM_CACHE", str(tmp_path / "cache"))


def test_grpo_training_seeds_skip_evaluation_tasks(policy):
    trainer = GRPOTrainer(
        policy, "verigym/GuessNumber-v0", num_generations=2, groups_per_step=1, seed=0
    )
    try:
        held = trainer.held_out.hashes("verigym/GuessNumber-v0")
        seeds = [trainer._training_seed(0) for _ in range(30)]
        env = trainer._env_pool(0, 1)[0]
        assert not {reset_task_hash(env, s) for s in seeds} & held
        # GuessNumber has 100 secrets and the suites hold about 40 of them: seeds were skipped
        assert seeds[-1] >= 40 and len(set(seeds)) == 30
    finally:
        trainer.close()
