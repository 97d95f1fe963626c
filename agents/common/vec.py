"""A light synchronous pool of envs with same-step autoreset and episode statistics.

Gymnasium's ``SyncVectorEnv`` merges every ``info`` dict into arrays on every step; the learners
only need per-env infos (for ``info["action_mask"]``), the final observation of an episode that
ended (to bootstrap on time-limit truncation) and each finished episode's return, length and
verdict. :class:`EnvPool` does just that, with one Python loop over the envs.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from verigym.core import SCORE, SUCCESS

__all__ = ["EnvPool", "make_env"]


def make_env(env: str | gym.Env) -> gym.Env:
    """``gym.make(env)`` for an id (importing verigym so its ids exist), else ``env`` itself."""
    if isinstance(env, str):
        import verigym  # noqa: F401  (registers verigym/... ids)

        return gym.make(env)
    return env


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
            if env.observation_space != self.observation_space or env.action_space != self.action_space:
                raise ValueError("all envs of a pool must have the same observation and action spaces")
        self.seed = seed
        self.num_envs = len(self.envs)
        self._returns = np.zeros(self.num_envs)
        self._lengths = np.zeros(self.num_envs, dtype=np.int64)
        self._finished: list[dict[str, float]] = []
        self.observations: list[Any] = []
        self.infos: list[dict[str, Any]] = []

    @classmethod
    def build(cls, env: str | gym.Env | EnvPool, num_envs: int, *, seed: int | None = None) -> EnvPool:
        """A pool of ``num_envs`` copies of ``env`` (an id, an env, or a pool returned as is).

        Copies of an env instance are rebuilt from ``env.spec`` (with its recorded wrappers) when it
        has one, else deep-copied (verigym envs pickle).
        """
        if isinstance(env, EnvPool):
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

    def step(self, actions: Sequence[Any]) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]], list[Any]]:
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
                episode = {"return": float(self._returns[i]), "length": float(self._lengths[i])}
                if SUCCESS in info:
                    episode["success"] = float(bool(info[SUCCESS]))
                if SCORE in info:
                    episode["score"] = float(info[SCORE])
                self._finished.append(episode)
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
