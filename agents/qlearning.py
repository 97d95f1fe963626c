"""Tabular Q-learning (Watkins & Dayan 1992, "Q-learning"), epsilon-greedy with linear decay.

For ``Discrete`` observations the table has one row per state. Any other observation (a text
string, a small integer grid, a vector) is hashed to one of ``table_size`` rows (CRC-32 of its
bytes, stable across processes), so text environments with a finite answer set (through
:class:`~verigym.wrappers.CandidateActionWrapper`) get a tabular baseline too. Distinct states
that collide share a row; raise ``table_size`` if that matters.

Update: ``Q(s, a) += lr * (r + gamma * (1 - terminated) * max_a' Q(s', a') - Q(s, a))``; a
time-limit truncation bootstraps. ``info["action_mask"]`` restricts exploration and the max.
The learning rate and epsilon decay linearly over ``lr_fraction`` / ``exploration_fraction`` of
training.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from verigym.agents.common.learner import Callback, TorchLearner, emit, episode_metrics
from verigym.agents.common.vec import action_masks, final_observations, unbatched, vector_env
from verigym.agents.configs import QLearningConfig
from verigym.core import ACTION_MASK

__all__ = ["QLearning", "QLearningConfig"]


class QLearning(TorchLearner):
    """Tabular Q-learning agent (see the module doc). Build with
    ``verigym.agents.make("qlearning", env, **options)``; options are the fields of
    :class:`QLearningConfig`."""

    name = "qlearning"
    config_class = QLearningConfig
    config: QLearningConfig

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        config: QLearningConfig,
        *,
        env_id: str | None = None,
    ):
        if not isinstance(action_space, spaces.Discrete):
            raise TypeError(f"Q-learning needs Discrete actions, got {action_space!r}")
        self.config = config
        self.observation_space = observation_space
        self.action_space = action_space
        self.env_id = env_id
        self.device = torch.device("cpu")
        self.global_step = 0
        self.rng = np.random.default_rng(config.seed)
        self.epsilon = config.exploration_initial_eps
        rows = (
            int(observation_space.n)
            if isinstance(observation_space, spaces.Discrete)
            else config.table_size
        )
        self.q = np.full((rows, int(action_space.n)), config.initial_q, dtype=np.float64)

    def state_index(self, obs: Any) -> int:
        """The table row of one observation."""
        space = self.observation_space
        if isinstance(space, spaces.Discrete):
            return int(obs) - int(space.start)
        data = (
            obs.encode("utf-8", "surrogatepass")
            if isinstance(obs, str)
            else np.ascontiguousarray(obs).tobytes()
        )
        return zlib.crc32(data) % self.config.table_size

    def reset(self, *, seed: int | None = None) -> None:
        if seed is not None:
            self.rng = np.random.default_rng(seed)

    def _choose(self, row: np.ndarray, mask: np.ndarray | None, explore: bool) -> int:
        values = row.tolist()
        legal = (
            range(len(values))
            if mask is None or not np.any(mask)
            else np.flatnonzero(mask).tolist()
        )
        if explore and self.rng.random() < self.epsilon:
            return int(legal[int(self.rng.integers(len(legal)))])
        top = max(values[a] for a in legal)
        best = [a for a in legal if values[a] == top]
        return int(
            best[int(self.rng.integers(len(best)))] if explore and len(best) > 1 else best[0]
        )

    def act(
        self,
        obs: Any,
        info: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        *,
        deterministic: bool = False,
    ) -> Any:
        """Greedy (``deterministic``) or epsilon-greedy action; a list/array of observations gives an array."""
        batched = isinstance(obs, (list, tuple)) or (
            not isinstance(obs, str)
            and isinstance(self.observation_space, spaces.Discrete)
            and np.ndim(obs) == 1
        )
        observations = list(obs) if batched else [obs]
        infos = info if isinstance(info, (list, tuple)) else [info] * len(observations)
        actions = [
            self._choose(
                self.q[self.state_index(o)],
                None if i is None else i.get(ACTION_MASK),
                not deterministic,
            )
            + int(self.action_space.start)
            for o, i in zip(observations, infos)
        ]
        return np.array(actions, dtype=np.int64) if batched else np.int64(actions[0])

    def _learn(
        self, env: Any, total_steps: int, *, callbacks: Sequence[Callback] = ()
    ) -> QLearning:
        """Train for ``total_steps`` env steps on one env (an id, an env or a ``VectorEnv`` of one).

        An id is stepped as a single env even when it has a natively batched engine: at one env
        the engine's fixed per-step cost loses to a Python step (docs/benchmarks.md).

        Returns:
            self.
        """
        cfg = self.config
        pool = vector_env(env, 1, native=False)
        obs_list, infos = pool.reset(seed=cfg.seed)
        state = self.state_index(unbatched(pool, obs_list)[0])
        start, start_step, next_log = (
            time.perf_counter(),
            self.global_step,
            self.global_step + cfg.log_interval,
        )
        offset = int(self.action_space.start)
        try:
            for t in range(total_steps):
                self.epsilon = cfg.exploration_initial_eps + min(
                    t / max(cfg.exploration_fraction * total_steps, 1), 1.0
                ) * (cfg.exploration_final_eps - cfg.exploration_initial_eps)
                lr = cfg.learning_rate + min(t / max(cfg.lr_fraction * total_steps, 1), 1.0) * (
                    cfg.final_learning_rate - cfg.learning_rate
                )
                masks = action_masks(infos)
                action = self._choose(
                    self.q[state], None if masks is None else masks[0], explore=True
                )
                obs_list, rewards, terminated, truncated, infos = pool.step(
                    np.array([action + offset], dtype=np.int64)
                )
                final = final_observations(infos, 1)[0]
                now = unbatched(pool, obs_list)[0]
                next_state = self.state_index(final if final is not None else now)
                target = float(rewards[0])
                if not terminated[0]:
                    target += cfg.gamma * float(self.q[next_state].max())
                self.q[state, action] += lr * (target - self.q[state, action])
                state = self.state_index(now)
                self.global_step += 1
                if self.global_step >= next_log:
                    next_log += cfg.log_interval
                    metrics = {
                        "global_step": float(self.global_step),
                        "charts/SPS": (self.global_step - start_step)
                        / max(time.perf_counter() - start, 1e-9),
                        "charts/epsilon": self.epsilon,
                    }
                    if not emit(callbacks, metrics | episode_metrics(pool.pop_episodes())):
                        break
        finally:
            if pool is not env and pool.unwrapped is not env:
                pool.close()
        return self

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {"q": torch.from_numpy(self.q)}

    def load_state_tensors(self, tensors: Mapping[str, torch.Tensor]) -> None:
        self.q = tensors["q"].cpu().numpy().astype(np.float64)
