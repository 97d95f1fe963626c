"""Reference agents every environment gets a leaderboard row for: random and oracle."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import OrderEnforcing

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

    def act(
        self, obs: Any, info: Mapping[str, Any] | None = None, *, deterministic: bool = False
    ) -> Any:
        mask = None if info is None else info.get(ACTION_MASK)
        if mask is not None and np.ndim(mask) == 1 and np.any(mask):
            return np.int64(self._rng.choice(np.flatnonzero(mask)))
        return self.action_space.sample()


class OracleAgent:
    """The env's own scripted solver (``env.unwrapped.oracle_action()``, :class:`verigym.OracleInterface`).

    The oracle reads the state of the one env instance it was built for (:attr:`bound_env`), so it
    acts only there: ``verigym.agents.common.callbacks.evaluate`` runs it on that instance.

    Args:
        env: the env whose oracle is asked (an env made by ``gym.make`` or ``verigym.agents.make``).

    Raises:
        TypeError: the env has no oracle.
    """

    def __init__(self, env: Any):
        if not isinstance(getattr(env, "unwrapped", None), OracleInterface):
            raise TypeError(
                f"{type(getattr(env, 'unwrapped', env)).__name__} has no oracle_action(); no oracle agent for it"
            )
        self.env = env

    @property
    def bound_env(self) -> Any:
        """The env instance whose state the oracle reads (see :func:`verigym.agents.base.env_for`)."""
        return self.env

    def reset(self, *, seed: int | None = None) -> None:
        pass

    def act(
        self, obs: Any, info: Mapping[str, Any] | None = None, *, deterministic: bool = False
    ) -> Any:
        """The oracle's action in the env's current state.

        Raises:
            RuntimeError: the env was never reset (Gymnasium's ``OrderEnforcing``, which
                ``gym.make`` adds, says so), so it has no task yet to solve.
        """
        if not _has_reset(self.env):
            spec = getattr(self.env, "spec", None)
            name = spec.id if spec is not None else type(self.env.unwrapped).__name__
            raise RuntimeError(
                f"the oracle's env {name} was never reset: call env.reset(seed=...) before agent.act"
            )
        return self.env.unwrapped.oracle_action()


def _has_reset(env: Any) -> bool:
    """Whether ``env`` was reset, as the ``OrderEnforcing`` wrapper in its stack records (True when
    it has none: then the env itself is in charge of a call before ``reset``)."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, OrderEnforcing):
            return bool(env.has_reset)
        env = env.env
    return True
