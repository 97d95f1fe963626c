"""Navigation tasks: reach the green goal square (Empty, FourRooms, Maze, LavaCrossing)."""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from verigym.envs.grid.engine import (
    EMPTY,
    GOAL,
    LAVA,
    WALL,
    GridEnv,
    Retry,
    safe_mask,
    standing_goal,
)
from verigym.kwargs_policy import IntRange, client
from verigym.validation import check_int, check_odd_int

__all__ = ["EmptyEnv", "FourRoomsEnv", "LavaCrossingEnv", "MazeEnv"]

_COMMON_DOC = """
    ## Action Space
    ``Discrete(7)`` (``action_set="minigrid"``, default): 0 left, 1 right (turn on the spot),
    2 forward, 3 pickup, 4 drop, 5 toggle, 6 done. ``action_set="cardinal"`` gives
    ``Discrete(8)``: 0 up, 1 right, 2 down, 3 left (face that way and step), 4 pickup, 5 drop,
    6 toggle, 7 done. ``info["action_mask"]`` (``int8``) marks the actions that change the state.
    A malformed action (not an integer in range, NaN, wrong shape) costs the step, changes nothing
    and sets ``info["action_error"]``.

    ## Observation Space
    ``observation="partial"`` (default): ``Box(0, [14, 14, 3], (view_size, view_size, 3), uint8)``,
    the egocentric view (type, color, state per cell; :mod:`verigym.envs.grid.engine`).
    ``observation="full"``: ``Box(.., (size, size, 3), uint8)``, the whole grid with the agent cell
    ``(10, type under the agent, direction)``. The mission is ``info["mission"]`` of ``reset``.
"""

_SPL_DOC = """
    ## Rewards
    ``1 - 0.9 * steps / max_steps`` on reaching the goal (MiniGrid's formula), else 0.

    ## Episode End
    Terminated on the goal: ``success=True``, ``score`` = SPL ``optimal_steps / max(optimal_steps,
    steps)`` with ``info["optimal_steps"]`` from a breadth-first search over (cell, direction)
    states. Terminated on lava with ``success=False, score=0``. Truncated after ``max_steps``:
    ``success=False``, ``score=0``.
"""


class _ReachGoal(GridEnv):
    """A task won by standing on a goal square; the oracle is one breadth-first search."""

    def _oracle_plan(self) -> list[int] | None:
        return self.plan_to(standing_goal(self.height, self.width, self.grid.find(GOAL)))


class EmptyEnv(_ReachGoal):
    __doc__ = (
        """An empty room; walk to the goal square in the far corner.

    ## Description
    MiniGrid's ``Empty`` (Chevalier-Boisvert et al. 2023): a ``size x size`` room (outer walls
    included) with the goal in the bottom-right corner; the agent starts on a random cell facing a
    random direction (MiniGrid's ``Empty-Random`` start), so seeds differ.
"""
        + _COMMON_DOC
        + _SPL_DOC
        + """
    ## Arguments
    * ``size`` (int, 5..32): side in cells, walls included.
    * ``max_steps`` (int | None): default ``4 * size**2`` (MiniGrid's).
    * ``observation``, ``view_size`` (odd, 3..15), ``see_through_walls``, ``action_set``,
      ``render_mode``: see :class:`~verigym.envs.grid.engine.GridEnv`.

    ## Version History
    * v0: initial version.
    """
    )

    remote_kwargs = {"size": client(IntRange(5, 32))}
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(self, *, size: int = 8, max_steps: int | None = None, **kwargs: Any):
        self.size = check_int("size", size, 5, 32)
        super().__init__(
            height=size,
            width=size,
            max_steps=4 * size * size if max_steps is None else max_steps,
            **kwargs,
        )

    def _gen_grid(self, height: int, width: int) -> None:
        self.grid.wall_rect(0, 0, height, width)
        self.grid.set(height - 2, width - 2, GOAL)
        self.place_agent()
        self.mission = "get to the green goal square"


