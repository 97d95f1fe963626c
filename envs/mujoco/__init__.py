"""MuJoCo environments (family ``mujoco``): goal-conditioned control with verifiable success.

Observations follow the Gymnasium-Robotics convention ``Dict(observation, achieved_goal,
desired_goal)`` with a vectorized ``compute_reward``. Nothing heavy is imported here: the env
modules (which import ``mujoco``) load only when an env is made.
"""

import os as _os

if "DISPLAY" not in _os.environ and "WAYLAND_DISPLAY" not in _os.environ:
    # headless machine: render with EGL unless the user chose a backend. mujoco reads this when it is
    # first imported, and every env module of this package imports it: set it here, before any of them.
    _os.environ.setdefault("MUJOCO_GL", "egl")
