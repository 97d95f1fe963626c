"""Treasure: the reference natively-tensor environment (a grid walk written from scratch)."""

from __future__ import annotations

from collections import deque
from typing import Any

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
from verigym.kwargs_policy import FloatRange, IntRange, client, operator_only
from verigym.render_modes import accept_render_mode
from verigym.validation import check_int, check_number

__all__ = ["TreasureEnv"]

EMPTY, WALL, TREASURE, AGENT = 0, 1, 2, 3
MOVES = np.array([(-1, 0), (0, 1), (1, 0), (0, -1)], dtype=np.int64)  # up, right, down, left
ACTION_NAMES = ("up", "right", "down", "left")
SYMBOLS = {EMPTY: ".", WALL: "#", TREASURE: "T", AGENT: "A"}


class TreasureEnv(EpisodeGuard, gym.Env[np.ndarray, np.int64]):
    """Walk to the treasure on a grid with random walls.

    ## Description
    A ``size x size`` grid with walls placed at random (density ``wall_density``); the agent and the
    treasure are placed on two distinct cells of one connected region, so every task is solvable.
    A breadth-first search gives the optimal number of steps ``info["optimal_steps"]``.

    ## Action Space
    ``Discrete(4)``: 0 up, 1 right, 2 down, 3 left. Moving into a wall or the border is legal and
    leaves the agent in place. ``info["action_mask"]`` (``int8``, shape ``(4,)``) marks the moves
    that change the position.

    ## Observation Space
    ``Box(0, 3, (size, size), uint8)``: 0 empty, 1 wall, 2 treasure, 3 agent.

    ## Rewards
    ``1 - 0.9 * steps / max_steps`` on reaching the treasure (MiniGrid's formula), else 0. A
    malformed action (not an integer in 0..3, NaN, wrong shape) costs the step, leaves the agent in
    place, and gets ``info["action_error"]``.

    ## Episode End
    Terminated on the treasure: ``success=True`` and ``score`` = success weighted by path length
    (SPL, Anderson et al. 2018) ``optimal_steps / max(optimal_steps, steps)``. Truncated after
    ``max_steps`` steps (default ``4 * size**2``): ``success=False``, ``score=0``.

    ## Arguments
    * ``size`` (int, 4..32): grid side in cells.
    * ``wall_density`` (float, 0..0.4): share of cells that are walls.
    * ``max_steps`` (int | None): step budget.

    ## Version History
    * v0: initial version.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 8, "family": "grid"}

    remote_kwargs = {
        "size": client(IntRange(4, 32)),
        "wall_density": client(FloatRange(0.0, 0.4)),
        "max_steps": operator_only(IntRange(1, 100_000), why="raises the cost of an episode"),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(
        self,
        *,
        size: int = 7,
        wall_density: float = 0.2,
        max_steps: int | None = None,
        render_mode: str | None = None,
    ):
        self.size = check_int("size", size, 4, 32)
        self.wall_density = check_number("wall_density", wall_density, 0.0, 0.4)
        self.max_steps = (
            4 * size * size if max_steps is None else check_int("max_steps", max_steps, 1)
        )
        self.render_mode = accept_render_mode(render_mode, self.metadata["render_modes"])
        self.observation_space = spaces.Box(0, 3, shape=(size, size), dtype=np.uint8)
        self.action_space = spaces.Discrete(4)
        self._walls = np.zeros((size, size), dtype=bool)
        self._agent = np.zeros(2, dtype=np.int64)
        self._treasure = np.zeros(2, dtype=np.int64)
        self._steps = 0
        self._optimal = 0

    # -- helpers -------------------------------------------------------------------------------
    def _distances(self, start: np.ndarray) -> np.ndarray:
        """BFS distances (in steps) from ``start``; -1 where unreachable."""
        dist = np.full((self.size, self.size), -1, dtype=np.int64)
        dist[tuple(start)] = 0
        queue = deque([tuple(start)])
        while queue:
            r, c = queue.popleft()
            for dr, dc in MOVES:
                nr, nc = r + dr, c + dc
                if (
                    0 <= nr < self.size
                    and 0 <= nc < self.size
                    and not self._walls[nr, nc]
                    and dist[nr, nc] < 0
                ):
                    dist[nr, nc] = dist[r, c] + 1
                    queue.append((nr, nc))
        return dist

    def _observation(self) -> np.ndarray:
        grid = self._walls.astype(np.uint8)  # WALL == 1
        grid[tuple(self._treasure)] = TREASURE
        grid[tuple(self._agent)] = AGENT
        return grid

    def _mask(self) -> np.ndarray:
        target = self._agent + MOVES
        inside = np.all((target >= 0) & (target < self.size), axis=1)
        mask = np.zeros(4, dtype=np.int8)
        mask[inside] = ~self._walls[target[inside, 0], target[inside, 1]]
        return mask

    def action_masks(self) -> np.ndarray:
        """``bool (4,)``: the moves that do not hit a wall or the border (``info["action_mask"]``),
        under the name sb3-contrib's ``MaskablePPO`` calls."""
        return self._mask().astype(bool)

    # -- Gymnasium API -------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        while True:
            self._walls = self.np_random.random((self.size, self.size)) < self.wall_density
            free = np.argwhere(~self._walls)
            if len(free) < 2:
                continue
            i, j = self.np_random.choice(len(free), size=2, replace=False)
            self._agent, self._treasure = free[i].astype(np.int64), free[j].astype(np.int64)
            self._optimal = int(self._distances(self._agent)[tuple(self._treasure)])
            if self._optimal > 0:
                break
        self._steps = 0
        return self._observation(), {"optimal_steps": self._optimal, ACTION_MASK: self._mask()}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._steps += 1
        info: dict[str, Any] = {"optimal_steps": self._optimal}
        try:
            move = MOVES[int(coerce_action(self.action_space, action))]
        except ActionParseError as exc:
            action_error_info(f"{exc}; actions are 0 up, 1 right, 2 down, 3 left", info)
        else:
            target = self._agent + move
            if np.all((target >= 0) & (target < self.size)) and not self._walls[tuple(target)]:
                self._agent = target
        terminated = bool(np.array_equal(self._agent, self._treasure))
        truncated = not terminated and self._steps >= self.max_steps
        reward = 1.0 - 0.9 * self._steps / self.max_steps if terminated else 0.0
        if terminated or truncated:
            spl = self._optimal / max(self._optimal, self._steps) if terminated else 0.0
            episode_end(info, success=terminated, score=spl)
        info[ACTION_MASK] = self._mask()
        return self._observation(), reward, terminated, truncated, info

    def render(self) -> str | np.ndarray | None:
        if self.render_mode == "ansi":
            return self.observation_text(self._observation())
        if self.render_mode == "rgb_array":
            palette = np.array(
                [[240, 240, 240], [60, 60, 60], [230, 190, 30], [200, 40, 40]], dtype=np.uint8
            )
            cells = palette[self._observation()]
            return np.repeat(np.repeat(cells, 16, axis=0), 16, axis=1)
        return None

    # -- TextInterface -------------------------------------------------------------------------
    def instructions(self) -> str:
        return (
            f"Walk to the treasure on a {self.size}x{self.size} grid. Map legend: A you, T treasure, "
            "# wall, . floor; row 0 is the top. Reply with one move: up, right, down or left "
            "(or 0-3). Walking into a wall leaves you in place."
        )

    def observation_text(self, observation: np.ndarray) -> str:
        return "\n".join("".join(SYMBOLS[int(v)] for v in row) for row in observation)

    def parse_action(self, text: str) -> int:
        """Read a move name or index from ``text`` (the last one mentioned counts).

        Raises:
            ActionParseError: no move found.
        """
        if not isinstance(text, str):
            raise TypeError(f"expected str, got {type(text).__name__}")
        words = text.lower().replace(",", " ").replace(".", " ").split()
        for word in reversed(words[-2000:]):
            if word in ACTION_NAMES:
                return ACTION_NAMES.index(word)
            if word in ("0", "1", "2", "3"):
                return int(word)
        raise ActionParseError("no move found; reply with up, right, down or left")

    def action_text(self, action: int) -> str:
        return ACTION_NAMES[int(action)]

    # -- oracle ------------------------------------------------------------------------------
    def oracle_action(self) -> np.int64:
        """A move along a shortest path to the treasure (BFS from the treasure)."""
        dist = self._distances(self._treasure)
        here = dist[tuple(self._agent)]
        for a, move in enumerate(MOVES):
            r, c = self._agent + move
            if 0 <= r < self.size and 0 <= c < self.size and 0 <= dist[r, c] < here:
                return np.int64(a)
        return np.int64(0)
