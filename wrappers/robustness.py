"""Robustness variants: action delay, observation noise and dynamics perturbation.

Each wrapper does one thing, draws its randomness from its own generator seeded by the ``seed``
passed to ``reset`` (so ``reset(seed=s)`` reproduces the perturbed episode exactly and the
perturbation is independent of the task the env draws from the same seed), and records its
settings in ``info["robustness"]`` (a dict, merged across stacked wrappers) on every ``reset`` and
``step``. Each refuses a ``step`` after the episode ended until ``reset``
(:class:`verigym.core.EpisodeGuard`), like the envs. Stack them to combine::

    env = DynamicsPerturbation(ObservationNoise(ActionDelay(gym.make("verigym/Reach-2Link-v0"), delay=2), std=0.01))

Sources: domain randomization of dynamics (Peng et al. 2018, "Sim-to-Real Transfer of Robotic
Control with Dynamics Randomization"); delays and sensor noise as in the Real-World RL suite
(Dulac-Arnold et al. 2020, "An empirical investigation of the challenges of real-world
reinforcement learning").
"""

from __future__ import annotations

from collections import deque
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.utils import RecordConstructorArgs

from verigym.core import ActionParseError, EpisodeGuard, action_error_info, coerce_action

__all__ = ["ActionDelay", "DynamicsPerturbation", "ObservationNoise", "ROBUSTNESS"]

ROBUSTNESS = "robustness"
"""``info`` key: dict of the robustness settings in force (``action_delay``, ``mass_scale`` ...)."""


