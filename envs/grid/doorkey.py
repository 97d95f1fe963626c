"""Key-and-door tasks: DoorKey, MultiRoom, KeyCorridor (long horizon, for hierarchical agents)."""

from __future__ import annotations

from typing import Any

import numpy as np

from verigym.envs.grid.engine import (
    BALL,
    CLOSED,
    COLOR_NAMES,
    DOOR,
    EMPTY,
    GOAL,
    KEY,
    LOCKED,
    OPEN,
    WALL,
    YELLOW,
    GridEnv,
    Planner,
    Retry,
)
from verigym.kwargs_policy import IntRange, client
from verigym.validation import check_int

__all__ = ["DoorKeyEnv", "KeyCorridorEnv", "MultiRoomEnv"]

_VIEW_DOC = """
    ## Action Space
    ``Discrete(7)`` (``action_set="minigrid"``, default): 0 left, 1 right (turn on the spot),
    2 forward, 3 pickup, 4 drop, 5 toggle (open/close the door in front; a locked door opens when
    the agent carries the key of its color), 6 done (no effect). ``action_set="cardinal"`` gives
    ``Discrete(8)``: 0 up, 1 right, 2 down, 3 left, then pickup, drop, toggle, done.
    ``info["action_mask"]`` (``int8``) marks the actions that change the state. A malformed action
    costs the step, changes nothing and sets ``info["action_error"]``.

    ## Observation Space
    ``observation="partial"`` (default): ``Box(0, [14, 14, 3], (view_size, view_size, 3), uint8)``,
    the egocentric view with the carried object on the agent's cell. ``observation="full"``: the
    whole ``(size, size, 3)`` grid with the agent cell ``(10, type under the agent, direction)``
    -- fully observable, for small learning tests. The mission is ``info["mission"]`` of ``reset``.
"""


def _plan_door_stage(plan: Planner, door: tuple[int, int], color: int) -> None:
    """Fetch the key of ``color`` (unless carried), then open ``door`` (unless open)."""
    r, c = door
    if plan.cells[r, c, 2] == OPEN:
        return
    if plan.cells[r, c, 2] == LOCKED and not (
        plan.carrying[0] == KEY and plan.carrying[1] == color
    ):
        if plan.carrying[0]:
            _drop_somewhere(plan)
        keys = np.argwhere((plan.cells[..., 0] == KEY) & (plan.cells[..., 1] == color))
        if not plan.face([tuple(k) for k in keys]):
            return
        plan.do("pickup")
    if plan.face([door]):
        plan.do("toggle")


def _drop_somewhere(plan: Planner) -> None:
    """Drop the carried object on the nearest free cell (faced from an adjacent free cell)."""
    free = np.argwhere(plan.cells[..., 0] == EMPTY)
    here = (plan.state[0], plan.state[1])
    targets = [tuple(f) for f in free if tuple(f) != here]
    if plan.face(targets):
        plan.do("drop")


