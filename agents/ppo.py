"""Proximal Policy Optimization (Schulman et al. 2017, "Proximal Policy Optimization Algorithms").

Clipped surrogate objective with the implementation details of Engstrom et al. 2020 and Huang et
al. 2022 ("The 37 Implementation Details of PPO"): vector envs, GAE (Schulman et al. 2016),
per-minibatch advantage normalization, optional value clipping, orthogonal init, Adam eps 1e-5,
global gradient clipping, optional linear annealing of the learning rate and the clip range,
observation and reward normalization (running statistics), bootstrapping at time-limit truncation
(the final observation's value is added to the reward, as Stable-Baselines3 does) and
``info["action_mask"]`` for discrete actions.

Acting (rollouts, bootstraps, ``act``) runs under ``torch.inference_mode``; only the update
records autograd. Envs are stepped as a Gymnasium ``VectorEnv``
(:func:`verigym.agents.common.vec.vector_env`): an env id that the registry gives a natively
batched engine (:func:`verigym.registration.native_vector`; the grid tasks) is stepped through
it by default (``batched_env``), the same episodes as ``num_envs`` single envs seeded
``seed + i``, stepped as arrays.

Symbolic grid observations go through the ``encoder`` option's network: ``mlp`` (the default:
the flattened one-hot grid, one linear layer) or ``cnn`` (a cell embedding and two
convolutions); docs/benchmarks.md compares them.

Supports observations of any kind :class:`~verigym.agents.common.spaces.ObservationBatcher`
handles (vectors, symbolic grids, images, text, ``Dict`` of those) and ``Discrete``,
``MultiDiscrete`` and ``Box`` actions.

Example:
    >>> agent = verigym.agents.make("ppo", "CartPole-v1", num_envs=8)  # doctest: +SKIP
    >>> agent.learn("CartPole-v1", 100_000)                               # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from verigym.agents.common.buffers import RunningMeanStd, gae
from verigym.agents.common.distributions import Categorical, DiagGaussian, MultiCategorical
from verigym.agents.common.learner import Callback, TorchLearner, emit, episode_metrics
from verigym.agents.common.networks import ObservationEncoder, adam, mlp, to_tensors
from verigym.agents.common.vec import action_masks, final_observations, vector_env
from verigym.agents.configs import PPOConfig

__all__ = ["PPO", "PPOConfig", "train"]


class ActorCritic(nn.Module):
    """Shared observation encoder; separate actor and critic MLPs."""

    def __init__(self, parts: Sequence[Any], action_space: spaces.Space, config: PPOConfig):
        super().__init__()
        self.encoder = ObservationEncoder(parts, grid=config.encoder)
        if isinstance(action_space, spaces.Discrete):
            self.kind, out = "discrete", int(action_space.n)
        elif isinstance(action_space, spaces.MultiDiscrete):
            self.kind, out = "multi", int(action_space.nvec.sum())
            self.nvec = [int(v) for v in action_space.nvec.ravel()]
        elif isinstance(action_space, spaces.Box):
            self.kind, out = "box", int(np.prod(action_space.shape))
            self.log_std = nn.Parameter(torch.full((out,), config.log_std_init))
        else:
            raise TypeError(
                f"PPO supports Discrete, MultiDiscrete and Box actions, not {action_space!r}"
            )
        self.actor = mlp(
            self.encoder.out_dim, config.hidden_sizes, out, config.activation, out_gain=0.01
        )
        self.critic = mlp(
            self.encoder.out_dim, config.hidden_sizes, 1, config.activation, out_gain=1.0
        )

    def dist(self, features: torch.Tensor, mask: torch.Tensor | None) -> Any:
        out = self.actor(features)
        if self.kind == "discrete":
            return Categorical(out, mask)
        if self.kind == "multi":
            return MultiCategorical(out, self.nvec, mask)
        return DiagGaussian(out, self.log_std)

    def value(self, features: torch.Tensor) -> torch.Tensor:
        return self.critic(features).squeeze(-1)


class PPO(TorchLearner):
    """PPO agent (see the module doc). Build with ``verigym.agents.make("ppo", env, **options)``;
    options are the fields of :class:`PPOConfig`."""

    name = "ppo"
    config_class = PPOConfig
    config: PPOConfig

    def _build(self) -> None:
        self.policy = ActorCritic(self.batcher.parts, self.action_space, self.config).to(
            self.device
        )
        self.optimizer = adam(self.policy.parameters(), self.config.learning_rate, eps=1e-5)
        self.obs_rms = (
            {p.key: RunningMeanStd(p.shape or ()) for p in self.batcher.parts if p.kind == "vector"}
            if self.config.normalize_observation
            else {}
        )
        self.return_rms = RunningMeanStd(())

    # -- acting -------------------------------------------------------------------------------
    def normalize(
        self, batch: dict[str, np.ndarray], update: bool = False
    ) -> dict[str, np.ndarray]:
        """``batch`` (the batcher's arrays by key) with its vector parts normalized by the running
        statistics (``normalize_observation``; clipped to +-10), float32, same shapes; ``update``
        first folds the batch into the statistics. Returns ``batch`` itself when the option is
        off."""
        if not self.obs_rms:
            return batch
        batch = dict(batch)
        for key, rms in self.obs_rms.items():
            if update:
                rms.update(batch[key])
            batch[key] = rms.normalize(batch[key])
        return batch

    def _act_batch(
        self, batch: dict[str, np.ndarray], mask: np.ndarray | None, deterministic: bool
    ) -> np.ndarray:
        with torch.inference_mode():
            features = self.policy.encoder(to_tensors(self.normalize(batch), self.device))
            dist = self.policy.dist(
                features, None if mask is None else torch.as_tensor(mask, device=self.device)
            )
            actions = dist.mode() if deterministic else dist.sample(self.generator)
        return self.env_actions(actions.cpu().numpy())

    # -- learning -----------------------------------------------------------------------------
    def _learn(self, env: Any, total_steps: int, *, callbacks: Sequence[Callback] = ()) -> PPO:
        """Train for ``total_steps`` env steps (rounded up to whole rollouts).

        Args:
            env: an env id (stepped through its batched engine when the registry has one and
                ``batched_env`` is on), a ``gymnasium.Env`` (copied into ``num_envs`` envs), a
                ``VectorEnv`` with ``SAME_STEP`` autoreset (an
                :class:`~verigym.agents.common.vec.EnvPool`, say) or a
                :class:`~verigym.agents.common.vec.ParallelEnvPool` (one policy for every agent);
                see :func:`~verigym.agents.common.vec.vector_env`.
            total_steps: env steps over all envs.
            callbacks: called after each ``log_interval`` rollouts with the metrics
                (``global_step``, ``charts/*``, ``losses/*``); returning False stops.

        Returns:
            self.
        """
        envs = vector_env(env, self.config.num_envs, native=self.config.batched_env)
        try:
            train([(self, np.arange(envs.num_envs))], envs, total_steps, callbacks)
        finally:
            if envs is not env and envs.unwrapped is not env:
                envs.close()
        return self

    def update(self, data: dict[str, Any], clip: float) -> dict[str, float]:
        """One PPO update: ``num_epochs`` passes of clipped-surrogate minibatch steps over a
        rollout (stopped early past ``target_kl``).

        Args:
            data: the rollout as tensors on :attr:`device`, time-major and flat over
                ``T * N`` transitions: ``obs`` (the batcher's keys), ``actions``, ``log_probs``
                (float32), ``values``, ``advantages``, ``returns`` (float32), ``masks``
                (``int8 (T*N, n)`` or None) and ``valid`` (``bool (T*N,)``, or None when every
                transition carries loss).
            clip: the surrogate (and value) clip range this update.

        Returns:
            the mean over minibatches of ``losses/policy_loss``, ``losses/value_loss``,
            ``losses/entropy``, ``losses/approx_kl`` and ``losses/clipfrac`` (empty when no
            transition carried loss).
        """
        cfg = self.config
        valid = data["valid"]  # transitions of inactive multi-agent slots carry no loss
        total = len(data["advantages"]) if valid is None else int(valid.sum())
        names = (
            "losses/policy_loss",
            "losses/value_loss",
            "losses/entropy",
            "losses/approx_kl",
            "losses/clipfrac",
        )
        stats: list[
            torch.Tensor
        ] = []  # one row per minibatch, read back once (no device sync per step)
        # the optimizer's list, not policy.parameters(): walking the modules each step was ~4% of
        # a CartPole run's CPU time (rl-zoo's 20 epochs)
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        for _ in range(cfg.num_epochs):
            order = torch.randperm(total, generator=self.generator, device=self.device)
            if valid is not None:
                order = torch.nonzero(valid).squeeze(1)[order]
            stop = False
            for begin in range(0, total, cfg.batch_size):
                idx = order[begin : begin + cfg.batch_size]
                features = self.policy.encoder({k: v[idx] for k, v in data["obs"].items()})
                dist = self.policy.dist(
                    features, None if data["masks"] is None else data["masks"][idx]
                )
                new_logp = dist.log_prob(data["actions"][idx])
                entropy = dist.entropy().mean()
                value = self.policy.value(features)
                log_ratio = new_logp - data["log_probs"][idx]
                ratio = log_ratio.exp()
                adv = data["advantages"][idx]
                if cfg.norm_adv and len(idx) > 1:
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                policy_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip)).mean()
                returns = data["returns"][idx]
                # SB3's value loss, the mean squared error (CleanRL halves it: its vf_coef 0.5 is
                # vf_coef 0.25 here); rl-zoo's settings are tuned with it
                if cfg.clip_vloss:
                    old = data["values"][idx]
                    clipped = old + (value - old).clamp(-clip, clip)
                    value_loss = torch.max((value - returns) ** 2, (clipped - returns) ** 2).mean()
                else:
                    value_loss = ((value - returns) ** 2).mean()
                loss = policy_loss - cfg.ent_coef * entropy + cfg.vf_coef * value_loss
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
                self.optimizer.step()
                with torch.no_grad():
                    approx_kl = ((ratio - 1) - log_ratio).mean()
                    clipfrac = ((ratio - 1).abs() > clip).float().mean()
                    stats.append(
                        torch.stack([policy_loss, value_loss, entropy, approx_kl, clipfrac])
                    )
                if cfg.target_kl is not None and approx_kl.item() > 1.5 * cfg.target_kl:
                    stop = True
                    break
            if stop:
                break
        return dict(zip(names, torch.stack(stats).mean(0).tolist())) if stats else {}

    # -- persistence --------------------------------------------------------------------------
    def state_tensors(self) -> dict[str, torch.Tensor]:
        tensors = {f"policy.{k}": v for k, v in self.policy.state_dict().items()}
        for key, rms in self.obs_rms.items():
            for name, value in rms.state().items():
                tensors[f"obs_rms.{key or 'obs'}.{name}"] = torch.as_tensor(value)
        return tensors

    def load_state_tensors(self, tensors: Mapping[str, torch.Tensor]) -> None:
        grid_keys = [k for k in tensors if k.startswith("policy.encoder.encoders.")]
        if grid_keys:  # checkpoints saved before the encoder option hold the CNN
            saved = "cnn" if any(".conv." in k for k in grid_keys) else "mlp"
            if saved != self.config.encoder:
                self.config = self.config.replace(encoder=saved)
                with torch.random.fork_rng(devices=[]):
                    self._build()
        self.policy.load_state_dict(
            {k[len("policy.") :]: v for k, v in tensors.items() if k.startswith("policy.")}
        )
        for key, rms in self.obs_rms.items():
            prefix = f"obs_rms.{key or 'obs'}."
            rms.load_state(
                {name: tensors[prefix + name].cpu().numpy() for name in ("mean", "var", "count")}
            )


class _Rollout:
    """One learner's share of a rollout: the transitions of its slots, step by step."""

    def __init__(self) -> None:
        self.obs: list[dict[str, np.ndarray]] = []
        self.actions: list[np.ndarray] = []
        self.log_probs: list[np.ndarray] = []
        self.values: list[np.ndarray] = []
        self.rewards: list[np.ndarray] = []
        self.dones: list[np.ndarray] = []
        self.masks: list[np.ndarray | None] = []
        self.valid: list[np.ndarray] = []

    def data(self, learner: PPO, advantages: np.ndarray, returns: np.ndarray) -> dict[str, Any]:
        """The rollout as flat tensors on the learner's device (time-major order)."""
        device = learner.device

        def flat(items: list[np.ndarray]) -> torch.Tensor:
            return torch.as_tensor(np.concatenate(items), device=device)

        return {
            "obs": {k: flat([b[k] for b in self.obs]) for k in self.obs[0]},
            "actions": flat(self.actions),
            "log_probs": flat(self.log_probs),
            "values": flat(self.values),
            "advantages": torch.as_tensor(advantages.reshape(-1), device=device),
            "returns": torch.as_tensor(returns.reshape(-1), device=device),
            "masks": None if self.masks[0] is None else flat(self.masks),
            "valid": None
            if not self.valid or all(v.all() for v in self.valid)
            else flat(self.valid),
        }


def train(
    groups: Sequence[tuple[PPO, np.ndarray]],
    pool: Any,
    total_steps: int,
    callbacks: Sequence[Callback] = (),
    *,
    owner: Any = None,
) -> None:
    """The PPO loop over a pool whose slots are split among learners.

    One learner over every slot is plain PPO; one learner per agent of a
    :class:`~verigym.agents.common.vec.ParallelEnvPool` is independent PPO (each agent its own
    networks and update, stepping the same games). Hyperparameters come from the first learner.

    Args:
        groups: ``(learner, slots)`` pairs; ``slots`` int array of the pool slots it acts for.
        pool: a vector env of :func:`~verigym.agents.common.vec.vector_env` (``SAME_STEP``
            autoreset, ``pop_episodes``) or a :class:`ParallelEnvPool` (its ``active`` slots
            select the transitions that carry loss).
        total_steps: env steps over all slots (rounded up to whole rollouts).
        callbacks: as :meth:`PPO.learn`; losses average over the learners.
        owner: whose ``global_step`` counts the env steps (default: the first learner).
    """
    owner = groups[0][0] if owner is None else owner
    cfg = groups[0][0].config
    n, t_max = pool.num_envs, cfg.num_steps
    num_updates = max(1, -(-total_steps // (n * t_max)))
    active = getattr(pool, "active", None)
    obs_list, infos = pool.reset(seed=cfg.seed)
    done = np.zeros(n, dtype=np.float32)
    disc_return = np.zeros(n)
    start, start_step = time.perf_counter(), owner.global_step
    rollout_seconds = update_seconds = 0.0  # since the start, for the split steps/s
    single = len(groups) == 1 and len(groups[0][1]) == n
    for update in range(num_updates):
        # SB3's schedule: the progress remaining after this update's rollout, 1 - steps collected /
        # total_steps (so the last update of a run gets 0), one rollout further than CleanRL's
        frac = max(0.0, 1.0 - (update + 1) * n * t_max / total_steps)
        clip = cfg.clip_coef * (frac if cfg.anneal_clip else 1.0)
        rollouts = [_Rollout() for _ in groups]
        for learner, _ in groups:
            if cfg.anneal_lr:
                learner.optimizer.param_groups[0]["lr"] = frac * cfg.learning_rate
        rollout_start = time.perf_counter()
        for _ in range(t_max):
            actions: list[Any] = [None] * n
            for (learner, slots), rollout in zip(groups, rollouts):
                batch = learner.normalize(learner.batcher(_rows(obs_list, slots, n)), update=True)
                mask = None
                if learner.policy.kind != "box":
                    masks = action_masks(infos)
                    mask = None if masks is None else masks if single else masks[slots]
                with torch.inference_mode():
                    features = learner.policy.encoder(to_tensors(batch, learner.device))
                    dist = learner.policy.dist(
                        features,
                        None if mask is None else torch.as_tensor(mask, device=learner.device),
                    )
                    action = dist.sample(learner.generator)
                    rollout.log_probs.append(dist.log_prob(action).cpu().numpy())
                    rollout.values.append(learner.policy.value(features).cpu().numpy())
                action_np = action.cpu().numpy()
                env_actions = learner.env_actions(action_np)
                if single:
                    actions = env_actions
                else:
                    for j, s in enumerate(slots):
                        actions[s] = env_actions[j]
                rollout.obs.append(batch)
                rollout.actions.append(action_np)
                rollout.masks.append(mask)
                rollout.dones.append(done[slots])
                if active is not None:
                    rollout.valid.append(active[slots].copy())
            obs_list, reward, terminated, truncated, infos = pool.step(actions)
            reward = np.asarray(reward, dtype=np.float32)
            ended = terminated | truncated
            for (learner, slots), rollout in zip(groups, rollouts):
                r = reward[slots]
                if cfg.normalize_reward:
                    disc_return[slots] = disc_return[slots] * cfg.gamma + r
                    learner.return_rms.update(disc_return[slots])
                    r = np.clip(r / np.sqrt(learner.return_rms.var + 1e-8), -10, 10).astype(
                        np.float32
                    )
                trunc_only = [j for j, s in enumerate(slots) if truncated[s] and not terminated[s]]
                if trunc_only:
                    finals = final_observations(infos, n)
                    final = learner.normalize(
                        learner.batcher([finals[slots[j]] for j in trunc_only])
                    )
                    with torch.inference_mode():
                        boot = (
                            learner.policy.value(
                                learner.policy.encoder(to_tensors(final, learner.device))
                            )
                            .cpu()
                            .numpy()
                        )
                    r[trunc_only] += cfg.gamma * boot
                rollout.rewards.append(r)
            owner.global_step += n
            disc_return[ended] = 0.0
            done = ended.astype(np.float32)
        update_start = time.perf_counter()
        rollout_seconds += update_start - rollout_start
        losses: dict[str, list[float]] = {}
        for (learner, slots), rollout in zip(groups, rollouts):
            with torch.inference_mode():
                batch = learner.normalize(learner.batcher(_rows(obs_list, slots, n)))
                last_value = (
                    learner.policy.value(learner.policy.encoder(to_tensors(batch, learner.device)))
                    .cpu()
                    .numpy()
                )
            advantages, returns = gae(
                np.stack(rollout.rewards),
                np.stack(rollout.values),
                np.stack(rollout.dones),
                last_value,
                done[slots],
                cfg.gamma,
                cfg.gae_lambda,
            )
            for key, value in learner.update(
                rollout.data(learner, advantages, returns), clip
            ).items():
                losses.setdefault(key, []).append(value)
        update_seconds += time.perf_counter() - update_start
        if (update + 1) % cfg.log_interval == 0 or update == num_updates - 1:
            elapsed = max(time.perf_counter() - start, 1e-9)
            done_steps = owner.global_step - start_step
            metrics = {
                "global_step": float(owner.global_step),
                "charts/SPS": done_steps / elapsed,
                # the two phases apart: env steps per second of acting + stepping, and of updating
                "charts/rollout_SPS": done_steps / max(rollout_seconds, 1e-9),
                "charts/update_SPS": done_steps / max(update_seconds, 1e-9),
                "charts/learning_rate": groups[0][0].optimizer.param_groups[0]["lr"],
            }
            metrics |= episode_metrics(pool.pop_episodes()) | {
                k: float(np.mean(v)) for k, v in losses.items()
            }
            if not emit(callbacks, metrics):
                break


def _rows(observations: Any, slots: np.ndarray, n: int) -> Any:
    """The observations of ``slots``: the batch itself when ``slots`` is every slot in order (a
    learner over a whole vector env), else a list or array rows (the slots of a
    :class:`~verigym.agents.common.vec.ParallelEnvPool`)."""
    if len(slots) == n and bool((slots == np.arange(n)).all()):
        return observations
    if isinstance(observations, np.ndarray):
        return observations[slots]
    return [observations[s] for s in slots]
