"""Drawing encoded grids: the ASCII map of the text view and the RGB image of ``render``.

Both read the same ``uint8 (H, W, 3)`` encoding (:mod:`verigym.envs.grid.encoding`), so single-agent
tasks and multi-agent games render alike.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

import numpy as np

from verigym.envs.grid.encoding import (
    AGENT,
    BALL,
    BOX,
    COLOR_NAMES,
    COLOR_RGB,
    CRATE,
    DOOR,
    EMPTY,
    FLOOR,
    GOAL,
    HOLE,
    ICE,
    KEY,
    LAVA,
    LOCKED,
    NUM_TYPES,
    OBJECT_NAMES,
    OPEN,
    RED,
    TARGET,
    UNSEEN,
    WALL,
)

# -- text ---------------------------------------------------------------------------------------
_SYMBOL = {
    UNSEEN: "??",
    EMPTY: ". ",
    WALL: "##",
    FLOOR: ". ",
    GOAL: "G ",
    LAVA: "~~",
    ICE: "__",
    HOLE: "OO",
    TARGET: "x ",
}
_OBJECT_LETTER = {KEY: "K", BALL: "B", BOX: "X"}
_DOOR_LETTER = ("/", "D", "L")
_ARROW = (">", "v", "<", "^")
LEGEND = (
    "Legend (2 characters a cell; the 2nd letter of an object is its color: r red, g green, "
    "b blue, p purple, y yellow, e grey): ## wall, '. ' floor, ?? not visible, G goal, ~~ lava, "
    "__ ice, OO hole, x target, K key, B ball, X box, C crate (c on a target), door: /=open, "
    "D=closed, L=locked; you are > v < ^ (the way you face)."
)


def cell_text(kind: int, color: int, state: int) -> str:
    """Two characters for one encoded cell (see :data:`LEGEND`)."""
    letter = "rgbpye"[color] if color < 6 else " "
    if kind == AGENT:
        return _ARROW[state % 4] + " "
    if kind == DOOR:
        return _DOOR_LETTER[min(state, 2)] + letter
    if kind in _OBJECT_LETTER:
        return _OBJECT_LETTER[kind] + letter
    if kind == CRATE:
        return "c " if state else "C "
    if kind == FLOOR and state:
        return f"{min(state, 3)} "
    return _SYMBOL.get(kind, "??")


def grid_text(observation: np.ndarray) -> str:
    """The ASCII map of an encoded ``uint8 (H, W, 3)`` array, one text line per row."""
    return "\n".join(
        "".join(cell_text(*map(int, cell)) for cell in row).rstrip() for row in observation
    )


def object_name(kind: int, color: int, state: int) -> str:
    """How the text view names an object: ``"a red key"``, ``"a wall"``."""
    name = OBJECT_NAMES[kind] if kind < NUM_TYPES else "object"
    return f"a {COLOR_NAMES[color]} {name}" if kind in (KEY, BALL, BOX, DOOR) else f"a {name}"


# -- rendering ----------------------------------------------------------------------------------
@functools.lru_cache(maxsize=512)
def _tile(kind: int, color: int, state: int, size: int) -> np.ndarray:
    """One ``uint8 (size, size, 3)`` tile, drawn with coordinate masks on the unit square."""
    y, x = (np.mgrid[0:size, 0:size] + 0.5) / size
    tile = np.zeros((size, size, 3), dtype=np.uint8)
    rgb = COLOR_RGB[color % 6]

    def paint(mask: np.ndarray, value: Sequence[int] | np.ndarray) -> None:
        tile[mask] = value

    if kind == WALL:
        paint(np.ones_like(x, bool), (100, 100, 100))
    elif kind == FLOOR:
        paint(np.ones_like(x, bool), (40 + 30 * min(state, 3),) * 3)
    elif kind == GOAL:
        paint(np.ones_like(x, bool), (0, 200, 0))
    elif kind == LAVA:
        paint(np.ones_like(x, bool), (255, 128, 0))
        paint(np.abs(y - 0.3 - 0.05 * np.sin(12 * x)) < 0.04, (0, 0, 0))
        paint(np.abs(y - 0.7 - 0.05 * np.sin(12 * x)) < 0.04, (0, 0, 0))
    elif kind in (ICE, HOLE):
        paint(np.ones_like(x, bool), (170, 220, 255))
        if kind == HOLE:
            paint((x - 0.5) ** 2 + (y - 0.5) ** 2 < 0.16, (10, 30, 90))
    elif kind == TARGET:
        paint(np.abs(x - 0.5) + np.abs(y - 0.5) < 0.25, (220, 60, 60))
    elif kind == CRATE:
        paint(
            (np.abs(x - 0.5) < 0.4) & (np.abs(y - 0.5) < 0.4),
            (0, 170, 80) if state else (150, 100, 40),
        )
        paint((np.abs(x - y) < 0.05) | (np.abs(x + y - 1) < 0.05), (60, 40, 10))
    elif kind == DOOR:
        frame = (np.abs(x - 0.5) < 0.47) & (np.abs(y - 0.5) < 0.47)
        if state == OPEN:
            paint(frame & ~((np.abs(x - 0.5) < 0.4) & (np.abs(y - 0.5) < 0.4)), rgb)
        else:
            paint(frame, rgb // 2 if state == LOCKED else rgb)
            paint(frame & ~((np.abs(x - 0.5) < 0.42) & (np.abs(y - 0.5) < 0.42)), rgb)
            if state == LOCKED:
                paint((np.abs(x - 0.75) < 0.04) & (np.abs(y - 0.5) < 0.1), (0, 0, 0))
            else:
                paint((x - 0.75) ** 2 + (y - 0.5) ** 2 < 0.004, (0, 0, 0))
    elif kind == KEY:
        paint((x - 0.5) ** 2 + (y - 0.3) ** 2 < 0.03, rgb)
        paint((x - 0.5) ** 2 + (y - 0.3) ** 2 < 0.008, (0, 0, 0))
        paint((np.abs(x - 0.5) < 0.05) & (y > 0.4) & (y < 0.85), rgb)
        paint((x > 0.5) & (x < 0.65) & ((np.abs(y - 0.7) < 0.04) | (np.abs(y - 0.82) < 0.04)), rgb)
    elif kind == BALL:
        paint((x - 0.5) ** 2 + (y - 0.5) ** 2 < 0.09, rgb)
    elif kind == BOX:
        outer = (np.abs(x - 0.5) < 0.36) & (np.abs(y - 0.5) < 0.36)
        paint(outer & ~((np.abs(x - 0.5) < 0.3) & (np.abs(y - 0.5) < 0.3)), rgb)
        paint((np.abs(y - 0.5) < 0.03) & (np.abs(x - 0.5) < 0.36), rgb)
    # grid lines
    tile[0, :] = tile[:, 0] = (30, 30, 30) if kind != WALL else (100, 100, 100)
    tile.flags.writeable = False
    return tile


@functools.lru_cache(maxsize=64)
def _agent_mask(direction: int, size: int) -> np.ndarray:
    """``bool (size, size)``: a triangle pointing in ``direction``."""
    y, x = (np.mgrid[0:size, 0:size] + 0.5) / size
    # triangle pointing east, then rotated: (u, v) = coordinates along/across the direction
    u, v = [(x, y), (y, 1 - x), (1 - x, 1 - y), (1 - y, x)][direction]
    return (u > 0.15) & (u < 0.85) & (np.abs(v - 0.5) < 0.35 * (0.85 - u) / 0.7)


def render_rgb(
    cells: np.ndarray,
    *,
    tile_size: int = 16,
    agents: Iterable[tuple[int, int, int, int]] = (),
    highlight: np.ndarray | None = None,
) -> np.ndarray:
    """Draw an encoded grid as an image.

    Args:
        cells: ``uint8 (H, W, 3)`` encoded cells (an ``AGENT`` cell is drawn as an agent too).
        tile_size: pixels per cell.
        agents: ``(row, col, direction, color)`` of each agent to draw as a triangle.
        highlight: optional ``bool (H, W)``; these cells are lightened (e.g. an agent's view).

    Returns:
        ``uint8 (H * tile_size, W * tile_size, 3)``.
    """
    height, width = cells.shape[:2]
    image = np.zeros((height * tile_size, width * tile_size, 3), dtype=np.uint8)
    for r in range(height):
        for c in range(width):
            kind, color, state = (int(v) for v in cells[r, c])
            block = image[r * tile_size : (r + 1) * tile_size, c * tile_size : (c + 1) * tile_size]
            block[:] = _tile(
                kind if kind != AGENT else color,
                0 if kind == AGENT else color,
                0 if kind == AGENT else state,
                tile_size,
            )
            if kind == AGENT:
                block[_agent_mask(state % 4, tile_size)] = COLOR_RGB[RED]
    for r, c, direction, color in agents:
        block = image[r * tile_size : (r + 1) * tile_size, c * tile_size : (c + 1) * tile_size]
        block[_agent_mask(int(direction) % 4, tile_size)] = COLOR_RGB[int(color) % 6]
    if highlight is not None:
        lit = np.repeat(np.repeat(highlight, tile_size, axis=0), tile_size, axis=1)
        image[lit] = (image[lit].astype(np.uint16) * 3 // 4 + 64).astype(np.uint8)
    return image
