"""The numpy grid engine of the ``grid`` family, one import for tasks and games.

The engine is split by concern; this module re-exports the public names of each, so tasks and
multi-agent games import them from one place:

- :mod:`verigym.envs.grid.encoding`: the ``uint8 (H, W, 3)`` cell encoding (object types, colors,
  states), directions, action sets and the lookup tables built on them;
- :mod:`verigym.envs.grid.grid`: :class:`Grid`, the cell array inside a wall padding;
- :mod:`verigym.envs.grid.visibility`: the egocentric view window and the line-of-sight rule;
- :mod:`verigym.envs.grid.rendering`: the ASCII map of the text view and the RGB image;
- :mod:`verigym.envs.grid.planning`: breadth-first plans and the multi-stage :class:`Planner`;
- :mod:`verigym.envs.grid.base`: :class:`GridEnv`, the single-agent template-method base class.

Argument validation is :mod:`verigym.validation`, shared by every family (``check_int`` is
re-exported here for the grid tasks).
"""

from __future__ import annotations

from verigym.envs.grid.base import GridEnv, Retry
from verigym.envs.grid.encoding import (
    ACTION_SETS,
    AGENT,
    BALL,
    BLUE,
    BOX,
    CLOSED,
    COLOR_NAMES,
    COLOR_RGB,
    CRATE,
    DIR_NAMES,
    DIR_VEC,
    DOOR,
    DOOR_STATES,
    EAST,
    EMPTY,
    FLOOR,
    GOAL,
    GREEN,
    GREY,
    HOLE,
    ICE,
    KEY,
    LAVA,
    LOCKED,
    MAX_STATE,
    NORTH,
    NUM_TYPES,
    OBJECT_NAMES,
    OPEN,
    PURPLE,
    RED,
    SOUTH,
    TARGET,
    UNSEEN,
    WALL,
    WEST,
    YELLOW,
    can_enter,
    safe_mask,
)
from verigym.envs.grid.grid import Grid
from verigym.envs.grid.planning import Planner, bfs_plan, facing_goal, simulate_plan, standing_goal
from verigym.envs.grid.rendering import LEGEND, cell_text, grid_text, render_rgb
from verigym.envs.grid.visibility import blocker_matrix
from verigym.validation import check_int

__all__ = [
    "ACTION_SETS",
    "AGENT",
    "BALL",
    "BLUE",
    "BOX",
    "CLOSED",
    "COLOR_NAMES",
    "COLOR_RGB",
    "CRATE",
    "DIR_NAMES",
    "DIR_VEC",
    "DOOR",
    "DOOR_STATES",
    "EAST",
    "EMPTY",
    "FLOOR",
    "GOAL",
    "GREEN",
    "GREY",
    "HOLE",
    "ICE",
    "KEY",
    "LAVA",
    "LEGEND",
    "LOCKED",
    "MAX_STATE",
    "NORTH",
    "NUM_TYPES",
    "OBJECT_NAMES",
    "OPEN",
    "PURPLE",
    "RED",
    "SOUTH",
    "TARGET",
    "UNSEEN",
    "WALL",
    "WEST",
    "YELLOW",
    "Grid",
    "GridEnv",
    "Planner",
    "Retry",
    "bfs_plan",
    "blocker_matrix",
    "can_enter",
    "cell_text",
    "check_int",
    "facing_goal",
    "grid_text",
    "render_rgb",
    "safe_mask",
    "simulate_plan",
    "standing_goal",
]
