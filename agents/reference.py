"""Reference agents every environment gets a leaderboard row for: random and oracle."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from verigym.core import ACTION_MASK, OracleInterface

__all__ = ["OracleAgent", "RandomAgent"]


class RandomAgent:
    """Uniformly random actions from the env's action space (legal ones when ``info`` has a mask).

    Args:
        env: the env (its ``action_space`` is sampled).
        seed: seed of the sampler; ``reset(seed=...)`` reseeds it.
    """

    def __init__(self, env: Any, *, seed: int | None = None):
        if env is None:
            raise ValueError("RandomAgent needs the env to sample its action space")
        self.action_space = env.action_space
        self.reset(seed=seed)

    def reset(self, *, seed: int | None = None) -> None:
        self.action_space.seed(seed)
        self._rng = np.random.default_rng(seed)

    def act(self, obs: Any, info: Mapping[str, Any] | None = None, *, deterministic: bool = False) -> Any:
        mask = None if info is None else info.get(ACTION_MASK)
        if mask is not None and np.ndim(mask) == 1 and np.any(mask):
            return np.int64(self._rng.choice(np.flatnonzero(mask)))
        return self.action_space.sample()


class OracleAgent:
    """The env's own scripted solver (``env.unwrapped.oracle_action()``, :class:`verigym.OracleInterface`).

    Raises:
        TypeError: the env has no oracle.
    """

    def __init__(self, env: Any):
        if not isinstance(getattr(env, "unwrapped", None), OracleInterface):
            raise TypeError(f"{type(getattr(env, 'unwrapped', env)).__name__} has no oracle_action(); no oracle agent for it")
        self.env = env

    def reset(self, *, seed: int | None = None) -> None:
        pass

    def act(self, obs: Any, info: Mapping[str, Any] | None = None, *, deterministic: bool = False) -> Any:
        return self.env.unwrapped.oracle_action()
