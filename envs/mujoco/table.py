"""Registration rows of the mujoco family (imported by ``import verigym``; keep it light)."""

from verigym.registration import EnvRow, variants

ROWS: list[EnvRow] = [
    *variants(
        "verigym/Reach-{}-v0",
        "verigym.envs.mujoco.reach:ReachEnv",
        family="mujoco",
        rows={"2Link": {"num_links": 2}, "3Link": {"num_links": 3}},
        description="Move a planar arm's fingertip to a random target (goal-conditioned).",
    ),
]
