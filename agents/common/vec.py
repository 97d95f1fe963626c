"""The vector envs the learners step: one path, Gymnasium's ``VectorEnv`` with same-step autoreset.

:func:`vector_env` gives a learner ``num_envs`` copies of an env as a ``VectorEnv`` with
``AutoresetMode.SAME_STEP`` (the last observation of an episode that ended is
``info["final_obs"]``, needed to bootstrap on time-limit truncation), wrapped in
:class:`EpisodeStats` (each finished episode's return, length and verdict): an id's natively
batched engine (``gymnasium.make_vec`` with ``vectorization_mode="vector_entry_point"``) when the
registry has one for it (:func:`verigym.registration.native_vector`), else an :class:`EnvPool`,
envs stepped in turn in one process without Gymnasium's per-step env checker.

:class:`ParallelEnvPool` gives copies of a PettingZoo ``ParallelEnv`` the same interface, one
*slot* per agent and copy (the layout of SuperSuit's ``pettingzoo_env_to_vec_env_v1``, which
Stable-Baselines3 users train parameter-shared policies with), so the learners run unchanged on
multi-agent games.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from verigym.core import ACTION_MASK, SCORE, SUCCESS

__all__ = [
    "EnvPool",
    "EpisodeStats",
    "ParallelEnvPool",
    "action_masks",
    "add_agent_id",
    "agent_id_space",
    "final_observations",
    "is_parallel_env",
    "make_env",
    "unbatched",
    "vector_env",
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


class EnvPool(VectorEnv):
    """``num_envs`` envs stepped in turn in one process: a Gymnasium ``VectorEnv`` with
    ``AutoresetMode.SAME_STEP`` (an env whose episode ends is reset in the step that ended it).

    It behaves as ``gymnasium.vector.SyncVectorEnv(..., autoreset_mode="SameStep")`` but takes
    env instances, seeds each env's action space with its reset seed, and stacks the envs' action
    masks in one call (``SyncVectorEnv`` merges each env's info apart, about a tenth of a grid
    step at N=1024): observations batched into ``observation_space`` (``batch_space`` of the
    single space; a new batch each call), rewards ``float64 (N,)``, ``terminated``/``truncated``
    ``bool (N,)``, the envs' infos merged as :meth:`VectorEnv._add_info` merges them
    (``info["action_mask"]`` ``(N, n)`` with ``info["_action_mask"]``);
    where an episode ended ``info["final_obs"]`` (object ``(N,)``, None elsewhere),
    ``info["final_info"]`` and their ``"_final_obs"``/``"_final_info"`` masks; the observation
    and info of such an env are those of its new episode.

    Args:
        envs: the envs (same spaces).

    Raises:
        ValueError: no envs, or envs with different spaces.
    """

    metadata: ClassVar[dict[str, Any]] = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, envs: Sequence[gym.Env]):
        if not envs:
            raise ValueError("EnvPool needs at least one env")
        self.envs = list(envs)
        first = self.envs[0]
        for env in self.envs[1:]:
            if (
                env.observation_space != first.observation_space
                or env.action_space != first.action_space
            ):
                raise ValueError(
                    "all envs of a pool must have the same observation and action spaces"
                )
        self.num_envs = len(self.envs)
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(first.observation_space, self.num_envs)
        self.action_space = batch_space(first.action_space, self.num_envs)
        self.metadata = {**type(self).metadata, "render_modes": []}
        self.render_mode = None

    @classmethod
    def build(cls, env: str | gym.Env, num_envs: int) -> EnvPool:
        """A pool of ``num_envs`` copies of ``env`` (a Gymnasium id or env).

        Copies of an env instance are rebuilt from ``env.spec`` (with its recorded wrappers) when it
        has one, else deep-copied (verigym envs pickle).
        """
        first = make_env(env)
        envs = [first]
        for _ in range(num_envs - 1):
            if isinstance(env, str):
                envs.append(make_env(env))
            elif first.spec is not None:
                envs.append(gym.make(first.spec))
            else:
                envs.append(copy.deepcopy(first))
        return cls(envs)

    def _batch(self, observations: list[Any]) -> Any:
        out = create_empty_array(self.single_observation_space, self.num_envs)
        return concatenate(self.single_observation_space, observations, out)

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every env: an int ``seed`` resets env ``i`` with ``seed + i`` (and seeds its
        action space so); a sequence gives one seed per env.

        Raises:
            ValueError: ``seed`` is a sequence of the wrong length.
        """
        if seed is None or isinstance(seed, (int, np.integer)):
            seeds = [None if seed is None else int(seed) + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"expected {self.num_envs} seeds, got {len(seeds)}")
        observations, infos = [], {}
        for i, (env, s) in enumerate(zip(self.envs, seeds)):
            if s is not None:
                env.action_space.seed(s)
            obs, info = env.reset(seed=s, options=options)
            observations.append(obs)
            infos = self._add_info(infos, info, i)
        return self._batch(observations), infos

    def _merge(self, infos: dict[str, Any], per_env: list[dict[str, Any]]) -> dict[str, Any]:
        """The envs' infos merged as :meth:`VectorEnv._add_info` merges them, with the action
        masks every env reports stacked in one call (the common case of the grid tasks:
        ``_add_info`` costs more per env than a grid step's own bookkeeping)."""
        masks = [info.get(ACTION_MASK) for info in per_env]
        stacked = all(isinstance(m, np.ndarray) for m in masks)
        for i, info in enumerate(per_env):
            if stacked:
                info = {k: v for k, v in info.items() if k != ACTION_MASK}
            if info:
                infos = self._add_info(infos, info, i)
        if stacked:
            infos[ACTION_MASK] = np.stack(masks)
            infos["_" + ACTION_MASK] = np.ones(self.num_envs, dtype=bool)
        return infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step env ``i`` with the ``i``-th action of ``actions`` (see the class doc).

        Raises:
            ValueError: ``actions`` does not hold one action per env.
        """
        rewards = np.zeros(self.num_envs)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        actions = list(iterate(self.action_space, actions))
        if len(actions) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} actions, got {len(actions)}")
        observations, infos, per_env = [], {}, []
        for i, (env, action) in enumerate(zip(self.envs, actions)):
            obs, rewards[i], terminated[i], truncated[i], info = env.step(action)
            if terminated[i] or truncated[i]:
                infos = self._add_info(infos, {"final_obs": obs, "final_info": info}, i)
                obs, info = env.reset()
            observations.append(obs)
            per_env.append(info)
        return (
            self._batch(observations),
            rewards,
            terminated,
            truncated,
            self._merge(infos, per_env),
        )

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()


class EpisodeStats(VectorWrapper):
    """Each finished episode's return, length and, when the env reports them, ``success`` and
    ``score``, for a vector env with ``AutoresetMode.SAME_STEP`` autoreset (read from
    ``info["final_info"]``); :meth:`pop_episodes` hands them over.

    Raises:
        ValueError: the env's ``metadata["autoreset_mode"]`` is not ``SAME_STEP``.
    """

    def __init__(self, env: VectorEnv):
        super().__init__(env)
        if env.metadata.get("autoreset_mode") != AutoresetMode.SAME_STEP:
            raise ValueError(
                "the learners need a vector env with autoreset_mode=AutoresetMode.SAME_STEP"
            )
        self._returns = np.zeros(self.num_envs)
        self._lengths = np.zeros(self.num_envs, dtype=np.int64)
        self._finished: list[dict[str, float]] = []

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self._returns[:] = 0.0
        self._lengths[:] = 0
        return self.env.reset(**kwargs)

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        self._returns += rewards
        self._lengths += 1
        ended = terminated | truncated
        if ended.any():
            verdict = info.get("final_info", {})
            for i in np.flatnonzero(ended).tolist():
                self._finished.append(
                    _episode(self._returns[i], self._lengths[i], _entry(verdict, i))
                )
            self._returns[ended], self._lengths[ended] = 0.0, 0
        return obs, rewards, terminated, truncated, info

    def pop_episodes(self) -> list[dict[str, float]]:
        """The episodes finished since the last call: ``return``, ``length`` and, when the env
        reported them, ``success`` (0/1) and ``score``."""
        done, self._finished = self._finished, []
        return done


def _entry(info: Mapping[str, Any], i: int) -> dict[str, Any]:
    """Env ``i``'s ``success`` and ``score`` of a merged vector info (where its mask is set)."""
    out = {}
    for key in (SUCCESS, SCORE):
        mask = info.get("_" + key)
        if key in info and (mask is None or mask[i]):
            out[key] = info[key][i]
    return out


