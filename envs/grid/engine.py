"""The numpy grid engine of the ``grid`` family: cells, visibility, rendering, planning, base env.

Everything here works on one array layout, so single-agent tasks (:class:`GridEnv` subclasses) and
multi-agent games (which use :class:`Grid` and the pure functions without the base class) share
the cell encoding, the renderers and the visibility rule.

**Cell encoding.** A grid is a ``uint8`` array of shape ``(height, width, 3)``; channel 0 is the
object type (:data:`OBJECT_NAMES`), channel 1 its color (:data:`COLOR_NAMES`), channel 2 its state
(doors: 0 open, 1 closed, 2 locked; crates: 1 on a target; visited floor: visit count, at most 3).
Coordinates are ``(row, col)`` with row 0 at the top. The type indices 0-10 are MiniGrid's
(Chevalier-Boisvert et al. 2023, "Minigrid & Miniworld"); 11-14 are verigym's (ice, hole, crate,
target). In an observation the agent's own cell is ``(AGENT, type under the agent, direction)``.

**Directions.** 0 east, 1 south, 2 west, 3 north (MiniGrid's order); :data:`DIR_VEC` holds the
``(d_row, d_col)`` step of each.

**Visibility.** The egocentric view (:meth:`Grid.ego_view`) is a ``view_size x view_size`` window
in front of the agent, the agent at the bottom row, center column, facing up. A cell is visible
when no opaque cell (wall, closed or locked door) lies on the straight segment between the centers
of the agent's cell and that cell; hidden cells read ``UNSEEN`` (all zeros). The segment test is a
precomputed ``(V*V, V*V)`` blocker matrix, so a view costs one small matrix product.

**Hot path.** Stepping touches only integers and preallocated arrays: no per-object Python
structures are created (objects are array entries, not instances).
"""

from __future__ import annotations

import functools
import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from verigym.core import (
    ACTION_MASK,
    ActionParseError,
    EpisodeGuard,
    action_error_info,
    coerce_action,
    episode_end,
)

