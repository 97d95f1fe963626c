"""verigym tasks under TRL's ``GRPOTrainer``: a prompt dataset and a verifier reward function.

For users who outgrow one machine: TRL (with accelerate/DeepSpeed/vLLM) runs the distributed
training, verigym supplies the tasks and the verdicts. Each dataset row is one task -- the
opening chat messages of ``env.reset(seed)`` plus the seed -- and :class:`VerigymReward` replays
that reset, steps the env with the model's completion and returns the verifier's score. This is
exact for single-turn envs (the first reply ends the episode); for a multi-turn env only the first
reply is scored (an episode still running scores ``unfinished_reward``) -- use
:class:`~verigym.agents.llm.grpo.GRPOTrainer` for multi-turn training.

Example::

    from trl import GRPOConfig, GRPOTrainer
    from verigym.agents.llm.trl_adapter import VerigymReward, verigym_dataset

    tasks = ["verigym/GuessNumber-v0"]
    trainer = GRPOTrainer(
        model="path/to/model", reward_funcs=VerigymReward(tasks),
        train_dataset=verigym_dataset(tasks, seeds=range(1000)), args=GRPOConfig(output_dir="runs/trl"),
    )
    trainer.train()

Needs ``pip install "verigym[trl]"``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from verigym.agents.llm.chat import initial_messages
from verigym.agents.llm.grpo import Task, make_env
from verigym.core import SCORE

__all__ = ["VerigymReward", "verigym_dataset"]

SEED_COLUMN = "verigym_seed"
TASK_COLUMN = "verigym_task"


def _as_list(tasks: Task | Sequence[Task]) -> list[Task]:
    return list(tasks) if isinstance(tasks, (list, tuple)) else [tasks]


def verigym_dataset(tasks: Task | Sequence[Task], seeds: Iterable[int]) -> Any:
    """A ``datasets.Dataset`` of conversational prompts, one row per (task, seed).

    Columns: ``prompt`` (list of chat messages: the env's instructions and first observation),
    ``verigym_seed`` (int) and ``verigym_task`` (int, index into ``tasks``).

    Args:
        tasks: env ids, env factories or envs (:data:`~verigym.agents.llm.grpo.Task`).
        seeds: reset seeds; every task gets every seed.
    """
    from datasets import Dataset

    rows: dict[str, list[Any]] = {"prompt": [], SEED_COLUMN: [], TASK_COLUMN: []}
    seeds = list(seeds)
    for index, task in enumerate(_as_list(tasks)):
        env = make_env(task)
        try:
            for seed in seeds:
                observation, info = env.reset(seed=int(seed))
                rows["prompt"].append(initial_messages(str(info.get("instructions", "")), str(observation)))
                rows[SEED_COLUMN].append(int(seed))
                rows[TASK_COLUMN].append(index)
        finally:
            env.close()
    return Dataset.from_dict(rows)


class VerigymReward:
    """A TRL reward function: the verifier's verdict on each completion.

    Called by TRL as ``reward(prompts=..., completions=..., verigym_seed=[...], verigym_task=[...])``
    (dataset columns arrive as keyword lists). Completions may be strings or lists of chat messages.

    Args:
        tasks: the same tasks, in the same order, as given to :func:`verigym_dataset`.
        reward: ``"score"`` (``info["score"]`` of the ending step) or ``"return"`` (the step reward).
        unfinished_reward: reward when the reply does not end the episode (multi-turn envs).
    """

    def __init__(self, tasks: Task | Sequence[Task], *, reward: str = "score", unfinished_reward: float = 0.0):
        if reward not in ("score", "return"):
            raise ValueError(f"reward must be 'score' or 'return', got {reward!r}")
        self.tasks = _as_list(tasks)
        self.reward = reward
        self.unfinished_reward = float(unfinished_reward)
        self.__name__ = "verigym_" + reward
        self._envs: dict[int, Any] = {}

    def _env(self, task: int) -> Any:
        if task not in self._envs:
            self._envs[task] = make_env(self.tasks[task])
        return self._envs[task]

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:
        seeds = columns.get(SEED_COLUMN)
        if seeds is None:
            raise KeyError(f"the dataset has no {SEED_COLUMN!r} column; build it with verigym_dataset()")
        tasks = columns.get(TASK_COLUMN) or [0] * len(completions)
        rewards = []
        for completion, seed, task in zip(completions, seeds, tasks):
            text = completion if isinstance(completion, str) else "".join(m.get("content", "") for m in completion)
            env = self._env(int(task))
            env.reset(seed=int(seed))
            _, step_reward, terminated, truncated, info = env.step(text)
            if not (terminated or truncated):
                rewards.append(self.unfinished_reward)
            elif self.reward == "score":
                rewards.append(float(info.get(SCORE, 0.0)))
            else:
                rewards.append(float(step_reward))
        return rewards

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()
