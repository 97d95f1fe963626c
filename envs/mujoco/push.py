"""Push: push a block across a table into a target zone with a round pusher."""

from __future__ import annotations

from typing import Any

import numpy as np

from verigym.envs.mujoco.base import (
    SCENE_XML,
    MujocoGoalEnv,
    planar_body_xml,
    planar_motors_xml,
    top_camera_xml,
)
from verigym.kwargs_policy import FloatRange, client
from verigym.validation import check_number

__all__ = ["PushEnv"]

PUSHER = 0.025
"""Radius of the pusher, m."""
BLOCK = 0.04
"""Radius of the (cylindrical) block, m."""
TABLE = 0.3
"""Half side of the table the pusher and block move on, m."""
GEAR = 4.0
"""Force of a unit action on the pusher, N."""
PUSHER_DAMPING = 8.0
"""Viscous damping of the pusher, N s/m."""

PUSH_XML = f"""<mujoco model="push">
  <option timestep="0.005" gravity="0 0 0"/>
  {SCENE_XML}
  <worldbody>
    <geom type="plane" size="{TABLE + 0.05} {TABLE + 0.05} 0.01" rgba="0.75 0.65 0.5 1" contype="0" conaffinity="0"/>
    {top_camera_xml(TABLE + 0.06)}
    <site name="target" pos="0 0 0.002" size="0.05 0.001" type="cylinder" rgba="0.1 0.8 0.1 0.6"/>
    {planar_body_xml("pusher", 0.03, f'damping="{PUSHER_DAMPING}" limited="true" range="-{TABLE} {TABLE}"', f'<geom type="cylinder" size="{PUSHER} 0.03" mass="0.5" rgba="0.2 0.3 0.8 1" friction="0.2 0.005 0.0001"/>')}
    {planar_body_xml("block", 0.03, f'damping="2" frictionloss="0.3" limited="true" range="-{TABLE} {TABLE}"', f'<geom type="cylinder" size="{BLOCK} 0.03" mass="0.3" rgba="0.85 0.4 0.1 1" friction="0.2 0.005 0.0001"/>')}
  </worldbody>
  <actuator>{planar_motors_xml("pusher", GEAR)}</actuator>
</mujoco>"""


