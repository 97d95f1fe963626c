"""IceLake: a procedural slippery frozen lake (FrozenLake kind) that is always solvable."""

from __future__ import annotations

from typing import Any

import numpy as np

from verigym.envs.grid.engine import (
    DIR_VEC,
    EAST,
    GOAL,
    HOLE,
    ICE,
    NORTH,
    SOUTH,
    WEST,
    GridEnv,
    Retry,
    safe_mask,
    standing_goal,
)
from verigym.kwargs_policy import FloatRange, IntRange, client, operator_only
from verigym.validation import check_int, check_number

__all__ = ["IceLakeEnv"]

_MOVE_DIRS = (NORTH, EAST, SOUTH, WEST)  # the cardinal actions 0..3


class IceLakeEnv(GridEnv):
    """Cross a slippery frozen lake to the goal without falling into a hole.

    ## Description
    The FrozenLake task of Gymnasium's toy text suite, made procedural: a ``size x size`` lake of
    ice (inside an outer wall) with holes drawn independently with probability ``hole_density``;
    the start is the top-left cell, the goal the bottom-right cell. Maps are redrawn until a
    breadth-first search finds a hole-free path, so every task is solvable. On ice the agent
    slips: with probability ``slip`` it moves in one of the two perpendicular directions (equally
    likely) instead of the chosen one (Gymnasium's FrozenLake: ``slip = 2/3``).

    ## Action Space
    ``Discrete(8)`` (``action_set="cardinal"``, default): 0 up, 1 right, 2 down, 3 left, then
    pickup, drop, toggle, done (no effect here; masked out). ``action_set="minigrid"`` is allowed
    too (turns never slip). A malformed action costs the step and sets ``info["action_error"]``.

    ## Observation Space
    ``observation="full"`` (default): ``Box(0, [14, 14, 3], (size + 2, size + 2, 3), uint8)``,
    the whole lake (ice 11, hole 12, goal 8) with the agent cell ``(10, type under, direction)``.
    ``observation="partial"``: the egocentric view.

    ## Rewards
    ``1 - 0.9 * steps / max_steps`` on reaching the goal, else 0 (also 0 for a hole).

    ## Starting State
    The agent on the top-left cell facing east.

    ## Episode End
    Terminated on the goal (``success=True``, ``score=1``) or in a hole (``success=False``,
    ``score=0``); truncated after ``max_steps``. The task is stochastic, so ``score`` is plain
    success (SPL only when ``slip=0``). The oracle follows the policy of value iteration that
    maximizes the probability of reaching the goal; that probability (from the start, within
    ``max_steps``) is ``info["oracle_success_probability"]`` at the episode end, a reference for
    success rates.

    ## Arguments
    * ``size`` (int, 3..20): lake side in cells (the grid adds a wall around it).
    * ``hole_density`` (float, 0..0.4): probability of a hole on each cell but start and goal.
    * ``slip`` (float, 0..1): probability of slipping sideways on a move.
    * ``max_steps`` (int | None): default ``100`` for ``size <= 4`` else ``25 * size``.
    * ``observation``, ``view_size``, ``see_through_walls``, ``action_set``, ``render_mode``.

    ## Version History
    * v0: initial version.
    """

    default_action_set = "cardinal"

    remote_kwargs = {
        "size": operator_only(IntRange(3, 20), why="generator work: 20 costs up to 0.4 s a reset"),
        "hole_density": client(FloatRange(0.0, 0.4)),
        "slip": client(FloatRange(0.0, 1.0)),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(
        self,
        *,
        size: int = 4,
        hole_density: float = 0.2,
        slip: float = 2 / 3,
        max_steps: int | None = None,
        observation: str = "full",
        **kwargs: Any,
    ):
        self.size = check_int("size", size, 3, 20)
        self.hole_density = check_number("hole_density", hole_density, 0.0, 0.4)
        self.slip = check_number("slip", slip, 0.0, 1.0)
        self.spl = self.slip == 0.0
        default_steps = 100 if size <= 4 else 25 * size
        super().__init__(
            height=size + 2,
            width=size + 2,
            max_steps=default_steps if max_steps is None else max_steps,
            observation=observation,
            **kwargs,
        )
        self._policy: np.ndarray | None = None
        self._success_probability = 0.0

    def _gen_grid(self, height: int, width: int) -> None:
        grid = self.grid
        grid.wall_rect(0, 0, height, width)
        inner = grid.cells[1 : height - 1, 1 : width - 1]
        holes = self.np_random.random((height - 2, width - 2)) < self.hole_density
        holes[0, 0] = holes[-1, -1] = False
        inner[..., 0] = np.where(holes, HOLE, ICE)
        grid.set(height - 2, width - 2, GOAL)
        self.agent_pos, self.agent_dir = (1, 1), EAST
        if self.plan_to(standing_goal(height, width, [(height - 2, width - 2)])) is None:
            raise Retry
        self.mission = "cross the ice to the goal without falling into a hole"

    def _on_reset(self) -> None:
        self._policy = None

    def _task_rules(self) -> str:
        return (
            f"Mission: {self.mission}. The ice (__) is slippery: a move goes sideways instead with "
            f"probability {self.slip:.2f}. Falling into a hole (OO) ends the episode. "
            "Up/right/down/left are the useful actions."
        )

    def _apply(self, name: str) -> None:
        if (
            self.action_set == "cardinal"
            and name in ("up", "right", "down", "left")
            or name == "forward"
        ):
            r, c = self.agent_pos
            if self.slip > 0.0 and self.grid.cells[r, c, 0] == ICE:
                u = float(self.np_random.random())
                if u < self.slip:
                    direction = (
                        _MOVE_DIRS[("up", "right", "down", "left").index(name)]
                        if name != "forward"
                        else self.agent_dir
                    )
                    side = 1 if u < self.slip / 2 else -1
                    slid = (direction + side) % 4
                    nr, nc = r + int(DIR_VEC[slid, 0]), c + int(DIR_VEC[slid, 1])
                    self.agent_dir = direction
                    if self._can_step(nr, nc, slid):
                        self._move(nr, nc)
                    return
        super()._apply(name)

    # -- oracle: value iteration on cells -------------------------------------------------------
    def _solve(self) -> None:
        """Value iteration for the probability of reaching the goal within ``max_steps``."""
        cells = self.grid.cells
        height, width = self.height, self.width
        n = height * width
        index = np.arange(n).reshape(height, width)
        enter = np.isin(cells[..., 0], (ICE, GOAL, HOLE))
        nxt = np.empty((4, n), dtype=np.int64)  # next cell of moving in each direction
        for d in range(4):
            rr = np.clip(np.arange(height)[:, None] + DIR_VEC[d, 0], 0, height - 1)
            cc = np.clip(np.arange(width)[None, :] + DIR_VEC[d, 1], 0, width - 1)
            target = index[rr, cc]
            nxt[d] = np.where(enter[rr, cc], target, index).ravel()
        goal = (cells[..., 0] == GOAL).ravel()
        hole = (cells[..., 0] == HOLE).ravel()
        value = goal.astype(np.float64)
        q = np.zeros((4, n))
        for _ in range(self.max_steps):
            for a, d in enumerate(_MOVE_DIRS):
                left, right = (d - 1) % 4, (d + 1) % 4
                q[a] = (1 - self.slip) * value[nxt[d]] + self.slip / 2 * (
                    value[nxt[left]] + value[nxt[right]]
                )
            new = np.where(goal, 1.0, np.where(hole, 0.0, q.max(axis=0)))
            if np.array_equal(new, value):
                break
            value = new
        self._policy = q.argmax(axis=0).reshape(height, width)
        start = self._start[1] if self._start is not None else self.agent_pos
        self._success_probability = float(value.reshape(height, width)[start])

    def _oracle_plan(self) -> list[int] | None:
        if self.slip == 0.0:
            return self.plan_to(standing_goal(self.height, self.width, self.grid.find(GOAL)))
        if self._policy is None:
            self._solve()
        direction = _MOVE_DIRS[int(self._policy[self.agent_pos])]
        if self.action_set == "cardinal":
            return [int(self._policy[self.agent_pos])]
        turn = (direction - self.agent_dir) % 4
        return {0: [2], 1: [1], 2: [1], 3: [0]}[turn]

    @property
    def optimal_steps(self) -> int:
        """Length of a shortest hole-free path (the slip-free optimum); a lower bound with slip."""
        if self._optimal is None:
            grid, pos, direction, _ = self._start
            plan = self.plan_to(
                standing_goal(self.height, self.width, grid.find(GOAL)),
                safe_mask(grid.cells),
                (pos[0], pos[1], direction),
            )
            self._optimal = max(len(plan or []), 1)
        return self._optimal

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        result = super().step(action)
        if result[2] or result[3]:
            if self._policy is None:
                self._solve_from_start()
            result[4]["oracle_success_probability"] = self._success_probability
        return result

    def _solve_from_start(self) -> None:
        saved = self.grid
        self.grid = self._start[0]
        try:
            self._solve()
        finally:
            self.grid = saved
        self._policy = None
