"""Evaluation and the ``learn`` callbacks: progress bar, JSONL and TensorBoard logs, early stop.

A callback is any callable taking the metrics dict a learner reports (``global_step``,
``charts/episodic_return``, ``losses/...``); returning ``False`` stops training.
"""

from __future__ import annotations

import json
import logging
import math
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from verigym.agents.base import env_for
from verigym.agents.common.vec import is_parallel_env, make_env
from verigym.core import SCORE, SUCCESS

__all__ = ["EvalStop", "MetricsLogger", "ProgressBar", "evaluate"]

log = logging.getLogger(__name__)


def evaluate(
    agent: Any, env: Any, *, episodes: int = 10, seed: int = 10_000, deterministic: bool = True
) -> dict[str, Any]:
    """Run ``episodes`` episodes (reset seeds ``seed, seed + 1, ...``) with ``agent.act``.

    Args:
        agent: anything with ``reset(seed=...)`` and ``act(obs, info, deterministic=...)``; on a
            PettingZoo parallel env, ``act`` takes and returns ``{agent: ...}`` dicts.
        env: an env or an env id (Gymnasium, or a PettingZoo parallel env). An agent bound to one
            env instance (the oracle) plays that instance: for an id, its own env when that is the
            id's registered task (see :func:`verigym.agents.base.env_for`).

    Raises:
        ValueError: ``agent`` is bound to another env instance than ``env``.

    Returns:
        ``{"mean_return", "std_return", "success_rate", "mean_score", "returns"}``; the rates are
        NaN when the env does not report ``info["success"]``/``info["score"]``. On a parallel env
        an episode's return, success and score are the means over its agents.
    """
    env = env_for(agent, env)
    if is_parallel_env(env):
        return _evaluate_parallel(agent, env, episodes, seed, deterministic)
    returns, successes, scores = [], [], []
    for episode in range(episodes):
        obs, info = env.reset(seed=seed + episode)
        agent.reset(seed=seed + episode)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, info = env.step(
                agent.act(obs, info, deterministic=deterministic)
            )
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
        if SUCCESS in info:
            successes.append(float(info[SUCCESS]))
        if SCORE in info:
            scores.append(float(info[SCORE]))
    return _summary(returns, successes, scores)


def _evaluate_parallel(
    agent: Any, env: Any, episodes: int, seed: int, deterministic: bool
) -> dict[str, Any]:
    returns, successes, scores = [], [], []
    for episode in range(episodes):
        observations, infos = env.reset(seed=seed + episode)
        agent.reset(seed=seed + episode)
        totals = dict.fromkeys(env.possible_agents, 0.0)
        verdicts: dict[str, Mapping[str, Any]] = {}
        while env.agents:
            actions = agent.act(
                {a: observations[a] for a in env.agents}, infos, deterministic=deterministic
            )
            observations, rewards, terminations, truncations, infos = env.step(
                {a: actions[a] for a in env.agents}
            )
            for name, reward in rewards.items():
                totals[name] += float(reward)
                if terminations.get(name) or truncations.get(name):
                    verdicts[name] = infos.get(name, {})
        returns.append(float(np.mean(list(totals.values()))))
        if any(SUCCESS in v for v in verdicts.values()):
            successes.append(
                float(np.mean([bool(v.get(SUCCESS, False)) for v in verdicts.values()]))
            )
        if any(SCORE in v for v in verdicts.values()):
            scores.append(float(np.mean([float(v.get(SCORE, 0.0)) for v in verdicts.values()])))
    return _summary(returns, successes, scores)


def _summary(returns: list[float], successes: list[float], scores: list[float]) -> dict[str, Any]:
    return {
        "mean_return": float(np.mean(returns)),
        "std_return": float(np.std(returns)),
        "success_rate": float(np.mean(successes)) if successes else math.nan,
        "mean_score": float(np.mean(scores)) if scores else math.nan,
        "returns": returns,
    }


