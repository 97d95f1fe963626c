"""The cell encoding of the ``grid`` family: object types, colors, states, directions, action sets.

A grid is a ``uint8`` array of shape ``(height, width, 3)``; channel 0 is the object type
(:data:`OBJECT_NAMES`), channel 1 its color (:data:`COLOR_NAMES`), channel 2 its state (doors: 0 open,
1 closed, 2 locked; crates: 1 on a target; visited floor: visit count, at most 3). Coordinates are
``(row, col)`` with row 0 at the top. The type indices 0-10 are MiniGrid's (Chevalier-Boisvert et
al. 2023, "Minigrid & Miniworld"); 11-14 are verigym's (ice, hole, crate, target). In an observation
the agent's own cell is ``(AGENT, type under the agent, direction)``.

**Directions.** 0 east, 1 south, 2 west, 3 north (MiniGrid's order); :data:`DIR_VEC` holds the
``(d_row, d_col)`` step of each.

The lookup tables (:data:`ENTERABLE`, :data:`OPAQUE`, :data:`PICKABLE`, :data:`HAZARD`, :data:`SAFE`)
are indexed ``[type]`` or ``[type, min(state, MAX_STATE)]``; the ``*_LIST`` copies are the same
tables as nested Python lists for the stepping hot path (indexing a list with ints is faster than
indexing an array).
"""

from __future__ import annotations

import numpy as np

UNSEEN, EMPTY, WALL, FLOOR, DOOR, KEY, BALL, BOX, GOAL, LAVA, AGENT, ICE, HOLE, CRATE, TARGET = (
    range(15)
)
OBJECT_NAMES: tuple[str, ...] = (
    "unseen",
    "empty",
    "wall",
    "floor",
    "door",
    "key",
    "ball",
    "box",
    "goal",
    "lava",
    "agent",
    "ice",
    "hole",
    "crate",
    "target",
)
NUM_TYPES = len(OBJECT_NAMES)
RED, GREEN, BLUE, PURPLE, YELLOW, GREY = range(6)
COLOR_NAMES: tuple[str, ...] = ("red", "green", "blue", "purple", "yellow", "grey")
COLOR_RGB = np.array(
    [[255, 0, 0], [0, 255, 0], [0, 0, 255], [112, 39, 195], [255, 255, 0], [100, 100, 100]],
    dtype=np.uint8,
)
OPEN, CLOSED, LOCKED = 0, 1, 2
DOOR_STATES: tuple[str, ...] = ("open", "closed", "locked")
EAST, SOUTH, WEST, NORTH = range(4)
DIR_VEC = np.array([(0, 1), (1, 0), (0, -1), (-1, 0)], dtype=np.int64)
DIR_NAMES: tuple[str, ...] = ("east", "south", "west", "north")
DIR_STEPS: tuple[tuple[int, int], ...] = ((0, 1), (1, 0), (0, -1), (-1, 0))
MAX_STATE = 3

# Lookup tables indexed [type, state]; state is clipped to MAX_STATE.
ENTERABLE = np.zeros((NUM_TYPES, MAX_STATE + 1), dtype=bool)
ENTERABLE[[EMPTY, FLOOR, GOAL, LAVA, ICE, HOLE, TARGET], :] = True
ENTERABLE[DOOR, OPEN] = True
OPAQUE = np.zeros((NUM_TYPES, MAX_STATE + 1), dtype=bool)
OPAQUE[WALL, :] = True
OPAQUE[DOOR, CLOSED] = OPAQUE[DOOR, LOCKED] = True
# float32 opacity by ``type * 4 + min(state, 3)`` (uint8 arithmetic stays below 256 for states <= 3)
OPAQUE_CODE = np.zeros(256 * 4, dtype=np.float32)
OPAQUE_CODE[: NUM_TYPES * 4] = OPAQUE.ravel()
CODE_WEIGHTS = np.array([4, 0, 1], dtype=np.uint8)  # cell . weights = type * 4 + state
PICKABLE = np.zeros(NUM_TYPES, dtype=bool)
PICKABLE[[KEY, BALL, BOX]] = True
HAZARD = np.zeros(NUM_TYPES, dtype=bool)
HAZARD[[LAVA, HOLE]] = True
SAFE = ENTERABLE & ~HAZARD[:, None]

ACTION_SETS: dict[str, tuple[str, ...]] = {
    "minigrid": ("left", "right", "forward", "pickup", "drop", "toggle", "done"),
    "cardinal": ("up", "right", "down", "left", "pickup", "drop", "toggle", "done"),
}
"""Named action sets. ``minigrid``: turn left/right, move forward, and act on the cell in front.
``cardinal``: face north/east/south/west and step there if it can be entered (the agent turns even
when the step is blocked), then the same pickup/drop/toggle/done."""
CARDINAL_DIR = {"up": NORTH, "right": EAST, "down": SOUTH, "left": WEST}


ENTERABLE_LIST: list[list[bool]] = ENTERABLE.tolist()
PICKABLE_LIST: list[bool] = PICKABLE.tolist()
HAZARD_LIST: list[bool] = HAZARD.tolist()


def can_enter(cells: np.ndarray, r: int, c: int) -> bool:
    """Whether a walker may step onto cell ``(r, c)`` (hazards included: lava, holes)."""
    kind, _, state = cells[r, c].tolist()
    return ENTERABLE_LIST[kind][min(state, MAX_STATE)]


def safe_mask(cells: np.ndarray) -> np.ndarray:
    """``bool (H, W)``: cells that can be entered without dying (no lava, no hole)."""
    return SAFE[cells[..., 0], np.minimum(cells[..., 2], MAX_STATE)]
