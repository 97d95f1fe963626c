"""Light synchronous pools of envs with same-step autoreset and episode statistics.

Gymnasium's ``SyncVectorEnv`` merges every ``info`` dict into arrays on every step; the learners
only need per-env infos (for ``info["action_mask"]``), the final observation of an episode that
ended (to bootstrap on time-limit truncation) and each finished episode's return, length and
verdict. :class:`EnvPool` does just that, with one Python loop over the envs.

:class:`ParallelEnvPool` gives copies of a PettingZoo ``ParallelEnv`` the same interface, one
*slot* per agent and copy (the layout of SuperSuit's ``pettingzoo_env_to_vec_env_v1``, which
Stable-Baselines3 users train parameter-shared policies with), so the learners run unchanged on
multi-agent games.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from verigym.core import ACTION_MASK, SCORE, SUCCESS

__all__ = [
    "EnvPool",
    "ParallelEnvPool",
    "add_agent_id",
    "agent_id_space",
    "is_parallel_env",
    "make_env",
]


def make_env(env: str | Any) -> Any:
    """Make the env of an id, else return ``env`` itself.

    ``gym.make(env)`` for Gymnasium ids; a verigym id registered with PettingZoo's parallel API
    (``verigym/Spread-v0``) gives that ``ParallelEnv``.

    Raises:
        ValueError: ``env`` is a turn-based (AEC) PettingZoo id, which no learner steps directly.
    """
    if not isinstance(env, str):
        return env
    import verigym  # noqa: F401  (registers verigym/... ids)
    from verigym import registration

    if env in gym.registry:
        return gym.make(env)
    try:  # verigym's and plugins' PettingZoo ids are in the registration table
        api = registration.row(env).api
    except KeyError:
        api = "gymnasium"
    if api == "parallel":
        return registration.make(env)
    if api == "aec":
        raise ValueError(
            f"{env} is a turn-based (AEC) game; train on its one-seat Gymnasium view (verigym list --family multiagent) or a parallel env"
        )
    return gym.make(env)


def is_parallel_env(env: Any) -> bool:
    """Whether ``env`` is a PettingZoo ``ParallelEnv`` (possibly wrapped)."""
    from pettingzoo.utils.env import ParallelEnv

    return isinstance(env, ParallelEnv) or isinstance(getattr(env, "unwrapped", None), ParallelEnv)


def agent_id_space(space: spaces.Space, num_agents: int) -> spaces.Dict:
    """``space`` with a one-hot agent id: ``Dict(observation, agent_id)``, or ``agent_id`` added
    to a ``Dict``; ``agent_id`` is ``Box(0, 1, (num_agents,), float32)``."""
    one_hot = spaces.Box(0.0, 1.0, shape=(num_agents,), dtype=np.float32)
    if isinstance(space, spaces.Dict):
        return spaces.Dict({**space.spaces, "agent_id": one_hot})
    return spaces.Dict({"observation": space, "agent_id": one_hot})


def add_agent_id(observation: Any, index: int, num_agents: int) -> dict[str, Any]:
    """An observation of :func:`agent_id_space` for agent number ``index``."""
    one_hot = np.zeros(num_agents, dtype=np.float32)
    one_hot[index] = 1.0
    if isinstance(observation, dict):
        return {**observation, "agent_id": one_hot}
    return {"observation": observation, "agent_id": one_hot}


def _episode(total: float, length: int, info: dict[str, Any]) -> dict[str, float]:
    """A finished episode's statistics: return, length and, when reported, success and score."""
    episode = {"return": float(total), "length": float(length)}
    if SUCCESS in info:
        episode["success"] = float(bool(info[SUCCESS]))
    if SCORE in info:
        episode["score"] = float(info[SCORE])
    return episode


