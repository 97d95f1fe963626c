"""Independent and parameter-shared PPO for PettingZoo parallel games.

Independent PPO (IPPO; de Witt et al. 2020, "Is Independent Learning All You Need in the StarCraft
Multi-Agent Challenge?"): every agent learns with PPO (:mod:`verigym.agents.ppo`) from its own
observations and rewards, the other agents being part of its environment. By default the agents
share one network trained on all their transitions (parameter sharing; Gupta et al. 2017,
"Cooperative Multi-Agent Control Using Deep Reinforcement Learning"), optionally told apart by a
one-hot agent id (Terry et al. 2020, "Revisiting Parameter Sharing in Multi-Agent Deep
Reinforcement Learning"); with ``share_parameters=False`` each agent has its own networks and
optimizer. Either way the agents step the same ``num_envs`` copies of the game together
(:class:`~verigym.agents.common.vec.ParallelEnvPool`), and an agent that finishes early (caught in
Tag) adds no transitions until its game restarts.

Every PPO option applies to each policy; ``num_envs`` counts copies of the game, so a rollout is
``num_envs * num_agents * num_steps`` agent transitions, and ``global_step`` counts agent
transitions (as SuperSuit's vector wrapper does for Stable-Baselines3). Parameter sharing needs
equal observation and action spaces.

Example:
    >>> agent = verigym.agents.make("ippo", "verigym/Spread-v0", num_envs=4)   # doctest: +SKIP
    >>> agent.learn("verigym/Spread-v0", 200_000)                              # doctest: +SKIP
    >>> actions = agent.act(observations, infos)   # {agent: action} for the agents given
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from verigym.agents.common.learner import Callback, TorchLearner
from verigym.agents.common.vec import (
    ParallelEnvPool,
    add_agent_id,
    agent_id_space,
    is_parallel_env,
    make_env,
)
from verigym.agents.configs import IPPOConfig
from verigym.agents.ppo import PPO, PPOConfig, train

__all__ = ["IPPO", "IPPOConfig"]


SHARED = "shared"
"""The key of the one policy under parameter sharing."""


class IPPO(TorchLearner):
    """Independent / parameter-shared PPO (see the module doc). Build with
    ``verigym.agents.make("ippo", env, **options)`` on a PettingZoo parallel env or its id.

    ``observation_space`` and ``action_space`` are ``Dict`` spaces keyed by agent name.
    """

    name = "ippo"
    config_class = IPPOConfig
    config: IPPOConfig

    @classmethod
    def from_env(cls, env: str | Any, **config: Any) -> IPPO:
        """Build for a parallel env (an instance, its id or a pool) with ``config`` overrides.

        Raises:
            TypeError: unknown option or wrong type. ValueError: out-of-range option, an env that
            is not a PettingZoo ``ParallelEnv``, or sharing across agents with different spaces.
        """
        if env is None:
            raise ValueError(
                "ippo needs a PettingZoo parallel env (or its id) to build its networks"
            )
        cfg = IPPOConfig.from_dict(config)
        probe = env.envs[0] if isinstance(env, ParallelEnvPool) else make_env(env)
        if not is_parallel_env(probe):
            raise ValueError(
                f"ippo trains on PettingZoo parallel envs (e.g. verigym/Spread-v0), not {env!r}; use ppo for a single-agent env"
            )
        agents = list(probe.possible_agents)
        observation_space = spaces.Dict({a: probe.observation_space(a) for a in agents})
        action_space = spaces.Dict({a: probe.action_space(a) for a in agents})
        return cls(
            observation_space, action_space, cfg, env_id=env if isinstance(env, str) else None
        )

    def _build(self) -> None:
        cfg = self.config
        self.agents = sorted(self.observation_space.spaces)  # the one-hot order of agent_indicator
        base = PPOConfig.from_dict(
            {f.name: getattr(cfg, f.name) for f in dataclasses.fields(PPOConfig)}
        )
        observations, actions = self.observation_space.spaces, self.action_space.spaces
        if cfg.share_parameters:
            first = self.agents[0]
            if any(
                observations[a] != observations[first] or actions[a] != actions[first]
                for a in self.agents
            ):
                raise ValueError(
                    "share_parameters needs agents with equal observation and action spaces; use share_parameters=False"
                )
            space = (
                agent_id_space(observations[first], len(self.agents))
                if cfg.agent_indicator
                else observations[first]
            )
            self.policies = {SHARED: PPO(space, actions[first], base)}
        else:
            self.policies = {
                a: PPO(observations[a], actions[a], base.replace(seed=cfg.seed + i))
                for i, a in enumerate(self.agents)
            }

    def _key(self, agent: str) -> str:
        if agent not in self.observation_space.spaces:
            raise KeyError(f"unknown agent {agent!r}; the agents are {self.agents}")
        return SHARED if SHARED in self.policies else agent

    # -- acting -------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None) -> None:
        for policy in self.policies.values():
            policy.reset(seed=seed)

    def act(
        self,
        obs: Mapping[str, Any],
        info: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        deterministic: bool = False,
    ) -> dict[str, Any]:
        """The actions of the agents in ``obs``.

        Args:
            obs: ``{agent: observation}`` as a PettingZoo parallel env returns it.
            info: ``{agent: info}``; ``info[agent]["action_mask"]`` restricts discrete actions.
            deterministic: the mode of each policy instead of a sample.

        Returns:
            ``{agent: action}`` for every agent of ``obs``.

        Raises:
            TypeError: ``obs`` is not a mapping. KeyError: an unknown agent.
        """
        if not isinstance(obs, Mapping):
            raise TypeError(f"IPPO.act takes {{agent: observation}}, got {type(obs).__name__}")
        info = info or {}
        groups: dict[str, list[str]] = {}
        for agent in obs:
            groups.setdefault(self._key(agent), []).append(agent)
        actions: dict[str, Any] = {}
        for key, members in groups.items():
            observations = [self._observation(a, obs[a]) for a in members]
            chosen = self.policies[key].act(
                observations, [info.get(a) or {} for a in members], deterministic=deterministic
            )
            actions.update(zip(members, chosen))
        return actions

    def _observation(self, agent: str, observation: Any) -> Any:
        if self.config.agent_indicator:
            return add_agent_id(observation, self.agents.index(agent), len(self.agents))
        return observation

    # -- learning -----------------------------------------------------------------------------
    def _learn(self, env: Any, total_steps: int, *, callbacks: Sequence[Callback] = ()) -> IPPO:
        """Train every policy for ``total_steps`` agent transitions (rounded up to rollouts).

        Args:
            env: a parallel env id, a PettingZoo ``ParallelEnv`` (deep-copied into ``num_envs``
                copies) or a :class:`~verigym.agents.common.vec.ParallelEnvPool`.
            total_steps: agent transitions over all copies and agents.
            callbacks: as :meth:`PPO.learn` (losses averaged over the policies).

        Returns:
            self.

        Raises:
            ValueError: the env's agents are not those this agent was built for.
        """
        cfg = self.config
        pool = ParallelEnvPool.build(env, cfg.num_envs, agent_indicator=cfg.agent_indicator)
        try:
            if sorted(pool.agents) != self.agents:
                raise ValueError(
                    f"this agent was built for agents {self.agents}, the env has {pool.agents}"
                )
            if pool.agent_indicator != cfg.agent_indicator:
                raise ValueError(
                    f"the pool's agent_indicator={pool.agent_indicator} differs from the config's {cfg.agent_indicator}"
                )
            if SHARED in self.policies:
                groups = [(self.policies[SHARED], np.arange(pool.num_envs))]
            else:
                groups = [(self.policies[a], pool.slots(a)) for a in self.agents]
            train(groups, pool, total_steps, callbacks, owner=self)
        finally:
            if pool is not env:
                pool.close()
        return self

    # -- persistence --------------------------------------------------------------------------
    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {
            f"{key}/{name}": tensor
            for key, policy in self.policies.items()
            for name, tensor in policy.state_tensors().items()
        }

    def load_state_tensors(self, tensors: Mapping[str, torch.Tensor]) -> None:
        for key, policy in self.policies.items():
            prefix = f"{key}/"
            policy.load_state_tensors(
                {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
            )