def _record(info: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """Merge ``settings`` into ``info["robustness"]`` (a fresh dict, so inner infos stay intact)."""
    info[ROBUSTNESS] = {**info.get(ROBUSTNESS, {}), **settings}
    return info


class _SeededWrapper(EpisodeGuard, gym.Wrapper, RecordConstructorArgs):
    """A wrapper with its own generator, reseeded from the ``seed`` of ``reset``.

    ``SALT`` separates the streams of different wrapper kinds stacked on one env.
    """

    SALT = 0

    def __init__(self, env: gym.Env, **recorded: Any):
        RecordConstructorArgs.__init__(self, **recorded)
        gym.Wrapper.__init__(self, env)
        self._rng = np.random.default_rng()

    def _reseed(self, seed: int | None) -> None:
        if seed is not None:
            self._rng = np.random.default_rng(
                np.random.SeedSequence([int(seed) & 0xFFFFFFFF, self.SALT])
            )


class ActionDelay(EpisodeGuard, gym.Wrapper, RecordConstructorArgs):
    """Execute each action ``delay`` steps after the agent chose it (actuation latency).

    The first ``delay`` steps of an episode execute ``noop_action`` (default: zeros clipped into a
    ``Box``, the first action of a ``Discrete``). An action that is not in the action space
    (checked with :func:`verigym.core.coerce_action` when it is sent) is queued as ``noop_action``
    instead; that step gets ``info["action_error"]`` and ``invalid_action_penalty`` is subtracted
    from its reward. ``info["robustness"]["action_delay"] = delay``.

    Args:
        env: any Gymnasium env.
        delay: latency in steps (0 passes actions through).
        noop_action: what runs while the queue fills; must be in ``env.action_space``.
        invalid_action_penalty: subtracted from the reward of a step whose action was malformed.

    Raises:
        ValueError: ``delay`` is negative, or no default no-op exists for the action space.
    """

    def __init__(
        self,
        env: gym.Env,
        *,
        delay: int = 1,
        noop_action: Any = None,
        invalid_action_penalty: float = 1.0,
    ):
        if isinstance(delay, bool) or not isinstance(delay, int) or delay < 0:
            raise ValueError(f"delay must be an int >= 0, got {delay!r}")
        RecordConstructorArgs.__init__(
            self, delay=delay, invalid_action_penalty=invalid_action_penalty
        )
        gym.Wrapper.__init__(self, env)
        self.delay = delay
        self.invalid_action_penalty = float(invalid_action_penalty)
        self.noop_action = (
            self._default_noop(env.action_space) if noop_action is None else noop_action
        )
        if not env.action_space.contains(self.noop_action):
            raise ValueError(
                f"noop_action {self.noop_action!r} is not in the action space {env.action_space}"
            )
        self._queue: deque[Any] = deque()

    @staticmethod
    def _default_noop(space: spaces.Space) -> Any:
        if isinstance(space, spaces.Box):
            return np.clip(np.zeros(space.shape), space.low, space.high).astype(space.dtype)
        if isinstance(space, spaces.Discrete):
            return np.int64(space.start)
        if isinstance(space, spaces.MultiDiscrete):
            return np.asarray(space.start, dtype=space.dtype).copy()
        if isinstance(space, spaces.MultiBinary):
            return np.zeros(space.shape, dtype=space.dtype)
        raise ValueError(f"no default no-op action for {space}; pass noop_action=")

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        self._queue = deque([self.noop_action] * self.delay)
        return observation, _record(info, {"action_delay": self.delay})

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        error = None
        try:
            action = coerce_action(self.env.action_space, action)
        except ActionParseError as exc:
            error, action = f"{exc} (a no-op was queued instead)", self.noop_action
        self._queue.append(action)
        observation, reward, terminated, truncated, info = self.env.step(self._queue.popleft())
        if error is not None:
            action_error_info(error, info)
            reward = float(reward) - self.invalid_action_penalty
        return (
            observation,
            reward,
            terminated,
            truncated,
            _record(info, {"action_delay": self.delay}),
        )


class ObservationNoise(_SeededWrapper):
    """Add Gaussian noise to the floating-point parts of observations (sensor noise).

    Noise ``N(0, std^2)`` in the observation's own units is added to every ``float`` ``Box`` leaf
    of the observation (recursively through ``Dict``/``Tuple``), except the ``Dict`` keys in
    ``exclude`` (default: ``desired_goal``, the goal is given, not sensed); the result is clipped
    into the space's bounds. ``info`` values (``distance``, ``success``) are the env's, computed
    from the true state. ``info["robustness"]["observation_noise_std"] = std``.

    Args:
        env: any Gymnasium env.
        std: standard deviation, >= 0.
        exclude: ``Dict`` keys left noiseless.

    Raises:
        ValueError: ``std`` is negative or not finite.
    """

    SALT = 1

    def __init__(
        self, env: gym.Env, *, std: float = 0.01, exclude: tuple[str, ...] = ("desired_goal",)
    ):
        if (
            isinstance(std, bool)
            or not isinstance(std, (int, float))
            or not np.isfinite(std)
            or std < 0
        ):
            raise ValueError(f"std must be a finite number >= 0, got {std!r}")
        super().__init__(env, std=std, exclude=tuple(exclude))
        self.std = float(std)
        self.exclude = tuple(exclude)

    def _noisy(self, space: spaces.Space, value: Any) -> Any:
        if isinstance(space, spaces.Dict):
            return {
                k: v if k in self.exclude else self._noisy(space[k], v) for k, v in value.items()
            }
        if isinstance(space, spaces.Tuple):
            return tuple(self._noisy(s, v) for s, v in zip(space.spaces, value))
        if isinstance(space, spaces.Box) and np.issubdtype(space.dtype, np.floating):
            noisy = np.asarray(value) + self._rng.normal(0.0, self.std, size=space.shape)
            return np.clip(noisy, space.low, space.high).astype(space.dtype)
        return value

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        self._reseed(seed)
        observation, info = self.env.reset(seed=seed, options=options)
        return self._noisy(self.observation_space, observation), _record(
            info, {"observation_noise_std": self.std}
        )

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        return (
            self._noisy(self.observation_space, observation),
            reward,
            terminated,
            truncated,
            _record(info, {"observation_noise_std": self.std}),
        )


class DynamicsPerturbation(_SeededWrapper):
    """Scale masses, friction and damping of a MuJoCo model by factors drawn per episode.

    On every ``reset``, three factors are drawn uniformly from their ranges with the wrapper's
    generator (seeded by the reset seed) and applied to the nominal model: ``body_mass`` and
    ``body_inertia`` by ``mass_scale``, ``geom_friction`` by ``friction_scale``, ``dof_damping``
    by ``damping_scale``. The factors are ``info["robustness"]["mass_scale"]`` etc. A range
    ``(1, 1)`` leaves that quantity nominal.

    Works on any env whose ``unwrapped.model`` is a ``mujoco.MjModel`` (verigym's ``mujoco``
    family, Gymnasium's MuJoCo envs). An env that rebuilds its model on reset (PointMaze) is
    handled: the nominal values are read from each new model.

    Args:
        env: the env.
        mass_scale, friction_scale, damping_scale: ``(low, high)`` ranges of positive factors.

    Raises:
        TypeError: the env has no MuJoCo model.
        ValueError: a range is not ``0 < low <= high``.
    """

    SALT = 2
    FIELDS = {
        "mass_scale": ("body_mass", "body_inertia"),
        "friction_scale": ("geom_friction",),
        "damping_scale": ("dof_damping",),
    }

    def __init__(
        self,
        env: gym.Env,
        *,
        mass_scale: tuple[float, float] = (0.8, 1.2),
        friction_scale: tuple[float, float] = (0.8, 1.2),
        damping_scale: tuple[float, float] = (0.8, 1.2),
    ):
        import mujoco

        if not isinstance(getattr(env.unwrapped, "model", None), mujoco.MjModel):
            raise TypeError(
                f"DynamicsPerturbation needs an env with a mujoco.MjModel at env.unwrapped.model; {type(env.unwrapped).__name__} has none"
            )
        ranges = {
            "mass_scale": mass_scale,
            "friction_scale": friction_scale,
            "damping_scale": damping_scale,
        }
        for name, (low, high) in ranges.items():
            if not 0 < float(low) <= float(high) or not np.isfinite(high):
                raise ValueError(
                    f"{name} must be a range (low, high) with 0 < low <= high, got {(low, high)!r}"
                )
        super().__init__(env, **{k: [float(v[0]), float(v[1])] for k, v in ranges.items()})
        self.ranges = {k: (float(v[0]), float(v[1])) for k, v in ranges.items()}
        self.scales = {k: 1.0 for k in ranges}
        self._model: Any = None
        self._nominal: dict[str, np.ndarray] = {}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        import mujoco

        self._reseed(seed)
        observation, info = self.env.reset(seed=seed, options=options)
        unwrapped = self.env.unwrapped
        model = unwrapped.model
        if model is not self._model:  # a new model (first reset, or one rebuilt by the env)
            self._model = model
            self._nominal = {
                f: getattr(model, f).copy() for fields in self.FIELDS.values() for f in fields
            }
        self.scales = {
            k: float(self._rng.uniform(low, high)) for k, (low, high) in self.ranges.items()
        }
        for key, fields in self.FIELDS.items():
            for f in fields:
                getattr(model, f)[:] = self._nominal[f] * self.scales[key]
        mujoco.mj_setConst(model, mujoco.MjData(model))  # derived constants from the new masses
        mujoco.mj_forward(model, unwrapped.data)
        return observation, _record(info, dict(self.scales))

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        return observation, reward, terminated, truncated, _record(info, dict(self.scales))
