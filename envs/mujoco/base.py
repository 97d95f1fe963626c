"""The shared machinery of the MuJoCo family: goal-conditioned env base class.

:class:`MujocoGoalEnv` owns what every task of the family does the same way -- building the
``mujoco.MjModel`` (from an XML string or file), stepping with a frame skip, mapping the normalized
action in ``[-1, 1]`` onto the actuators' control range, the Gymnasium-Robotics observation
``Dict(observation, achieved_goal, desired_goal)`` with a vectorized :meth:`compute_reward`, the
step limit, the verdict at the episode end, malformed actions, headless ``rgb_array`` rendering and
the text view. A task subclass (MiniGrid's template method) implements:

* ``_model_xml()`` -- the MJCF of the next episode (may depend on ``self.np_random``, e.g. a maze);
* ``_reset_task()`` -- initial ``qpos``/``qvel`` and the goal, drawn from ``self.np_random``;
* ``_observation_vector()``, ``_achieved_goal()``, ``_desired_goal()`` -- new ``float64`` arrays
  (never views of ``MjData``, which the next step overwrites);
* ``_status(reached)`` -- ``(success, failed)`` after a step, given whether the goal predicate
  holds now: success terminates with ``success=True``, failure (a fall) with ``success=False``;
* ``_progress()`` -- the share of the task done, in [0, 1], for the partial score;
* ``OBSERVATION_FIELDS`` / ``GOAL_FIELDS`` -- names and units of the vectors, for the text view.

A subclass may also override ``goal_distance``/``within_tolerance`` (the goal predicate) and the
physics hooks ``_before_physics()``/``_after_physics()``. The step computes the reward with the
same vectorized definitions as :meth:`compute_reward`, so hindsight relabelling reproduces the
reward ``step`` paid.

Source of the conventions: Plappert et al. 2018, "Multi-Goal Reinforcement Learning: Challenging
Robotics Environments and Request for Research" (the ``Dict`` observation, ``compute_reward``,
sparse/dense rewards, ``info["is_success"]``), and Gymnasium's ``MujocoEnv``.
"""

from __future__ import annotations

import logging
from typing import Any

import gymnasium as gym
import mujoco  # MUJOCO_GL's headless default is set in the package's __init__
import numpy as np
from gymnasium import spaces

from verigym.core import (
    ActionParseError,
    EpisodeGuard,
    action_error_info,
    coerce_action,
    episode_end,
)
from verigym.kwargs_policy import IntRange, OneOf, client, operator_only
from verigym.render_modes import accept_render_mode
from verigym.textview import format_value, parse_value
from verigym.validation import check_choice, check_int

__all__ = [
    "MujocoGoalEnv",
    "REWARD_TYPES",
    "SCENE_XML",
    "planar_body_xml",
    "top_camera_xml",
    "planar_motors_xml",
]

logger = logging.getLogger(__name__)

REWARD_TYPES = ("dense", "sparse")
_UNSTABLE_WARNINGS = slice(
    int(mujoco.mjtWarning.mjWARN_BADQPOS), int(mujoco.mjtWarning.mjWARN_BADQACC) + 1
)
"""MuJoCo's warnings of a state it found unstable and reset (BADQPOS, BADQVEL, BADQACC: consecutive)."""
INVALID_ACTION_PENALTY = 1.0
"""Subtracted from the reward of a step whose action was malformed (zero control is applied)."""

Field = tuple[str, int, str]
"""(name, number of entries, unit) of a slice of an observation vector."""


SCENE_XML = """<visual>
    <global offwidth="1024" offheight="1024"/>
    <headlight ambient="0.4 0.4 0.4" diffuse="0.5 0.5 0.5" specular="0.05 0.05 0.05"/>
  </visual>
  <asset>
    <texture name="sky" type="skybox" builtin="gradient" rgb1="0.55 0.65 0.8" rgb2="0.15 0.15 0.2" width="64" height="64"/>
    <texture name="checker" type="2d" builtin="checker" rgb1="0.78 0.78 0.75" rgb2="0.7 0.7 0.67" width="64" height="64"/>
    <material name="floor" texture="checker" texuniform="true" texrepeat="2 2"/>
  </asset>"""
"""The shared ``<visual>`` and ``<asset>`` elements of the family's models (rendering only): an
offscreen buffer up to 1024 x 1024, a soft headlight, a sky box and the ``floor`` material."""


