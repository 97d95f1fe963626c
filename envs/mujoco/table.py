"""Registration rows of the mujoco family (imported by ``import verigym``; keep it light)."""

from verigym.registration import EnvRow, variants

GOAL_API = ("verigym.envs.mujoco.goal_api:GoalEnvApi",)
"""Outermost wrapper of ``gym.make``: ``env.compute_reward`` for SB3's ``check_env`` (goal_api.py)."""

ROWS: list[EnvRow] = [
    *variants(
        "verigym/Reach-{}-v0",
        "verigym.envs.mujoco.reach:ReachEnv",
        family="mujoco",
        additional_wrappers=GOAL_API,
        rows={"2Link": {"num_links": 2}, "3Link": {"num_links": 3}},
        description="Move a planar arm's fingertip to a random target (goal-conditioned).",
    ),
]
ROWS += variants(
    "verigym/PointMaze-{}-v0",
    "verigym.envs.mujoco.point_maze:PointMazeEnv",
    family="mujoco",
    additional_wrappers=GOAL_API,
    rows={"Small": {"size": 3}, "Medium": {"size": 5}, "Large": {"size": 7}},
    description="Drive a point mass through a procedurally generated maze (long horizon).",
)
ROWS.append(
    EnvRow(
        id="verigym/Push-v0",
        entry_point="verigym.envs.mujoco.push:PushEnv",
        family="mujoco",
        additional_wrappers=GOAL_API,
        description="Push a block into a target zone on a table (goal-conditioned).",
    )
)
ROWS.append(
    EnvRow(
        id="verigym/Swingup-v0",
        entry_point="verigym.envs.mujoco.swingup:SwingupEnv",
        family="mujoco",
        additional_wrappers=GOAL_API,
        description="Cart-pole swing-up; success = upright for 2 s in a row.",
    )
)
ROWS += variants(
    "verigym/LocomotionTarget-{}-v0",
    "verigym.envs.mujoco.locomotion:LocomotionTargetEnv",
    family="mujoco",
    additional_wrappers=GOAL_API,
    rows={
        "Hopper": {"robot": "hopper"},
        "HalfCheetah": {"robot": "half_cheetah"},
        "Ant": {"robot": "ant"},
    },
    description="Gymnasium's locomotion robot must run D metres within T seconds without falling.",
)