class FourRoomsEnv(_ReachGoal):
    __doc__ = (
        """Four rooms joined by one gap each; walk to the goal square.

    ## Description
    MiniGrid's ``FourRooms`` (after Sutton, Precup & Singh 1999, the options paper): a
    ``size x size`` grid split into four rooms by a cross of walls, one random gap in each of the
    four wall segments; the agent (random direction) and the goal are on random cells.
"""
        + _COMMON_DOC
        + _SPL_DOC
        + """
    ## Arguments
    * ``size`` (int, 7..32): side in cells, walls included (MiniGrid: 19).
    * ``max_steps`` (int | None): default 100 (MiniGrid's).
    * ``observation``, ``view_size``, ``see_through_walls``, ``action_set``, ``render_mode``: see
      :class:`~verigym.envs.grid.engine.GridEnv`.

    ## Version History
    * v0: initial version.
    """
    )

    remote_kwargs = {"size": client(IntRange(7, 32))}
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(self, *, size: int = 19, max_steps: int | None = None, **kwargs: Any):
        self.size = check_int("size", size, 7, 32)
        super().__init__(
            height=size, width=size, max_steps=100 if max_steps is None else max_steps, **kwargs
        )

    def _gen_grid(self, height: int, width: int) -> None:
        grid = self.grid
        grid.wall_rect(0, 0, height, width)
        mid_r, mid_c = height // 2, width // 2
        grid.cells[mid_r, :, 0] = WALL
        grid.cells[:, mid_c, 0] = WALL
        rng = self.np_random
        # one gap in each of the four wall segments
        grid.clear(int(rng.integers(1, mid_r)), mid_c)
        grid.clear(int(rng.integers(mid_r + 1, height - 1)), mid_c)
        grid.clear(mid_r, int(rng.integers(1, mid_c)))
        grid.clear(mid_r, int(rng.integers(mid_c + 1, width - 1)))
        self.place_agent()
        self.place_obj(GOAL)
        self.mission = "reach the goal"


