"""The template of the parallel grid games (pursuit, tag), built on the grid engine.

The map, the egocentric views, the text and the pictures come from :mod:`verigym.envs.grid.engine`
(the ``grid`` family's engine), so the multi-agent grids read like the single-agent ones. A game
subclasses :class:`GridGame` and implements :meth:`~GridGame._place` (where everything starts),
:meth:`~GridGame._resolve` (rewards and terminations after the agents moved) and
:meth:`~GridGame._verdict`.

Conventions:

* Actions ``Discrete(5)``: 0 stay, 1 up, 2 right, 3 down, 4 left. A move turns the agent to face
  that way and steps if the cell can be entered; ``infos[agent]["action_mask"]`` (``int8``, shape
  ``(5,)``) marks stay and the moves that change the position. A malformed action (NaN, out of
  range, wrong shape, ``None``) counts as *stay* and sets ``infos[agent]["action_error"]``. A joint
  action that is not a dict, names unknown agents or misses a live agent raises, and so does a step
  after the game is over (:class:`~verigym.envs.multiagent.base.ParallelGame`).
* Observations ``Box(0, 14, (view_size, view_size, 3), uint8)``: the engine's egocentric view in
  front of the agent (the agent at the bottom row, center column, facing up; walls block sight).
  Other agents and non-player characters are ``BALL`` objects of their team color; the agent's own
  cell is ``(AGENT, own team color, facing)``.
* Several agents may share a cell. ``max_cycles`` truncates the game; the step that ends an
  agent's episode carries ``success``/``score`` in its info.
"""

from __future__ import annotations

import re
import sys
from collections import deque
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding

from verigym.core import (
    ACTION_MASK,
    ActionParseError,
    action_error_info,
    coerce_action,
    episode_end,
)
from verigym.envs.grid.engine import (
    AGENT,
    BALL,
    DIR_VEC,
    EAST,
    EMPTY,
    NORTH,
    SOUTH,
    WALL,
    WEST,
    Grid,
    grid_text,
    render_rgb,
)
from verigym.envs.multiagent.base import ParallelGame, last_match
from verigym.validation import check_choice, check_int, check_number, check_odd_int

__all__ = ["MOVE_NAMES", "GridGame"]

MOVE_NAMES = ("stay", "up", "right", "down", "left")
MOVE_DIRS = (-1, NORTH, EAST, SOUTH, WEST)
_MOVE = re.compile(r"\b(stay|up|right|down|left|north|east|south|west|[0-4])\b", re.IGNORECASE)
_ALIASES = {"north": 1, "east": 2, "south": 3, "west": 4}