class DoorKeyEnv(GridEnv):
    (
        """Pick up the key, unlock the door, and reach the goal behind the wall.

    ## Description
    MiniGrid's ``DoorKey`` (Chevalier-Boisvert et al. 2023): a ``size x size`` room split by a
    vertical wall at a random column with one locked yellow door at a random row. The agent
    (random cell and direction) and the yellow key are left of the wall, the goal is in the
    bottom-right corner. A sparse-reward exploration benchmark.
"""
        + _VIEW_DOC
        + """
    ## Rewards
    ``1 - 0.9 * steps / max_steps`` on reaching the goal (MiniGrid's formula), else 0.

    ## Starting State
    Random wall column in ``2..size-3``, door row in ``1..size-3``, agent and key left of the wall.

    ## Episode End
    Terminated on the goal: ``success=True``, ``score`` = SPL ``optimal_steps / max(optimal_steps,
    steps)``; ``info["optimal_steps"]`` is the oracle's plan (shortest path to face the key, pick
    it up, shortest path to face the door, toggle, shortest path to the goal). Truncated after
    ``max_steps``: ``success=False``, ``score=0``.

    ## Arguments
    * ``size`` (int, 5..32): side in cells, walls included.
    * ``max_steps`` (int | None): default ``10 * size**2`` (MiniGrid's).
    * ``observation`` ("partial" | "full"), ``view_size`` (odd, 3..15), ``see_through_walls``,
      ``action_set`` ("minigrid" | "cardinal"), ``render_mode`` ("ansi" | "rgb_array").

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
            max_steps=10 * size * size if max_steps is None else max_steps,
            **kwargs,
        )

    def _gen_grid(self, height: int, width: int) -> None:
        rng = self.np_random
        grid = self.grid
        grid.wall_rect(0, 0, height, width)
        grid.set(height - 2, width - 2, GOAL)
        split = int(rng.integers(2, width - 2))
        grid.cells[:, split, 0] = WALL
        door_row = int(rng.integers(1, height - 2))
        grid.set(door_row, split, DOOR, YELLOW, LOCKED)
        self.place_agent(size=(height, split))
        self.place_obj(KEY, YELLOW, size=(height, split))
        self.mission = "use the key to open the door and then get to the goal"

    def _oracle_plan(self) -> list[int] | None:
        plan = Planner(self)
        for r, c in self.grid.find(DOOR):
            _plan_door_stage(plan, (int(r), int(c)), int(self.grid.cells[r, c, 1]))
        plan.stand([tuple(g) for g in self.grid.find(GOAL)])
        return plan.plan


class MultiRoomEnv(GridEnv):
    (
        """Walk through a chain of rooms, opening the closed door of each, to the goal in the last.

    ## Description
    MiniGrid's ``MultiRoom``: ``num_rooms`` rectangular rooms (sides 4..``max_room_size``, walls
    included) placed one after another in random directions on a ``size x size`` grid, each joined
    to the next by a closed (not locked) door of a random color. The agent starts in the first
    room, the goal is in the last. Long horizon with sparse reward.