class MazeEnv(EmptyEnv):
    __doc__ = (
        """A perfect maze; walk from one end to the goal at the farthest cell.

    ## Description
    A maze carved by a randomized depth-first search (recursive backtracker) on the odd cells of a
    ``size x size`` grid, so every two cells are joined by exactly one path. The agent starts on a
    random corridor cell; the goal is on the cell farthest from it (by breadth-first search), so
    the task is long-horizon and always solvable.
"""
        + _COMMON_DOC
        + _SPL_DOC
        + """
    ## Arguments
    * ``size`` (odd int, 7..31): side in cells, walls included.
    * ``max_steps`` (int | None): default ``4 * size**2``.
    * ``observation``, ``view_size``, ``see_through_walls``, ``action_set``, ``render_mode``: see
      :class:`~verigym.envs.grid.engine.GridEnv`.

    ## Version History
    * v0: initial version.
    """
    )

    def __init__(self, *, size: int = 11, max_steps: int | None = None, **kwargs: Any):
        super().__init__(size=check_odd_int("size", size, 7, 31), max_steps=max_steps, **kwargs)

    def _gen_grid(self, height: int, width: int) -> None:
        cells = self.grid.cells
        cells[..., 0] = WALL
        rng = self.np_random
        start = (2 * int(rng.integers(height // 2)) + 1, 2 * int(rng.integers(width // 2)) + 1)
        cells[start[0], start[1], 0] = EMPTY
        stack = [start]
        while stack:
            r, c = stack[-1]
            options = [
                (r + dr, c + dc)
                for dr, dc in ((-2, 0), (0, 2), (2, 0), (0, -2))
                if 0 < r + dr < height - 1
                and 0 < c + dc < width - 1
                and cells[r + dr, c + dc, 0] == WALL
            ]
            if not options:
                stack.pop()
                continue
            nr, nc = options[int(rng.integers(len(options)))]
            cells[(r + nr) // 2, (c + nc) // 2, 0] = EMPTY
            cells[nr, nc, 0] = EMPTY
            stack.append((nr, nc))
        self.place_agent()
        distances = _distances(safe_mask(cells), self.agent_pos)
        far = np.argwhere(distances == distances.max())
        r, c = far[int(rng.integers(len(far)))]
        self.grid.set(int(r), int(c), GOAL)
        self.mission = "find the goal at the end of the maze"


class LavaCrossingEnv(EmptyEnv):
    __doc__ = (
        """Cross rivers of lava through their gaps to reach the goal; stepping on lava ends the episode.

    ## Description
    MiniGrid's ``LavaCrossing``: ``num_crossings`` rivers of lava, horizontal or vertical, each
    with one gap placed so that a path from the top-left start (facing east) to the goal in the
    bottom-right corner always exists (the generator checks it with a breadth-first search).
"""
        + _COMMON_DOC
        + _SPL_DOC
        + """
    ## Arguments
    * ``size`` (odd int, 7..31): side in cells, walls included (MiniGrid: 9 or 11).
    * ``num_crossings`` (int, 1..size - 3): rivers of lava (rows and columns 2, 4, ..).
    * ``max_steps`` (int | None): default ``4 * size**2``.
    * ``observation``, ``view_size``, ``see_through_walls``, ``action_set``, ``render_mode``: see
      :class:`~verigym.envs.grid.engine.GridEnv`.

    ## Version History
    * v0: initial version.
    """
    )

    remote_kwargs = {"num_crossings": client(IntRange(1, 15))}
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(
        self, *, size: int = 9, num_crossings: int = 1, max_steps: int | None = None, **kwargs: Any
    ):
        check_odd_int("size", size, 7, 31)
        self.num_crossings = check_int("num_crossings", num_crossings, 1, 2 * ((size - 3) // 2))
        super().__init__(size=size, max_steps=max_steps, **kwargs)

    def _gen_grid(self, height: int, width: int) -> None:
        rng = self.np_random
        grid = self.grid
        grid.wall_rect(0, 0, height, width)
        self.agent_pos, self.agent_dir = (1, 1), 0
        grid.set(height - 2, width - 2, GOAL)
        # rivers on even rows/columns 2..size-3 (as MiniGrid), chosen without repetition
        rows = [("h", i) for i in range(2, height - 2, 2)]
        cols = [("v", j) for j in range(2, width - 2, 2)]
        pool = rows + cols
        picks = rng.choice(len(pool), size=self.num_crossings, replace=False)
        rivers = sorted((pool[int(k)] for k in picks), key=lambda x: x[0])
        for kind, index in rivers:
            if kind == "h":
                grid.cells[index, 1 : width - 1, 0] = LAVA
            else:
                grid.cells[1 : height - 1, index, 0] = LAVA
        # open one gap per river: walk a monotone path from the start, east or south at random
        r, c = 1, 1
        river_rows = {i for k, i in rivers if k == "h"}
        river_cols = {j for k, j in rivers if k == "v"}
        while (r, c) != (height - 2, width - 2):
            can_east = c < width - 2
            can_south = r < height - 2
            if r in river_rows and can_south:  # cross a river in one cell
                can_east = False
            elif c in river_cols and can_east:
                can_south = False
            if can_east and (not can_south or rng.random() < 0.5):
                c += 1
            else:
                r += 1
            if (r in river_rows or c in river_cols) and grid.cells[r, c, 0] == LAVA:
                grid.clear(r, c)
        if grid.cells[1, 1, 0] != EMPTY:
            raise Retry
        self.mission = "avoid the lava and get to the green goal square"


def _distances(passable: np.ndarray, start: tuple[int, int]) -> np.ndarray:
    """BFS step counts (4-connected) from ``start``; -1 where unreachable."""
    dist = np.full(passable.shape, -1, dtype=np.int64)
    dist[start] = 0
    queue = deque([start])
    height, width = passable.shape
    while queue:
        r, c = queue.popleft()
        for nr, nc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if 0 <= nr < height and 0 <= nc < width and passable[nr, nc] and dist[nr, nc] < 0:
                dist[nr, nc] = dist[r, c] + 1
                queue.append((nr, nc))
    return dist
