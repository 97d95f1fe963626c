"""Reach: move the fingertip of a planar 2- or 3-link arm to a random target."""

from __future__ import annotations

import math
from typing import Any

import mujoco
import numpy as np

from verigym.envs.mujoco.base import SCENE_XML, MujocoGoalEnv, top_camera_xml
from verigym.kwargs_policy import FloatRange, OneOf, client
from verigym.validation import check_number

__all__ = ["ReachEnv"]

LINK_LENGTHS = {2: (0.12, 0.10), 3: (0.10, 0.08, 0.06)}
"""Link lengths in metres per number of links; the reach is their sum (0.22 m / 0.24 m)."""
VMAX = 6.0
"""Joint speed limit of the oracle's velocity reference, rad/s."""


def _arm_xml(lengths: tuple[float, ...]) -> str:
    bodies, close = [], []
    for i, length in enumerate(lengths):
        offset = 0.0 if i == 0 else lengths[i - 1]
        bodies.append(
            f'<body name="link{i}" pos="{offset} 0 0">'
            f'<joint name="j{i}" type="hinge" axis="0 0 1" damping="0.002"/>'
            f'<geom type="capsule" fromto="0 0 0 {length} 0 0" size="0.01" rgba="0.2 0.5 0.8 1" mass="{0.1 * length / 0.1:.4f}"/>'
        )
        close.append("</body>")
    tip = f'<site name="fingertip" pos="{lengths[-1]} 0 0" size="0.012" rgba="0.9 0.3 0.2 1"/>'
    motors = "".join(
        f'<motor joint="j{i}" gear="0.05" ctrlrange="-1 1" ctrllimited="true"/>'
        for i in range(len(lengths))
    )
    return f"""<mujoco model="reach{len(lengths)}">
  <option timestep="0.005" gravity="0 0 0" integrator="implicitfast"/>
  {SCENE_XML}
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <geom type="plane" size="0.3 0.3 0.01" rgba="0.85 0.85 0.82 1"/>
    {top_camera_xml(0.27)}
    <geom type="cylinder" size="0.015 0.01" rgba="0.3 0.3 0.3 1"/>
    <site name="target" pos="0.1 0 0.01" size="0.015" rgba="0.1 0.8 0.1 0.8"/>
    <body name="arm" pos="0 0 0.02">{"".join(bodies)}{tip}{"".join(close)}</body>
  </worldbody>
  <actuator>{motors}</actuator>
</mujoco>"""


