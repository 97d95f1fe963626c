"""Swingup: swing a pole on a cart up from hanging and balance it upright."""

from __future__ import annotations

import math
from typing import Any

import mujoco
import numpy as np

from verigym.envs.mujoco.base import SCENE_XML, MujocoGoalEnv
from verigym.kwargs_policy import FloatRange, client
from verigym.validation import check_number

__all__ = ["SwingupEnv"]

POLE = 1.0
"""Pole length, m (its pivot is on the cart; the tip is the achieved goal)."""
POLE_MASS = 0.1
"""Pole mass, kg."""
GEAR = 10.0
"""Force of a unit action on the cart, N."""
RAIL = 1.8
"""The cart moves on a rail from -RAIL to +RAIL metres (hard stops)."""

SWINGUP_XML = f"""<mujoco model="swingup">
  <option timestep="0.01" integrator="implicitfast"/>
  {SCENE_XML}
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <light pos="0 -2 4" dir="0 0.4 -1" directional="true" diffuse="0.4 0.4 0.4"/>
    <geom type="plane" pos="0 0 -0.6" size="3 1.5 0.01" material="floor"/>
    <camera name="side" pos="0 -5.6 0.5" xyaxes="1 0 0 0 0 1"/>
    <geom type="capsule" fromto="-{RAIL + 0.2} 0 0 {RAIL + 0.2} 0 0" size="0.015" rgba="0.4 0.4 0.4 1"/>
    <body name="cart">
      <joint name="slider" type="slide" axis="1 0 0" limited="true" range="-{RAIL} {RAIL}" damping="0.05"/>
      <geom type="box" size="0.15 0.08 0.06" mass="1" rgba="0.2 0.4 0.8 1"/>
      <body name="pole">
        <joint name="hinge" type="hinge" axis="0 1 0" damping="0.002"/>
        <geom type="capsule" fromto="0 0 0 0 0 {POLE}" size="0.02" mass="{POLE_MASS}" rgba="0.85 0.5 0.1 1"/>
        <site name="tip" pos="0 0 {POLE}" size="0.03" rgba="0.9 0.2 0.2 1"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="slider" gear="{GEAR}" ctrlrange="-1 1" ctrllimited="true"/>
  </actuator>
</mujoco>"""