def top_camera_xml(half_extent: float) -> str:
    """A camera named ``top`` looking straight down that frames ``[-half_extent, half_extent]^2``."""
    height = 2.6 * half_extent  # the default vertical field of view is 45 degrees
    return f'<camera name="top" pos="0 0 {height:.3f}" xyaxes="1 0 0 0 1 0"/>'


def planar_body_xml(name: str, height: float, joint_attributes: str, geom: str) -> str:
    """MJCF of a body that slides on the floor: joints ``<name>_x`` and ``<name>_y``, no rotation.

    Args:
        name: body name, prefix of the joint names.
        height: z of the body frame, m.
        joint_attributes: extra attributes of both slide joints (damping, range, ...).
        geom: the body's ``<geom .../>`` element.
    """
    joints = "".join(
        f'<joint name="{name}_{axis}" type="slide" axis="{direction}" {joint_attributes}/>'
        for axis, direction in (("x", "1 0 0"), ("y", "0 1 0"))
    )
    return f'<body name="{name}" pos="0 0 {height}">{joints}{geom}</body>'


def planar_motors_xml(name: str, gear: float) -> str:
    """MJCF motors (control range [-1, 1], ``gear`` newtons) on the slide joints of ``name``."""
    return "".join(
        f'<motor joint="{name}_{axis}" gear="{gear}" ctrlrange="-1 1" ctrllimited="true"/>'
        for axis in "xy"
    )


def _format_numbers(values: np.ndarray, precision: int = 4) -> str:
    return "[" + ", ".join(f"{float(v):.{precision}g}" for v in np.ravel(values)) + "]"


def _penalized(
    error: dict[str, Any], info: dict[str, Any], reward: float
) -> tuple[dict[str, Any], float]:
    """``(info, reward)`` of a step whose action was malformed (``error`` holds its
    ``action_error``, first in the info) or, with an empty ``error``, unchanged."""
    if not error:
        return info, reward
    return {**error, **info}, reward - INVALID_ACTION_PENALTY


