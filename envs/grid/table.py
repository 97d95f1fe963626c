"""Registration rows of the grid family (imported by ``import verigym``; keep it light)."""

from verigym.registration import EnvRow, variants

ROWS: list[EnvRow] = [
    *variants(
        "verigym/Treasure-{}-v0",
        "verigym.envs.grid.treasure:TreasureEnv",
        family="grid",
        rows={"7x7": {"size": 7}, "12x12": {"size": 12, "wall_density": 0.3}},
        description="Walk to the treasure on a grid with random walls (the tensor tutorial env).",
    ),
]
