"""Deep Q-Network (Mnih et al. 2015, "Human-level control through deep reinforcement learning")
with double-DQN targets (van Hasselt et al. 2016, "Deep Reinforcement Learning with Double
Q-learning").

Replay buffer, a target network synced every ``target_update_interval`` env steps (or Polyak
averaged with ``tau < 1``), a linearly decaying epsilon-greedy policy, Huber loss, gradient-norm
clipping; ``train_freq`` env steps (per env) between training phases of ``gradient_steps`` updates
(the Stable-Baselines3 / rl-zoo parametrization). Illegal actions under ``info["action_mask"]``
are never chosen, neither greedily nor at random, and masked out of the target's max.

Supports ``Discrete`` actions and any observation :class:`~verigym.agents.common.spaces.ObservationBatcher`
handles.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from verigym.agents.common.buffers import ReplayBuffer
from verigym.agents.common.learner import (
    Callback,
    TorchLearner,
    emit,
    episode_metrics,
    final_batch,
)
from verigym.agents.common.networks import ObservationEncoder, adam, mlp, to_tensors
from verigym.agents.common.vec import action_masks, final_observations, vector_env
from verigym.agents.configs import DQNConfig

__all__ = ["DQN", "DQNConfig"]


class QNetwork(nn.Module):
    def __init__(self, parts: Sequence[Any], n_actions: int, config: DQNConfig):
        super().__init__()
        self.encoder = ObservationEncoder(parts)
        self.head = mlp(
            self.encoder.out_dim, config.hidden_sizes, n_actions, config.activation, init=False
        )

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.head(self.encoder(batch))


def _masked(q: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is None:
        return q
    legal = mask.bool() | ~mask.bool().any(dim=-1, keepdim=True)
    return q.masked_fill(~legal, -torch.inf)


class DQN(TorchLearner):
    """DQN agent (see the module doc). Build with ``verigym.agents.make("dqn", env, **options)``;
    options are the fields of :class:`DQNConfig`."""

    name = "dqn"
    config_class = DQNConfig
    config: DQNConfig

    def _build(self) -> None:
        if not isinstance(self.action_space, spaces.Discrete):
            raise TypeError(f"DQN needs Discrete actions, got {self.action_space!r}")
        n = int(self.action_space.n)
        self.q = QNetwork(self.batcher.parts, n, self.config).to(self.device)
        self.q_target = QNetwork(self.batcher.parts, n, self.config).to(self.device)
        self.q_target.load_state_dict(self.q.state_dict())
        self.q_target.requires_grad_(False)
        self.optimizer = adam(self.q.parameters(), self.config.learning_rate)
        self.epsilon = self.config.exploration_initial_eps

    def _greedy(self, batch: dict[str, np.ndarray], mask: np.ndarray | None) -> np.ndarray:
        with torch.inference_mode():
            q = self.q(to_tensors(batch, self.device))
            return (
                _masked(q, None if mask is None else torch.as_tensor(mask, device=self.device))
                .argmax(-1)
                .cpu()
                .numpy()
            )

    def _act_batch(
        self, batch: dict[str, np.ndarray], mask: np.ndarray | None, deterministic: bool
    ) -> np.ndarray:
        actions = self._greedy(batch, mask)
        if not deterministic:
            explore = self.rng.random(len(actions)) < self.epsilon
            for i in np.flatnonzero(explore):
                legal = (
                    np.arange(self.action_space.n)
                    if mask is None or not mask[i].any()
                    else np.flatnonzero(mask[i])
                )
                actions[i] = self.rng.choice(legal)
        return self.env_actions(actions)

    def _learn(self, env: Any, total_steps: int, *, callbacks: Sequence[Callback] = ()) -> DQN:
        """Train for ``total_steps`` env steps (over all envs).

        Args:
            env: an env id, a ``gymnasium.Env`` or a ``VectorEnv`` (:func:`~verigym.agents.common.vec.vector_env`).
            total_steps: env steps.
            callbacks: called every ``log_interval`` env steps with the metrics; False stops.

        Returns:
            self.
        """
        cfg = self.config
        pool = vector_env(env, cfg.num_envs)
        n = pool.num_envs
        buffer = ReplayBuffer(min(cfg.buffer_size, max(total_steps, 1)), self.rng)
        obs_list, infos = pool.reset(seed=cfg.seed)
        batch = self.batcher(obs_list)
        start, start_step, next_log = (
            time.perf_counter(),
            self.global_step,
            self.global_step + cfg.log_interval,
        )
        decay_steps = max(cfg.exploration_fraction * total_steps, 1.0)
        losses: list[float] = []
        calls = 0
        try:
            for _ in range(-(-total_steps // n)):
                done_steps = self.global_step - start_step
                self.epsilon = cfg.exploration_initial_eps + min(done_steps / decay_steps, 1.0) * (
                    cfg.exploration_final_eps - cfg.exploration_initial_eps
                )
                mask = action_masks(infos)
                if done_steps < cfg.learning_starts:
                    actions = np.array(
                        [self._random_action(m) for m in (mask if mask is not None else [None] * n)]
                    )
                else:
                    actions = self._act_batch(batch, mask, deterministic=False) - int(
                        self.action_space.start
                    )
                obs_list, rewards, terminated, truncated, infos = pool.step(
                    self.env_actions(actions)
                )
                next_batch = self.batcher(obs_list)
                stored_next = final_batch(self.batcher, next_batch, final_observations(infos, n))
                buffer.add(batch, actions, rewards, stored_next, terminated)
                batch = next_batch
                self.global_step += n
                calls += 1
                if (
                    self.global_step - start_step > cfg.learning_starts
                    and calls % cfg.train_freq == 0
                ):
                    losses.extend(self._train_phase(buffer))
                if calls % max(cfg.target_update_interval // n, 1) == 0:
                    self._update_target()
                if self.global_step >= next_log:
                    next_log += cfg.log_interval
                    elapsed = max(time.perf_counter() - start, 1e-9)
                    metrics = {
                        "global_step": float(self.global_step),
                        "charts/SPS": (self.global_step - start_step) / elapsed,
                        "charts/epsilon": self.epsilon,
                    }
                    metrics |= episode_metrics(pool.pop_episodes())
                    if losses:
                        metrics["losses/td_loss"] = float(np.mean(losses))
                        losses = []
                    if not emit(callbacks, metrics):
                        break
        finally:
            if pool is not env and pool.unwrapped is not env:
                pool.close()
        return self

    def _random_action(self, mask: np.ndarray | None) -> int:
        if mask is None or not np.any(mask):
            return int(self.rng.integers(self.action_space.n))
        return int(self.rng.choice(np.flatnonzero(mask)))

    def _update_target(self) -> None:
        with torch.no_grad():
            if self.config.tau >= 1.0:
                self.q_target.load_state_dict(self.q.state_dict())
            else:
                for target, online in zip(self.q_target.parameters(), self.q.parameters()):
                    target.lerp_(online, self.config.tau)

    def _train_phase(self, buffer: ReplayBuffer) -> list[float]:
        """``gradient_steps`` updates; the minibatches are drawn and moved to the device at once.

        The target network is fixed during a phase, so its values for every minibatch come from
        one batched forward pass (and the whole TD target, when ``double_q`` is off).
        """
        cfg = self.config
        if cfg.gradient_steps == 0:
            return []
        size = cfg.batch_size
        sample = buffer.sample(cfg.gradient_steps * size)
        obs = to_tensors(sample["obs"], self.device)
        next_obs = to_tensors(sample["next_obs"], self.device)
        actions = torch.as_tensor(sample["actions"], device=self.device).long().unsqueeze(-1)
        with torch.no_grad():
            next_q_target = self.q_target(next_obs)
            discount = cfg.gamma * (1.0 - torch.as_tensor(sample["terminated"], device=self.device))
            rewards = torch.as_tensor(sample["rewards"], device=self.device)
            if not cfg.double_q:
                targets = rewards + discount * next_q_target.max(-1).values
        losses = []
        for step in range(cfg.gradient_steps):
            part = slice(step * size, (step + 1) * size)
            if cfg.double_q:  # the online network picks the next action: one pass over both halves
                q_both = self.q({k: torch.cat([obs[k][part], next_obs[k][part]]) for k in obs})
                q_all = q_both[:size]
                with torch.no_grad():
                    best = q_both[size:].argmax(-1, keepdim=True)
                    target = rewards[part] + discount[part] * next_q_target[part].gather(
                        -1, best
                    ).squeeze(-1)
            else:
                q_all = self.q({k: v[part] for k, v in obs.items()})
                target = targets[part]
            q = q_all.gather(-1, actions[part]).squeeze(-1)
            loss = nn.functional.smooth_l1_loss(q, target)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(self.q.parameters(), cfg.max_grad_norm)
            self.optimizer.step()
            losses.append(loss.detach())
        return [float(x) for x in torch.stack(losses).cpu()]

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {f"q.{k}": v for k, v in self.q.state_dict().items()}

    def load_state_tensors(self, tensors: Mapping[str, torch.Tensor]) -> None:
        self.q.load_state_dict({k[2:]: v for k, v in tensors.items() if k.startswith("q.")})
        self.q_target.load_state_dict(self.q.state_dict())