def vector_env(env: Any, num_envs: int, *, native: bool = True) -> Any:
    """The vector env a learner steps: ``num_envs`` copies of ``env`` with
    ``AutoresetMode.SAME_STEP``, wrapped in :class:`EpisodeStats`.

    Args:
        env: an env id (its natively batched engine via ``gymnasium.make_vec`` when the
            registry has one for it, :func:`verigym.registration.native_vector`, and ``native``
            is on; else an :class:`EnvPool`), a ``gymnasium.Env`` (copied into an
            :class:`EnvPool`), a ``VectorEnv`` with ``SAME_STEP`` autoreset (used as is), or a
            :class:`ParallelEnvPool` / :class:`EpisodeStats` (returned as is).
        num_envs: copies to make (ignored for a vector env or pool).
        native: use an id's natively batched engine when it has one.

    Raises:
        ValueError: a vector env without ``SAME_STEP`` autoreset, or an AEC id (:func:`make_env`).
    """
    if isinstance(env, (EpisodeStats, ParallelEnvPool)):
        return env
    if isinstance(env, VectorEnv):
        return EpisodeStats(env)
    if isinstance(env, str) and native:
        import verigym  # noqa: F401  (registers the ids)
        from verigym import registration

        if registration.native_vector(env):
            return EpisodeStats(
                gym.make_vec(
                    env,
                    num_envs=num_envs,
                    vectorization_mode="vector_entry_point",
                    autoreset_mode=AutoresetMode.SAME_STEP,
                )
            )
    return EpisodeStats(EnvPool.build(env, num_envs))


