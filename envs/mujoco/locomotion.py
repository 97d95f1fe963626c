"""Locomotion targets: Gymnasium's Hopper, HalfCheetah and Ant must cover a distance in time."""

from __future__ import annotations

import pathlib
import re
from dataclasses import dataclass
from typing import Any

import gymnasium
import mujoco
import numpy as np

from verigym.envs.mujoco.base import MujocoGoalEnv
from verigym.kwargs_policy import FloatRange, OneOf, client, operator_only
from verigym.validation import check_choice, check_number

__all__ = ["ROBOTS", "LocomotionTargetEnv", "Robot"]

ASSETS = pathlib.Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets"
"""Where the gymnasium package keeps its MuJoCo models (no download)."""


@dataclass(frozen=True)
class Robot:
    """A locomotion model and its defaults.

    Attributes:
        xml: file name in Gymnasium's assets folder.
        frame_skip: physics steps per env step (Gymnasium's value).
        reset_noise: half-width of the uniform noise on the initial qpos and qvel.
        hidden_qpos: leading qpos entries left out of the observation (the forward position, and
            the lateral one for the Ant), as in Gymnasium.
        distance: default target distance along +x, m.
        seconds: default time limit, s.
    """

    xml: str
    frame_skip: int
    reset_noise: float
    hidden_qpos: int
    distance: float
    seconds: float


ROBOTS: dict[str, Robot] = {
    "hopper": Robot("hopper.xml", 4, 0.005, 1, 5.0, 8.0),
    "half_cheetah": Robot("half_cheetah.xml", 5, 0.1, 1, 10.0, 10.0),
    "ant": Robot("ant.xml", 5, 0.1, 2, 5.0, 20.0),
}