class EnvPool:
    """``num_envs`` envs stepped in turn; an env whose episode ends is reset in the same step.

    Args:
        envs: the envs (same spaces).
        seed: env ``i`` is reset with ``seed + i`` the first time (and its action space seeded).

    Raises:
        ValueError: no envs, or envs with different spaces.
    """

    def __init__(self, envs: Sequence[gym.Env], *, seed: int | None = None):
        if not envs:
            raise ValueError("EnvPool needs at least one env")
        self.envs = list(envs)
        self.observation_space = self.envs[0].observation_space
        self.action_space = self.envs[0].action_space
        for env in self.envs[1:]:
            if (
                env.observation_space != self.observation_space
                or env.action_space != self.action_space
            ):
                raise ValueError(
                    "all envs of a pool must have the same observation and action spaces"
                )
        self.seed = seed
        self.num_envs = len(self.envs)
        self._returns = np.zeros(self.num_envs)
        self._lengths = np.zeros(self.num_envs, dtype=np.int64)
        self._finished: list[dict[str, float]] = []
        self.observations: list[Any] = []
        self.infos: list[dict[str, Any]] = []

    @classmethod
    def build(
        cls, env: str | gym.Env | EnvPool, num_envs: int, *, seed: int | None = None
    ) -> EnvPool:
        """A pool of ``num_envs`` copies of ``env`` (an id, an env, or a pool -- also a
        :class:`ParallelEnvPool` -- returned as is).

        Copies of an env instance are rebuilt from ``env.spec`` (with its recorded wrappers) when it
        has one, else deep-copied (verigym envs pickle).
        """
        if isinstance(env, (EnvPool, ParallelEnvPool)):
            return env
        first = make_env(env)
        envs = [first]
        for _ in range(num_envs - 1):
            if isinstance(env, str):
                envs.append(make_env(env))
            elif first.spec is not None:
                envs.append(gym.make(first.spec))
            else:
                envs.append(copy.deepcopy(first))
        return cls(envs, seed=seed)

    def reset(self) -> tuple[list[Any], list[dict[str, Any]]]:
        """Reset every env (seeded on the first call); returns observations and infos."""
        self.observations, self.infos = [], []
        for i, env in enumerate(self.envs):
            seed = None if self.seed is None else self.seed + i
            if seed is not None:
                env.action_space.seed(seed)
            obs, info = env.reset(seed=seed)
            self.observations.append(obs)
            self.infos.append(info)
        self.seed = None  # later resets continue each env's RNG
        self._returns[:] = 0.0
        self._lengths[:] = 0
        return self.observations, self.infos

    def step(
        self, actions: Sequence[Any]
    ) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]], list[Any]]:
        """Step env ``i`` with ``actions[i]``.

        Returns:
            ``(observations, rewards, terminated, truncated, infos, final_observations)``:
            ``rewards`` float32 ``(num_envs,)``, the flags bool ``(num_envs,)``. Where an episode
            ended, the observation and info are those of the new episode (same-step autoreset)
            and ``final_observations[i]`` is the last observation of the old one (else None).
        """
        rewards = np.zeros(self.num_envs, dtype=np.float32)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        finals: list[Any] = [None] * self.num_envs
        for i, env in enumerate(self.envs):
            obs, reward, term, trunc, info = env.step(actions[i])
            rewards[i], terminated[i], truncated[i] = reward, term, trunc
            self._returns[i] += float(reward)
            self._lengths[i] += 1
            if term or trunc:
                self._finished.append(_episode(self._returns[i], self._lengths[i], info))
                self._returns[i], self._lengths[i] = 0.0, 0
                finals[i] = obs
                obs, info = env.reset()
            self.observations[i], self.infos[i] = obs, info
        return self.observations, rewards, terminated, truncated, self.infos, finals

    def pop_episodes(self) -> list[dict[str, float]]:
        """The episodes finished since the last call: ``return``, ``length`` and, when the env
        reported them, ``success`` (0/1) and ``score``."""
        done, self._finished = self._finished, []
        return done

    def close(self) -> None:
        for env in self.envs:
            env.close()