class SwingupEnv(MujocoGoalEnv):
    """Swing a pole up from hanging and balance it upright for ``hold_seconds``.

    ## Description
    The cart-pole swing-up of the DeepMind Control Suite (Tassa et al. 2018), written for
    verigym: a 1 kg cart on a rail (hard stops at +-1.8 m) carries a 1 m, 0.1 kg pole on an
    unactuated hinge. The pole starts hanging down; success is the pole upright (within
    ``upright_angle`` of vertical) for ``hold_seconds`` without a break. Simulation step 10 ms,
    ``frame_skip`` 2: one env step is 0.02 s.

    ## Action Space
    ``Box(-1, 1, (1,), float32)``: horizontal force on the cart, in units of 10 N.

    ## Observation Space
    ``Dict`` of ``float64`` vectors:

    | key | shape | content |
    | --- | --- | --- |
    | ``observation`` | ``(6,)`` | cart x (m), cos and sin of the pole angle (0 = upright; positive leans to +x), cart velocity (m/s), pole angular velocity (rad/s), seconds held upright so far (s) |
    | ``achieved_goal`` | ``(1,)`` | height of the pole tip above the pivot (m) |
    | ``desired_goal`` | ``(1,)`` | the pole length, 1 m (tip straight up) |

    ## Rewards
    ``dense`` (default): ``-|h - 1|`` with ``h`` the tip height in metres; ``sparse``: ``0`` while
    upright (``h >= cos(upright_angle)``) else ``-1``. A malformed action applies no force for the
    step, costs 1 extra and sets ``info["action_error"]``.

    ## Starting State
    Cart at ``x ~ U(-0.2, 0.2)`` m, pole angle ``pi + U(-0.2, 0.2)`` rad (hanging), at rest.

    ## Episode End
    Terminated after ``hold_seconds`` upright in a row: ``success=True``, ``score=1``. Truncated
    after ``max_steps`` (default 500 = 10 s): ``success=False``, ``score = 0.5 * longest hold /
    hold_seconds``.

    ## Arguments
    * ``hold_seconds`` (float, 0.1..10 s, default 2).
    * ``upright_angle`` (float, 0.05..0.5 rad, default 0.2).
    * ``max_steps`` (int), ``reward_type``, ``render_mode``, ``width``, ``height``.

    The oracle (:meth:`oracle_action`) pumps energy (Astrom and Furuta 2000) and switches to an
    LQR balance controller, linearized from the MuJoCo model, near the top.

    ## Version History
    * v0: initial version.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50, "family": "mujoco"}

    remote_kwargs = {
        "hold_seconds": client(FloatRange(0.1, 10.0)),
        "upright_angle": client(FloatRange(0.05, 0.5)),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""
    frame_skip = 2
    OBSERVATION_FIELDS = (
        ("cart position", 1, "m"),
        ("cos, sin of the pole angle", 2, ""),
        ("cart velocity", 1, "m/s"),
        ("pole angular velocity", 1, "rad/s"),
        ("held upright", 1, "s"),
    )
    GOAL_FIELDS = (("pole tip height", 1, "m"),)

    def __init__(
        self,
        *,
        hold_seconds: float = 2.0,
        upright_angle: float = 0.2,
        max_steps: int = 500,
        reward_type: str = "dense",
        render_mode: str | None = None,
        width: int = 480,
        height: int = 480,
    ):
        self.hold_seconds = check_number("hold_seconds", hold_seconds, 0.1, 10.0)
        self.upright_angle = check_number("upright_angle", upright_angle, 0.05, 0.5)
        self.distance_threshold = POLE * (1.0 - float(np.cos(self.upright_angle)))
        self._cos_upright = float(np.cos(self.upright_angle))
        self._held_steps = 0
        self._best_held_steps = 0
        self._lqr_gain: np.ndarray | None = None
        self.TASK_TEXT = (
            f"Swing up a {POLE:g} m pole hinged on a cart (rail from -{RAIL} to {RAIL} m) and keep "
            f"it within {self.upright_angle} rad of upright for {self.hold_seconds:g} s in a row. "
            f"The action is the horizontal force on the cart in units of {GEAR:g} N (positive = +x)."
        )
        self._setup(
            max_steps=max_steps,
            reward_type=reward_type,
            render_mode=render_mode,
            width=width,
            height=height,
        )

    def _model_xml(self) -> str:
        return SWINGUP_XML

    def _reset_task(self) -> None:
        self.data.qpos[0] = self.np_random.uniform(-0.2, 0.2)
        self.data.qpos[1] = np.pi + self.np_random.uniform(-0.2, 0.2)
        self._held_steps = 0
        self._best_held_steps = 0

    # The step path reads the cached views of ``data`` (``self._qpos``, ``self._qvel``) and works
    # on Python floats: the model steps in about 3.5 us, so numpy scalar calls would dominate it.
    def _upright(self) -> bool:
        return math.cos(self._qpos[1]) >= self._cos_upright

    def _after_physics(self) -> None:
        self._held_steps = held = self._held_steps + 1 if self._upright() else 0
        if held > self._best_held_steps:
            self._best_held_steps = held

    def _observation_vector(self) -> np.ndarray:
        x, angle = self._qpos.tolist()
        velocity, rate = self._qvel.tolist()
        return np.array(
            [x, math.cos(angle), math.sin(angle), velocity, rate, self._held_steps * self._dt]
        )

    def _achieved_goal(self) -> np.ndarray:
        return np.array([POLE * math.cos(self._qpos[1])])

    def _desired_goal(self) -> np.ndarray:
        return np.array([POLE])

    def within_tolerance(self, distance: np.ndarray) -> np.ndarray:
        """Upright: the tip at most ``POLE (1 - cos(upright_angle))`` below the goal height."""
        return np.asarray(distance) <= self.distance_threshold + 1e-12

    def _status(self, reached: bool) -> tuple[bool, bool]:
        return self._held_steps * self._dt >= self.hold_seconds - 1e-9, False

    def _progress(self) -> float:
        return self._best_held_steps * self.dt / self.hold_seconds

    def _camera(self) -> Any:
        return "side"

    # -- oracle ------------------------------------------------------------------------------
    def _balance_gain(self) -> np.ndarray:
        """LQR gain (1 x 4, on [x, angle, x velocity, angular velocity]) for one env step."""
        data = mujoco.MjData(self.model)
        mujoco.mj_forward(self.model, data)
        n = 2 * self.model.nv
        a = np.zeros((n, n))
        b = np.zeros((n, self.model.nu))
        mujoco.mjd_transitionFD(self.model, data, 1e-6, True, a, b, None, None)
        # the action is held for frame_skip physics steps (zero-order hold)
        a_env, b_env = np.eye(n), np.zeros_like(b)
        for _ in range(self.frame_skip):
            b_env = a @ b_env + b
            a_env = a @ a_env
        q, r = np.diag([1.0, 20.0, 0.5, 1.0]), np.array([[0.2]])
        p = q.copy()
        for _ in range(2000):
            k = np.linalg.solve(r + b_env.T @ p @ b_env, b_env.T @ p @ a_env)
            p = q + a_env.T @ p @ (a_env - b_env @ k)
        return k

    def oracle_action(self) -> np.ndarray:
        """Energy pumping far from the top, LQR balance near it."""
        x, angle = float(self.data.qpos[0]), float(self.data.qpos[1])
        velocity, rate = float(self.data.qvel[0]), float(self.data.qvel[1])
        wrapped = float(np.angle(np.exp(1j * angle)))
        if np.cos(angle) > np.cos(0.6):
            if self._lqr_gain is None:
                self._lqr_gain = self._balance_gain()
            u = -float((self._lqr_gain @ np.array([x, wrapped, velocity, rate]))[0])
        else:
            half = POLE / 2
            inertia = POLE_MASS * POLE**2 / 3
            energy = 0.5 * inertia * rate**2 + POLE_MASS * 9.81 * half * (np.cos(angle) - 1.0)
            direction = 1.0 if rate * np.cos(angle) >= 0 else -1.0
            u = 8.0 * energy * direction - 0.3 * x - 0.3 * velocity
        return np.clip(np.array([u]), -1.0, 1.0).astype(np.float32)