class MujocoGoalEnv(EpisodeGuard, gym.Env[dict[str, np.ndarray], np.ndarray]):
    """Base class of the goal-conditioned MuJoCo tasks (see the module docstring).

    Subclasses set ``metadata`` (``render_fps`` follows ``dt``), call :meth:`_setup` at the end of
    ``__init__`` and implement the hooks. Observations are ``float64``; actions are ``float32`` in
    ``[-1, 1]`` per actuator, mapped linearly onto ``actuator_ctrlrange``.
    """

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 50, "family": "mujoco"}

    remote_kwargs = {
        "reward_type": client(OneOf(REWARD_TYPES)),
        "max_steps": operator_only(IntRange(1, 1_000_000), why="raises the cost of an episode"),
        "width": operator_only(IntRange(16, 4096), why="rendering cost"),
        "height": operator_only(IntRange(16, 4096), why="rendering cost"),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    OBSERVATION_FIELDS: tuple[Field, ...] = ()
    GOAL_FIELDS: tuple[Field, ...] = ()
    TASK_TEXT = ""
    """One paragraph for :meth:`instructions`: the goal, the action's meaning and units."""

    frame_skip: int = 1
    max_steps: int = 100
    reward_type: str = "dense"
    render_mode: str | None = None
    width: int = 480
    height: int = 480

    # -- hooks ---------------------------------------------------------------------------------
    def _model_xml(self) -> str:
        """The MJCF of the next episode (called on every reset; the compiled model is cached)."""
        raise NotImplementedError

    def _reset_task(self) -> None:
        """Set ``self.data`` (qpos, qvel) and the goal from ``self.np_random``."""
        raise NotImplementedError

    def _observation_vector(self) -> np.ndarray:
        raise NotImplementedError

    def _achieved_goal(self) -> np.ndarray:
        raise NotImplementedError

    def _desired_goal(self) -> np.ndarray:
        raise NotImplementedError

    def _status(self, reached: bool) -> tuple[bool, bool]:
        """``(success, failed)`` in the current state; ``reached``: the goal predicate holds now.

        Default: success as soon as the goal is reached, no failure.
        """
        return reached, False

    def _progress(self) -> float:
        """Share of the task done, in [0, 1] (the partial score of an unsuccessful episode)."""
        raise NotImplementedError

    def goal_distance(self, achieved_goal: np.ndarray, desired_goal: np.ndarray) -> np.ndarray:
        """Euclidean distance over the last axis (vectorized), in the goal's unit."""
        difference = np.asarray(achieved_goal, dtype=np.float64) - np.asarray(
            desired_goal, dtype=np.float64
        )
        return np.sqrt(np.sum(difference * difference, axis=-1))

    def within_tolerance(self, distance: np.ndarray) -> np.ndarray:
        """Whether a goal distance counts as reached: ``distance < self.distance_threshold``."""
        return np.asarray(distance) < self.distance_threshold

    distance_threshold: float = 0.05

    # -- setup ---------------------------------------------------------------------------------
    def _setup(
        self,
        *,
        max_steps: int,
        reward_type: str,
        render_mode: str | None,
        width: int = 480,
        height: int = 480,
    ) -> None:
        """Validate the common arguments, build the first model and the spaces."""
        self.max_steps = check_int("max_steps", max_steps, 1, 1_000_000)
        self.reward_type = check_choice("reward_type", reward_type, REWARD_TYPES)
        self.render_mode = accept_render_mode(render_mode, self.metadata["render_modes"])
        self.width = check_int("width", width, 16, 4096)
        self.height = check_int("height", height, 16, 4096)
        self._xml: str | None = None
        self._renderer: mujoco.Renderer | None = None
        self._load(self._model_xml())
        self._steps = 0
        self._reset_task()
        mujoco.mj_forward(self.model, self.data)
        nu = self.model.nu
        self.action_space = spaces.Box(-1.0, 1.0, shape=(nu,), dtype=np.float32)
        goal = self._achieved_goal()
        self.observation_space = spaces.Dict(
            {
                "observation": self._vector_space(self._observation_vector()),
                "achieved_goal": self._vector_space(goal),
                "desired_goal": self._vector_space(goal),
            }
        )

    def _vector_space(self, example: np.ndarray) -> spaces.Box:
        return spaces.Box(-np.inf, np.inf, shape=example.shape, dtype=np.float64)

    def _load(self, xml: str) -> None:
        """Compile ``xml`` unless it is the current model's source."""
        if xml == self._xml:
            return
        self._xml = xml
        self.model = self._compile(xml)
        self.data = mujoco.MjData(self.model)
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        ctrl = self.model.actuator_ctrlrange.astype(np.float64)
        limited = self.model.actuator_ctrllimited.astype(bool)
        low, high = np.where(limited, ctrl[:, 0], -1.0), np.where(limited, ctrl[:, 1], 1.0)
        self._ctrl_mid, self._ctrl_half = (high + low) / 2, (high - low) / 2
        self._bind_views()
        self._bind()

    _VIEWS = ("_qpos", "_qvel", "_ctrl", "_unstable")
    """Attributes that are views into ``self.data`` (rebuilt after a compile, a copy or unpickling)."""

    def _bind_views(self) -> None:
        """Cache views into ``self.data`` (each ``data.qpos`` access builds a new numpy view), and
        MuJoCo's counters of the states it found unstable and reset."""
        self._qpos, self._qvel, self._ctrl = self.data.qpos, self.data.qvel, self.data.ctrl
        self._dt = float(self.model.opt.timestep) * self.frame_skip  # see dt
        # a live int32 view of MuJoCo's counts of the BADQPOS, BADQVEL and BADQACC warnings
        self._unstable = self.data.warning.number[_UNSTABLE_WARNINGS]
        self._unstable_seen = self._unstable_count()

    def _unstable_count(self) -> int:
        """How many times MuJoCo found NaN, inf or huge values in qpos/qvel/qacc and reset ``data``."""
        return sum(self._unstable.tolist())

    def _bind(self) -> None:
        """Called after each compile: cache ids of named sites/bodies (subclass hook)."""

    def _compile(self, xml: str) -> mujoco.MjModel:
        """Compile MJCF text (subclass hook, e.g. to post-process the model)."""
        return mujoco.MjModel.from_xml_string(xml)

    @property
    def dt(self) -> float:
        """Seconds of simulated time per env step (``timestep * frame_skip``)."""
        return self._dt

    # -- Gymnasium API -------------------------------------------------------------------------
    def _observation(self) -> dict[str, np.ndarray]:
        # the hooks return new float64 arrays (never views of MjData, which the next step changes)
        return {
            "observation": self._observation_vector(),
            "achieved_goal": self._achieved_goal(),
            "desired_goal": self._desired_goal(),
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        self._load(self._model_xml())
        mujoco.mj_resetData(self.model, self.data)
        self._steps = 0
        self._reset_task()
        mujoco.mj_forward(self.model, self.data)
        self._unstable_seen = self._unstable_count()
        observation = self._observation()
        return observation, self._goal_info(observation)[0]

    def _goal_info(self, observation: dict[str, np.ndarray]) -> tuple[dict[str, Any], float, bool]:
        """The per-step ``info`` entries, the reward and whether the goal is reached, for
        ``observation``'s goals (the definitions :meth:`compute_reward` uses)."""
        distance = self.goal_distance(observation["achieved_goal"], observation["desired_goal"])
        reached = bool(self.within_tolerance(distance))
        info = {"distance": float(distance), "is_success": float(reached), "time": self.data.time}
        return info, float(self._reward(distance, reached)), reached

    def controls(self, action: np.ndarray) -> np.ndarray:
        """Actuator controls (``data.ctrl``) of a normalized action in [-1, 1]: a linear map onto
        ``actuator_ctrlrange`` (unlimited actuators: identity)."""
        return self._ctrl_mid + np.asarray(action, dtype=np.float64) * self._ctrl_half

    def _unit_action(self, action: Any, info: dict[str, Any]) -> np.ndarray:
        """The action as float64 in [-1, 1]; zeros and ``info["action_error"]`` if malformed."""
        if (
            type(action) is np.ndarray
            and action.shape == self.action_space.shape
            and action.dtype == np.float32
            and bool((np.abs(action) <= 1.0).all())
        ):
            return action.astype(np.float64)  # fast path; NaN fails the bound test
        try:
            return coerce_action(self.action_space, action).astype(np.float64)
        except ActionParseError as exc:
            example = format_value(self.action_space, np.zeros(self.model.nu, np.float32))
            action_error_info(
                f"{exc}; send {self.model.nu} numbers in [-1, 1], e.g. {example}", info
            )
            return np.zeros(self.model.nu)

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        error: dict[str, Any] = {}
        self._ctrl[:] = self.controls(self._unit_action(action, error))
        self._before_physics()
        mujoco.mj_step(self.model, self.data, self.frame_skip)
        self._after_physics()
        self._steps += 1
        # MuJoCo resets data itself when qpos/qvel/qacc turn NaN, inf or huge; its counters tell
        if self._unstable_count() != self._unstable_seen:
            return self._diverged_step(error)
        observation = self._observation()
        info, reward, reached = self._goal_info(observation)
        info, reward = _penalized(error, info, reward)
        success, failed = self._status(reached)
        if success or failed:
            return self._end(observation, reward, info, success)
        if self._steps >= self.max_steps:
            return self._end(observation, reward, info, False, truncated=True)
        return observation, reward, False, False, info

    def _end(
        self,
        observation: dict[str, np.ndarray],
        reward: float,
        info: dict[str, Any],
        success: bool,
        *,
        truncated: bool = False,
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """The last step of an episode (terminated, or ``truncated`` at the step limit): the verdict
        in ``info``, score 1 on success, else half the progress."""
        score = 1.0 if success else 0.5 * min(1.0, max(0.0, float(self._progress())))
        episode_end(info, success=success, score=score)
        return observation, reward, not truncated, truncated, info

    def _diverged_step(
        self, error: dict[str, Any]
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """The simulation blew up: end the episode as a failure, with a finite observation."""
        logger.warning("MuJoCo state diverged in %s; ending the episode", type(self).__name__)
        mujoco.mj_resetData(self.model, self.data)
        mujoco.mj_forward(self.model, self.data)
        self._unstable_seen = self._unstable_count()
        observation = self._observation()
        info, reward, _ = self._goal_info(observation)
        info, reward = _penalized(error, info, reward)
        return self._end(observation, reward, info, False)

    def _before_physics(self) -> None:
        """Called after ``ctrl`` is set, before the physics steps (subclass hook)."""

    def _after_physics(self) -> None:
        """Called after the physics steps, before the observation (subclass hook)."""

    def compute_reward(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any
    ) -> np.ndarray | float:
        """The reward for goals, vectorized over leading axes (hindsight relabelling).

        ``dense``: ``-distance(achieved_goal, desired_goal)``; ``sparse``: ``0`` where the goal is
        reached, else ``-1``. ``info`` is unused (accepted for the Gymnasium-Robotics signature).

        Args:
            achieved_goal: float array of shape ``(..., goal_dim)``.
            desired_goal: float array of shape ``(..., goal_dim)``.
            info: a dict or an array of dicts (ignored).

        Returns:
            float64 array of shape ``(...)`` (a 0-d array for single goals).
        """
        distance = self.goal_distance(achieved_goal, desired_goal)
        return self._reward(distance, self.within_tolerance(distance))

    def _reward(self, distance: np.ndarray, reached: np.ndarray) -> np.ndarray:
        if self.reward_type == "sparse":
            return np.asarray(reached, dtype=np.float64) - 1.0
        return -np.asarray(distance, dtype=np.float64)

    # -- rendering -----------------------------------------------------------------------------
    def _camera(self) -> mujoco.MjvCamera | str | int:
        """The camera of ``render()``: a named camera of the model or a configured free camera."""
        return -1

    def render(self) -> np.ndarray | None:
        """An ``uint8`` array of shape ``(height, width, 3)`` in ``rgb_array`` mode, else None."""
        if self.render_mode != "rgb_array":
            return None
        if self._renderer is None:
            self._renderer = mujoco.Renderer(self.model, self.height, self.width)
        self._renderer.update_scene(self.data, camera=self._camera())
        return self._renderer.render().copy()

    def close(self) -> None:
        if getattr(self, "_renderer", None) is not None:
            self._renderer.close()
            self._renderer = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_renderer"] = None  # an OpenGL context does not pickle; render() makes a new one
        for name in self._VIEWS:  # views of the old data: rebuilt on the copy's own data
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        seen = state.get("_unstable_seen")
        self._bind_views()
        self._bind()
        if seen is not None:
            self._unstable_seen = seen

    def __deepcopy__(self, memo: dict[int, Any]) -> MujocoGoalEnv:
        import copy

        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        clone.__setstate__(
            {key: copy.deepcopy(value, memo) for key, value in self.__getstate__().items()}
        )
        return clone

    # -- TextInterface -------------------------------------------------------------------------
    def instructions(self) -> str:
        n = self.model.nu
        example = format_value(self.action_space, np.zeros(n, np.float32))
        return (
            f"{self.TASK_TEXT} Each step lasts {self.dt:.3g} s; the episode ends after "
            f"{self.max_steps} steps ({self.max_steps * self.dt:.3g} s). Reply with a list of {n} "
            f"numbers in [-1, 1], one per actuator, e.g. {example}; the last [...] list in the "
            "reply counts. A reply without such a list is an invalid action: it is penalized and the "
            "error is shown to you."
        )

    def observation_text(self, observation: dict[str, np.ndarray]) -> str:
        lines = []
        for key, fields in (
            ("observation", self.OBSERVATION_FIELDS),
            ("achieved_goal", self.GOAL_FIELDS),
            ("desired_goal", self.GOAL_FIELDS),
        ):
            vector = np.asarray(observation[key], dtype=np.float64)
            prefix = {
                "observation": "",
                "achieved_goal": "achieved goal, ",
                "desired_goal": "desired goal, ",
            }[key]
            start = 0
            for name, size, unit in fields:
                part = vector[start : start + size]
                start += size
                unit_text = f" ({unit})" if unit else ""
                lines.append(f"{prefix}{name}{unit_text}: {_format_numbers(part)}")
            if start < vector.size:
                lines.append(f"{prefix}{key} (rest): {_format_numbers(vector[start:])}")
        distance = float(
            self.goal_distance(observation["achieved_goal"], observation["desired_goal"])
        )
        lines.append(f"distance to the goal: {distance:.4g}")
        return "\n".join(lines)

    def parse_action(self, text: str) -> np.ndarray:
        """Read the last ``[...]`` list of ``nu`` numbers in ``text``.

        Raises:
            TypeError: ``text`` is not a str.
            ActionParseError: no list of the right length with values in [-1, 1].
        """
        return parse_value(self.action_space, text)

    def action_text(self, action: np.ndarray) -> str:
        """The exact text of ``action`` (round-trips through :meth:`parse_action`)."""
        return format_value(self.action_space, action)