class LocomotionTargetEnv(MujocoGoalEnv):
    """Run forward ``distance`` metres within ``seconds`` without falling.

    ## Description
    Gymnasium's MuJoCo ``Hopper``, ``HalfCheetah`` and ``Ant`` models (loaded from the
    ``gymnasium`` package, Todorov et al. 2012; Schulman et al. 2015; Erez et al. 2011) with a
    verifiable goal in place of a reward to maximize: the torso must reach ``x >= distance``
    (metres along +x from the start) before ``seconds`` of simulated time, and must not fall on
    the way. Falling is Gymnasium's "unhealthy" test: Hopper torso height < 0.7 m or pitch beyond
    +-0.2 rad; Ant torso height outside [0.2, 1.0] m; HalfCheetah (which cannot fall in Gymnasium)
    flipped: pitch beyond +-1 rad. Physics and frame skips are Gymnasium's (one step: 0.008 s
    Hopper, 0.05 s HalfCheetah and Ant).

    ## Action Space
    ``Box(-1, 1, (nu,), float32)``, nu = 3 (Hopper), 6 (HalfCheetah), 8 (Ant): joint torques,
    mapped linearly onto the actuators' control ranges (Gymnasium's action scale).

    ## Observation Space
    ``Dict`` of ``float64`` vectors:

    | key | shape | content |
    | --- | --- | --- |
    | ``observation`` | ``(nq - k + nv + 1,)`` | joint positions without the first k = 1 (Ant: 2) entries (m, rad; Ant torso orientation as a quaternion), joint velocities (m/s, rad/s), seconds left (s) |
    | ``achieved_goal`` | ``(1,)`` | torso x (m) |
    | ``desired_goal`` | ``(1,)`` | the target ``distance`` (m) |

    ## Rewards
    ``dense`` (default): ``-max(0, distance - x)`` (metres still to go); ``sparse``: ``0`` once
    ``x >= distance`` else ``-1``. A malformed action applies zero torque for the step, costs 1
    extra and sets ``info["action_error"]``.

    ## Starting State
    Gymnasium's initial pose with uniform noise on qpos and qvel (+-0.005 Hopper, +-0.1 others).

    ## Episode End
    Terminated on ``x >= distance``: ``success=True``, ``score=1``; terminated on a fall:
    ``success=False``. Truncated after ``seconds``: ``success=False``. An unsuccessful episode
    scores ``0.5 * clip(x / distance, 0, 1)``.

    ## Arguments
    * ``robot`` (``"hopper"``, ``"half_cheetah"`` or ``"ant"``).
    * ``distance`` (float, 0.5..100 m; default 5 Hopper, 10 HalfCheetah, 5 Ant).
    * ``seconds`` (float, 1..100 s; default 8 Hopper, 10 HalfCheetah, 20 Ant).
    * ``reward_type``, ``render_mode``, ``width``, ``height``.

    No scripted oracle: these tasks are for learned policies.

    ## Version History
    * v0: initial version.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20, "family": "mujoco"}

    remote_kwargs = {
        "robot": client(OneOf(tuple(ROBOTS))),
        "distance": client(FloatRange(0.5, 100.0)),
        "seconds": operator_only(
            FloatRange(1.0, 100.0), why="raises the simulated time of an episode"
        ),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""
    GOAL_FIELDS = (("torso x", 1, "m"),)

    def __init__(
        self,
        *,
        robot: str = "hopper",
        distance: float | None = None,
        seconds: float | None = None,
        reward_type: str = "dense",
        render_mode: str | None = None,
        width: int = 480,
        height: int = 480,
    ):
        self.robot = check_choice("robot", robot, tuple(ROBOTS))
        spec = ROBOTS[robot]
        self.distance = check_number(
            "distance", spec.distance if distance is None else distance, 0.5, 100.0
        )
        self.seconds = check_number(
            "seconds", spec.seconds if seconds is None else seconds, 1.0, 100.0
        )
        self.frame_skip = spec.frame_skip
        self._spec = spec
        self._xml_text = (ASSETS / spec.xml).read_text()
        self._init_qpos = np.zeros(0)
        self.TASK_TEXT = (
            f"Make the {robot.replace('_', ' ')} run forward (+x) at least {self.distance:g} m "
            f"within {self.seconds:g} s without falling. Each action entry is the torque of one "
            "actuator, as a share of its limit."
        )
        self._setup(
            max_steps=1,
            reward_type=reward_type,
            render_mode=render_mode,
            width=width,
            height=height,
        )
        self.max_steps = int(round(self.seconds / self.dt))
        nq, nv = self.model.nq, self.model.nv
        self.OBSERVATION_FIELDS = (
            ("joint positions", nq - spec.hidden_qpos, "m or rad"),
            ("joint velocities", nv, "m/s or rad/s"),
            ("time left", 1, "s"),
        )

    def _model_xml(self) -> str:
        return self._xml_text

    def _compile(self, xml: str) -> mujoco.MjModel:
        # HalfCheetah's MJCF uses the deprecated compiler attribute settotalmass (MuJoCo logs a
        # warning to MUJOCO_LOG.TXT in the working directory); apply it on the compiled model
        match = re.search(r'\s*settotalmass="([^"]+)"', xml)
        if match is None:
            return super()._compile(xml)
        model = super()._compile(xml.replace(match.group(0), ""))
        mujoco.mj_setTotalmass(model, float(match.group(1)))
        mujoco.mj_setConst(model, mujoco.MjData(model))
        return model

    def _reset_task(self) -> None:
        noise = self._spec.reset_noise
        self.data.qpos[:] = self.model.qpos0 + self.np_random.uniform(
            -noise, noise, size=self.model.nq
        )
        self.data.qvel[:] = self.np_random.uniform(-noise, noise, size=self.model.nv)
        self._start_x = float(self.data.qpos[0])

    # The step path reads the cached views of ``data`` (``self._qpos``, ``self._qvel``) and works on
    # Python floats where numpy would build arrays for one or two numbers.
    def _bind(self) -> None:
        self._visible_qpos = self._qpos[self._spec.hidden_qpos :]  # a view, like _qpos

    _VIEWS = (*MujocoGoalEnv._VIEWS, "_visible_qpos")

    def _torso_x(self) -> float:
        return self._qpos.item(0) - self._start_x

    def _observation_vector(self) -> np.ndarray:
        left = max(0.0, self.max_steps - self._steps) * self._dt
        return np.concatenate((self._visible_qpos, self._qvel, (left,)))

    def _achieved_goal(self) -> np.ndarray:
        return np.array([self._torso_x()])

    def _desired_goal(self) -> np.ndarray:
        return np.array([self.distance])

    def goal_distance(self, achieved_goal: np.ndarray, desired_goal: np.ndarray) -> np.ndarray:
        """Metres still to go along +x, ``max(0, desired - achieved)`` (vectorized)."""
        gap = np.asarray(desired_goal, dtype=np.float64) - np.asarray(
            achieved_goal, dtype=np.float64
        )
        return np.maximum(gap[..., 0], 0.0)

    def within_tolerance(self, distance: np.ndarray) -> np.ndarray:
        """Reached when nothing is left to go: ``distance <= 0``."""
        return np.asarray(distance) <= 0.0

    def fallen(self) -> bool:
        """Gymnasium's unhealthy test for the robot (HalfCheetah: flipped over)."""
        q = self._qpos.tolist()
        if self.robot == "hopper":
            z, pitch = q[1], q[2]
            return not (
                z > 0.7
                and abs(pitch) < 0.2
                and all(abs(value) < 100.0 for value in (*q[2:], *self._qvel.tolist()))
            )
        if self.robot == "ant":
            return not 0.2 <= q[2] <= 1.0
        return abs(q[2]) > 1.0

    def _status(self, reached: bool) -> tuple[bool, bool]:
        return reached, self.fallen()

    def _progress(self) -> float:
        return self._torso_x() / self.distance

    def _camera(self) -> Any:
        return "track"