class ParallelEnvPool:
    """``num_copies`` copies of a PettingZoo ``ParallelEnv`` as a pool of agent *slots*.

    Slot ``e * num_agents + i`` is agent ``possible_agents[i]`` in copy ``e``; ``num_envs`` is
    the number of slots, so a learner written for :class:`EnvPool` steps every agent of every copy
    as one batch. A copy is reset in the same step once all its agents are done.

    An agent that finishes before the others (caught in Tag, say) leaves its slot *inactive*
    until its copy resets: ``active[s]`` is False, the slot reports ``terminated=True`` and reward
    0 on every step, its observation stays the agent's last one and its action is ignored.
    Learners drop the transitions of inactive slots from their losses.

    Args:
        envs: the copies (same agents and spaces).
        seed: copy ``e`` is reset with ``seed + e`` the first time.
        agent_indicator: add a one-hot ``agent_id`` (float32 ``(num_agents,)``, agents in sorted
            order of their names) to every observation (``Dict(observation, agent_id)``, or a new
            key of a ``Dict``), so one shared policy can tell the agents apart (Terry et al. 2020,
            "Revisiting Parameter Sharing in Multi-Agent Deep Reinforcement Learning"). Needs
            equal observation spaces.

    Attributes:
        agents: ``possible_agents`` of the game. ``observation_spaces`` / ``action_spaces``:
            per agent (with the indicator). ``observation_space`` / ``action_space``: the
            spaces every agent shares, or None when they differ.

    Raises:
        ValueError: no copies, copies with other agents, or ``agent_indicator`` with agents whose
            observation spaces differ.
    """

    def __init__(
        self, envs: Sequence[Any], *, seed: int | None = None, agent_indicator: bool = False
    ):
        if not envs:
            raise ValueError("ParallelEnvPool needs at least one env")
        self.envs = list(envs)
        self.agents: list[str] = list(self.envs[0].possible_agents)
        if any(list(env.possible_agents) != self.agents for env in self.envs[1:]):
            raise ValueError("all copies of a ParallelEnvPool must have the same possible_agents")
        self.num_agents = len(self.agents)
        self.num_envs = len(self.envs) * self.num_agents
        self._index = {agent: i for i, agent in enumerate(self.agents)}
        self._id_index = {
            agent: i for i, agent in enumerate(sorted(self.agents))
        }  # one-hot position
        raw = {a: self.envs[0].observation_space(a) for a in self.agents}
        self.action_spaces = {a: self.envs[0].action_space(a) for a in self.agents}
        self.agent_indicator = agent_indicator
        if agent_indicator:
            if any(space != raw[self.agents[0]] for space in raw.values()):
                raise ValueError(
                    "agent_indicator needs agents with equal observation spaces; train independent policies instead"
                )
            raw = dict.fromkeys(self.agents, agent_id_space(raw[self.agents[0]], self.num_agents))
        self.observation_spaces = raw
        self.observation_space = _common(list(raw.values()))
        self.action_space = _common(list(self.action_spaces.values()))
        self.seed = seed
        self.active = np.zeros(self.num_envs, dtype=bool)
        self.observations: list[Any] = [None] * self.num_envs
        self.infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        self._returns = np.zeros(self.num_envs)
        self._lengths = np.zeros(self.num_envs, dtype=np.int64)
        self._finished: list[dict[str, float]] = []

    @classmethod
    def build(
        cls,
        env: str | Any,
        num_copies: int,
        *,
        seed: int | None = None,
        agent_indicator: bool = False,
    ) -> ParallelEnvPool:
        """A pool of ``num_copies`` copies of ``env`` (a parallel env id or instance; a pool is
        returned as is). Copies of an instance are deep copies (verigym envs pickle)."""
        if isinstance(env, ParallelEnvPool):
            return env
        first = make_env(env)
        if not is_parallel_env(first):
            raise ValueError(f"{env!r} is not a PettingZoo ParallelEnv")
        envs = [first] + [
            make_env(env) if isinstance(env, str) else copy.deepcopy(first)
            for _ in range(num_copies - 1)
        ]
        return cls(envs, seed=seed, agent_indicator=agent_indicator)

    def slots(self, agent: str) -> np.ndarray:
        """``int64 (num_copies,)``: the slots of ``agent``."""
        return np.arange(self._index[agent], self.num_envs, self.num_agents)

    def with_indicator(self, agent: str, observation: Any) -> Any:
        """``observation`` of ``agent`` as the pool presents it (with the one-hot when asked)."""
        return (
            add_agent_id(observation, self._id_index[agent], self.num_agents)
            if self.agent_indicator
            else observation
        )

    def _start(self, e: int, seed: int | None) -> None:
        observations, infos = self.envs[e].reset(seed=seed)
        base = e * self.num_agents
        for agent, i in self._index.items():
            s = base + i
            self._returns[s], self._lengths[s] = 0.0, 0
            self.active[s] = agent in observations
            if self.active[s]:
                self.observations[s] = self.with_indicator(agent, observations[agent])
                self.infos[s] = dict(infos.get(agent, {}))

    def reset(self) -> tuple[list[Any], list[dict[str, Any]]]:
        """Reset every copy (seeded on the first call); returns per-slot observations and infos."""
        for e in range(len(self.envs)):
            self._start(e, None if self.seed is None else self.seed + e)
        if self.seed is not None:
            for a, space in self.action_spaces.items():
                space.seed(self.seed + self._index[a])
        self.seed = None
        return self.observations, self.infos

    def step(
        self, actions: Sequence[Any]
    ) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]], list[Any]]:
        """Step every copy with ``actions[s]`` for each active slot ``s``.

        Returns:
            ``(observations, rewards, terminated, truncated, infos, final_observations)`` per
            slot, as :meth:`EnvPool.step`; inactive slots report ``terminated=True``.
        """
        rewards = np.zeros(self.num_envs, dtype=np.float32)
        terminated = ~self.active.copy()
        truncated = np.zeros(self.num_envs, dtype=bool)
        finals: list[Any] = [None] * self.num_envs
        for e, env in enumerate(self.envs):
            base = e * self.num_agents
            acting = [a for a in env.agents if self.active[base + self._index[a]]]
            observations, reward, term, trunc, infos = env.step(
                {a: actions[base + self._index[a]] for a in acting}
            )
            for agent in acting:
                s = base + self._index[agent]
                info = infos.get(agent, {})
                rewards[s] = reward.get(agent, 0.0)
                terminated[s], truncated[s] = (
                    bool(term.get(agent, False)),
                    bool(trunc.get(agent, False)),
                )
                self._returns[s] += float(rewards[s])
                self._lengths[s] += 1
                if terminated[s] or truncated[s]:
                    self._finished.append(_episode(self._returns[s], self._lengths[s], info))
                    finals[s] = self.with_indicator(agent, observations[agent])
                    self.active[s] = False
                    mask = self.infos[s].get(
                        ACTION_MASK
                    )  # an inactive slot keeps a mask for batching
                    self.infos[s] = {} if mask is None else {ACTION_MASK: mask}
                else:
                    self.observations[s], self.infos[s] = (
                        self.with_indicator(agent, observations[agent]),
                        dict(info),
                    )
            if not env.agents:
                self._start(e, None)
        return self.observations, rewards, terminated, truncated, self.infos, finals

    def pop_episodes(self) -> list[dict[str, float]]:
        """Each agent's episodes finished since the last call (as :meth:`EnvPool.pop_episodes`)."""
        done, self._finished = self._finished, []
        return done

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _common(items: list[spaces.Space]) -> spaces.Space | None:
    """The space all items equal, else None."""
    return items[0] if all(s == items[0] for s in items[1:]) else None
