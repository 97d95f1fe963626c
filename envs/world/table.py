"""Registration rows of the world family (imported by ``import verigym``; keep it light: the
games' packages are optional extras, imported only when an env is made)."""

from verigym.registration import EnvRow, variants

_WORLD = "verigym.envs.world"

ROWS: list[EnvRow] = [
    *variants(
        "verigym/Crafter{}-v0",
        f"{_WORLD}.crafter:CrafterEnv",
        family="world",
        rows={
            "": {},
            "-Diamond": {"goal": ["collect_diamond"]},
            "-Survive": {"goal": [], "survive": True},
        },
        description="Crafter (needs verigym[crafter]): 64x64x3 pixels, 17 actions, 22 achievements; "
        "success: the goal's achievements (default make_wood_pickaxe), score: unlocked / 22.",
    ),
    *variants(
        "verigym/Crafter-Text{}-v0",
        f"{_WORLD}.crafter:CrafterTextEnv",
        family="world",
        rows={
            "": {},
            "-Diamond": {"goal": ["collect_diamond"]},
            "-Survive": {"goal": [], "survive": True},
        },
        description="Crafter as text (BALROG style: what is in view with direction and distance, "
        "vitals, inventory); a reply names one of the 17 actions.",
    ),
]
