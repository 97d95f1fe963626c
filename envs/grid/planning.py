"""Shortest plans in the ``grid`` family: breadth-first search over ``(row, col, direction)``.

The oracles of the tasks are built from these: :func:`bfs_plan` for one walk, :class:`Planner` to
chain walks and object actions (pick up the key, open the door, go to the goal) on a private copy of
the state.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from verigym.envs.grid.encoding import (
    CLOSED,
    DIR_VEC,
    EAST,
    EMPTY,
    NORTH,
    OPEN,
    SOUTH,
    WEST,
    safe_mask,
)

if TYPE_CHECKING:
    from verigym.envs.grid.base import GridEnv


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
    parent: dict[tuple[int, int, int], tuple[tuple[int, int, int], int]] = {
        (r0, c0, d0): ((r0, c0, d0), -1)
    }
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


def simulate_plan(
    agent: tuple[int, int, int], plan: Sequence[int], passable: np.ndarray, action_set: str
) -> tuple[int, int, int]:
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