class PushEnv(MujocoGoalEnv):
    """Push a block across a table into a target zone.

    ## Description
    A planar version of Gymnasium-Robotics' ``FetchPush`` (Plappert et al. 2018): seen from
    above, a round pusher (radius 0.025 m, 0.5 kg) is driven by forces on a 0.6 m x 0.6 m table; a
    cylindrical block (radius 0.04 m, 0.3 kg, Coulomb friction 0.3 N and viscous damping 2 N s/m
    against the table) moves only when pushed. The block must end inside the target zone.
    Simulation step 5 ms, ``frame_skip`` 10: one env step is 0.05 s.

    ## Action Space
    ``Box(-1, 1, (2,), float32)``: force on the pusher along x and y, in units of 4 N.

    ## Observation Space
    ``Dict`` of ``float64`` vectors:

    | key | shape | content |
    | --- | --- | --- |
    | ``observation`` | ``(10,)`` | pusher x, y (m), pusher velocity (m/s), block x, y (m), block velocity (m/s), block minus pusher x, y (m) |
    | ``achieved_goal`` | ``(2,)`` | block x, y (m) |
    | ``desired_goal`` | ``(2,)`` | target x, y (m) |

    ## Rewards
    ``dense`` (default): ``-d``, the block-target distance in metres; ``sparse``: ``0`` if
    ``d < distance_threshold`` else ``-1``. A malformed action applies no force for the step, costs
    1 extra and sets ``info["action_error"]``.

    ## Starting State
    Block uniform in ``[-0.15, 0.15]^2`` m, target uniform in ``[-0.2, 0.2]^2`` m at least 0.1 m
    from the block, pusher uniform on the table at least 0.1 m from the block; all at rest.

    ## Episode End
    Terminated when ``d < distance_threshold``: ``success=True``, ``score=1``. Truncated after
    ``max_steps`` (default 200 = 10 s): ``success=False``, ``score = 0.5 * max(0, 1 - d / d_0)``.

    ## Arguments
    * ``distance_threshold`` (float, 0.01..0.1 m, default 0.05).
    * ``max_steps`` (int), ``reward_type``, ``render_mode``, ``width``, ``height``.

    The oracle (:meth:`oracle_action`) circles the block at a small clearance until it is on the
    side away from the target, then pushes through the block's centre towards the target, turning
    around the block as the block-target direction changes.

    ## Version History
    * v0: initial version.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20, "family": "mujoco"}

    remote_kwargs = {"distance_threshold": client(FloatRange(0.01, 0.1))}
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""
    frame_skip = 10
    OBSERVATION_FIELDS = (
        ("pusher x, y", 2, "m"),
        ("pusher velocity x, y", 2, "m/s"),
        ("block x, y", 2, "m"),
        ("block velocity x, y", 2, "m/s"),
        ("block minus pusher x, y", 2, "m"),
    )
    GOAL_FIELDS = (("x, y", 2, "m"),)

    def __init__(
        self,
        *,
        distance_threshold: float = 0.05,
        max_steps: int = 200,
        reward_type: str = "dense",
        render_mode: str | None = None,
        width: int = 480,
        height: int = 480,
    ):
        self.distance_threshold = check_number("distance_threshold", distance_threshold, 0.01, 0.1)
        self._target = np.zeros(2)
        self._initial_distance = 1.0
        self.TASK_TEXT = (
            f"Push a round block (radius {BLOCK} m) into the target zone (its centre within "
            f"{self.distance_threshold} m of the target) with a round pusher (radius {PUSHER} m) on "
            f"a table from -{TABLE} to {TABLE} m in x and y, seen from above. The action is the "
            f"force on the pusher along x and y in units of {GEAR:g} N."
        )
        self._setup(
            max_steps=max_steps,
            reward_type=reward_type,
            render_mode=render_mode,
            width=width,
            height=height,
        )

    def _model_xml(self) -> str:
        return PUSH_XML

    def _reset_task(self) -> None:
        block = self.np_random.uniform(-0.15, 0.15, size=2)
        while True:
            target = self.np_random.uniform(-0.2, 0.2, size=2)
            if np.linalg.norm(target - block) >= 0.1:
                break
        while True:
            pusher = self.np_random.uniform(-TABLE + PUSHER, TABLE - PUSHER, size=2)
            if np.linalg.norm(pusher - block) >= 0.1:
                break
        self.data.qpos[:] = np.concatenate([pusher, block])
        self._target = target
        self.model.site_pos[self.model.site("target").id, :2] = target
        self.model.site_size[self.model.site("target").id, 0] = self.distance_threshold
        self._initial_distance = float(np.linalg.norm(target - block))

    def _observation_vector(self) -> np.ndarray:
        q, v = self.data.qpos, self.data.qvel
        return np.concatenate([q[:2], v[:2], q[2:4], v[2:4], q[2:4] - q[:2]])

    def _achieved_goal(self) -> np.ndarray:
        return self.data.qpos[2:4].copy()

    def _desired_goal(self) -> np.ndarray:
        return self._target.copy()

    def _progress(self) -> float:
        return (
            1.0 - float(np.linalg.norm(self.data.qpos[2:4] - self._target)) / self._initial_distance
        )

    def _camera(self) -> Any:
        return "top"

    # -- oracle ------------------------------------------------------------------------------
    def oracle_action(self) -> np.ndarray:
        """Get behind the block, then push it along the block-target line."""
        pusher, block = self.data.qpos[:2].copy(), self.data.qpos[2:4].copy()
        to_target = self._target - block
        distance = float(np.linalg.norm(to_target))
        u = to_target / max(distance, 1e-9)
        rel = pusher - block
        r = max(float(np.linalg.norm(rel)), 1e-9)
        radial = rel / r
        tangential = np.array([-radial[1], radial[0]])  # counter-clockwise around the block
        # angle still to go around the block to reach the pushing side (the side facing away from
        # the target), wrapped to (-pi, pi]
        turn = float(
            np.angle(np.exp(1j * (np.arctan2(-u[1], -u[0]) - np.arctan2(radial[1], radial[0]))))
        )
        reach = PUSHER + BLOCK
        orbit = 0.35 * np.clip(2.0 * turn, -1.0, 1.0) * tangential
        if abs(turn) < 0.4 and r < reach + 0.04:
            # on the pushing side: push towards the target, turning the contact point with it
            speed = min(0.2, 1.5 * distance + 0.02) * (1.0 - abs(turn) / 0.4)
            desired = speed * u + orbit
        else:
            # circle the block at a small clearance until on the pushing side
            desired = orbit + np.clip(6.0 * (reach + 0.02 - r), -0.3, 0.3) * radial
        force = PUSHER_DAMPING * desired + 2.0 * (desired - self.data.qvel[:2])
        return np.clip(force / GEAR, -1.0, 1.0).astype(np.float32)
