"""The base class of the single-agent ``grid`` tasks (MiniGrid's template method).

:class:`GridEnv` owns stepping, observations, rewards, the verdict, rendering and the text view; a
task implements ``_gen_grid`` and ``_oracle_plan``. Multi-agent games use :class:`~verigym.envs.grid.grid.Grid`
and the pure functions of the other modules without this class.
"""

from __future__ import annotations

import re
from collections.abc import Callable
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
from verigym.envs.grid.encoding import (
    ACTION_SETS,
    AGENT,
    CARDINAL_DIR,
    CLOSED,
    DIR_STEPS,
    DOOR,
    EAST,
    EMPTY,
    ENTERABLE_LIST,
    GOAL,
    HAZARD_LIST,
    KEY,
    LOCKED,
    MAX_STATE,
    NORTH,
    NUM_TYPES,
    OPEN,
    PICKABLE_LIST,
    RED,
    SOUTH,
    UNSEEN,
    WEST,
    can_enter,
    safe_mask,
)
from verigym.envs.grid.grid import Grid
from verigym.envs.grid.planning import bfs_plan
from verigym.envs.grid.rendering import LEGEND, grid_text, object_name, render_rgb
from verigym.envs.grid.visibility import ego_offsets
from verigym.kwargs_policy import FLAG, IntRange, OneOf, client, operator_only
from verigym.render_modes import accept_render_mode
from verigym.validation import check_choice, check_int, check_odd_int


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

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["ansi", "rgb_array"],
        "render_fps": 10,
        "family": "grid",
    }
    default_action_set: ClassVar[str] = "minigrid"
    spl: ClassVar[bool] = True
    """Whether ``score`` is SPL (deterministic tasks) or plain success (stochastic ones)."""

    remote_kwargs = {
        "observation": client(OneOf(("partial", "full"))),
        "view_size": client(IntRange(3, 15)),
        "see_through_walls": client(FLAG),
        "action_set": client(OneOf((None, *sorted(ACTION_SETS)))),
        "max_steps": operator_only(IntRange(1, 100_000), why="raises the cost of an episode"),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

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
        check_choice("observation", observation, ("partial", "full"))
        view_size = check_odd_int("view_size", view_size, 3, 15)
        action_set = self.default_action_set if action_set is None else action_set
        check_choice("action_set", action_set, sorted(ACTION_SETS))
        max_steps = check_int("max_steps", max_steps, 1, 100_000)
        render_mode = accept_render_mode(render_mode, self.metadata["render_modes"])
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
        high = np.broadcast_to(
            np.array([NUM_TYPES - 1, NUM_TYPES - 1, MAX_STATE], dtype=np.uint8), shape
        ).copy()
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
        if self._entered >= 0 and HAZARD_LIST[self._entered]:
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
    def place_obj(
        self,
        kind: int,
        color: int = 0,
        state: int = 0,
        *,
        top: tuple[int, int] = (0, 0),
        size: tuple[int, int] | None = None,
        reject: Callable[[int, int], bool] | None = None,
    ) -> tuple[int, int]:
        """Put an object on a random empty cell of the rectangle ``top``/``size`` (not the agent's).

        Raises:
            RuntimeError: no empty cell there.
        """
        r, c = self.random_empty_cell(top=top, size=size, reject=reject)
        self.grid.set(r, c, kind, color, state)
        return r, c

    def random_empty_cell(
        self,
        *,
        top: tuple[int, int] = (0, 0),
        size: tuple[int, int] | None = None,
        reject: Callable[[int, int], bool] | None = None,
    ) -> tuple[int, int]:
        """A uniformly drawn empty cell of the rectangle (excluding the agent's cell).

        Raises:
            RuntimeError: no empty cell there.
        """
        h, w = size if size is not None else (self.height - top[0], self.width - top[1])
        window = self.grid.cells[top[0] : top[0] + h, top[1] : top[1] + w, 0] == EMPTY
        free = [(int(r) + top[0], int(c) + top[1]) for r, c in np.argwhere(window)]
        free = [
            p for p in free if p != tuple(self.agent_pos) and (reject is None or not reject(*p))
        ]
        if not free:
            raise RuntimeError(f"no empty cell in rectangle top={top} size={size}")
        return free[int(self.np_random.integers(len(free)))]

    def place_agent(
        self, *, top: tuple[int, int] = (0, 0), size: tuple[int, int] | None = None
    ) -> None:
        """Put the agent on a random empty cell with a random direction."""
        self.agent_pos = (-1, -1)
        self.agent_pos = self.random_empty_cell(top=top, size=size)
        self.agent_dir = int(self.np_random.integers(4))

    # -- state ----------------------------------------------------------------------------------
    @property
    def front_pos(self) -> tuple[int, int]:
        """The cell the agent faces."""
        r, c = self.agent_pos
        dr, dc = DIR_STEPS[self.agent_dir]
        return r + dr, c + dc

    def _front_inside(self) -> bool:
        r, c = self.agent_pos
        dr, dc = DIR_STEPS[self.agent_dir]
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
            self.grid, self.agent_pos, self.agent_dir, self.carrying = (
                grid.copy(),
                pos,
                direction,
                carrying,
            )
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
                hidden = self._hidden_cache[key] = self.grid.hidden_cells(
                    r, c, self.agent_dir, self.view_size
                )
        obs = self.grid.ego_view(
            r,
            c,
            self.agent_dir,
            self.view_size,
            see_through_walls=self.see_through_walls,
            hidden=hidden,
        )
        obs[self.view_size - 1, self.view_size // 2] = (
            self.carrying if self.carrying[0] else (EMPTY, 0, 0)
        )
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
                dr, dc = DIR_STEPS[d]
                inside = 0 <= r + dr < self.height and 0 <= c + dc < self.width
                mask[a] = int(d != self.agent_dir or (inside and self._can_step(r + dr, c + dc, d)))
        if self._front_inside():
            fr, fc = self.front_pos
            kind, color, state = self.grid.cells[fr, fc].tolist()
            if self.action_set == "minigrid":
                if (
                    type(self)._can_step is GridEnv._can_step
                ):  # the plain rule: skip a second lookup
                    mask[2] = int(ENTERABLE_LIST[kind][min(state, MAX_STATE)])
                else:
                    mask[2] = int(self._can_step(fr, fc, self.agent_dir))
            carrying = self.carrying[0]
            mask[turn_offset + 1] = int(PICKABLE_LIST[kind] and not carrying)
            mask[turn_offset + 2] = int(bool(carrying) and kind == EMPTY)
            mask[turn_offset + 3] = int(
                kind == DOOR
                and (state != LOCKED or (carrying == KEY and self.carrying[1] == color))
            )
        mask[turn_offset + 4] = 1
        return np.array(mask, dtype=np.int8)

    def action_masks(self) -> np.ndarray:
        """``bool (n_actions,)``: :meth:`action_mask` under the name sb3-contrib's ``MaskablePPO``
        calls (no ``ActionMasker`` needed)."""
        return self.action_mask().astype(bool)

    def _can_step(self, r: int, c: int, direction: int) -> bool:
        """Whether walking onto ``(r, c)`` in ``direction`` succeeds (Sokoban overrides: pushes)."""
        return can_enter(self.grid.cells, r, c)

    def _can_toggle(self, r: int, c: int) -> bool:
        kind, color, state = self.grid.cells[r, c].tolist()
        if kind != DOOR:
            return False
        return state != LOCKED or (self.carrying[0] == KEY and self.carrying[1] == color)

    # -- Gymnasium API --------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
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
                action_error_info(
                    f"{exc}; actions are "
                    + ", ".join(f"{i} {n}" for i, n in enumerate(self.action_names)),
                    info,
                )
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
        if self.action_set == "cardinal" and name in CARDINAL_DIR:
            self.agent_dir = CARDINAL_DIR[name]
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
            if PICKABLE_LIST[cell[0]] and not self.carrying[0]:
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
        return render_rgb(
            self.grid.cells,
            tile_size=tile_size,
            agents=[(r, c, self.agent_dir, RED)],
            highlight=highlight,
        )

    def _view_cells(self) -> np.ndarray:
        """``bool (H, W)``: the cells inside the agent's view window (visible or not)."""
        mark = np.zeros((self.height, self.width), dtype=bool)
        offsets = ego_offsets(self.view_size, self.grid.padded.shape[1], self.grid.pad)[
            self.agent_dir
        ]
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
            lines.append(
                "Carrying: " + (object_name(*held) if held[0] not in (UNSEEN, EMPTY) else "nothing")
            )
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
        raise ActionParseError(
            "no action found; reply with one of: " + ", ".join(self.action_names)
        )

    def action_text(self, action: Any) -> str:
        return self.action_names[int(action)]

    def task_fingerprint(self) -> dict[str, Any]:
        """The full layout (the observation is the agent's partial view), the agent's start and
        the mission: the hidden target of the task's content hash."""
        from verigym.task_split import canonical

        return {
            "cells": canonical(np.asarray(self.grid.cells)),
            "agent": canonical([self.agent_pos, self.agent_dir, self.carrying]),
            "mission": str(getattr(self, "mission", "")),
        }

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

    def plan_to(
        self,
        goal: np.ndarray,
        passable: np.ndarray | None = None,
        start: tuple[int, int, int] | None = None,
    ) -> list[int] | None:
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
