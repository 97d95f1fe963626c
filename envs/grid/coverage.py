"""Coverage: visit every free cell; the reward of a cell shrinks with each revisit."""

from __future__ import annotations

from typing import Any

import numpy as np

from verigym.envs.grid.engine import (
    EMPTY,
    FLOOR,
    MAX_STATE,
    WALL,
    GridEnv,
    Retry,
    bfs_plan,
    simulate_plan,
    standing_goal,
)
from verigym.kwargs_policy import FloatRange, IntRange, client, operator_only
from verigym.validation import check_int, check_number

__all__ = ["CoverageEnv"]


class CoverageEnv(GridEnv):
    """Visit every free cell of a room with obstacles; revisits earn less and less.

    ## Description
    A coverage (lawn-mowing / exploration) task: a ``size x size`` room with random wall blocks
    (density ``obstacle_density``, the free cells kept connected). Visited cells turn into floor
    marked with their visit count (capped at 3), so the state is fully observable.

    ## Action Space
    ``Discrete(8)`` (``action_set="cardinal"``, default): 0 up, 1 right, 2 down, 3 left, then
    pickup, drop, toggle, done (no effect; masked out). ``action_set="minigrid"`` is allowed.
    A malformed action costs the step and sets ``info["action_error"]``.

    ## Observation Space
    ``observation="full"`` (default): ``Box(0, [14, 14, 3], (size, size, 3), uint8)``; unvisited
    free cells are empty (1), visited ones floor (3) with the visit count in channel 2.

    ## Rewards
    Entering a cell visited ``k`` times before gives ``decay**k / num_free`` (diminishing returns:
    1/num_free for a new cell, ``decay`` times less for each revisit). The return is at most
    ``1 / (1 - decay)`` times the share of cells covered, and new cells dominate.

    ## Starting State
    The agent on a random free cell (counted as visited) facing a random direction.

    ## Episode End
    Terminated when every free cell was visited: ``success=True``. ``score = covered *
    min(1, reference_steps / steps)`` where ``covered`` is the share of free cells visited and
    ``reference_steps = info["optimal_steps"]`` is the length of the oracle's tour (greedy: always
    walk to the nearest unvisited cell; a reference, not the NP-hard optimum). Truncated after
    ``max_steps`` with ``success=False`` and the same score formula (partial credit for coverage).

    ## Arguments
    * ``size`` (int, 5..20): side in cells, walls included.
    * ``obstacle_density`` (float, 0..0.3): share of inner cells that are walls.
    * ``decay`` (float, 0..1): reward factor per revisit.
    * ``max_steps`` (int | None): default ``3 * size**2``.
    * ``observation``, ``view_size``, ``see_through_walls``, ``action_set``, ``render_mode``.

    ## Version History
    * v0: initial version. Fixed in v0: the reward of a revisit used the cell's visit count,
      which stops at 3, so oscillating between two cells paid ``decay**3 / num_free`` a step for
      ever (1.26 on Coverage-6x6, more than covering the grid); it now decays with every visit.
    """

    default_action_set = "cardinal"

    remote_kwargs = {
        "size": operator_only(IntRange(5, 20), why="generator work per reset (issue 43)"),
        "obstacle_density": operator_only(
            FloatRange(0.0, 0.3), why="generator work: 0.3 costs up to 0.3 s a reset"
        ),
        "decay": client(FloatRange(0.0, 1.0)),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(
        self,
        *,
        size: int = 8,
        obstacle_density: float = 0.1,
        decay: float = 0.5,
        max_steps: int | None = None,
        observation: str = "full",
        **kwargs: Any,
    ):
        self.size = check_int("size", size, 5, 20)
        self.obstacle_density = check_number("obstacle_density", obstacle_density, 0.0, 0.3)
        self.decay = check_number("decay", decay, 0.0, 1.0)
        super().__init__(
            height=size,
            width=size,
            max_steps=3 * size * size if max_steps is None else max_steps,
            observation=observation,
            **kwargs,
        )
        self._num_free = 1
        self._gain = 0.0

    def _gen_grid(self, height: int, width: int) -> None:
        cells = self.grid.cells
        self.grid.wall_rect(0, 0, height, width)
        blocks = self.np_random.random((height - 2, width - 2)) < self.obstacle_density
        cells[1 : height - 1, 1 : width - 1, 0] = np.where(blocks, WALL, EMPTY)
        free = np.argwhere(cells[..., 0] == EMPTY)
        if len(free) < 2:
            raise Retry
        self.place_agent()
        if not _connected(cells[..., 0] == EMPTY, self.agent_pos):
            raise Retry
        self._num_free = len(free)
        cells[self.agent_pos] = (FLOOR, 0, 1)
        self.mission = "visit every free cell"

    def _task_rules(self) -> str:
        return (
            f"Mission: {self.mission}. Unvisited cells show '. ', visited ones their visit count "
            "(1-3); a new cell pays most, each revisit pays less. Up/right/down/left are the useful actions."
        )

    def _on_reset(self) -> None:
        self._beyond: dict[tuple[int, int], int] = {}

    def _move(self, r: int, c: int) -> None:
        cell = self.grid.cells[r, c]
        visits = int(cell[2]) if cell[0] == FLOOR else 0
        if visits >= MAX_STATE:  # the cell's count stops at MAX_STATE; the reward's does not
            visits += self._beyond.get((r, c), 0)
            self._beyond[(r, c)] = visits + 1 - MAX_STATE
        self._gain = self.decay**visits / self._num_free
        cell[0], cell[2] = FLOOR, min(visits + 1, MAX_STATE)
        super()._move(r, c)

    def _status(self) -> bool | None:
        return True if not np.any(self.grid.cells[..., 0] == EMPTY) else None

    def _step_reward(self, status: bool | None) -> float:
        gain, self._gain = self._gain, 0.0
        return gain

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = super().step(action)
        if terminated or truncated:
            covered = 1.0 - np.count_nonzero(self.grid.cells[..., 0] == EMPTY) / self._num_free
            info["covered"] = covered
            info["score"] = covered * min(1.0, self.optimal_steps / self.step_count)
        return observation, reward, terminated, truncated, info

    def _oracle_plan(self) -> list[int] | None:
        cells = self.grid.cells
        unvisited = cells[..., 0] == EMPTY
        passable = np.isin(cells[..., 0], (EMPTY, FLOOR))
        state = (self.agent_pos[0], self.agent_pos[1], self.agent_dir)
        plan: list[int] = []
        while unvisited.any():
            path = bfs_plan(
                passable,
                state,
                standing_goal(self.height, self.width, np.argwhere(unvisited)),
                self.action_set,
            )
            if path is None:
                return plan or None
            for action in path:
                state = simulate_plan(state, [action], passable, self.action_set)
                unvisited[state[0], state[1]] = False
            plan.extend(path)
        return plan


def _connected(passable: np.ndarray, start: tuple[int, int]) -> bool:
    """Whether every passable cell is 4-connected to ``start``."""
    seen = np.zeros_like(passable)
    stack = [start]
    seen[start] = True
    while stack:
        r, c = stack.pop()
        for nr, nc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if passable[nr, nc] and not seen[nr, nc]:
                seen[nr, nc] = True
                stack.append((nr, nc))
    return bool(seen.sum() == passable.sum())