class EvalStop:
    """Evaluate every ``every`` env steps; stop training once ``metric`` reaches ``threshold``.

    Args:
        agent: the learner being trained.
        env: evaluation env (or id), separate from the training envs.
        threshold: stop when the evaluated metric is >= this (None: never stop, only record).
        every: env steps between evaluations.
        episodes: episodes per evaluation.
        metric: a key of :func:`evaluate`'s result (``mean_return``, ``success_rate``, ...).
        deterministic: evaluate the greedy/mean policy (else sampled actions).

    Attributes:
        history: ``[(global_step, value), ...]``; ``best``: the best value; ``reached_at``: the
        global step of the first evaluation at or above the threshold, else None.
    """

    def __init__(
        self,
        agent: Any,
        env: Any,
        *,
        threshold: float | None,
        every: int,
        episodes: int = 5,
        metric: str = "mean_return",
        seed: int = 10_000,
        deterministic: bool = True,
    ):
        self.agent, self.env, self.deterministic = agent, make_env(env), deterministic
        self.threshold, self.every, self.episodes, self.metric, self.seed = (
            threshold,
            every,
            episodes,
            metric,
            seed,
        )
        self.history: list[tuple[int, float]] = []
        self.best = -math.inf
        self.reached_at: int | None = None
        self._next = every

    def __call__(self, metrics: Mapping[str, float]) -> bool:
        step = int(metrics["global_step"])
        if step < self._next:
            return True
        while self._next <= step:
            self._next += self.every
        value = evaluate(
            self.agent,
            self.env,
            episodes=self.episodes,
            seed=self.seed,
            deterministic=self.deterministic,
        )[self.metric]
        self.history.append((step, value))
        self.best = max(self.best, value)
        if self.threshold is not None and value >= self.threshold:
            self.reached_at = step
            return False
        return True


class MetricsLogger:
    """Writes each metrics dict as one line of ``metrics.jsonl`` and, optionally, as TensorBoard scalars.

    The one metrics writer of the learners, ``verigym train`` and the GRPO trainer. It is a
    ``learn`` callback (call it with a metrics dict). Each line is flushed, so a crash loses nothing;
    NaN and infinite values are written as ``null`` (JSON has no NaN).

    Args:
        directory: where ``metrics.jsonl`` goes (created); ``None`` writes nothing.
        tensorboard: also write TensorBoard scalars; when the ``tensorboard`` package is missing
            this logs a warning and writes the JSONL file only.
        tensorboard_dir: the event directory (default: ``directory``).
        step_key: the metric used as the x-axis of the TensorBoard scalars (``global_step`` for the
            torch learners, ``step`` for GRPO); it is not itself a scalar. A dict without it is
            written to the JSONL file only.
        prefix: prepended to each TensorBoard tag (``"grpo/"``).
    """

    def __init__(
        self,
        directory: str | Path | None,
        *,
        tensorboard: bool = False,
        tensorboard_dir: str | Path | None = None,
        step_key: str = "global_step",
        prefix: str = "",
    ):
        self.path = None if directory is None else Path(directory) / "metrics.jsonl"
        self.step_key, self.prefix = step_key, prefix
        self._file = None
        self._tb = None
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                log.warning(
                    "tensorboard is not installed (pip install tensorboard); logging to metrics.jsonl only"
                )
            else:
                self._tb = SummaryWriter(
                    str(directory if tensorboard_dir is None else tensorboard_dir)
                )

    def __call__(self, metrics: Mapping[str, float]) -> None:
        if self._file is not None:
            clean = {k: (float(v) if math.isfinite(v) else None) for k, v in metrics.items()}
            self._file.write(json.dumps(clean) + "\n")
            self._file.flush()
        if self._tb is not None and self.step_key in metrics:
            step = int(metrics[self.step_key])
            for key, value in metrics.items():
                if key != self.step_key:
                    self._tb.add_scalar(self.prefix + key, float(value), step)

    def flush(self) -> None:
        """Push buffered TensorBoard events to disk (the JSONL file is flushed on every call)."""
        if self._tb is not None:
            self._tb.flush()

    def close(self) -> None:
        """Close the files; idempotent."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._tb is not None:
            self._tb.close()
            self._tb = None


class ProgressBar:
    """A ``rich`` progress bar over ``total_steps`` with steps/s and the recent mean return.

    Args:
        total_steps: env steps of this ``learn`` call.
        description: text before the bar.
        start: the learner's ``global_step`` when the call began (a second ``learn`` on the same
            agent counts from there).
    """

    def __init__(self, total_steps: int, description: str = "training", *, start: int = 0):
        from verigym.progress import counter_bar  # whole lines, not a live bar, in a log

        self.start = start
        self.progress = counter_bar("{task.fields[sps]:>7.0f} steps/s  return {task.fields[ret]}")
        self.task = self.progress.add_task(description, total=total_steps, sps=0.0, ret="-")
        self.recent: deque[float] = deque(maxlen=20)
        self.progress.start()

    def __call__(self, metrics: Mapping[str, float]) -> None:
        if "charts/episodic_return" in metrics:
            self.recent.append(float(metrics["charts/episodic_return"]))
        ret = f"{np.mean(self.recent):.2f}" if self.recent else "-"
        self.progress.update(
            self.task,
            completed=int(metrics["global_step"]) - self.start,
            sps=float(metrics.get("charts/SPS", 0.0)),
            ret=ret,
        )

    def close(self) -> None:
        self.progress.stop()
