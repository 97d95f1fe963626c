"""PointMaze: drive a point mass through a procedurally generated maze to a goal."""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from verigym.envs.mujoco.base import (
    SCENE_XML,
    MujocoGoalEnv,
    planar_body_xml,
    planar_motors_xml,
    top_camera_xml,
)
from verigym.kwargs_policy import FloatRange, IntRange, client
from verigym.validation import check_int, check_number

__all__ = ["PointMazeEnv", "generate_maze"]

CELL = 1.0
"""Side of a maze cell, m."""
WALL = 0.1
"""Wall thickness, m."""
BALL = 0.15
"""Radius of the point mass, m."""
GEAR = 5.0
"""Force of a unit action, N."""
DAMPING = 2.0
"""Viscous damping of the point mass, N s/m (top speed at full force: 2.5 m/s)."""


def generate_maze(size: int, rng: np.random.Generator) -> np.ndarray:
    """A perfect maze (one path between any two cells) by randomized depth-first search.

    Args:
        size: cells per side.
        rng: the random generator (the env's ``np_random``).

    Returns:
        bool array of shape ``(2 * size + 1, 2 * size + 1)``, True on walls. Cell ``(r, c)`` is
        entry ``(2r + 1, 2c + 1)``; row 0 is the top (north) wall.
    """
    grid = np.ones((2 * size + 1, 2 * size + 1), dtype=bool)
    visited = np.zeros((size, size), dtype=bool)
    start = (int(rng.integers(size)), int(rng.integers(size)))
    stack = [start]
    visited[start] = True
    grid[2 * start[0] + 1, 2 * start[1] + 1] = False
    while stack:
        r, c = stack[-1]
        options = [
            (r + dr, c + dc)
            for dr, dc in ((-1, 0), (0, 1), (1, 0), (0, -1))
            if 0 <= r + dr < size and 0 <= c + dc < size and not visited[r + dr, c + dc]
        ]
        if not options:
            stack.pop()
            continue
        nr, nc = options[int(rng.integers(len(options)))]
        visited[nr, nc] = True
        grid[2 * nr + 1, 2 * nc + 1] = False
        grid[r + nr + 1, c + nc + 1] = False  # the wall between the two cells
        stack.append((nr, nc))
    return grid


def _maze_xml(grid: np.ndarray) -> str:
    size = (grid.shape[0] - 1) // 2
    half = size * CELL / 2
    walls = []
    for i, j in np.argwhere(grid):
        x, y = j * CELL / 2 - half, half - i * CELL / 2
        sx = WALL / 2 if j % 2 == 0 else CELL / 2
        sy = WALL / 2 if i % 2 == 0 else CELL / 2
        walls.append(
            f'<geom type="box" pos="{x:.3f} {y:.3f} 0.1" size="{sx:.3f} {sy:.3f} 0.1" rgba="0.35 0.3 0.25 1"/>'
        )
    return f"""<mujoco model="point_maze">
  <option timestep="0.01" gravity="0 0 0"/>
  {SCENE_XML}
  <default><geom friction="0.1 0.005 0.0001" solref="0.01 1"/></default>
  <worldbody>
    <geom type="plane" size="{half + 0.2:.2f} {half + 0.2:.2f} 0.01" material="floor" contype="0" conaffinity="0"/>
    {top_camera_xml(half + 0.15)}
    <site name="goal" pos="0 0 0.02" size="{BALL:.2f} 0.005" type="cylinder" rgba="0.1 0.8 0.1 0.8"/>
    {"".join(walls)}
    {planar_body_xml("ball", BALL, f'damping="{DAMPING}"', f'<geom type="sphere" size="{BALL}" mass="1" rgba="0.8 0.2 0.2 1"/>')}
  </worldbody>
  <actuator>{planar_motors_xml("ball", GEAR)}</actuator>
</mujoco>"""


