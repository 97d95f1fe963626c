"""Option-critic (Bacon, Harb & Precup 2017, "The Option-Critic Architecture"), trained on-policy
with parallel envs and n-step returns as in A2OC (Harb et al. 2018, "When Waiting is Not an
Option: Learning Options with a Deliberation Cost").

One network with a shared encoder and trunk and three heads: the option values ``Q_Omega(s, o)``,
the termination probabilities ``beta(s, o)`` (sigmoid) and the intra-option policies
``pi(a | s, o)`` (softmax, masked by ``info["action_mask"]``). The policy over options is
epsilon-greedy on ``Q_Omega`` (epsilon decays linearly). Per rollout the losses are

* critic: ``(G_t - Q_Omega(s_t, o_t))^2`` with n-step returns ``G_t`` bootstrapped by
  ``U(s_T, o_T) = (1 - beta) Q_Omega(s_T, o_T) + beta max_o Q_Omega(s_T, o)``;
* intra-option policy gradient: ``-log pi(a_t | s_t, o_t) (G_t - Q_Omega(s_t, o_t))`` minus an
  entropy bonus;
* termination gradient: ``beta(s_{t+1}, o_t) (Q_Omega(s_{t+1}, o_t) - V(s_{t+1}) + xi)`` with
  ``V = max_o Q_Omega`` and the termination regularizer (deliberation cost) ``xi``.

Supports ``Discrete`` actions and any observation :class:`~verigym.agents.common.spaces.ObservationBatcher`
handles. The current option of each env is agent state: call ``reset()`` at each episode start.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from verigym.agents.common.distributions import Categorical
from verigym.agents.common.learner import (
    Callback,
    TorchLearner,
    emit,
    episode_metrics,
)
from verigym.agents.common.networks import ObservationEncoder, adam, layer_init, mlp, to_tensors
from verigym.agents.common.vec import action_masks, final_observations, vector_env
from verigym.agents.configs import OptionCriticConfig

__all__ = ["OptionCritic", "OptionCriticConfig"]


class OptionCriticNetwork(nn.Module):
    """Encoder + trunk; heads ``q (N, O)``, ``beta (N, O)``, ``logits (N, O, A)``."""

    def __init__(self, parts: Sequence[Any], n_actions: int, config: OptionCriticConfig):
        super().__init__()
        self.encoder = ObservationEncoder(parts)
        self.trunk = mlp(self.encoder.out_dim, config.hidden_sizes, None, config.activation)
        width = config.hidden_sizes[-1] if config.hidden_sizes else self.encoder.out_dim
        self.num_options, self.n_actions = config.num_options, n_actions
        self.q = layer_init(nn.Linear(width, config.num_options), 1.0)
        self.termination = layer_init(nn.Linear(width, config.num_options), 0.01)
        self.policy = layer_init(nn.Linear(width, config.num_options * n_actions), 0.01)

    def forward(
        self, batch: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h = self.trunk(self.encoder(batch))
        return (
            self.q(h),
            torch.sigmoid(self.termination(h)),
            self.policy(h).view(-1, self.num_options, self.n_actions),
        )


def _pick(x: torch.Tensor, options: torch.Tensor) -> torch.Tensor:
    """``x[i, options[i]]`` for ``x (N, O, ...)``."""
    return x[torch.arange(len(options), device=x.device), options]


class OptionCritic(TorchLearner):
    """Option-critic agent (see the module doc). Build with
    ``verigym.agents.make("option-critic", env, **options)``; options are the fields of
    :class:`OptionCriticConfig`."""

    name = "option-critic"
    config_class = OptionCriticConfig
    config: OptionCriticConfig

    def _build(self) -> None:
        if not isinstance(self.action_space, spaces.Discrete):
            raise TypeError(f"option-critic needs Discrete actions, got {self.action_space!r}")
        self.net = OptionCriticNetwork(
            self.batcher.parts, int(self.action_space.n), self.config
        ).to(self.device)
        self.optimizer = adam(self.net.parameters(), self.config.learning_rate)
        self.epsilon = self.config.option_eps_final
        self._options: np.ndarray | None = None

    # -- acting -------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None) -> None:
        """Episode start: forget the current options (a new one is chosen at the next ``act``)."""
        super().reset(seed=seed)
        self._options = None

    def _choose_options(self, q: torch.Tensor, epsilon: float) -> torch.Tensor:
        greedy = q.argmax(-1)
        explore = torch.rand(len(q), generator=self.generator, device=q.device) < epsilon
        random = torch.randint(
            self.config.num_options, (len(q),), generator=self.generator, device=q.device
        )
        return torch.where(explore, random, greedy)

    def _step_options(
        self,
        q: torch.Tensor,
        beta: torch.Tensor,
        options: torch.Tensor | None,
        epsilon: float,
        deterministic: bool,
    ) -> torch.Tensor:
        """Keep each option unless it terminates (sampled from beta; beta > 0.5 when deterministic)."""
        fresh = self._choose_options(q, 0.0 if deterministic else epsilon)
        if options is None:
            return fresh
        b = _pick(beta, options)
        stop = (
            b > 0.5
            if deterministic
            else torch.rand(len(b), generator=self.generator, device=b.device) < b
        )
        return torch.where(stop, fresh, options)

    def _act_batch(
        self, batch: dict[str, np.ndarray], mask: np.ndarray | None, deterministic: bool
    ) -> np.ndarray:
        n = len(next(iter(batch.values())))
        with torch.inference_mode():
            q, beta, logits = self.net(to_tensors(batch, self.device))
            previous = (
                None
                if self._options is None or len(self._options) != n
                else torch.as_tensor(self._options, device=self.device)
            )
            options = self._step_options(q, beta, previous, self.epsilon, deterministic)
            dist = Categorical(
                _pick(logits, options),
                None if mask is None else torch.as_tensor(mask, device=self.device),
            )
            actions = dist.mode() if deterministic else dist.sample(self.generator)
        self._options = options.cpu().numpy()
        return self.env_actions(actions.cpu().numpy())

    # -- learning -----------------------------------------------------------------------------
    def _learn(
        self, env: Any, total_steps: int, *, callbacks: Sequence[Callback] = ()
    ) -> OptionCritic:
        """Train for ``total_steps`` env steps (rounded up to whole rollouts).

        Args:
            env: an env id, a ``gymnasium.Env`` or a ``VectorEnv`` (:func:`~verigym.agents.common.vec.vector_env`).
            total_steps: env steps over all envs.
            callbacks: called after each ``log_interval`` rollouts with the metrics; False stops.

        Returns:
            self.
        """
        cfg = self.config
        pool = vector_env(env, cfg.num_envs)
        n, t_max = pool.num_envs, cfg.num_steps
        num_updates = max(1, -(-total_steps // (n * t_max)))
        obs_list, infos = pool.reset(seed=cfg.seed)
        batch = self.batcher(obs_list)
        with torch.no_grad():
            q, beta, logits = self.net(to_tensors(batch, self.device))
        options = self._choose_options(q, cfg.option_eps_initial)
        start, start_step = time.perf_counter(), self.global_step
        decay = max(cfg.exploration_fraction * total_steps, 1.0)
        switches = 0
        try:
            for update in range(num_updates):
                obs_buf, opt_buf, act_buf, rew_buf, done_buf, mask_buf = [], [], [], [], [], []
                if update:  # the weights changed: the policy of the first step is the updated one
                    with torch.no_grad():
                        q, beta, logits = self.net(to_tensors(batch, self.device))
                for _ in range(t_max):
                    self.epsilon = cfg.option_eps_initial + min(
                        (self.global_step - start_step) / decay, 1.0
                    ) * (cfg.option_eps_final - cfg.option_eps_initial)
                    mask = action_masks(infos)
                    with torch.no_grad():
                        dist = Categorical(
                            _pick(logits, options),
                            None if mask is None else torch.as_tensor(mask, device=self.device),
                        )
                        actions = dist.sample(self.generator)
                    obs_list, rewards, terminated, truncated, infos = pool.step(
                        self.env_actions(actions.cpu().numpy())
                    )
                    finals = final_observations(infos, n)
                    done = terminated | truncated
                    next_batch = self.batcher(
                        obs_list
                    )  # where an episode ended: the first obs of the next one
                    rewards = rewards.astype(np.float32)
                    with torch.no_grad():
                        # one forward of s_{t+1} gives the termination/choice of the next option and the next policy
                        q, beta, logits = self.net(to_tensors(next_batch, self.device))
                        trunc_only = np.flatnonzero(truncated & ~terminated)
                        if len(
                            trunc_only
                        ):  # time limit: bootstrap from U(s_last, o_t) of the true last obs
                            q_last, beta_last, _ = self.net(
                                to_tensors(
                                    self.batcher([finals[i] for i in trunc_only]), self.device
                                )
                            )
                            o = options[torch.as_tensor(trunc_only, device=self.device)]
                            b = _pick(beta_last, o)
                            u = (1 - b) * _pick(q_last, o) + b * q_last.max(-1).values
                            rewards[trunc_only] += cfg.gamma * u.cpu().numpy()
                        new_options = self._step_options(q, beta, options, self.epsilon, False)
                        if done.any():  # a new episode starts with a fresh option
                            ended = torch.as_tensor(done, device=self.device)
                            new_options = torch.where(
                                ended, self._choose_options(q, self.epsilon), new_options
                            )
                    switches += int((new_options != options).sum())
                    obs_buf.append(batch)
                    opt_buf.append(options)
                    act_buf.append(actions)
                    rew_buf.append(rewards)
                    done_buf.append(done.astype(np.float32))
                    mask_buf.append(mask)
                    batch, options = next_batch, new_options
                    self.global_step += n
                losses = self._update(
                    obs_buf, opt_buf, act_buf, rew_buf, done_buf, mask_buf, batch, options
                )
                if (update + 1) % cfg.log_interval == 0 or update == num_updates - 1:
                    elapsed = max(time.perf_counter() - start, 1e-9)
                    metrics = {
                        "global_step": float(self.global_step),
                        "charts/SPS": (self.global_step - start_step) / elapsed,
                        "charts/option_epsilon": self.epsilon,
                        "charts/option_switches": float(switches),
                    }
                    switches = 0
                    if not emit(callbacks, metrics | episode_metrics(pool.pop_episodes()) | losses):
                        break
        finally:
            if pool is not env and pool.unwrapped is not env:
                pool.close()
        return self

    def _update(
        self,
        obs_buf: list,
        opt_buf: list,
        act_buf: list,
        rew_buf: list,
        done_buf: list,
        mask_buf: list,
        last_batch: dict[str, np.ndarray],
        last_options: torch.Tensor,
    ) -> dict[str, float]:
        """One gradient step on a rollout of ``T`` steps of ``N`` envs.

        Args:
            obs_buf: ``T`` batches of ``s_t``; ``last_batch`` is ``s_T``.
            opt_buf: ``T`` options ``o_t`` (``int64 (N,)``); ``last_options``: ``o_T`` (after the
                termination at ``s_T``, as A2OC's bootstrap).
            act_buf: ``T`` actions (``int64 (N,)``); ``rew_buf``/``done_buf``: ``T`` ``float32 (N,)``
                (truncation bootstraps already folded into the rewards); ``mask_buf``: ``T`` action
                masks ``(N, A)`` or None.

        ``s_{t+1}`` of a step that did not end an episode is ``obs_buf[t + 1]`` (or ``last_batch``),
        so one forward pass over ``T + 1`` batches gives the critic and policy terms at ``s_t`` and
        the termination term at ``s_{t+1}``; steps that ended an episode have no termination term.
        """
        cfg = self.config
        t_max, n = len(obs_buf), len(rew_buf[0])
        rewards = torch.as_tensor(np.stack(rew_buf), device=self.device)
        dones = torch.as_tensor(np.stack(done_buf), device=self.device)
        obs = to_tensors(
            {k: np.concatenate([b[k] for b in obs_buf] + [last_batch[k]]) for k in obs_buf[0]},
            self.device,
        )
        options = torch.cat(opt_buf)
        actions = torch.cat(act_buf)
        masks = (
            None
            if any(m is None for m in mask_buf)
            else torch.as_tensor(np.concatenate(mask_buf), device=self.device)
        )
        q_all, beta_all, logits_all = self.net(obs)
        with torch.no_grad():
            b = _pick(beta_all[t_max * n :], last_options)
            q_last = q_all[t_max * n :]
            running = (1 - b) * _pick(q_last, last_options) + b * q_last.max(-1).values
            returns = torch.zeros(t_max, n, device=self.device)
            for t in reversed(range(t_max)):
                running = rewards[t] + cfg.gamma * (1 - dones[t]) * running
                returns[t] = running
            returns = returns.reshape(-1)
        q_o = _pick(q_all[: t_max * n], options)
        advantage = (returns - q_o).detach()
        dist = Categorical(_pick(logits_all[: t_max * n], options), masks)
        policy_loss = -(dist.log_prob(actions) * advantage).mean()
        entropy = dist.entropy().mean()
        critic_loss = 0.5 * ((returns - q_o) ** 2).mean()
        beta_next = _pick(beta_all[n:], options)  # beta(s_{t+1}, o_t)
        with torch.no_grad():
            q_next = q_all[n:]
            option_advantage = _pick(q_next, options) - q_next.max(-1).values + cfg.termination_reg
        termination_loss = (beta_next * option_advantage * (1 - dones.reshape(-1))).mean()
        loss = policy_loss - cfg.ent_coef * entropy + cfg.vf_coef * critic_loss + termination_loss
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.net.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        return {
            "losses/policy_loss": float(policy_loss.detach()),
            "losses/critic_loss": float(critic_loss.detach()),
            "losses/termination_loss": float(termination_loss.detach()),
            "losses/entropy": float(entropy.detach()),
            "charts/termination_prob": float(beta_next.detach().mean()),
        }

    # -- persistence --------------------------------------------------------------------------
    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {f"net.{k}": v for k, v in self.net.state_dict().items()}

    def load_state_tensors(self, tensors: Mapping[str, torch.Tensor]) -> None:
        self.net.load_state_dict({k[4:]: v for k, v in tensors.items() if k.startswith("net.")})