def final_observations(info: Mapping[str, Any], num_envs: int) -> list[Any]:
    """Per env, the last observation of the episode that ended in this step (``SAME_STEP``
    autoreset's ``info["final_obs"]``), else None."""
    ended = info.get("_final_obs")
    if ended is None:
        return [None] * num_envs
    final = info["final_obs"]
    if isinstance(final, Mapping):  # a Dict space batched by key
        return [{k: v[i] for k, v in final.items()} if ended[i] else None for i in range(num_envs)]
    return [final[i] if ended[i] else None for i in range(num_envs)]


def unbatched(envs: Any, observations: Any) -> list[Any]:
    """The observations of a vector env's batch, one per env (a list is returned as is)."""
    if isinstance(observations, list):
        return observations
    return list(iterate(envs.observation_space, observations))


def action_masks(info: Mapping[str, Any]) -> np.ndarray | None:
    """``info["action_mask"]`` of a vector env as ``(N, n)``, or None when some env lacks one."""
    masks = info.get(ACTION_MASK)
    present = info.get("_" + ACTION_MASK)
    if masks is None or (present is not None and not present.all()):
        return None
    masks = np.asarray(masks)
    return np.stack(list(masks)) if masks.dtype == object else masks


class ParallelEnvPool(VectorEnv):
    """``num_copies`` copies of a PettingZoo ``ParallelEnv`` as a pool of agent *slots*.

    Slot ``e * num_agents + i`` is agent ``possible_agents[i]`` in copy ``e``; ``num_envs`` is
    the number of slots, so a learner written for a vector env steps every agent of every copy
    as one batch. ``reset`` and ``step`` return what a ``VectorEnv`` with
    ``AutoresetMode.SAME_STEP`` returns (infos merged over the slots, ``info["final_obs"]`` where
    an agent's episode ended) except that observations are a list, one per slot, since agents'
    observation spaces may differ; ``observation_space``/``action_space`` are the spaces every
    agent shares (not batched). A copy is reset in the same step once all its agents are done.

    An agent that finishes before the others (caught in Tag, say) leaves its slot *inactive*
    until its copy resets: ``active[s]`` is False, the slot reports ``terminated=True`` and reward
    0 on every step, its observation stays the agent's last one and its action is ignored.
    Learners drop the transitions of inactive slots from their losses.

    Args:
        envs: the copies (same agents and spaces).
        agent_indicator: add a one-hot ``agent_id`` (float32 ``(num_agents,)``, agents in sorted
            order of their names) to every observation (``Dict(observation, agent_id)``, or a new
            key of a ``Dict``), so one shared policy can tell the agents apart (Terry et al. 2020,
            "Revisiting Parameter Sharing in Multi-Agent Deep Reinforcement Learning"). Needs
            equal observation spaces.

    Attributes:
        agents: ``possible_agents`` of the game. ``observation_spaces`` / ``action_spaces``:
            per agent (with the indicator). ``observation_space`` / ``action_space``: the
            spaces every agent shares, or None when they differ (also ``single_*``).

    Raises:
        ValueError: no copies, copies with other agents, or ``agent_indicator`` with agents whose
            observation spaces differ.
    """

    metadata: ClassVar[dict[str, Any]] = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, envs: Sequence[Any], *, agent_indicator: bool = False):
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
        self.single_observation_space = self.observation_space
        self.single_action_space = self.action_space
        self.metadata = dict(type(self).metadata)
        self.render_mode = None
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
        return cls(envs, agent_indicator=agent_indicator)

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

    def _merged(self, infos: dict[str, Any]) -> dict[str, Any]:
        for s, info in enumerate(self.infos):
            infos = self._add_info(infos, info, s)
        return infos

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[Any], dict[str, Any]]:
        """Reset every copy (copy ``e`` with ``seed + e``, and agent ``i``'s action space with
        ``seed + i``): per-slot observations (a list) and the slots' merged infos."""
        for e in range(len(self.envs)):
            self._start(e, None if seed is None else seed + e)
        if seed is not None:
            for a, space in self.action_spaces.items():
                space.seed(seed + self._index[a])
        return list(self.observations), self._merged({})

    def step(
        self, actions: Sequence[Any]
    ) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every copy with ``actions[s]`` for each active slot ``s``.

        Returns:
            ``(observations, rewards, terminated, truncated, infos)`` per slot, as a
            ``SAME_STEP`` vector env (``info["final_obs"]`` where an agent's episode ended in
            this step); inactive slots report ``terminated=True`` and no ``final_obs``.
        """
        rewards = np.zeros(self.num_envs, dtype=np.float32)
        terminated = ~self.active.copy()
        truncated = np.zeros(self.num_envs, dtype=bool)
        merged: dict[str, Any] = {}
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
                    final = self.with_indicator(agent, observations[agent])
                    merged = self._add_info(merged, {"final_obs": final, "final_info": info}, s)
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
        return list(self.observations), rewards, terminated, truncated, self._merged(merged)

    def pop_episodes(self) -> list[dict[str, float]]:
        """Each agent's episodes finished since the last call (as :meth:`EpisodeStats.pop_episodes`)."""
        done, self._finished = self._finished, []
        return done

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()


def _common(items: list[spaces.Space]) -> spaces.Space | None:
    """The space all items equal, else None."""
    return items[0] if all(s == items[0] for s in items[1:]) else None