class ReachEnv(MujocoGoalEnv):
    """Move the fingertip of a planar arm to a random target.

    ## Description
    A planar arm of ``num_links`` hinge joints (2: links 0.12 and 0.10 m; 3: 0.10, 0.08 and 0.06 m)
    lies on a table, seen from above, without gravity or self-collision (the arm of Gymnasium's
    ``Reacher``, generalized). A target is drawn uniformly in the annulus ``0.05 m <= r <= 0.9 *
    reach`` around the base; every target is reachable. Simulation step 5 ms, ``frame_skip`` 4:
    one env step is 0.02 s.

    ## Action Space
    ``Box(-1, 1, (num_links,), float32)``: the torque of each joint, in units of 0.05 N m.

    ## Observation Space
    ``Dict`` of ``float64`` vectors (Gymnasium-Robotics convention):

    | key | shape | content |
    | --- | --- | --- |
    | ``observation`` | ``(3 * num_links + 2,)`` | cos and sin of each joint angle, joint velocities (rad/s), fingertip x, y (m) |
    | ``achieved_goal`` | ``(2,)`` | fingertip x, y (m) |
    | ``desired_goal`` | ``(2,)`` | target x, y (m) |

    ## Rewards
    :meth:`compute_reward` of the step's goals: ``dense`` (default) ``-d`` with ``d`` the
    fingertip-target distance in metres; ``sparse`` ``0`` if ``d < distance_threshold`` else ``-1``.
    A malformed action (NaN, out of [-1, 1], wrong shape) applies zero torque for the step, costs 1
    extra and sets ``info["action_error"]``. Every ``info`` holds ``distance`` (m), ``is_success``
    (0/1 float) and ``time`` (s).

    ## Starting State
    Joint angles uniform in ``[-pi, pi]``, velocities zero; target as above.

    ## Episode End
    Terminated when ``d < distance_threshold``: ``success=True``, ``score=1``. Truncated after
    ``max_steps``: ``success=False``, ``score = 0.5 * max(0, 1 - d / d_0)`` (``d_0`` the initial
    distance).

    ## Arguments
    * ``num_links`` (int, 2 or 3).
    * ``distance_threshold`` (float, 0.005..0.05 m, default 0.015).
    * ``max_steps`` (int, default 100 = 2 s).
    * ``reward_type`` (``"dense"`` or ``"sparse"``).
    * ``render_mode`` (``None`` or ``"rgb_array"``), ``width``, ``height`` (pixels).

    The oracle (:meth:`oracle_action`) solves inverse kinematics by damped least squares once per
    goal, then tracks the joint angles with a speed-limited velocity reference and computed torque
    (``M(q)`` times the desired acceleration).

    ## Version History
    * v0: initial version.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50, "family": "mujoco"}

    remote_kwargs = {
        "num_links": client(OneOf((2, 3))),
        "distance_threshold": client(FloatRange(0.005, 0.05)),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""
    frame_skip = 4
    TASK_TEXT = ""

    def __init__(
        self,
        *,
        num_links: int = 2,
        distance_threshold: float = 0.015,
        max_steps: int = 100,
        reward_type: str = "dense",
        render_mode: str | None = None,
        width: int = 480,
        height: int = 480,
    ):
        if num_links not in LINK_LENGTHS:
            raise ValueError(f"num_links must be 2 or 3, got {num_links!r}")
        self.num_links = num_links
        self.lengths = LINK_LENGTHS[num_links]
        self.reach = float(sum(self.lengths))
        self.distance_threshold = check_number(
            "distance_threshold", distance_threshold, 0.005, 0.05
        )
        self._target = np.zeros(2)
        self._initial_distance = 1.0
        self._ik: tuple[tuple[float, float], np.ndarray] | None = None
        self.OBSERVATION_FIELDS = (
            ("cos(joint angle)", num_links, ""),
            ("sin(joint angle)", num_links, ""),
            ("joint velocity", num_links, "rad/s"),
            ("fingertip x, y", 2, "m"),
        )
        self.GOAL_FIELDS = (("x, y", 2, "m"),)
        self.TASK_TEXT = (
            f"Move the fingertip of a planar {num_links}-link arm (seen from above, base at the "
            f"origin, reach {self.reach:.2f} m) to within {self.distance_threshold} m of the target. "
            "Each action entry is the torque of one joint from base to tip, in units of 0.05 N m."
        )
        self._setup(
            max_steps=max_steps,
            reward_type=reward_type,
            render_mode=render_mode,
            width=width,
            height=height,
        )

    def _model_xml(self) -> str:
        return _arm_xml(self.lengths)

    def _reset_task(self) -> None:
        self.data.qpos[:] = self.np_random.uniform(-np.pi, np.pi, size=self.num_links)
        radius = self.np_random.uniform(0.05, 0.9 * self.reach)
        angle = self.np_random.uniform(-np.pi, np.pi)
        self._target = np.array([radius * np.cos(angle), radius * np.sin(angle)])
        self.model.site_pos[self.model.site("target").id, :2] = self._target
        mujoco.mj_forward(self.model, self.data)
        self._initial_distance = max(1e-6, float(np.linalg.norm(self._fingertip() - self._target)))
        self._ik = None

    _VIEWS = (*MujocoGoalEnv._VIEWS, "_tip_xy")

    def _bind(self) -> None:
        self._tip = self.model.site("fingertip").id
        self._tip_xy = self.data.site_xpos[self._tip, :2]  # a view: read after every step

    def _fingertip(self) -> np.ndarray:
        return self._tip_xy.copy()

    def _observation_vector(self) -> np.ndarray:
        # one array from Python floats: cheaper than two ufuncs and a concatenate on 2-3 joints
        q = self._qpos.tolist()
        return np.array(
            [*map(math.cos, q), *map(math.sin, q), *self._qvel.tolist(), *self._tip_xy.tolist()]
        )

    def _achieved_goal(self) -> np.ndarray:
        return self._fingertip()

    def _desired_goal(self) -> np.ndarray:
        return self._target.copy()

    def _progress(self) -> float:
        return (
            1.0 - float(np.linalg.norm(self._fingertip() - self._target)) / self._initial_distance
        )

    def _camera(self) -> Any:
        return "top"

    # -- oracle ------------------------------------------------------------------------------
    def _solve_ik(self) -> np.ndarray:
        """Joint angles that put the fingertip on the target (damped least squares)."""
        data = mujoco.MjData(self.model)
        site = self.model.site("fingertip").id
        jac = np.zeros((3, self.model.nv))
        best, best_error = self.data.qpos.copy(), np.inf
        for attempt in range(8):
            data.qpos[:] = (
                self.data.qpos
                if attempt == 0
                else best + np.linspace(0.7, 1.9, self.num_links) * attempt
            )
            for _ in range(100):
                mujoco.mj_kinematics(self.model, data)
                error = self._target - data.site_xpos[site, :2]
                if np.linalg.norm(error) < 1e-5:
                    break
                mujoco.mj_comPos(self.model, data)
                mujoco.mj_jacSite(self.model, data, jac, None, site)
                j = jac[:2]
                data.qpos[:] += j.T @ np.linalg.solve(j @ j.T + 1e-4 * np.eye(2), error)
            mujoco.mj_kinematics(self.model, data)
            err = float(np.linalg.norm(self._target - data.site_xpos[site, :2]))
            if err < best_error:
                best, best_error = data.qpos.copy(), err
            if err < 1e-4:
                break
        return best

    def oracle_action(self) -> np.ndarray:
        """PD torques toward the inverse-kinematics solution of the current target."""
        key = (float(self._target[0]), float(self._target[1]))
        if self._ik is None or self._ik[0] != key:
            self._ik = (key, self._solve_ik())
        error = np.angle(np.exp(1j * (self._ik[1] - self.data.qpos)))  # wrapped to (-pi, pi]
        # velocity reference (at most VMAX rad/s), tracked by computed torque: torque = M(q) @ acc
        velocity = np.clip(6.0 * error, -VMAX, VMAX)
        torque = np.zeros(self.model.nv)
        mujoco.mj_mulM(self.model, self.data, torque, 25.0 * (velocity - self.data.qvel))
        return np.clip(torque / 0.05, -1.0, 1.0).astype(np.float32)