"""
        + _VIEW_DOC
        + """
    ## Rewards
    ``1 - 0.9 * steps / max_steps`` on reaching the goal, else 0.

    ## Episode End
    Terminated on the goal: ``success=True``, ``score`` = SPL with ``info["optimal_steps"]`` from
    the oracle (shortest path to face each door in turn, toggle, then to the goal). Truncated after
    ``max_steps``: ``success=False``, ``score=0``.

    ## Arguments
    * ``num_rooms`` (int, 2..8), ``max_room_size`` (int, 4..10), ``size`` (int, 10..32).
    * ``max_steps`` (int | None): default ``20 * num_rooms`` (MiniGrid's).
    * ``observation``, ``view_size``, ``see_through_walls``, ``action_set``, ``render_mode``.

    ## Version History
    * v0: initial version.
    """
    )

    remote_kwargs = {
        "num_rooms": client(IntRange(2, 8)),
        "max_room_size": client(IntRange(4, 10)),
        "size": client(IntRange(10, 32)),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(
        self,
        *,
        num_rooms: int = 2,
        max_room_size: int = 4,
        size: int = 25,
        max_steps: int | None = None,
        **kwargs: Any,
    ):
        self.num_rooms = check_int("num_rooms", num_rooms, 2, 8)
        self.max_room_size = check_int("max_room_size", max_room_size, 4, 10)
        self.size = check_int("size", size, 10, 32)
        super().__init__(
            height=size,
            width=size,
            max_steps=20 * num_rooms if max_steps is None else max_steps,
            **kwargs,
        )
        self._doors: list[tuple[int, int]] = []

    def _gen_grid(self, height: int, width: int) -> None:
        rng = self.np_random
        cells = self.grid.cells
        cells[..., 0] = WALL
        rooms: list[tuple[int, int, int, int]] = []  # top, left, height, width (walls included)
        doors: list[tuple[int, int]] = []
        h, w = (int(rng.integers(4, self.max_room_size + 1)) for _ in range(2))
        top, left = int(rng.integers(0, height - h + 1)), int(rng.integers(0, width - w + 1))
        rooms.append((top, left, h, w))
        for _ in range(self.num_rooms - 1):
            placed = False
            for _ in range(40):
                ptop, pleft, ph, pw = rooms[-1]
                side = int(rng.integers(4))  # 0 east, 1 south, 2 west, 3 north
                nh, nw = (int(rng.integers(4, self.max_room_size + 1)) for _ in range(2))
                if side in (0, 2):
                    door = (
                        int(rng.integers(ptop + 1, ptop + ph - 1)),
                        pleft + pw - 1 if side == 0 else pleft,
                    )
                    ntop = int(rng.integers(door[0] - nh + 2, door[0]))
                    nleft = door[1] if side == 0 else door[1] - nw + 1
                else:
                    door = (
                        ptop + ph - 1 if side == 1 else ptop,
                        int(rng.integers(pleft + 1, pleft + pw - 1)),
                    )
                    nleft = int(rng.integers(door[1] - nw + 2, door[1]))
                    ntop = door[0] if side == 1 else door[0] - nh + 1
                if ntop < 0 or nleft < 0 or ntop + nh > height or nleft + nw > width:
                    continue
                # the new room's interior must not touch any earlier room (walls may be shared)
                if any(
                    ntop < t + rh - 1
                    and t < ntop + nh - 1
                    and nleft < lf + rw - 1
                    and lf < nleft + nw - 1
                    for t, lf, rh, rw in rooms
                ):
                    continue
                rooms.append((ntop, nleft, nh, nw))
                doors.append(door)
                placed = True
                break
            if not placed:
                raise Retry
        for t, lf, rh, rw in rooms:
            cells[t + 1 : t + rh - 1, lf + 1 : lf + rw - 1] = (EMPTY, 0, 0)
        previous = -1
        for r, c in doors:
            color = int(rng.integers(len(COLOR_NAMES)))
            while color == previous:
                color = int(rng.integers(len(COLOR_NAMES)))
            previous = color
            self.grid.set(r, c, DOOR, color, CLOSED)
        t, lf, rh, rw = rooms[0]
        self.place_agent(top=(t + 1, lf + 1), size=(rh - 2, rw - 2))
        t, lf, rh, rw = rooms[-1]
        self.place_obj(GOAL, top=(t + 1, lf + 1), size=(rh - 2, rw - 2))
        self._doors = doors
        self.mission = "traverse the rooms to get to the goal"

    def _oracle_plan(self) -> list[int] | None:
        plan = Planner(self)
        goal = [tuple(g) for g in self.grid.find(GOAL)]
        for door in self._doors:
            if plan.cells[door[0], door[1], 2] != OPEN and plan.face([door]):
                plan.do("toggle")
        plan.stand(goal)
        return plan.plan


class KeyCorridorEnv(GridEnv):
    (
        """Find the key in a side room, unlock the locked room, and pick up the ball inside it.

    ## Description
    MiniGrid's ``KeyCorridor`` (after BabyAI): ``num_rows x 3`` rooms; the middle column is one
    corridor, the side rooms open onto it through closed doors. One room on the right is locked
    and holds the ball; the key of its color lies in a room on the left. The agent starts in the
    corridor. Success is picking up the ball. Long horizon: open, fetch, unlock, drop, fetch.
"""
        + _VIEW_DOC
        + """
    ## Rewards
    ``1 - 0.9 * steps / max_steps`` when the ball is picked up, else 0.

    ## Episode End
    Terminated when the ball is carried: ``success=True``, ``score`` = SPL with
    ``info["optimal_steps"]`` from the oracle (open the key's room, take the key, unlock the
    door, drop the key, take the ball; shortest paths in that order). Truncated after
    ``max_steps``: ``success=False``, ``score=0``.

    ## Arguments
    * ``num_rows`` (int, 1..4): rows of rooms; ``room_size`` (int, 3..7): room side, walls
      included (MiniGrid's S3R1: ``room_size=3, num_rows=1``).
    * ``max_steps`` (int | None): default ``30 * room_size**2`` (MiniGrid's).
    * ``observation``, ``view_size``, ``see_through_walls``, ``action_set``, ``render_mode``.

    ## Version History
    * v0: initial version.
    """
    )

    remote_kwargs = {"num_rows": client(IntRange(1, 4)), "room_size": client(IntRange(3, 7))}
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(
        self, *, num_rows: int = 1, room_size: int = 3, max_steps: int | None = None, **kwargs: Any
    ):
        self.num_rows = check_int("num_rows", num_rows, 1, 4)
        self.room_size = check_int("room_size", room_size, 3, 7)
        side = room_size - 1  # neighbouring rooms share a wall
        super().__init__(
            height=side * num_rows + 1,
            width=side * 3 + 1,
            max_steps=30 * room_size**2 if max_steps is None else max_steps,
            **kwargs,
        )
        self._locked = self._key_door = (0, 0)

    def _gen_grid(self, height: int, width: int) -> None:
        rng = self.np_random
        side = self.room_size - 1
        cells = self.grid.cells
        for i in range(self.num_rows + 1):
            cells[i * side, :, 0] = WALL
        for j in range(4):
            cells[:, j * side, 0] = WALL
        cells[1 : height - 1, side + 1 : 2 * side, 0] = EMPTY  # the corridor, all rows
        doors: dict[tuple[int, int], tuple[int, int]] = {}
        for i in range(self.num_rows):
            for j, wall_col in ((0, side), (2, 2 * side)):
                row = i * side + int(rng.integers(1, side))
                self.grid.set(row, wall_col, DOOR, int(rng.integers(len(COLOR_NAMES))), CLOSED)
                doors[(i, j)] = (row, wall_col)
        lock_i, key_i = int(rng.integers(self.num_rows)), int(rng.integers(self.num_rows))
        locked = doors[(lock_i, 2)]
        lock_color = int(cells[locked[0], locked[1], 1])
        cells[locked[0], locked[1], 2] = LOCKED
        ball_color = int(rng.integers(len(COLOR_NAMES)))
        inner = (side - 1, side - 1)
        self.place_obj(BALL, ball_color, top=(lock_i * side + 1, 2 * side + 1), size=inner)
        self.place_obj(KEY, lock_color, top=(key_i * side + 1, 1), size=inner)
        self.place_agent(top=(1, side + 1), size=(height - 2, side - 1))
        self._locked, self._key_door = locked, doors[(key_i, 0)]
        self.mission = f"pick up the {COLOR_NAMES[ball_color]} ball"

    def _status(self) -> bool | None:
        return True if self.carrying[0] == BALL else None

    def _oracle_plan(self) -> list[int] | None:
        plan = Planner(self)
        if plan.carrying[0] == BALL:
            return []
        r, c = self._locked
        if plan.cells[r, c, 2] == LOCKED and not plan.carrying[0] == KEY:
            keys = np.argwhere(plan.cells[..., 0] == KEY)
            inside = keys.size and keys[0][1] < self._key_door[1]
            kr, kc = self._key_door
            if inside and plan.cells[kr, kc, 2] != OPEN and plan.face([(kr, kc)]):
                plan.do("toggle")
        _plan_door_stage(plan, self._locked, int(plan.cells[r, c, 1]))
        if plan.carrying[0]:
            _drop_somewhere(plan)
        plan.face([tuple(b) for b in np.argwhere(plan.cells[..., 0] == BALL)])
        plan.do("pickup")
        return plan.plan
