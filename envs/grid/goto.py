"""GoToObject: a language mission ("go to the red ball") among distractors (BabyAI kind)."""

from __future__ import annotations

from typing import Any

from verigym.envs.grid.engine import (
    BALL,
    BOX,
    COLOR_NAMES,
    KEY,
    OBJECT_NAMES,
    GridEnv,
    Retry,
    facing_goal,
)
from verigym.kwargs_policy import IntRange, client
from verigym.validation import check_int

__all__ = ["GoToObjectEnv"]

_KINDS = (KEY, BALL, BOX)


class GoToObjectEnv(GridEnv):
    """Go to the object the mission names, among distractors of other colors and kinds.

    ## Description
    BabyAI's ``GoToLocal`` / ``GoToObj`` (Chevalier-Boisvert et al. 2019, "BabyAI: A Platform to
    Study the Sample Efficiency of Grounded Language Learning"): a ``size x size`` room with
    ``num_objects`` objects (keys, balls, boxes; every kind-color pair distinct). The mission is
    "go to the <color> <kind>"; the task is won when the agent faces that object. The target is
    named only in the mission (``info["mission"]`` and the text view), so a tensor agent needs the
    mission as an input.

    ## Action Space
    ``Discrete(7)`` (``action_set="minigrid"``, default): 0 left, 1 right, 2 forward, 3 pickup,
    4 drop, 5 toggle, 6 done. ``action_set="cardinal"``: ``Discrete(8)``, 0 up, 1 right, 2 down,
    3 left, then pickup, drop, toggle, done. A malformed action costs the step and sets
    ``info["action_error"]``.

    ## Observation Space
    ``observation="partial"`` (default): ``Box(0, [14, 14, 3], (view_size, view_size, 3), uint8)``,
    the egocentric view; ``observation="full"``: the whole ``(size, size, 3)`` grid.

    ## Rewards
    ``1 - 0.9 * steps / max_steps`` when the agent faces the target, else 0.

    ## Starting State
    Objects and agent on random cells; the agent never starts facing the target.

    ## Episode End
    Terminated when the agent faces the target: ``success=True``, ``score`` = SPL with
    ``info["optimal_steps"]`` from a breadth-first search over (cell, direction). Picking up the
    target does not end the episode (drop it again). Truncated after ``max_steps``:
    ``success=False``, ``score=0``.

    ## Arguments
    * ``size`` (int, 5..16): side in cells, walls included.
    * ``num_objects`` (int, 1..8).
    * ``max_steps`` (int | None): default ``5 * size**2``.
    * ``observation``, ``view_size``, ``see_through_walls``, ``action_set``, ``render_mode``.

    ## Version History
    * v0: initial version.
    """

    remote_kwargs = {"size": client(IntRange(5, 16)), "num_objects": client(IntRange(1, 8))}
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(
        self, *, size: int = 8, num_objects: int = 3, max_steps: int | None = None, **kwargs: Any
    ):
        self.size = check_int("size", size, 5, 16)
        self.num_objects = check_int("num_objects", num_objects, 1, min(8, (size - 2) ** 2 - 2))
        super().__init__(
            height=size,
            width=size,
            max_steps=5 * size * size if max_steps is None else max_steps,
            **kwargs,
        )
        self.target = (BALL, 0)

    def _gen_grid(self, height: int, width: int) -> None:
        rng = self.np_random
        self.grid.wall_rect(0, 0, height, width)
        pairs = [(k, c) for k in _KINDS for c in range(len(COLOR_NAMES))]
        chosen = rng.choice(len(pairs), size=self.num_objects, replace=False)
        objects = [pairs[int(i)] for i in chosen]
        for kind, color in objects:
            self.place_obj(kind, color)
        self.place_agent()
        self.target = objects[int(rng.integers(len(objects)))]
        if self._status():
            raise Retry
        kind, color = self.target
        self.mission = f"go to the {COLOR_NAMES[color]} {OBJECT_NAMES[kind]}"

    def _status(self) -> bool | None:
        if not self._front_inside():
            return None
        cell = self.grid.cells[self.front_pos]
        return True if (int(cell[0]), int(cell[1])) == self.target else None

    def _targets(self) -> list[tuple[int, int]]:
        return [tuple(int(v) for v in p) for p in self.grid.find(*self.target)]

    def _oracle_plan(self) -> list[int] | None:
        targets = self._targets()
        if not targets:  # the agent carries the target: drop it first
            if not self.action_mask()[self.action_names.index("drop")]:
                return [self.action_names.index("right")] if self.action_set == "minigrid" else None
            return [self.action_names.index("drop")]
        return self.plan_to(facing_goal(self.height, self.width, targets))

    def _task_rules(self) -> str:
        return f"Mission: {self.mission}. You win by standing next to that object and facing it."
