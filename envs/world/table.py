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


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported here (found, not imported)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


# NetHack (nle) is under the NetHack General Public License: an optional extra that is never a
# default dependency, so its ids exist only where it is installed (the registry-wide tests and the
# generated id tables of a default install do not depend on it).
if _installed("nle"):
    ROWS += variants(
        "verigym/NetHack{}-v0",
        f"{_WORLD}.nethack:NetHackEnv",
        family="world",
        rows={"": {}, "-Score": {"score_by": "game"}},
        description="NetHack 3.6 through nle's core (needs verigym[nethack], NetHack GPL): the "
        "terminal screen; score: BALROG's progression of the depth and experience level reached "
        "(-Score: in-game points).",
    )
    ROWS += variants(
        "verigym/NetHack-{}-v0",
        f"{_WORLD}.nethack_tasks:NetHackTaskEnv",
        family="world",
        rows={
            "Room": {"task": "room"},
            "Corridor": {"task": "corridor"},
            "Monster": {"task": "monster"},
            "PickUp": {"task": "pickup"},
        },
        description="A small MiniHack-like NetHack task on a level compiled from a des-file by "
        "nle's own lev_comp (needs verigym[nethack], NetHack GPL): cross a room, follow a "
        "corridor, pass gas spores unhurt, pick up a wand; the NetHack-v0 screen and actions.",
    )


# TextWorld: its jericho dependency builds from source with a C compiler, so the ids exist only
# where textworld is installed (the extra `textworld`).
if _installed("textworld") and _installed("jericho"):
    ROWS += variants(
        "verigym/TextWorld-{}-v0",
        f"{_WORLD}.textworld_env:TextWorldEnv",
        family="world",
        rows={
            "CoinCollector": {"challenge": "coin_collector"},
            "TreasureHunter": {"challenge": "treasure_hunter"},
            "Simple": {"challenge": "simple"},
        },
        description="TextWorld challenge (needs verigym[textworld]), a game generated per seed by "
        "textworld and cached; score: game points / max, success: the game is won.",
    )
