"""A batched runner for grid tasks: ``GridVectorEnv`` steps N envs into preallocated arrays."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from verigym.core import ACTION_MASK, SCORE, SUCCESS
from verigym.envs.grid.engine import GridEnv

__all__ = ["GridVectorEnv"]


class GridVectorEnv(VectorEnv):
    """``num_envs`` grid envs stepped in one process, written into preallocated batch arrays.

    Behaves like ``gymnasium.vector.SyncVectorEnv`` with ``AutoresetMode.NEXT_STEP`` (the step
    after an episode ended resets that env and returns its first observation with reward 0), but
    skips Gymnasium's per-step wrappers and generic info merging: ``info`` always holds
    ``"action_mask"`` (``int8 (num_envs, n_actions)``) and, on steps where some episode ended,
    ``"success"`` (``bool (num_envs,)``), ``"score"`` (``float64 (num_envs,)``) with Gymnasium's
    ``"_success"``/``"_score"`` masks marking the envs they belong to.

    Args:
        env_fns: one zero-argument factory per env, or an env id (then ``num_envs`` copies of
            ``gymnasium.make(env_id, **kwargs)``).
        num_envs: copies when ``env_fns`` is an id.
        **kwargs: constructor overrides when ``env_fns`` is an id.

    Raises:
        TypeError: an env is not a :class:`~verigym.envs.grid.engine.GridEnv`.
        ValueError: the envs' spaces differ, or ``num_envs`` < 1.

    Example::

        envs = GridVectorEnv("verigym/DoorKey-8x8-v0", num_envs=16, observation="full")
        obs, info = envs.reset(seed=0)            # obs: uint8 (16, 8, 8, 3)
        obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "family": "grid"}

    def __init__(
        self,
        env_fns: str | Sequence[Callable[[], gym.Env]],
        num_envs: int | None = None,
        **kwargs: Any,
    ):
        if isinstance(env_fns, str):
            env_id = env_fns
            if num_envs is None or num_envs < 1:
                raise ValueError(f"num_envs must be >= 1 with an env id, got {num_envs!r}")
            import verigym  # noqa: F401  (registers the ids)

            env_fns = [
                lambda: gym.make(env_id, disable_env_checker=True, **kwargs)
                for _ in range(num_envs)
            ]
        self.envs: list[GridEnv] = []
        for make in env_fns:
            env = make().unwrapped
            if not isinstance(env, GridEnv):
                raise TypeError(f"GridVectorEnv needs grid envs, got {type(env).__name__}")
            self.envs.append(env)
        if not self.envs:
            raise ValueError("GridVectorEnv needs at least one env")
        first = self.envs[0]
        for env in self.envs[1:]:
            if (
                env.observation_space != first.observation_space
                or env.action_space != first.action_space
            ):
                raise ValueError(
                    "all envs of a GridVectorEnv must share their observation and action spaces"
                )
        self.num_envs = len(self.envs)
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(first.observation_space, self.num_envs)
        self.action_space = batch_space(first.action_space, self.num_envs)
        self.render_mode = None
        self._obs = np.zeros((self.num_envs, *first.observation_space.shape), dtype=np.uint8)
        self._masks = np.zeros((self.num_envs, first.action_space.n), dtype=np.int8)
        self._done = np.zeros(self.num_envs, dtype=bool)

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[np.ndarray, dict[str, Any]]:
        seeds = (
            [None if seed is None else seed + i for i in range(self.num_envs)]
            if not isinstance(seed, Sequence)
            else list(seed)
        )
        if len(seeds) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} seeds, got {len(seeds)}")
        for i, (env, s) in enumerate(zip(self.envs, seeds)):
            obs, info = env.reset(seed=s, options=options)
            self._obs[i] = obs
            self._masks[i] = info[ACTION_MASK]
        self._done[:] = False
        return self._obs.copy(), {
            ACTION_MASK: self._masks.copy(),
            "mission": np.array([e.mission for e in self.envs], dtype=object),
        }

    def step(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        actions = np.asarray(actions)
        if actions.shape != (self.num_envs,):
            raise ValueError(f"expected actions of shape ({self.num_envs},), got {actions.shape}")
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        success = score = ended = None
        for i, env in enumerate(self.envs):
            if self._done[i]:
                obs, info = env.reset()
            else:
                obs, rewards[i], terminated[i], truncated[i], info = env.step(int(actions[i]))
                if terminated[i] or truncated[i]:
                    if ended is None:
                        success, score = (
                            np.zeros(self.num_envs, dtype=bool),
                            np.zeros(self.num_envs),
                        )
                        ended = np.zeros(self.num_envs, dtype=bool)
                    success[i], score[i], ended[i] = info[SUCCESS], info[SCORE], True
            self._obs[i] = obs
            self._masks[i] = info[ACTION_MASK]
        self._done = terminated | truncated
        infos: dict[str, Any] = {ACTION_MASK: self._masks.copy()}
        if ended is not None:
            infos.update(
                {SUCCESS: success, "_" + SUCCESS: ended, SCORE: score, "_" + SCORE: ended.copy()}
            )
        return self._obs.copy(), rewards, terminated, truncated, infos

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()