__all__ = [
    "ACTION_SETS",
    "COLOR_NAMES",
    "COLOR_RGB",
    "DIR_VEC",
    "LEGEND",
    "OBJECT_NAMES",
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

# -- encoding -----------------------------------------------------------------------------------
UNSEEN, EMPTY, WALL, FLOOR, DOOR, KEY, BALL, BOX, GOAL, LAVA, AGENT, ICE, HOLE, CRATE, TARGET = range(15)
OBJECT_NAMES: tuple[str, ...] = (
    "unseen", "empty", "wall", "floor", "door", "key", "ball", "box", "goal", "lava", "agent",
    "ice", "hole", "crate", "target",
)
NUM_TYPES = len(OBJECT_NAMES)
RED, GREEN, BLUE, PURPLE, YELLOW, GREY = range(6)
COLOR_NAMES: tuple[str, ...] = ("red", "green", "blue", "purple", "yellow", "grey")
COLOR_RGB = np.array(
    [[255, 0, 0], [0, 255, 0], [0, 0, 255], [112, 39, 195], [255, 255, 0], [100, 100, 100]], dtype=np.uint8
)
OPEN, CLOSED, LOCKED = 0, 1, 2
DOOR_STATES: tuple[str, ...] = ("open", "closed", "locked")
EAST, SOUTH, WEST, NORTH = range(4)
DIR_VEC = np.array([(0, 1), (1, 0), (0, -1), (-1, 0)], dtype=np.int64)
DIR_NAMES: tuple[str, ...] = ("east", "south", "west", "north")
_DIRS: tuple[tuple[int, int], ...] = ((0, 1), (1, 0), (0, -1), (-1, 0))
MAX_STATE = 3

# Lookup tables indexed [type, state]; state is clipped to MAX_STATE.
_ENTERABLE = np.zeros((NUM_TYPES, MAX_STATE + 1), dtype=bool)
_ENTERABLE[[EMPTY, FLOOR, GOAL, LAVA, ICE, HOLE, TARGET], :] = True
_ENTERABLE[DOOR, OPEN] = True
_OPAQUE = np.zeros((NUM_TYPES, MAX_STATE + 1), dtype=bool)
_OPAQUE[WALL, :] = True
_OPAQUE[DOOR, CLOSED] = _OPAQUE[DOOR, LOCKED] = True
# float32 opacity by ``type * 4 + min(state, 3)`` (uint8 arithmetic stays below 256 for states <= 3)
_OPAQUE_CODE = np.zeros(256 * 4, dtype=np.float32)
_OPAQUE_CODE[: NUM_TYPES * 4] = _OPAQUE.ravel()
_CODE_WEIGHTS = np.array([4, 0, 1], dtype=np.uint8)  # cell . weights = type * 4 + state
_PICKABLE = np.zeros(NUM_TYPES, dtype=bool)
_PICKABLE[[KEY, BALL, BOX]] = True
_HAZARD = np.zeros(NUM_TYPES, dtype=bool)
_HAZARD[[LAVA, HOLE]] = True
_SAFE = _ENTERABLE & ~_HAZARD[:, None]

ACTION_SETS: dict[str, tuple[str, ...]] = {
    "minigrid": ("left", "right", "forward", "pickup", "drop", "toggle", "done"),
    "cardinal": ("up", "right", "down", "left", "pickup", "drop", "toggle", "done"),
}
"""Named action sets. ``minigrid``: turn left/right, move forward, and act on the cell in front.
``cardinal``: face north/east/south/west and step there if it can be entered (the agent turns even
when the step is blocked), then the same pickup/drop/toggle/done."""
_CARDINAL_DIR = {"up": NORTH, "right": EAST, "down": SOUTH, "left": WEST}


_ENTERABLE_LIST: list[list[bool]] = _ENTERABLE.tolist()
_PICKABLE_LIST: list[bool] = _PICKABLE.tolist()
_HAZARD_LIST: list[bool] = _HAZARD.tolist()


def can_enter(cells: np.ndarray, r: int, c: int) -> bool:
    """Whether a walker may step onto cell ``(r, c)`` (hazards included: lava, holes)."""
    kind, _, state = cells[r, c].tolist()
    return _ENTERABLE_LIST[kind][min(state, MAX_STATE)]


def safe_mask(cells: np.ndarray) -> np.ndarray:
    """``bool (H, W)``: cells that can be entered without dying (no lava, no hole)."""
    return _SAFE[cells[..., 0], np.minimum(cells[..., 2], MAX_STATE)]


# -- the grid -----------------------------------------------------------------------------------
class Grid:
    """A ``height x width`` grid of cells inside a wall padding of ``pad`` cells.

    ``cells`` is a view of the ``uint8 (height, width, 3)`` interior of ``padded``; writing to
    ``cells`` is all a task or a game has to do. The padding (walls) lets :meth:`ego_view` read a
    window near the border with one index operation.

    Args:
        height: rows, >= 3.
        width: columns, >= 3.
        pad: padding in cells; at least ``view_size - 1`` for egocentric views of that size.

    Raises:
        ValueError: a size out of range.
    """

    def __init__(self, height: int, width: int, *, pad: int = 6):
        if height < 3 or width < 3 or pad < 0:
            raise ValueError(f"grid must be at least 3x3 with pad >= 0, got {height}x{width}, pad {pad}")
        self.height, self.width, self.pad = int(height), int(width), int(pad)
        self.padded = np.zeros((height + 2 * pad, width + 2 * pad, 3), dtype=np.uint8)
        self.padded[..., 0] = WALL
        self.cells = self.padded[pad : pad + height, pad : pad + width]
        self.cells[..., 0] = EMPTY
        self._flat = self.padded.reshape(-1, 3)

    def __getstate__(self) -> dict[str, Any]:
        return {"height": self.height, "width": self.width, "pad": self.pad, "padded": self.padded.copy()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.height, self.width, self.pad = state["height"], state["width"], state["pad"]
        self.padded = state["padded"]
        self.cells = self.padded[self.pad : self.pad + self.height, self.pad : self.pad + self.width]
        self._flat = self.padded.reshape(-1, 3)

    def copy(self) -> Grid:
        """An independent copy."""
        other = Grid.__new__(Grid)
        other.__setstate__(self.__getstate__())
        return other

    # construction helpers
    def set(self, r: int, c: int, kind: int, color: int = 0, state: int = 0) -> None:
        """Put an object ``(kind, color, state)`` on cell ``(r, c)``."""
        self.cells[r, c] = (kind, color, state)

    def clear(self, r: int, c: int) -> None:
        """Make cell ``(r, c)`` empty floor."""
        self.cells[r, c] = (EMPTY, 0, 0)

    def wall_rect(self, top: int, left: int, height: int, width: int) -> None:
        """Draw the outline of a rectangle of walls."""
        bottom, right = top + height - 1, left + width - 1
        self.cells[top, left : right + 1] = (WALL, 0, 0)
        self.cells[bottom, left : right + 1] = (WALL, 0, 0)
        self.cells[top : bottom + 1, left] = (WALL, 0, 0)
        self.cells[top : bottom + 1, right] = (WALL, 0, 0)

    def find(self, kind: int, color: int | None = None) -> np.ndarray:
        """``int64 (n, 2)``: the cells holding objects of ``kind`` (and ``color``), row-major order."""
        hit = self.cells[..., 0] == kind
        if color is not None:
            hit &= self.cells[..., 1] == color
        return np.argwhere(hit)

    # views
    def ego_view(
        self, r: int, c: int, direction: int, view_size: int = 7, *, see_through_walls: bool = False,
        hidden: np.ndarray | None = None,
    ) -> np.ndarray:
        """The egocentric view of an agent at ``(r, c)`` facing ``direction``.

        Args:
            r, c, direction: the agent's cell and direction.
            view_size: odd side of the view window.
            see_through_walls: show every cell of the window.
            hidden: a precomputed :meth:`hidden_cells` mask for this pose (callers that know the
                opaque cells did not change may cache it); computed when ``None``.

        Returns:
            ``uint8 (view_size, view_size, 3)``, a new array: row 0 is the farthest row ahead, the
            agent's cell is ``(view_size - 1, view_size // 2)`` and holds what the grid holds there
            (callers overwrite it, e.g. with the carried object). Out-of-grid cells read as walls;
            cells hidden behind opaque cells read as ``UNSEEN`` unless ``see_through_walls``.

        Raises:
            ValueError: ``view_size`` is even, < 3, or larger than ``pad + 1``.
        """
        width = self.padded.shape[1]
        offsets = _ego_offsets(view_size, width, self.pad)[direction]
        view = self._flat.take(offsets + ((r + self.pad) * width + c + self.pad), axis=0)
        if not see_through_walls:
            if hidden is None:
                hidden = blocker_matrix(view_size).dot(_OPAQUE_CODE.take(view.dot(_CODE_WEIGHTS))) > 0
            view[hidden] = 0
        return view.reshape(view_size, view_size, 3)

    def hidden_cells(self, r: int, c: int, direction: int, view_size: int = 7) -> np.ndarray:
        """``bool (view_size * view_size,)``: the cells of the view window (row-major) that opaque
        cells hide from an agent at ``(r, c)`` facing ``direction``."""
        width = self.padded.shape[1]
        offsets = _ego_offsets(view_size, width, self.pad)[direction]
        view = self._flat.take(offsets + ((r + self.pad) * width + c + self.pad), axis=0)
        return blocker_matrix(view_size).dot(_OPAQUE_CODE.take(view.dot(_CODE_WEIGHTS))) > 0


@functools.lru_cache(maxsize=64)
def _ego_offsets(view_size: int, padded_width: int, pad: int) -> np.ndarray:
    """``int64 (4, V * V)`` flat offsets (in padded cells) of the view window for each direction."""
    if view_size < 3 or view_size % 2 == 0 or view_size - 1 > pad:
        raise ValueError(f"view_size must be odd, >= 3 and <= pad + 1 = {pad + 1}, got {view_size}")
    i, j = np.mgrid[0:view_size, 0:view_size]
    ahead, lateral = view_size - 1 - i, j - view_size // 2
    out = np.empty((4, view_size * view_size), dtype=np.int64)
    for d in range(4):
        fwd, right = DIR_VEC[d], DIR_VEC[(d + 1) % 4]
        dr = ahead * fwd[0] + lateral * right[0]
        dc = ahead * fwd[1] + lateral * right[1]
        out[d] = (dr * padded_width + dc).ravel()
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=16)
def blocker_matrix(view_size: int) -> np.ndarray:
    """``float32 (V*V, V*V)``: entry ``[t, k]`` is 1 when view cell ``k`` lies on the segment
    between the agent's cell and view cell ``t`` (endpoints excluded).

    The segment is sampled at 8 points per cell of length; a sample belongs to the cell whose
    center is nearest. ``blocker_matrix(V) @ opaque.ravel() > 0`` marks the hidden cells.
    """
    n = view_size * view_size
    matrix = np.zeros((n, n), dtype=np.float32)
    agent = np.array([view_size - 1, view_size // 2], dtype=np.float64)
    for t in range(n):
        target = np.array(divmod(t, view_size), dtype=np.float64)
        length = np.abs(target - agent).max()
        if length <= 1:
            continue
        samples = np.linspace(0.0, 1.0, int(8 * length) + 1)[1:-1, None]
        points = np.floor(agent + samples * (target - agent) + 0.5).astype(np.int64)
        for r, c in points:
            k = r * view_size + c
            if k != t and (r, c) != tuple(agent.astype(np.int64)):
                matrix[t, k] = 1.0
    matrix.flags.writeable = False
    return matrix


# -- text ---------------------------------------------------------------------------------------
_SYMBOL = {
    UNSEEN: "??", EMPTY: ". ", WALL: "##", FLOOR: ". ", GOAL: "G ", LAVA: "~~", ICE: "__",
    HOLE: "OO", TARGET: "x ",
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
    return "\n".join("".join(cell_text(*map(int, cell)) for cell in row).rstrip() for row in observation)


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
        paint((np.abs(x - 0.5) < 0.4) & (np.abs(y - 0.5) < 0.4), (0, 170, 80) if state else (150, 100, 40))
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
            block[:] = _tile(kind if kind != AGENT else color, 0 if kind == AGENT else color, 0 if kind == AGENT else state, tile_size)
            if kind == AGENT:
                block[_agent_mask(state % 4, tile_size)] = COLOR_RGB[RED]
    for r, c, direction, color in agents:
        block = image[r * tile_size : (r + 1) * tile_size, c * tile_size : (c + 1) * tile_size]
        block[_agent_mask(int(direction) % 4, tile_size)] = COLOR_RGB[int(color) % 6]
    if highlight is not None:
        lit = np.repeat(np.repeat(highlight, tile_size, axis=0), tile_size, axis=1)
        image[lit] = (image[lit].astype(np.uint16) * 3 // 4 + 64).astype(np.uint8)
    return image


# -- planning -----------------------------------------------------------------------------------
def bfs_plan(
    passable: np.ndarray,
    start: tuple[int, int, int],
    goal: np.ndarray,
    action_set: str = "minigrid",
) -> list[int] | None:
    """Shortest action sequence over states ``(row, col, direction)`` (breadth-first search).

    Args:
        passable: ``bool (H, W)``, cells the agent may step on.
        start: ``(row, col, direction)``.
        goal: ``bool (4, H, W)``, goal states indexed ``[direction, row, col]``.
        action_set: ``"minigrid"`` (left, right, forward) or ``"cardinal"`` (four moves that turn
            the agent even when blocked).

    Returns:
        The action indices of a shortest plan, or ``None`` when no goal state is reachable.
    """
    height, width = passable.shape
    r0, c0, d0 = start
    if goal[d0, r0, c0]:
        return []
    parent: dict[tuple[int, int, int], tuple[tuple[int, int, int], int]] = {(r0, c0, d0): ((r0, c0, d0), -1)}
    queue = deque([(r0, c0, d0)])
    while queue:
        state = queue.popleft()
        r, c, d = state
        if action_set == "minigrid":
            fr, fc = r + DIR_VEC[d, 0], c + DIR_VEC[d, 1]
            moves = [((r, c, (d - 1) % 4), 0), ((r, c, (d + 1) % 4), 1)]
            if 0 <= fr < height and 0 <= fc < width and passable[fr, fc]:
                moves.append(((int(fr), int(fc), d), 2))
        else:
            moves = []
            for a, nd in enumerate((NORTH, EAST, SOUTH, WEST)):
                fr, fc = r + DIR_VEC[nd, 0], c + DIR_VEC[nd, 1]
                if 0 <= fr < height and 0 <= fc < width and passable[fr, fc]:
                    moves.append(((int(fr), int(fc), nd), a))
                else:
                    moves.append(((r, c, nd), a))
        for nxt, action in moves:
            if nxt in parent:
                continue
            parent[nxt] = (state, action)
            if goal[nxt[2], nxt[0], nxt[1]]:
                plan = []
                while nxt != (r0, c0, d0):
                    nxt, action = parent[nxt]
                    plan.append(action)
                return plan[::-1]
            queue.append(nxt)
    return None


def facing_goal(height: int, width: int, targets: Iterable[tuple[int, int]]) -> np.ndarray:
    """``bool (4, H, W)``: the states that face one of ``targets`` from an adjacent cell."""
    goal = np.zeros((4, height, width), dtype=bool)
    for tr, tc in targets:
        for d in range(4):
            r, c = tr - DIR_VEC[d, 0], tc - DIR_VEC[d, 1]
            if 0 <= r < height and 0 <= c < width:
                goal[d, r, c] = True
    return goal


def standing_goal(height: int, width: int, targets: Iterable[tuple[int, int]]) -> np.ndarray:
    """``bool (4, H, W)``: the states standing on one of ``targets``, any direction."""
    goal = np.zeros((4, height, width), dtype=bool)
    for tr, tc in targets:
        goal[:, tr, tc] = True
    return goal


# -- the single-agent base class ----------------------------------------------------------------
class GridEnv(EpisodeGuard, gym.Env[np.ndarray, np.int64]):
    """Base class of the single-agent grid tasks (the template-method pattern of MiniGrid).

    A subclass implements :meth:`_gen_grid`, which fills ``self.grid`` (a :class:`Grid`), sets
    ``self.agent_pos``/``self.agent_dir`` and ``self.mission``, drawing all randomness from
    ``self.np_random``; and, for the oracle, :meth:`_oracle_plan`. The base class owns stepping,
    observations, rewards, the verdict, rendering and the text view. Hooks a task may override:
    :meth:`_status` (success / failure), :meth:`_step_reward`, :meth:`_move` (ice, pushing).
    The partial view caches which cells are hidden per pose; a task that makes cells opaque or
    transparent other than by the ``toggle`` action must call ``self._hidden_cache.clear()``.

    Observations (``observation="partial"``, MiniGrid's default) are the egocentric
    ``uint8 (view_size, view_size, 3)`` view with the carried object on the agent's cell;
    ``observation="full"`` gives the whole ``uint8 (height, width, 3)`` grid with the agent cell
    encoded ``(AGENT, type under the agent, direction)`` -- fully observable, convenient for small
    learning tests. The mission string is ``self.mission`` and ``info["mission"]`` of ``reset``
    (it does not change during an episode).

    The reward on success is MiniGrid's ``1 - 0.9 * steps / max_steps``; 0 otherwise.
    ``info["score"]`` is success weighted by path length (SPL, Anderson et al. 2018,
    "On Evaluation of Embodied Navigation Agents"): ``optimal_steps / max(optimal_steps, steps)``
    where ``optimal_steps`` is the length of the oracle's plan from the start state; it is in
    ``info["optimal_steps"]`` on a successful episode end (on failures only when already known, so
    that failing episodes never pay for planning) and always in :attr:`optimal_steps`.

    After the step that ends an episode (``terminated`` or ``truncated``), ``step`` raises
    :class:`verigym.core.EpisodeEndedError` until ``reset`` (:class:`verigym.core.EpisodeGuard`).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "rgb_array"], "render_fps": 10, "family": "grid"}
    default_action_set: ClassVar[str] = "minigrid"
    spl: ClassVar[bool] = True
    """Whether ``score`` is SPL (deterministic tasks) or plain success (stochastic ones)."""

    def __init__(
        self,
        *,
        height: int,
        width: int,
        max_steps: int,
        observation: str = "partial",
        view_size: int = 7,
        see_through_walls: bool = False,
        action_set: str | None = None,
        render_mode: str | None = None,
    ):
        if observation not in ("partial", "full"):
            raise ValueError(f"observation must be 'partial' or 'full', got {observation!r}")
        if not isinstance(view_size, int) or isinstance(view_size, bool) or view_size < 3 or view_size % 2 == 0 or view_size > 15:
            raise ValueError(f"view_size must be an odd int in 3..15, got {view_size!r}")
        action_set = self.default_action_set if action_set is None else action_set
        if action_set not in ACTION_SETS:
            raise ValueError(f"action_set must be one of {sorted(ACTION_SETS)}, got {action_set!r}")
        check_int("max_steps", max_steps, 1, 100_000)
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        self.height, self.width = height, width
        self.max_steps = max_steps
        self.observation_mode = observation
        self.view_size = view_size
        self.see_through_walls = bool(see_through_walls)
        self.action_set = action_set
        self.action_names = ACTION_SETS[action_set]
        self.render_mode = render_mode
        self.action_space = spaces.Discrete(len(self.action_names))
        shape = (view_size, view_size, 3) if observation == "partial" else (height, width, 3)
        high = np.broadcast_to(np.array([NUM_TYPES - 1, NUM_TYPES - 1, MAX_STATE], dtype=np.uint8), shape).copy()
        self.observation_space = spaces.Box(np.zeros(shape, np.uint8), high, dtype=np.uint8)
        self.grid = Grid(height, width, pad=max(view_size - 1, 1))
        self.agent_pos = (1, 1)
        self.agent_dir = 0
        self.carrying = (0, 0, 0)  # (kind, color, state); kind 0: nothing
        self.mission = ""
        self.step_count = 0
        self._start: tuple[Grid, tuple[int, int], int, tuple[int, int, int]] | None = None
        self._optimal: int | None = None
        self._plan: list[int] = []
        self._plan_at = -1
        self._entered = EMPTY
        self._hidden_cache: dict[tuple[int, int, int], np.ndarray] = {}

    # -- to implement ---------------------------------------------------------------------------
    def _gen_grid(self, height: int, width: int) -> None:
        """Fill ``self.grid``, set ``agent_pos``, ``agent_dir`` and ``mission`` (from ``np_random``)."""
        raise NotImplementedError

    def _oracle_plan(self) -> list[int] | None:
        """Action indices that solve the task from the current state (``None``: no plan found)."""
        raise NotImplementedError

    # -- hooks ----------------------------------------------------------------------------------
    def _status(self) -> bool | None:
        """After a step: True on success, False on failure, None to continue.

        Default: success on entering a goal, failure on entering lava or a hole.
        """
        if self._entered == GOAL:
            return True
        if self._entered >= 0 and _HAZARD_LIST[self._entered]:
            return False
        return None

    def _step_reward(self, status: bool | None) -> float:
        """The reward of a step given its status (default: MiniGrid's, on success only)."""
        return 1.0 - 0.9 * self.step_count / self.max_steps if status else 0.0

    def _move(self, r: int, c: int) -> None:
        """Walk onto ``(r, c)`` (already known to be enterable); sets ``self._entered``."""
        self.agent_pos = (r, c)
        self._entered = int(self.grid.cells[r, c, 0])

    # -- placement helpers for _gen_grid -------------------------------------------------------
    def place_obj(self, kind: int, color: int = 0, state: int = 0, *, top: tuple[int, int] = (0, 0), size: tuple[int, int] | None = None, reject: Callable[[int, int], bool] | None = None) -> tuple[int, int]:
        """Put an object on a random empty cell of the rectangle ``top``/``size`` (not the agent's).

        Raises:
            RuntimeError: no empty cell there.
        """
        r, c = self.random_empty_cell(top=top, size=size, reject=reject)
        self.grid.set(r, c, kind, color, state)
        return r, c

    def random_empty_cell(self, *, top: tuple[int, int] = (0, 0), size: tuple[int, int] | None = None, reject: Callable[[int, int], bool] | None = None) -> tuple[int, int]:
        """A uniformly drawn empty cell of the rectangle (excluding the agent's cell).

        Raises:
            RuntimeError: no empty cell there.
        """
        h, w = size if size is not None else (self.height - top[0], self.width - top[1])
        window = self.grid.cells[top[0] : top[0] + h, top[1] : top[1] + w, 0] == EMPTY
        free = [(int(r) + top[0], int(c) + top[1]) for r, c in np.argwhere(window)]
        free = [p for p in free if p != tuple(self.agent_pos) and (reject is None or not reject(*p))]
        if not free:
            raise RuntimeError(f"no empty cell in rectangle top={top} size={size}")
        return free[int(self.np_random.integers(len(free)))]

    def place_agent(self, *, top: tuple[int, int] = (0, 0), size: tuple[int, int] | None = None) -> None:
        """Put the agent on a random empty cell with a random direction."""
        self.agent_pos = (-1, -1)
        self.agent_pos = self.random_empty_cell(top=top, size=size)
        self.agent_dir = int(self.np_random.integers(4))

    # -- state ----------------------------------------------------------------------------------
    @property
    def front_pos(self) -> tuple[int, int]:
        """The cell the agent faces."""
        r, c = self.agent_pos
        dr, dc = _DIRS[self.agent_dir]
        return r + dr, c + dc

    def _front_inside(self) -> bool:
        r, c = self.agent_pos
        dr, dc = _DIRS[self.agent_dir]
        return 0 <= r + dr < self.height and 0 <= c + dc < self.width

    @property
    def optimal_steps(self) -> int:
        """Length of the oracle's plan from this episode's start state (computed once, lazily).

        Exact for single-goal navigation; for tasks with stages (key, door, goal) it is the
        shortest plan through the stages in their fixed order.

        Raises:
            RuntimeError: called before ``reset`` or the oracle found no plan.
        """
        if self._optimal is None:
            if self._start is None:
                raise RuntimeError("call reset() first")
            saved = (self.grid, self.agent_pos, self.agent_dir, self.carrying)
            grid, pos, direction, carrying = self._start
            self.grid, self.agent_pos, self.agent_dir, self.carrying = grid.copy(), pos, direction, carrying
            try:
                plan = self._oracle_plan()
            finally:
                self.grid, self.agent_pos, self.agent_dir, self.carrying = saved
            if plan is None:
                raise RuntimeError("the oracle found no plan from the start state")
            self._optimal = max(len(plan), 1)
        return self._optimal

    def observation(self) -> np.ndarray:
        """The current observation (see the class docstring); a new array."""
        r, c = self.agent_pos
        if self.observation_mode == "full":
            obs = self.grid.cells.copy()
            obs[r, c] = (AGENT, obs[r, c, 0], self.agent_dir)
            return obs
        hidden = None
        if not self.see_through_walls:
            # walls never change and doors only through "toggle", which clears this cache
            key = (r, c, self.agent_dir)
            hidden = self._hidden_cache.get(key)
            if hidden is None:
                hidden = self._hidden_cache[key] = self.grid.hidden_cells(r, c, self.agent_dir, self.view_size)
        obs = self.grid.ego_view(r, c, self.agent_dir, self.view_size, see_through_walls=self.see_through_walls, hidden=hidden)
        obs[self.view_size - 1, self.view_size // 2] = self.carrying if self.carrying[0] else (EMPTY, 0, 0)
        return obs

    def action_mask(self) -> np.ndarray:
        """``int8 (n_actions,)``: 1 for actions that change the state (turns always do)."""
        mask = [0] * len(self.action_names)
        r, c = self.agent_pos
        if self.action_set == "minigrid":
            mask[0] = mask[1] = 1
            turn_offset = 2
        else:
            turn_offset = 3
            for a, d in enumerate((NORTH, EAST, SOUTH, WEST)):
                dr, dc = _DIRS[d]
                inside = 0 <= r + dr < self.height and 0 <= c + dc < self.width
                mask[a] = int(d != self.agent_dir or (inside and self._can_step(r + dr, c + dc, d)))
        if self._front_inside():
            fr, fc = self.front_pos
            kind, color, state = self.grid.cells[fr, fc].tolist()
            if self.action_set == "minigrid":
                if type(self)._can_step is GridEnv._can_step:  # the plain rule: skip a second lookup
                    mask[2] = int(_ENTERABLE_LIST[kind][min(state, MAX_STATE)])
                else:
                    mask[2] = int(self._can_step(fr, fc, self.agent_dir))
            carrying = self.carrying[0]
            mask[turn_offset + 1] = int(_PICKABLE_LIST[kind] and not carrying)
            mask[turn_offset + 2] = int(bool(carrying) and kind == EMPTY)
            mask[turn_offset + 3] = int(kind == DOOR and (state != LOCKED or (carrying == KEY and self.carrying[1] == color)))
        mask[turn_offset + 4] = 1
        return np.array(mask, dtype=np.int8)

    def _can_step(self, r: int, c: int, direction: int) -> bool:
        """Whether walking onto ``(r, c)`` in ``direction`` succeeds (Sokoban overrides: pushes)."""
        return can_enter(self.grid.cells, r, c)

    def _can_toggle(self, r: int, c: int) -> bool:
        kind, color, state = self.grid.cells[r, c].tolist()
        if kind != DOOR:
            return False
        return state != LOCKED or (self.carrying[0] == KEY and self.carrying[1] == color)

    # -- Gymnasium API --------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        for _ in range(1000):
            self.agent_pos, self.agent_dir = (-1, -1), 0
            self.grid = Grid(self.height, self.width, pad=max(self.view_size - 1, 1))
            self.carrying = (0, 0, 0)
            self.mission = ""
            try:
                self._gen_grid(self.height, self.width)
            except Retry:
                continue
            break
        else:
            raise RuntimeError(f"{type(self).__name__} could not generate a task in 1000 tries")
        self.step_count = 0
        self._entered = EMPTY
        self._hidden_cache.clear()
        self._start = (self.grid.copy(), tuple(self.agent_pos), self.agent_dir, self.carrying)
        self._optimal = None
        self._plan, self._plan_at = [], -1
        self._on_reset()
        return self.observation(), {"mission": self.mission, ACTION_MASK: self.action_mask()}

    def _on_reset(self) -> None:
        """Called at the end of ``reset`` (after the start state was saved)."""

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.step_count += 1
        self._entered = -1
        info: dict[str, Any] = {}
        if type(action) in (int, np.int64) and 0 <= action < len(self.action_names):
            self._apply(self.action_names[action])  # fast path for the common case
        else:
            try:
                index = int(coerce_action(self.action_space, action))
            except ActionParseError as exc:
                action_error_info(f"{exc}; actions are " + ", ".join(f"{i} {n}" for i, n in enumerate(self.action_names)), info)
            else:
                self._apply(self.action_names[index])
        status = self._status()
        terminated = status is not None
        truncated = not terminated and self.step_count >= self.max_steps
        reward = self._step_reward(status)
        if terminated or truncated:
            success = bool(status)
            if self.spl and success:
                info["optimal_steps"] = self.optimal_steps
                score = self.optimal_steps / max(self.optimal_steps, self.step_count)
            elif self.spl:
                if self._optimal is not None:  # no planning on failures: they score 0 anyway
                    info["optimal_steps"] = self._optimal
                score = 0.0
            else:
                score = float(success)
            episode_end(info, success=success, score=score)
        info[ACTION_MASK] = self.action_mask()
        return self.observation(), float(reward), terminated, truncated, info

    def _apply(self, name: str) -> None:
        """Carry out one named action."""
        if self.action_set == "cardinal" and name in _CARDINAL_DIR:
            self.agent_dir = _CARDINAL_DIR[name]
            name = "forward"
        if name == "left":
            self.agent_dir = (self.agent_dir - 1) % 4
        elif name == "right":
            self.agent_dir = (self.agent_dir + 1) % 4
        elif not self._front_inside():
            return
        elif name == "forward":
            fr, fc = self.front_pos
            if self._can_step(fr, fc, self.agent_dir):
                self._move(fr, fc)
        elif name == "pickup":
            fr, fc = self.front_pos
            cell = self.grid.cells[fr, fc].tolist()
            if _PICKABLE_LIST[cell[0]] and not self.carrying[0]:
                self.carrying = tuple(cell)
                self.grid.clear(fr, fc)
        elif name == "drop":
            fr, fc = self.front_pos
            if self.carrying[0] and self.grid.cells[fr, fc, 0] == EMPTY:
                self.grid.set(fr, fc, *self.carrying)
                self.carrying = (0, 0, 0)
        elif name == "toggle":
            fr, fc = self.front_pos
            if self._can_toggle(fr, fc):
                self.grid.cells[fr, fc, 2] = CLOSED if self.grid.cells[fr, fc, 2] == OPEN else OPEN
                self._hidden_cache.clear()  # a door changed what can be seen
        elif name == "done":
            self._on_done()

    def _on_done(self) -> None:
        """The ``done`` action (a no-op unless a task gives it a meaning)."""

    def render(self) -> str | np.ndarray | None:
        if self.render_mode == "ansi":
            return self.map_text()
        if self.render_mode == "rgb_array":
            return self.render_frame()
        return None

    def render_frame(self, tile_size: int = 24) -> np.ndarray:
        """``uint8 (H * tile_size, W * tile_size, 3)``: the whole grid, the agent's view lightened."""
        highlight = None
        if self.observation_mode == "partial":
            highlight = self._view_cells()
        r, c = self.agent_pos
        return render_rgb(self.grid.cells, tile_size=tile_size, agents=[(r, c, self.agent_dir, RED)], highlight=highlight)

    def _view_cells(self) -> np.ndarray:
        """``bool (H, W)``: the cells inside the agent's view window (visible or not)."""
        mark = np.zeros((self.height, self.width), dtype=bool)
        offsets = _ego_offsets(self.view_size, self.grid.padded.shape[1], self.grid.pad)[self.agent_dir]
        pw = self.grid.padded.shape[1]
        base = (self.agent_pos[0] + self.grid.pad) * pw + self.agent_pos[1] + self.grid.pad
        rows, cols = np.divmod(offsets + base, pw)
        rows, cols = rows - self.grid.pad, cols - self.grid.pad
        inside = (rows >= 0) & (rows < self.height) & (cols >= 0) & (cols < self.width)
        mark[rows[inside], cols[inside]] = True
        return mark

    def map_text(self) -> str:
        """The whole grid as ASCII with the agent (for ``render_mode="ansi"``)."""
        obs = self.grid.cells.copy()
        obs[self.agent_pos] = (AGENT, obs[self.agent_pos][0], self.agent_dir)
        return f"Mission: {self.mission}\n{grid_text(obs)}"

    # -- TextInterface --------------------------------------------------------------------------
    def instructions(self) -> str:
        """The rules, the map legend and the action format, as a prompt."""
        if self.action_set == "minigrid":
            moves = "left / right turn on the spot, forward steps into the cell you face"
        else:
            moves = "up / right / down / left face that way and step there when the cell is free"
        view = (
            f"You see a {self.view_size}x{self.view_size} window in front of you: you are at the "
            "bottom center, facing up (^); walls and closed doors hide what is behind them. The "
            "cell under your arrow shows nothing; 'Carrying:' says what you hold."
            if self.observation_mode == "partial"
            else "You see the whole map; row 0 is the top, north is up."
        )
        return (
            f"{self._task_rules()} {view} {LEGEND} Actions: "
            + ", ".join(f"{i} {n}" for i, n in enumerate(self.action_names))
            + f". {moves}; pickup takes the object you face (hold one at a time), drop puts it on "
            "the free cell you face, toggle opens or closes the door you face (a locked door needs "
            f"the key of its color). Reply with one action name or number. You have {self.max_steps} steps."
        )

    def _task_rules(self) -> str:
        return f"Mission: {self.mission}."

    def observation_text(self, observation: np.ndarray) -> str:
        obs = np.asarray(observation)
        lines = [f"Mission: {self.mission}"]
        if self.observation_mode == "partial":
            v = self.view_size
            shown = obs.copy()
            held = tuple(int(x) for x in shown[v - 1, v // 2])
            shown[v - 1, v // 2] = (AGENT, EMPTY, NORTH)
            lines.append(grid_text(shown))
            lines.append("Carrying: " + (_object_name(*held) if held[0] not in (UNSEEN, EMPTY) else "nothing"))
        else:
            lines.append(grid_text(obs))
        return "\n".join(lines)

    def parse_action(self, text: str) -> np.int64:
        """Read an action name or number from ``text``; the last one mentioned counts.

        Raises:
            TypeError: ``text`` is not a str.
            ActionParseError: no action found.
        """
        if not isinstance(text, str):
            raise TypeError(f"expected str, got {type(text).__name__}")
        words = re.findall(r"[a-z]+|\d+", text[-4000:].lower())
        for word in reversed(words):
            if word in self.action_names:
                return np.int64(self.action_names.index(word))
            if word.isdigit() and int(word) < len(self.action_names):
                return np.int64(int(word))
        raise ActionParseError("no action found; reply with one of: " + ", ".join(self.action_names))

    def action_text(self, action: Any) -> str:
        return self.action_names[int(action)]

    # -- oracle ---------------------------------------------------------------------------------
    def oracle_action(self) -> np.int64:
        """The next action of the oracle's plan (replanned when the state left the plan)."""
        if self._plan_at != self.step_count or not self._plan:
            plan = self._oracle_plan()
            self._plan = list(plan) if plan else [len(self.action_names) - 1]
            if self.step_count == 0 and self._optimal is None and plan is not None:
                self._optimal = max(len(plan), 1)
        self._plan_at = self.step_count + 1
        return np.int64(self._plan.pop(0))

    def plan_to(self, goal: np.ndarray, passable: np.ndarray | None = None, start: tuple[int, int, int] | None = None) -> list[int] | None:
        """A shortest plan from ``start`` (default: the agent's state) to a goal state.

        ``passable`` defaults to the cells that can be entered safely (no lava, no hole). Plans
        use this env's action set.
        """
        if passable is None:
            passable = safe_mask(self.grid.cells)
        if start is None:
            start = (self.agent_pos[0], self.agent_pos[1], self.agent_dir)
        return bfs_plan(passable, start, goal, self.action_set)


class Retry(Exception):
    """Raised inside ``_gen_grid`` to draw the task again (rejection sampling)."""


def _object_name(kind: int, color: int, state: int) -> str:
    name = OBJECT_NAMES[kind] if kind < NUM_TYPES else "object"
    return f"a {COLOR_NAMES[color]} {name}" if kind in (KEY, BALL, BOX, DOOR) else f"a {name}"


def check_int(name: str, value: Any, low: int, high: int) -> int:
    """``value`` as an int after checking it is an integer (not a bool) in ``low..high``.

    Raises:
        ValueError: it is not; the message names the argument and the range.
    """
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be an int in {low}..{high}, got {value!r}")
    return int(value)


class Planner:
    """Chains shortest sub-plans (go to, face, pick up, toggle) on a private copy of the state.

    Oracles of multi-stage tasks use it: each :meth:`face`/:meth:`stand` is a breadth-first
    search, each :meth:`do` updates the copy like the env would. ``plan`` is ``None`` once a stage
    had no path.
    """

    def __init__(self, env: GridEnv):
        self.cells = env.grid.cells.copy()
        self.state = (int(env.agent_pos[0]), int(env.agent_pos[1]), int(env.agent_dir))
        self.carrying = tuple(env.carrying)
        self.action_set = env.action_set
        self.names = env.action_names
        self.plan: list[int] | None = []

    def go(self, goal: np.ndarray) -> bool:
        """Walk to a goal state (``bool (4, H, W)``); False when unreachable."""
        if self.plan is None:
            return False
        passable = safe_mask(self.cells)
        path = bfs_plan(passable, self.state, goal, self.action_set)
        if path is None:
            self.plan = None
            return False
        self.plan.extend(path)
        self.state = simulate_plan(self.state, path, passable, self.action_set)
        return True

    def face(self, targets: Iterable[tuple[int, int]]) -> bool:
        """Walk next to one of ``targets`` and face it."""
        return self.go(facing_goal(self.cells.shape[0], self.cells.shape[1], targets))

    def stand(self, targets: Iterable[tuple[int, int]]) -> bool:
        """Walk onto one of ``targets``."""
        return self.go(standing_goal(self.cells.shape[0], self.cells.shape[1], targets))

    @property
    def front(self) -> tuple[int, int]:
        r, c, d = self.state
        return r + int(DIR_VEC[d, 0]), c + int(DIR_VEC[d, 1])

    def do(self, name: str) -> None:
        """Append ``pickup``, ``drop`` or ``toggle`` (acting on the faced cell) to the plan."""
        if self.plan is None:
            return
        self.plan.append(self.names.index(name))
        fr, fc = self.front
        if name == "pickup":
            self.carrying = tuple(int(v) for v in self.cells[fr, fc])
            self.cells[fr, fc] = (EMPTY, 0, 0)
        elif name == "drop":
            self.cells[fr, fc] = self.carrying
            self.carrying = (0, 0, 0)
        elif name == "toggle":
            self.cells[fr, fc, 2] = CLOSED if self.cells[fr, fc, 2] == OPEN else OPEN


def simulate_plan(agent: tuple[int, int, int], plan: Sequence[int], passable: np.ndarray, action_set: str) -> tuple[int, int, int]:
    """The ``(row, col, direction)`` reached by following a movement ``plan`` from ``agent``."""
    r, c, d = agent
    height, width = passable.shape
    for a in plan:
        if action_set == "minigrid":
            if a == 0:
                d = (d - 1) % 4
            elif a == 1:
                d = (d + 1) % 4
            elif a == 2:
                fr, fc = r + int(DIR_VEC[d, 0]), c + int(DIR_VEC[d, 1])
                if 0 <= fr < height and 0 <= fc < width and passable[fr, fc]:
                    r, c = fr, fc
        elif a < 4:
            d = (NORTH, EAST, SOUTH, WEST)[a]
            fr, fc = r + int(DIR_VEC[d, 0]), c + int(DIR_VEC[d, 1])
            if 0 <= fr < height and 0 <= fc < width and passable[fr, fc]:
                r, c = fr, fc
    return r, c, d