class PointMazeEnv(MujocoGoalEnv):
    """Drive a point mass through a procedurally generated maze to a goal.

    ## Description
    A ``size x size`` maze of 1 m cells with 0.1 m walls, generated per seed by randomized
    depth-first search (a perfect maze: exactly one corridor path between two cells), after
    Gymnasium-Robotics' ``PointMaze`` (Fu et al. 2020, D4RL), whose mazes are fixed. A ball of
    radius 0.15 m and mass 1 kg slides on the floor (viscous damping 2 N s/m). The start and goal
    cells are distinct cells at least ``size - 1`` cells apart along the maze path; positions are
    jittered by up to 0.25 m inside the cell. A long-horizon task for hierarchical agents: the
    path has up to ``size**2`` cells. Simulation step 10 ms, ``frame_skip`` 5: one env step is
    0.05 s. The model is rebuilt on every ``reset`` (the walls change with the seed).

    ## Action Space
    ``Box(-1, 1, (2,), float32)``: force on the ball along x and y, in units of 5 N.

    ## Observation Space
    ``Dict`` of ``float64`` vectors:

    | key | shape | content |
    | --- | --- | --- |
    | ``observation`` | ``(4 + (2 size + 1)**2,)`` | ball x, y (m), velocity x, y (m/s), then the wall map (1 wall, 0 free) row by row, row 0 north |
    | ``achieved_goal`` | ``(2,)`` | ball x, y (m) |
    | ``desired_goal`` | ``(2,)`` | goal x, y (m) |

    The maze is centred on the origin; cell ``(r, c)`` has its centre at
    ``x = (c - (size - 1) / 2)``, ``y = ((size - 1) / 2 - r)`` metres.

    ## Rewards
    ``dense`` (default): ``-d``, the straight-line ball-goal distance in metres; ``sparse``: ``0``
    if ``d < distance_threshold`` else ``-1``. A malformed action applies no force for the step,
    costs 1 extra and sets ``info["action_error"]``.

    ## Starting State
    Ball at rest in the start cell; goal in the goal cell (see Description).

    ## Episode End
    Terminated when ``d < distance_threshold``: ``success=True``, ``score=1``. Truncated after
    ``max_steps`` (default ``20 size**2 + 100``): ``success=False``,
    ``score = 0.5 * (1 - p / p_0)`` with ``p`` the remaining maze-path length in cells.

    ## Arguments
    * ``size`` (int, 2..12): cells per side.
    * ``distance_threshold`` (float, 0.05..0.45 m, default 0.3).
    * ``max_steps`` (int | None), ``reward_type``, ``render_mode``, ``width``, ``height``.

    The oracle (:meth:`oracle_action`) follows the breadth-first-search path of cells with a
    velocity controller.

    ## Version History
    * v0: initial version.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 20, "family": "mujoco"}

    remote_kwargs = {
        "size": client(IntRange(2, 12)),
        "distance_threshold": client(FloatRange(0.05, 0.45)),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""
    frame_skip = 5
    OBSERVATION_FIELDS = (("ball x, y", 2, "m"), ("ball velocity x, y", 2, "m/s"))
    GOAL_FIELDS = (("x, y", 2, "m"),)

    def __init__(
        self,
        *,
        size: int = 5,
        distance_threshold: float = 0.3,
        max_steps: int | None = None,
        reward_type: str = "dense",
        render_mode: str | None = None,
        width: int = 480,
        height: int = 480,
    ):
        self.size = check_int("size", size, 2, 12)
        self.distance_threshold = check_number("distance_threshold", distance_threshold, 0.05, 0.45)
        self.grid = generate_maze(self.size, np.random.default_rng(0))
        self._grid_vector = self.grid.astype(np.float64).ravel()
        self._goal = np.zeros(2)
        self._distances = np.zeros((self.size, self.size), dtype=np.int64)
        self._initial_path = 1
        self.TASK_TEXT = (
            f"Drive a ball (radius {BALL} m) through a {self.size}x{self.size} maze of {CELL:g} m "
            f"cells to within {self.distance_threshold} m of the goal. The action is the force "
            f"along x (east) and y (north) in units of {GEAR:g} N. The map shows # walls, B the "
            "ball, G the goal; north is up."
        )
        steps = 20 * self.size**2 + 100 if max_steps is None else max_steps
        self._setup(
            max_steps=steps,
            reward_type=reward_type,
            render_mode=render_mode,
            width=width,
            height=height,
        )

    # -- geometry ------------------------------------------------------------------------------
    def cell_center(self, cell: tuple[int, int] | np.ndarray) -> np.ndarray:
        """World x, y (m) of the centre of cell ``(row, col)``."""
        r, c = int(cell[0]), int(cell[1])
        offset = (self.size - 1) / 2
        return np.array([(c - offset) * CELL, (offset - r) * CELL])

    def cell_of(self, position: np.ndarray) -> tuple[int, int]:
        """The cell ``(row, col)`` containing world point ``position`` (clamped into the maze)."""
        offset = (self.size - 1) / 2
        c = int(np.clip(np.floor(position[0] / CELL + offset + 0.5), 0, self.size - 1))
        r = int(np.clip(np.floor(offset - position[1] / CELL + 0.5), 0, self.size - 1))
        return r, c

    def _neighbours(self, cell: tuple[int, int]) -> list[tuple[int, int]]:
        r, c = cell
        out = []
        for dr, dc in ((-1, 0), (0, 1), (1, 0), (0, -1)):
            nr, nc = r + dr, c + dc
            if (
                0 <= nr < self.size
                and 0 <= nc < self.size
                and not self.grid[2 * r + 1 + dr, 2 * c + 1 + dc]
            ):
                out.append((nr, nc))
        return out

    def path_distances(self, target: tuple[int, int]) -> np.ndarray:
        """Maze-path distance (cells) of every cell to ``target``, by breadth-first search."""
        dist = np.full((self.size, self.size), -1, dtype=np.int64)
        dist[target] = 0
        queue = deque([target])
        while queue:
            cell = queue.popleft()
            for nxt in self._neighbours(cell):
                if dist[nxt] < 0:
                    dist[nxt] = dist[cell] + 1
                    queue.append(nxt)
        return dist

    # -- hooks ---------------------------------------------------------------------------------
    def _model_xml(self) -> str:
        return _maze_xml(self.grid)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        # the maze is drawn before the model is built, so it needs the seeded generator first
        if seed is not None:
            super(MujocoGoalEnv, self).reset(seed=seed)
        self.grid = generate_maze(self.size, self.np_random)
        self._grid_vector = self.grid.astype(np.float64).ravel()
        return super().reset(seed=None, options=options)

    def _reset_task(self) -> None:
        cells = [(r, c) for r in range(self.size) for c in range(self.size)]
        goal_cell = cells[int(self.np_random.integers(len(cells)))]
        self._distances = self.path_distances(goal_cell)
        far = [cell for cell in cells if self._distances[cell] >= self.size - 1]
        start_cell = far[int(self.np_random.integers(len(far)))]
        start = self.cell_center(start_cell) + self.np_random.uniform(-0.25, 0.25, size=2)
        self._goal = self.cell_center(goal_cell) + self.np_random.uniform(-0.25, 0.25, size=2)
        self.data.qpos[:] = start
        self.model.site_pos[self.model.site("goal").id, :2] = self._goal
        self._initial_path = max(1, int(self._distances[start_cell]))

    def _observation_vector(self) -> np.ndarray:
        return np.concatenate((self._qpos, self._qvel, self._grid_vector))

    def _achieved_goal(self) -> np.ndarray:
        return self._qpos.copy()

    def _desired_goal(self) -> np.ndarray:
        return self._goal.copy()

    def _progress(self) -> float:
        return 1.0 - float(self._distances[self.cell_of(self.data.qpos)]) / self._initial_path

    def _camera(self) -> Any:
        return "top"

    # -- text view ---------------------------------------------------------------------------
    def observation_text(self, observation: dict[str, np.ndarray]) -> str:
        vector = np.asarray(observation["observation"])
        side = 2 * self.size + 1
        grid = vector[4 : 4 + side * side].reshape(side, side) > 0.5
        chars = np.where(grid, "#", " ").astype("<U1")
        for mark, point in (
            ("G", observation["desired_goal"]),
            ("B", observation["achieved_goal"]),
        ):
            r, c = self.cell_of(np.asarray(point))
            chars[2 * r + 1, 2 * c + 1] = mark
        numbers = super().observation_text(observation)
        return "\n".join("".join(row) for row in chars) + "\n" + numbers

    # -- oracle ------------------------------------------------------------------------------
    def oracle_action(self) -> np.ndarray:
        """Follow the cell path to the goal: a velocity reference tracked with feed-forward."""
        position, velocity = self.data.qpos.copy(), self.data.qvel.copy()
        here = self.cell_of(position)
        vmax = 1.5
        if self._distances[here] == 0:
            desired = np.clip(3.0 * (self._goal - position), -vmax, vmax)
        else:
            nxt = min(self._neighbours(here), key=lambda cell: self._distances[cell])
            centre = self.cell_center(here)
            axis = self.cell_center(nxt) - centre
            axis /= np.linalg.norm(axis)
            offset = position - centre
            lateral = offset - axis * (offset @ axis)
            speed = vmax * max(0.0, 1.0 - float(np.linalg.norm(lateral)) / 0.3)
            desired = axis * speed - 4.0 * lateral
        force = DAMPING * desired + 6.0 * (desired - velocity)
        return np.clip(force / GEAR, -1.0, 1.0).astype(np.float32)
