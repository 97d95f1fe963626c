"""Soft Actor-Critic (Haarnoja et al. 2018, "Soft Actor-Critic: Off-Policy Maximum Entropy Deep
Reinforcement Learning with a Stochastic Actor" and "Soft Actor-Critic Algorithms and
Applications").

Twin Q-networks with Polyak-averaged targets (the min of the two in the target), a
tanh-squashed Gaussian actor, and automatic entropy tuning towards ``target_entropy`` (default
``-dim(A)``). The twin critics are one :class:`~verigym.agents.common.networks.EnsembleMLP`, so both
are evaluated in one batched matmul per layer.

Goal-conditioned ``Dict`` observations (``observation``, ``achieved_goal``, ``desired_goal``, as in
Gymnasium-Robotics) are concatenated by the encoder; with ``her_k > 0`` each finished episode is
also stored ``her_k`` more times with goals it achieved later (hindsight experience replay,
Andrychowicz et al. 2017, "future" strategy), rewarded by ``env.unwrapped.compute_reward``.

Supports ``Box`` actions (rescaled from the actor's ``(-1, 1)`` to the space's bounds).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from verigym.agents.common.buffers import HindsightRelabeller, ReplayBuffer
from verigym.agents.common.distributions import squashed_gaussian_sample
from verigym.agents.common.learner import Callback, TorchLearner, emit, episode_metrics, final_batch
from verigym.agents.common.networks import EnsembleMLP, ObservationEncoder, adam, mlp, to_tensors
from verigym.agents.common.vec import final_observations, unbatched, vector_env
from verigym.agents.configs import SACConfig

__all__ = ["SAC", "SACConfig"]

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0


class Actor(nn.Module):
    def __init__(self, encoder: ObservationEncoder, act_dim: int, config: SACConfig):
        super().__init__()
        self.encoder = encoder
        self.trunk = mlp(encoder.out_dim, config.hidden_sizes, None, config.activation, init=False)
        width = config.hidden_sizes[-1] if config.hidden_sizes else encoder.out_dim
        self.mean = nn.Linear(width, act_dim)
        self.log_std = nn.Linear(width, act_dim)

    def forward(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(self.encoder(batch))
        return self.mean(h), self.log_std(h).clamp(LOG_STD_MIN, LOG_STD_MAX)


class Critics(nn.Module):
    """Two Q-functions ``Q_i(s, a)``; ``forward`` returns ``(2, N)``."""

    def __init__(self, encoder: ObservationEncoder, act_dim: int, config: SACConfig):
        super().__init__()
        self.encoder = encoder
        self.q = EnsembleMLP(
            2, encoder.out_dim + act_dim, config.hidden_sizes, 1, config.activation
        )

    def forward(self, batch: dict[str, torch.Tensor], actions: torch.Tensor) -> torch.Tensor:
        return self.q(torch.cat([self.encoder(batch), actions], dim=-1)).squeeze(-1)


class SAC(TorchLearner):
    """SAC agent (see the module doc). Build with ``verigym.agents.make("sac", env, **options)``;
    options are the fields of :class:`SACConfig`."""

    name = "sac"
    config_class = SACConfig
    config: SACConfig

    def _build(self) -> None:
        space = self.action_space
        if (
            not isinstance(space, spaces.Box)
            or not np.all(np.isfinite(space.low))
            or not np.all(np.isfinite(space.high))
        ):
            raise TypeError(f"SAC needs a bounded Box action space, got {space!r}")
        cfg = self.config
        act_dim = int(np.prod(space.shape))
        parts = self.batcher.parts
        self.actor = Actor(ObservationEncoder(parts), act_dim, cfg).to(self.device)
        self.critic = Critics(ObservationEncoder(parts), act_dim, cfg).to(self.device)
        self.critic_target = Critics(ObservationEncoder(parts), act_dim, cfg).to(self.device)
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.critic_target.requires_grad_(False)
        # listed once: each gradient step switches the critics' gradients off and on around the
        # actor loss and Polyak-averages the targets (walking the modules each time was ~3% of a
        # Pendulum run's CPU time)
        self._critic_params = list(self.critic.parameters())
        self._target_params = list(self.critic_target.parameters())
        self.actor_optimizer = adam(self.actor.parameters(), cfg.learning_rate)
        self.critic_optimizer = adam(self.critic.parameters(), cfg.learning_rate)
        self.log_alpha = torch.tensor(
            [math.log(cfg.ent_coef if cfg.ent_coef else cfg.ent_coef_init)],
            device=self.device,
            requires_grad=cfg.ent_coef is None,
        )
        self.alpha_optimizer = (
            adam([self.log_alpha], cfg.learning_rate) if cfg.ent_coef is None else None
        )
        self.target_entropy = float(-act_dim if cfg.target_entropy is None else cfg.target_entropy)
        self._scale = torch.as_tensor(
            (space.high - space.low) / 2.0, dtype=torch.float32, device=self.device
        ).reshape(-1)
        self._center = torch.as_tensor(
            (space.high + space.low) / 2.0, dtype=torch.float32, device=self.device
        ).reshape(-1)

    def _to_env(self, squashed: torch.Tensor) -> np.ndarray:
        actions = (squashed * self._scale + self._center).cpu().numpy()
        return self.env_actions(actions.reshape(len(actions), *self.action_space.shape))

    def _act_batch(
        self, batch: dict[str, np.ndarray], mask: np.ndarray | None, deterministic: bool
    ) -> np.ndarray:
        with torch.inference_mode():
            mean, log_std = self.actor(to_tensors(batch, self.device))
            squashed = (
                torch.tanh(mean)
                if deterministic
                else squashed_gaussian_sample(mean, log_std, self.generator)[0]
            )
        return self._to_env(squashed)

    def _learn(self, env: Any, total_steps: int, *, callbacks: Sequence[Callback] = ()) -> SAC:
        """Train for ``total_steps`` env steps (over all envs).

        Args:
            env: an env id, a ``gymnasium.Env`` or a ``VectorEnv`` (:func:`~verigym.agents.common.vec.vector_env`).
            total_steps: env steps.
            callbacks: called every ``log_interval`` env steps with the metrics; False stops.

        Returns:
            self.

        Raises:
            TypeError: ``her_k > 0`` but the env is not goal-conditioned.
        """
        cfg = self.config
        pool = vector_env(env, cfg.num_envs)
        n = pool.num_envs
        buffer = ReplayBuffer(min(cfg.buffer_size, max(total_steps * (1 + cfg.her_k), 1)), self.rng)
        her = None
        if cfg.her_k:
            unwrapped = pool.unwrapped.envs[0].unwrapped
            if (
                not isinstance(pool.single_observation_space, spaces.Dict)
                or "achieved_goal" not in pool.single_observation_space.spaces
                or not hasattr(unwrapped, "compute_reward")
            ):
                raise TypeError(
                    "her_k > 0 needs a goal-conditioned env: Dict observations with achieved_goal/desired_goal and compute_reward()"
                )
            her = HindsightRelabeller(n, cfg.her_k, unwrapped.compute_reward, self.rng)
        obs_list, _ = pool.reset(seed=cfg.seed)
        batch = self.batcher(obs_list)
        start, start_step, next_log = (
            time.perf_counter(),
            self.global_step,
            self.global_step + cfg.log_interval,
        )
        stats: dict[str, list[torch.Tensor]] = {}
        calls = 0
        try:
            for _ in range(-(-total_steps // n)):
                if self.global_step - start_step < cfg.learning_starts:
                    squashed = (
                        torch.rand(
                            (n, len(self._scale)), generator=self.generator, device=self.device
                        )
                        * 2
                        - 1
                    )
                else:
                    with torch.inference_mode():
                        mean, log_std = self.actor(to_tensors(batch, self.device))
                        squashed = squashed_gaussian_sample(mean, log_std, self.generator)[0]
                env_actions = self._to_env(squashed)
                previous = [dict(o) for o in unbatched(pool, obs_list)] if her is not None else []
                obs_list, rewards, terminated, truncated, infos = pool.step(env_actions)
                finals = final_observations(infos, n)
                next_batch = self.batcher(obs_list)
                stored_next = final_batch(self.batcher, next_batch, finals)
                stored_actions = (
                    (
                        torch.as_tensor(
                            env_actions, dtype=torch.float32, device=self.device
                        ).reshape(n, -1)
                        - self._center
                    )
                    / self._scale
                ).clamp(-1, 1)
                buffer.add(batch, stored_actions.cpu().numpy(), rewards, stored_next, terminated)
                if her is not None:
                    self._hindsight(
                        her,
                        buffer,
                        previous,
                        env_actions,
                        unbatched(pool, obs_list),
                        finals,
                        terminated,
                        truncated,
                    )
                batch = next_batch
                self.global_step += n
                calls += 1
                if (
                    self.global_step - start_step >= cfg.learning_starts
                    and calls % cfg.train_freq == 0
                ):
                    for _ in range(cfg.gradient_steps):
                        for key, value in self._train_step(buffer.sample(cfg.batch_size)).items():
                            stats.setdefault(key, []).append(value)
                if self.global_step >= next_log:
                    next_log += cfg.log_interval
                    elapsed = max(time.perf_counter() - start, 1e-9)
                    metrics = {
                        "global_step": float(self.global_step),
                        "charts/SPS": (self.global_step - start_step) / elapsed,
                    }
                    metrics |= episode_metrics(pool.pop_episodes())
                    metrics |= {k: float(torch.stack(v).mean()) for k, v in stats.items()}
                    stats = {}
                    if not emit(callbacks, metrics):
                        break
        finally:
            if pool is not env and pool.unwrapped is not env:
                pool.close()
        return self

    def _hindsight(
        self,
        her: HindsightRelabeller,
        buffer: ReplayBuffer,
        previous: list[Any],
        actions: np.ndarray,
        obs_list: list[Any],
        finals: list[Any],
        terminated: np.ndarray,
        truncated: np.ndarray,
    ) -> None:
        scaled = (
            (
                (actions.reshape(len(actions), -1) - self._center.cpu().numpy())
                / self._scale.cpu().numpy()
            )
            .clip(-1, 1)
            .astype(np.float32)
        )
        for i in range(len(previous)):
            next_obs = finals[i] if finals[i] is not None else obs_list[i]
            her.record(i, previous[i], scaled[i], next_obs, bool(terminated[i]))
            if terminated[i] or truncated[i]:
                relabelled = her.finish(i)
                if relabelled:
                    o, a, r, no, d = zip(*relabelled)
                    buffer.add(
                        self.batcher(list(o)),
                        np.stack(a),
                        np.array(r, dtype=np.float32),
                        self.batcher(list(no)),
                        np.array(d),
                    )

    def _train_step(self, sample: dict[str, Any]) -> dict[str, torch.Tensor]:
        cfg = self.config
        obs = to_tensors(sample["obs"], self.device)
        next_obs = to_tensors(sample["next_obs"], self.device)
        actions = torch.as_tensor(sample["actions"], device=self.device)
        rewards = torch.as_tensor(sample["rewards"], device=self.device)
        not_done = 1.0 - torch.as_tensor(sample["terminated"], device=self.device)
        # temperature
        mean, log_std = self.actor(obs)
        pi_actions, log_prob = squashed_gaussian_sample(mean, log_std, self.generator)
        alpha = self.log_alpha.detach().exp()
        out: dict[str, torch.Tensor] = {}
        if self.alpha_optimizer is not None:
            alpha_loss = -(self.log_alpha * (log_prob.detach() + self.target_entropy)).mean()
            self.alpha_optimizer.zero_grad(set_to_none=True)
            alpha_loss.backward()
            self.alpha_optimizer.step()
            out["losses/alpha_loss"] = alpha_loss.detach()
        # critics
        with torch.no_grad():
            next_mean, next_log_std = self.actor(next_obs)
            next_actions, next_log_prob = squashed_gaussian_sample(
                next_mean, next_log_std, self.generator
            )
            next_q = (
                self.critic_target(next_obs, next_actions).min(dim=0).values - alpha * next_log_prob
            )
            target = rewards + not_done * cfg.gamma * next_q
        q = self.critic(obs, actions)
        critic_loss = 0.5 * ((q - target) ** 2).mean(dim=1).sum()
        self.critic_optimizer.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_optimizer.step()
        # actor
        for p in self._critic_params:  # the actor loss needs d/d(action), not critic weight grads
            p.requires_grad_(False)
        q_pi = self.critic(obs, pi_actions).min(dim=0).values
        for p in self._critic_params:
            p.requires_grad_(True)
        actor_loss = (alpha * log_prob - q_pi).mean()
        self.actor_optimizer.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_optimizer.step()
        with torch.no_grad():
            torch._foreach_lerp_(self._target_params, self._critic_params, cfg.tau)
        out |= {
            "losses/critic_loss": critic_loss.detach(),
            "losses/actor_loss": actor_loss.detach(),
            "losses/alpha": alpha[0],
        }
        return out

    def state_tensors(self) -> dict[str, torch.Tensor]:
        tensors = {f"actor.{k}": v for k, v in self.actor.state_dict().items()}
        tensors |= {f"critic.{k}": v for k, v in self.critic.state_dict().items()}
        tensors |= {f"critic_target.{k}": v for k, v in self.critic_target.state_dict().items()}
        tensors["log_alpha"] = self.log_alpha.detach()
        return tensors

    def load_state_tensors(self, tensors: Mapping[str, torch.Tensor]) -> None:
        for name in ("actor", "critic", "critic_target"):
            prefix = name + "."
            getattr(self, name).load_state_dict(
                {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
            )
        with torch.no_grad():
            self.log_alpha.copy_(tensors["log_alpha"])