class GridGame(ParallelGame):
    """Base class of the parallel grid games (see the module docstring).

    Args (shared by every subclass):
        size: the grid is ``size x size`` cells (walls outside).
        wall_density: share of inner cells that are walls (the free cells stay connected).
        view_size: side of the egocentric view, odd, 3..7.
        max_cycles: steps before the game is truncated.
        render_mode: ``"ansi"``, ``"rgb_array"``, ``"human"`` (text to stdout) or ``None``.
    """

    metadata: dict[str, Any] = {
        "render_modes": ["ansi", "rgb_array", "human"],
        "render_fps": 5,
        "is_parallelizable": True,
        "family": "multiagent",
    }

    def _setup(
        self,
        agents: list[str],
        *,
        size: int,
        wall_density: float,
        view_size: int,
        max_cycles: int,
        render_mode: str | None,
    ) -> None:
        check_int("size", size, 5, 32)
        check_number("wall_density", wall_density, 0.0, 0.3)
        check_odd_int("view_size", view_size, 3, 7)
        check_int("max_cycles", max_cycles, 1, 100_000)
        check_choice("render_mode", render_mode, (None, *self.metadata["render_modes"]))
        self.size, self.wall_density, self.view_size = size, float(wall_density), view_size
        self.max_cycles, self.render_mode = max_cycles, render_mode
        self.possible_agents = list(agents)
        self.agents: list[str] = []
        observation_space = spaces.Box(0, 14, shape=(view_size, view_size, 3), dtype=np.uint8)
        self.observation_spaces = dict.fromkeys(agents, observation_space)
        self.action_spaces = {a: spaces.Discrete(5) for a in agents}
        self.np_random, self.np_random_seed = seeding.np_random(None)
        self.grid = Grid(size, size)
        self.position = {a: (0, 0) for a in agents}
        self.facing = dict.fromkeys(agents, NORTH)
        self.cycle = 0

    # -- hooks ----------------------------------------------------------------------------------
    def _place(self, free: list[tuple[int, int]]) -> None:
        """Put agents (``self.position``/``self.facing``) and any NPCs on cells of ``free``
        (shuffled by ``np_random``)."""
        raise NotImplementedError

    def _resolve(self, acting: list[str]) -> tuple[dict[str, float], dict[str, bool]]:
        """After the agents moved: NPC moves, captures; returns rewards and terminations of ``acting``."""
        raise NotImplementedError

    def _verdict(self, agent: str, truncated: bool) -> tuple[bool, float]:
        """``(success, score)`` of ``agent`` on the step that ends its episode."""
        raise NotImplementedError

    def team_color(self, agent: str) -> int:
        """The engine color index of ``agent``'s team."""
        raise NotImplementedError

    def npcs(self) -> list[tuple[int, int, int]]:
        """``(row, col, color)`` of non-player characters drawn as balls (none by default)."""
        return []

    def instructions(self, agent: str) -> str:
        """The rules for ``agent`` and the action format."""
        raise NotImplementedError

    # -- PettingZoo API -------------------------------------------------------------------------
    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        self._reseed(seed)
        free = self._make_map()
        order = self.np_random.permutation(len(free))
        self.agents = list(self.possible_agents)
        self.cycle = 0
        self._place([free[i] for i in order])
        observations = {a: self.observe(a) for a in self.agents}
        return observations, {a: {ACTION_MASK: self.action_mask(a)} for a in self.agents}

    def _step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        acting = list(self.agents)
        infos: dict[str, dict[str, Any]] = {a: {} for a in acting}
        for agent in acting:  # every live agent has an entry (ParallelGame.check_joint_action)
            move = 0
            try:
                move = int(coerce_action(self.action_spaces[agent], actions[agent]))
            except ActionParseError as exc:
                action_error_info(
                    f"{exc}; {agent} stays. Actions: 0 stay, 1 up, 2 right, 3 down, 4 left",
                    infos[agent],
                )
            self._move(agent, move)
        self.cycle += 1
        rewards, terminations = self._resolve(acting)
        out_of_time = self.cycle >= self.max_cycles
        truncations = {a: out_of_time and not terminations[a] for a in acting}
        for a in acting:
            if terminations[a] or truncations[a]:
                success, score = self._verdict(a, truncations[a])
                episode_end(infos[a], success=success, score=score)
            infos[a][ACTION_MASK] = self.action_mask(a)
        observations = {a: self.observe(a) for a in acting}
        self.agents = [a for a in acting if not (terminations[a] or truncations[a])]
        return observations, rewards, terminations, truncations, infos

    def observe(self, agent: str) -> np.ndarray:
        """The egocentric view of ``agent`` (see the module docstring)."""
        scene = self._scene()
        r, c = self.position[agent]
        scene.cells[r, c] = (AGENT, self.team_color(agent), self.facing[agent])
        return scene.ego_view(r, c, self.facing[agent], self.view_size)

    def action_mask(self, agent: str) -> np.ndarray:
        """``int8 (5,)``: stay and the moves of ``agent`` that change its position."""
        r, c = self.position[agent]
        mask = np.zeros(5, dtype=np.int8)
        mask[0] = 1
        for action in range(1, 5):
            dr, dc = DIR_VEC[MOVE_DIRS[action]]
            mask[action] = int(self._enterable(r + dr, c + dc))
        return mask

    def render(self) -> str | np.ndarray | None:
        if self.render_mode is None:
            return None
        if self.render_mode == "rgb_array":
            drawn = [
                (r, c, self.facing[a], self.team_color(a))
                for a, (r, c) in self.position.items()
                if a in self.agents
            ]
            return render_rgb(self._scene(with_agents=False).cells, tile_size=16, agents=drawn)
        text = self.map_text()
        if self.render_mode == "human":
            sys.stdout.write(text + "\n")
            return None
        return text

    def close(self) -> None:
        """Nothing to release; safe to call twice."""

    # -- text view ------------------------------------------------------------------------------
    def observation_text(self, observation: np.ndarray, agent: str) -> str:
        """The view as ASCII (two characters a cell, the engine's legend; ``Bb``/``Br`` balls are
        the blue/red team, you are the arrow at the bottom center, facing up)."""
        return "Your view (you are at the bottom center, facing up):\n" + grid_text(observation)

    def parse_action(self, text: str, agent: str) -> int:
        """A move name (stay/up/right/down/left, or north/east/south/west) or index 0-4; the last counts.

        Raises:
            TypeError: ``text`` is not a ``str``.
            ActionParseError: no move found.
        """
        found = last_match(_MOVE, text, "no move found; reply with stay, up, right, down or left")
        word = found.group().lower()
        return (
            int(word)
            if word.isdigit()
            else _ALIASES.get(word, MOVE_NAMES.index(word) if word in MOVE_NAMES else 0)
        )

    def action_text(self, action: Any, agent: str) -> str:
        return MOVE_NAMES[int(action)]

    def map_text(self) -> str:
        """The whole map as ASCII (agents and NPCs as team-colored balls)."""
        return grid_text(self._scene().cells)

    # -- helpers --------------------------------------------------------------------------------
    def _enterable(self, r: int, c: int) -> bool:
        return 0 <= r < self.size and 0 <= c < self.size and self.grid.cells[r, c, 0] != WALL

    def _move(self, agent: str, action: int) -> None:
        if action == 0:
            return
        direction = MOVE_DIRS[action]
        self.facing[agent] = direction
        r, c = self.position[agent]
        dr, dc = DIR_VEC[direction]
        if self._enterable(r + dr, c + dc):
            self.position[agent] = (r + int(dr), c + int(dc))

    def _scene(self, with_agents: bool = True) -> Grid:
        scene = self.grid.copy()
        for r, c, color in self.npcs():
            scene.cells[r, c] = (BALL, color, 0)
        if with_agents:
            for a in self.agents:
                r, c = self.position[a]
                scene.cells[r, c] = (BALL, self.team_color(a), 0)
        return scene

    def _make_map(self) -> list[tuple[int, int]]:
        """Scatter walls until the free cells are connected; return the free cells."""
        n = self.size
        while True:
            walls = self.np_random.random((n, n)) < self.wall_density
            free = [(int(r), int(c)) for r, c in np.argwhere(~walls)]
            if len(free) >= n and self._connected(walls, free[0]) == len(free):
                break
        self.grid = Grid(n, n)
        self.grid.cells[walls] = (WALL, 0, 0)
        self.grid.cells[~walls] = (EMPTY, 0, 0)
        return free

    @staticmethod
    def _connected(walls: np.ndarray, start: tuple[int, int]) -> int:
        seen = np.zeros_like(walls)
        seen[start] = True
        queue, count = deque([start]), 1
        while queue:
            r, c = queue.popleft()
            for dr, dc in DIR_VEC:
                nr, nc = r + int(dr), c + int(dc)
                if (
                    0 <= nr < walls.shape[0]
                    and 0 <= nc < walls.shape[1]
                    and not walls[nr, nc]
                    and not seen[nr, nc]
                ):
                    seen[nr, nc] = True
                    count += 1
                    queue.append((nr, nc))
        return count
