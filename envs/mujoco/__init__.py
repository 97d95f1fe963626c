"""MuJoCo environments (family ``mujoco``): goal-conditioned control with verifiable success.

Observations follow the Gymnasium-Robotics convention ``Dict(observation, achieved_goal,
desired_goal)`` with a vectorized ``compute_reward``. Nothing heavy is imported here: the env
modules (which import ``mujoco``) load only when an env is made.
"""
