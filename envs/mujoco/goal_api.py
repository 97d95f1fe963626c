"""The goal-env method on the outside of the wrapper stack, for clients that call ``env.compute_reward``.

Gymnasium (>= 1.0) wrappers no longer forward attributes, so on ``gym.make(id)`` (an
``OrderEnforcing`` around a ``PassiveEnvChecker`` around the env) ``env.compute_reward`` is an
``AttributeError``. Stable-Baselines3's ``check_env`` detects a goal env by
``env.unwrapped.compute_reward`` and then calls ``env.compute_reward`` on the wrapper it was given.
The MuJoCo rows register :class:`GoalEnvApi` as Gymnasium's ``additional_wrappers`` so
``gym.make`` returns it outermost. (SB3's ``HerReplayBuffer`` and VecEnvs already reach the method
through ``get_wrapper_attr``.)
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.utils import RecordConstructorArgs

__all__ = ["GoalEnvApi"]


class GoalEnvApi(gym.Wrapper, RecordConstructorArgs):
    """Exposes the goal-conditioned env's ``compute_reward`` on the wrapper; changes nothing else.

    Args:
        env: an env whose ``unwrapped`` has ``compute_reward(achieved_goal, desired_goal, info)``
            and a ``Dict`` observation space with ``achieved_goal`` and ``desired_goal``.

    Raises:
        TypeError: ``env`` is not such a goal-conditioned env.
    """

    def __init__(self, env: gym.Env):
        space = env.observation_space
        if not callable(getattr(env.unwrapped, "compute_reward", None)) or not (
            isinstance(space, gym.spaces.Dict)
            and {"achieved_goal", "desired_goal"} <= set(space.spaces)
        ):
            raise TypeError(
                f"{type(env.unwrapped).__name__} is not a goal-conditioned env (Dict achieved_goal/desired_goal and compute_reward)"
            )
        RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)

    def compute_reward(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any
    ) -> np.ndarray | float:
        """The wrapped env's ``compute_reward`` (vectorized over leading axes); see the env class."""
        return self.env.unwrapped.compute_reward(achieved_goal, desired_goal, info)
