"""Natively batched grid worlds: the state of N envs in arrays, one ``step`` for all of them.

:class:`BatchedGridEnv` is a Gymnasium 1.x :class:`~gymnasium.vector.VectorEnv` over ``num_envs``
copies of one :class:`~verigym.envs.grid.base.GridEnv` task. The state of every copy lives in
numpy arrays -- the padded object grids ``uint8 (N, H + 2p, W + 2p, 3)`` (wall padding of
``p = max(view_size - 1, 1)`` cells, as :class:`~verigym.envs.grid.grid.Grid`), the agent cells
(``int64 (N,)`` flat indices into them; ``row``/``col`` give grid coordinates) and directions
``int64 (N,)``, the carried objects ``uint8 (N, 3)``, the step counters ``int64 (N,)`` -- and :meth:`~BatchedGridEnv.step` applies the actions of all N copies as array
operations (turns, moves, pickup, drop, toggle, the success test, rewards, the egocentric views with
line of sight, the action masks), with no Python loop over the envs. The dynamics, observations,
rewards, masks, ``success``/``score`` and seeding are those of the single env: copy ``i`` reset
with ``seed + i`` is step for step the single env reset with that seed
(``tests/envs/grid/test_batched.py`` replays both).

**What stays per env.** Reset (the layout drawn from the seed: maze, door, key, lake) runs the
single env's own generator, in Python, once per episode, for the copies that reset; the ``score``
of a successful episode calls that env's oracle once (SPL, Anderson et al. 2018). IceLake draws
its slips from each copy's own generator, read ahead in blocks of :data:`SLIP_BLOCK` (a loop only
over the copies whose block ran out) so that seeding matches the single env.

Tasks served (:data:`SERVED`): Empty, FourRooms, Maze, LavaCrossing, DoorKey, MultiRoom,
KeyCorridor, GoToObject, IceLake; :class:`BatchedTreasureEnv` serves Treasure. Sokoban and
Coverage stay per env (:class:`~verigym.agents.common.vec.EnvPool`, what
:func:`~verigym.agents.common.vec.vector_env` gives an id without a batched engine).

Autoreset (``autoreset_mode``) as Gymnasium 1.x defines it: ``NEXT_STEP`` (default; the step after
an episode ended resets that copy, ignores its action and returns its first observation with
reward 0), ``SAME_STEP`` (the copy is reset in the step that ended it; ``info["final_obs"]``
``(N, *obs_shape)`` with ``info["_final_obs"]`` marking the copies, ``info["final_info"]`` their
``success``/``score``) or ``DISABLED`` (``reset(options={"reset_mask": bool (N,)})`` resets some).

Infos, laid out as ``SyncVectorEnv``'s (each key with its ``"_key"`` mask): ``info["action_mask"]``
``int8 (N, n_actions)`` on every call; ``info["mission"]`` (object ``(N,)``) on ``reset`` and on
the autoreset steps (``"_mission"`` marks the copies reset); on steps where some episode ended ``info["success"]``
``bool (N,)`` and ``info["score"]`` ``float64 (N,)`` with Gymnasium's ``"_success"``/``"_score"``
masks, and ``info["optimal_steps"]`` ``int64 (N,)`` (with ``"_optimal_steps"``) for the copies
whose single env reports it at that end: the SPL tasks on a success, and on a failure only when
the plan is already known (as the single env; failures never pay for planning). Treasure
reports ``optimal_steps`` on every reset and step, as its single env. A malformed action of one copy (not an integer in range, NaN) costs that copy the step,
changes nothing, and sets ``info["action_error"]`` (object ``(N,)``, ``None`` elsewhere) with
``info["_action_error"]``; an ``actions`` array of the wrong shape raises ``ValueError``.

Rendering: ``render_mode`` ``"ansi"`` or ``"rgb_array"`` (the single env's modes) makes
:meth:`~BatchedGridEnv.render` return a tuple of ``num_envs`` frames (strings, or ``uint8
(H, W, 3)`` arrays), as Gymnasium's ``SyncVectorEnv``: each copy's state is written back into its
single env, which draws it (a loop over the copies: rendering is for looking, not for speed).

Example::

    envs = gymnasium.make_vec("verigym/DoorKey-8x8-v0", num_envs=1024,
                              vectorization_mode="vector_entry_point")
    obs, info = envs.reset(seed=0)            # obs: uint8 (1024, 7, 7, 3)
    obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from verigym.core import ACTION_MASK, SCORE, SUCCESS
from verigym.envs.grid.base import GridEnv
from verigym.envs.grid.doorkey import DoorKeyEnv, KeyCorridorEnv, MultiRoomEnv
from verigym.envs.grid.encoding import (
    AGENT,
    BALL,
    CLOSED,
    DIR_VEC,
    DOOR,
    EMPTY,
    ENTERABLE,
    GOAL,
    HAZARD,
    ICE,
    KEY,
    LOCKED,
    MAX_STATE,
    OPAQUE_CODE,
    OPEN,
    PICKABLE,
)
from verigym.envs.grid.goto import GoToObjectEnv
from verigym.envs.grid.icelake import IceLakeEnv
from verigym.envs.grid.navigation import EmptyEnv, FourRoomsEnv, LavaCrossingEnv, MazeEnv
from verigym.envs.grid.treasure import MOVES as TREASURE_MOVES
from verigym.envs.grid.treasure import TREASURE, TreasureEnv
from verigym.envs.grid.visibility import blocker_matrix, ego_offsets

__all__ = [
    "SERVED",
    "SLIP_BLOCK",
    "BatchedGridEnv",
    "BatchedTreasureEnv",
    "make_batched",
]

SLIP_BLOCK = 64
"""Uniforms read ahead per IceLake copy (one block per copy; refilled when used up)."""

# operation codes of the minigrid action names (cardinal moves become FORWARD after a turn)
LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE, DONE, NOOP = range(8)
_MINIGRID_OPS = np.array([LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE, DONE, NOOP], np.int64)
_CARDINAL_OPS = np.array(
    [FORWARD, FORWARD, FORWARD, FORWARD, PICKUP, DROP, TOGGLE, DONE, NOOP], np.int64
)
_TURN = np.array([-1, 1, 0, 0, 0, 0, 0, 0], np.int64)  # by operation code
_CARDINAL_DIRS = np.array([3, 0, 1, 2, 0, 0, 0, 0, 0], np.int64)  # up right down left -> N E S W
_ENTERABLE_CODE = np.zeros(256, dtype=bool)  # by type * 4 + min(state, 3)
_ENTERABLE_CODE[: ENTERABLE.size] = ENTERABLE.ravel()
_PICKABLE = np.zeros(256, dtype=bool)
_PICKABLE[: PICKABLE.size] = PICKABLE
_HAZARD = np.zeros(256, dtype=bool)
_HAZARD[: HAZARD.size] = HAZARD
_OPAQUE_BOOL = OPAQUE_CODE[:256] > 0  # by uint8 ``type * 4 + state`` (as Grid.ego_view)


def _blocker_bits(view_size: int) -> np.ndarray:
    """``uint64 (V*V, chunks)``: row ``t`` has bit ``k`` set when view cell ``k`` lies between
    the agent and view cell ``t`` (:func:`~verigym.envs.grid.visibility.blocker_matrix` as bit
    sets, so that the hidden cells of a view are one AND with the bits of its opaque cells)."""
    matrix = blocker_matrix(view_size) > 0
    cells = view_size * view_size
    chunks = -(-cells // 64)
    padded = np.zeros((cells, chunks * 64), dtype=bool)
    padded[:, :cells] = matrix
    return np.packbits(padded, axis=1, bitorder="little").view(np.uint64).copy()


SERVED: dict[type, str] = {
    EmptyEnv: "enter",
    FourRoomsEnv: "enter",
    MazeEnv: "enter",
    LavaCrossingEnv: "enter",
    DoorKeyEnv: "enter",
    MultiRoomEnv: "enter",
    KeyCorridorEnv: "carry_ball",
    GoToObjectEnv: "face_target",
    IceLakeEnv: "enter",
}
"""The single-env classes :class:`BatchedGridEnv` steps natively, with their success rule:
``enter`` (entering a goal wins, a hazard loses: :meth:`GridEnv._status`), ``carry_ball``
(KeyCorridor) or ``face_target`` (GoToObject)."""


def _seeds(seed: int | Sequence[int | None] | None, n: int) -> list[int | None]:
    """Gymnasium's rule: an int gives ``seed + i``; a sequence one seed per copy."""
    if seed is None:
        return [None] * n
    if isinstance(seed, (int, np.integer)):
        return [int(seed) + i for i in range(n)]
    seeds = list(seed)
    if len(seeds) != n:
        raise ValueError(f"expected {n} seeds, got {len(seeds)}")
    return seeds


def _check_actions(actions: Any, n: int, n_actions: int) -> tuple[np.ndarray, np.ndarray]:
    """``(int64 (n,) actions, bool (n,) valid)``; invalid entries (non-integer, out of range,
    NaN, non-numeric) become 0 and are marked invalid.

    Raises:
        ValueError: ``actions`` does not have shape ``(n,)``.
    """
    array = np.asarray(actions)
    if array.shape != (n,):
        raise ValueError(f"expected actions of shape ({n},), got {array.shape}")
    if array.dtype.kind in "iu":
        valid = (array >= 0) & (array < n_actions)
        if np.count_nonzero(valid) == n:
            return array.astype(np.int64, copy=False), valid
        return np.where(valid, array, 0).astype(np.int64, copy=False), valid
    if array.dtype.kind not in "fb":  # objects, strings: convert one by one (the rare path)
        converted = np.full(n, np.nan)
        for i, value in enumerate(array.tolist()):
            try:
                converted[i] = float(value)
            except (TypeError, ValueError):
                pass
        array = converted
    as_float = array.astype(np.float64)
    valid = (
        np.isfinite(as_float)
        & (as_float == np.round(as_float))
        & (as_float >= 0)
        & (as_float < n_actions)
    )
    return np.where(valid, as_float, 0).astype(np.int64), valid


class _BatchedBase(VectorEnv):
    """Autoreset, seeding and info plumbing shared by the batched engines.

    A subclass keeps one single env per copy (its reset generator and oracle) in ``self.envs``
    and implements ``_load`` (copy ``i``'s state from its single env after a reset),
    ``_advance`` (one batched step of the copies marked active), ``_observe`` and ``_masks``.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "autoreset_mode": AutoresetMode.NEXT_STEP,
        "family": "grid",
    }
    envs: list[Any]

    def _setup(self, autoreset_mode: AutoresetMode | str, render_mode: str | None) -> None:
        first = self.envs[0]
        self.num_envs = len(self.envs)
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(first.observation_space, self.num_envs)
        self.action_space = batch_space(first.action_space, self.num_envs)
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.metadata = {
            **type(self).metadata,
            "autoreset_mode": self.autoreset_mode,
            "render_modes": list(first.metadata.get("render_modes", [])),
            "render_fps": first.metadata.get("render_fps"),
        }
        self.render_mode = render_mode
        self._n_actions = int(first.action_space.n)
        self._pending = np.zeros(self.num_envs, dtype=bool)  # NEXT_STEP: reset on the next step
        self._started = False

    # -- to implement --------------------------------------------------------------------------
    def _load(self, i: int) -> None:
        raise NotImplementedError

    def _advance(
        self, actions: np.ndarray, active: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Step the active copies: ``(reward float64, terminated, truncated, success)``."""
        raise NotImplementedError

    def _observe(self) -> np.ndarray:
        raise NotImplementedError

    def _masks(self) -> np.ndarray:
        raise NotImplementedError

    def _score(self, i: int, success: bool) -> float:
        raise NotImplementedError

    def _sync(self, i: int) -> None:
        """Write copy ``i``'s state into its single env (for ``render``)."""
        raise NotImplementedError

    def _end_info(self, ended: np.ndarray) -> dict[str, np.ndarray]:
        """Extra episode-end infos of the ``ended`` copies (after ``_score``), with masks."""
        return {}

    def _every_info(self) -> dict[str, np.ndarray]:
        """Infos of every ``reset`` and ``step`` (after any autoreset)."""
        return {}

    def render(self) -> tuple[Any, ...] | None:
        """A frame per copy (``render_mode`` ``"ansi"``: ``str``; ``"rgb_array"``: ``uint8
        (H, W, 3)``), drawn by each copy's single env; None without a ``render_mode``.

        Raises:
            RuntimeError: called before ``reset``.
        """
        if self.render_mode is None:
            return None
        if not self._started:
            raise RuntimeError("call reset() before render()")
        frames = []
        for i, env in enumerate(self.envs):
            self._sync(i)
            frames.append(env.render())
        return tuple(frames)

    # -- plumbing -------------------------------------------------------------------------------
    def _reset_one(self, i: int, seed: int | None, options: dict[str, Any] | None = None) -> None:
        self.envs[i].reset(seed=seed, options=options)
        self._load(i)

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every copy (or those of ``options["reset_mask"]``, ``bool (N,)``).

        Raises:
            ValueError: ``seed`` is a sequence of the wrong length, or ``reset_mask`` is not a
                ``bool (N,)`` array (or is given before the first full reset).
        """
        seeds = _seeds(seed, self.num_envs)
        options = dict(options or {})
        which = np.ones(self.num_envs, dtype=bool)
        if "reset_mask" in options:
            which = np.asarray(options.pop("reset_mask"))
            if which.shape != (self.num_envs,) or which.dtype != np.bool_:
                raise ValueError(f"reset_mask must be a bool array of shape ({self.num_envs},)")
            if not self._started and not which.all():
                raise ValueError("the first reset must reset every copy")
        for i in np.flatnonzero(which).tolist():
            self._reset_one(i, seeds[i], options or None)
        self._started = True
        self._pending[which] = False
        return self._observe(), {
            ACTION_MASK: self._masks(),
            "_" + ACTION_MASK: np.ones(self.num_envs, dtype=bool),
            **self._missions(which),
            **self._every_info(),
        }

    def _missions(self, which: np.ndarray) -> dict[str, np.ndarray]:
        """``mission`` (object ``(N,)``) with its ``_mission`` mask ``which`` (the copies reset)."""
        missions = np.array([getattr(e, "mission", "") for e in self.envs], dtype=object)
        return {"mission": missions, "_mission": which.copy()}

    def step(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One step of every copy (see the module doc for autoreset and infos).

        Raises:
            RuntimeError: called before ``reset``.
            ValueError: ``actions`` is not of shape ``(num_envs,)``.
        """
        if not self._started:
            raise RuntimeError("call reset() before step()")
        actions, valid = _check_actions(actions, self.num_envs, self._n_actions)
        all_valid = np.count_nonzero(valid) == self.num_envs
        restart = self._pending
        active = ~restart
        reward, terminated, truncated, success = self._advance(
            actions if all_valid else np.where(valid, actions, -1), active
        )
        ended = terminated | truncated
        infos: dict[str, Any] = {}
        if not all_valid:
            bad = ~valid & active
            if np.count_nonzero(bad):
                errors = np.full(self.num_envs, None, dtype=object)
                for i in np.flatnonzero(bad).tolist():
                    errors[i] = (
                        f"invalid action for env {i}: expected an integer in 0..{self._n_actions - 1}"
                    )
                infos["action_error"], infos["_action_error"] = errors, bad
        if np.count_nonzero(ended):
            score = np.zeros(self.num_envs)
            for i in np.flatnonzero(ended).tolist():
                score[i] = self._score(i, bool(success[i]))
            verdict = {
                SUCCESS: success & ended,
                "_" + SUCCESS: ended,
                SCORE: score,
                "_" + SCORE: ended.copy(),
                **self._end_info(ended),
            }
        else:
            verdict = {}
        obs = self._observe()
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            if np.count_nonzero(ended):
                infos["final_obs"], infos["_final_obs"] = obs.copy(), ended.copy()
                infos["final_info"], infos["_final_info"] = verdict, ended.copy()
                for i in np.flatnonzero(ended).tolist():
                    self._reset_one(i, None)
                obs = self._observe()
                infos.update(self._missions(ended))
        else:
            infos.update(verdict)
            if np.count_nonzero(restart):
                for i in np.flatnonzero(restart).tolist():
                    self._reset_one(i, None)
                obs = self._observe()
                infos.update(self._missions(restart))
            if self.autoreset_mode == AutoresetMode.NEXT_STEP:
                self._pending = ended
        infos[ACTION_MASK] = self._masks()
        infos["_" + ACTION_MASK] = np.ones(self.num_envs, dtype=bool)
        infos.update(self._every_info())
        return obs, reward, terminated, truncated, infos

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()


class BatchedGridEnv(_BatchedBase):
    """``num_envs`` copies of one grid task stepped as arrays (see the module doc).

    Args:
        num_envs: copies, >= 1.
        env_class: the single-env class, one of :data:`SERVED`.
        autoreset_mode: ``"NextStep"`` (default), ``"SameStep"`` or ``"Disabled"``
            (:class:`gymnasium.vector.AutoresetMode`).
        **kwargs: the single env's constructor arguments (``size``, ``observation``,
            ``view_size``, ``see_through_walls``, ``action_set``, ``max_steps``, ...), validated by
            it, ``render_mode`` included (see the module doc).

    Raises:
        ValueError: ``num_envs`` < 1 or a bad constructor argument.
        TypeError: ``env_class`` is not served natively.
    """

    def __init__(
        self,
        num_envs: int,
        env_class: type[GridEnv],
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        **kwargs: Any,
    ):
        if type(num_envs) is not int or num_envs < 1:
            raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
        if env_class not in SERVED:
            raise TypeError(
                f"{getattr(env_class, '__name__', env_class)} is not stepped natively in batches; "
                "use verigym.agents.common.vec.EnvPool"
            )
        self.envs: list[GridEnv] = [env_class(**kwargs) for _ in range(num_envs)]
        self._setup(autoreset_mode, self.envs[0].render_mode)
        first = self.envs[0]
        self.rule = SERVED[env_class]
        n = num_envs
        self.height, self.width = first.height, first.width
        self.max_steps = first.max_steps
        self.view_size = first.view_size
        self.full = first.observation_mode == "full"
        self.see_through_walls = first.see_through_walls
        self.cardinal = first.action_set == "cardinal"
        self.pad = first.grid.pad
        self.padded_h, self.padded_w = first.grid.padded.shape[:2]
        plane = self.padded_h * self.padded_w
        # 4 bytes a cell (type, color, state, 0) so that a view gathers one uint32 per cell
        self._cells4 = np.zeros((n, self.padded_h, self.padded_w, 4), dtype=np.uint8)
        self.cells = self._cells4[..., :3]
        self._flat = self._cells4.reshape(-1, 4)
        self._words = self._cells4.reshape(-1).view(np.uint32)
        self._base = np.arange(n, dtype=np.int64) * plane
        # the agent's cell as a flat index into the padded grids of all copies (copy i's plane
        # starts at i * plane); the padding is walls, so a step or a look off the grid meets a
        # wall there, as the single env's "front cell is outside" rule gives
        self.pos = np.zeros(n, dtype=np.int64)
        self.direction = np.zeros(n, dtype=np.int64)
        self.carrying = np.zeros((n, 3), dtype=np.uint8)
        self.steps = np.zeros(n, dtype=np.int64)
        self.target = np.zeros((n, 2), dtype=np.uint8)  # GoToObject: (kind, color)
        self._step_flat = DIR_VEC[:, 0] * self.padded_w + DIR_VEC[:, 1]
        self._offsets = ego_offsets(self.view_size, self.padded_w, self.pad)
        self._blocker_bits = _blocker_bits(self.view_size)
        self._spl = np.array([e.spl for e in self.envs], dtype=bool)
        self.slip = float(getattr(first, "slip", 0.0)) if isinstance(first, IceLakeEnv) else 0.0
        if self.slip > 0.0:
            self._uniforms = np.zeros((n, SLIP_BLOCK))
            self._used = np.zeros(n, dtype=np.int64)
            self._block_state: list[Any] = [None] * n
        self._rows = np.arange(n)

    # -- state from a freshly reset single env ------------------------------------------------
    def _load(self, i: int) -> None:
        env = self.envs[i]
        self.cells[i] = env.grid.padded
        r, c = env.agent_pos
        self.pos[i] = self._base[i] + (r + self.pad) * self.padded_w + c + self.pad
        self.direction[i] = env.agent_dir
        self.carrying[i] = env.carrying
        self.steps[i] = 0
        if self.rule == "face_target":
            self.target[i] = env.target
        if self.slip > 0.0:
            generator = env.np_random
            self._block_state[i] = generator.bit_generator.state
            self._uniforms[i] = generator.random(SLIP_BLOCK)
            self._used[i] = 0

    def _reset_one(self, i: int, seed: int | None, options: dict[str, Any] | None = None) -> None:
        if self.slip > 0.0 and seed is None and self._block_state[i] is not None:
            # rewind copy i's generator to where the single env's would be: the slips it used
            generator = self.envs[i].np_random
            generator.bit_generator.state = self._block_state[i]
            generator.random(int(self._used[i]))
        super()._reset_one(i, seed, options)

    def _draw(self, which: np.ndarray) -> np.ndarray:
        """One uniform from each copy of ``which`` (int64 indices), in each copy's stream order."""
        empty = which[self._used[which] >= SLIP_BLOCK]
        for i in empty.tolist():  # the rare refill: only copies that used up their block
            generator = self.envs[i].np_random
            self._block_state[i] = generator.bit_generator.state
            self._uniforms[i] = generator.random(SLIP_BLOCK)
            self._used[i] = 0
        values = self._uniforms[which, self._used[which]]
        self._used[which] += 1
        return values

    # -- stepping -------------------------------------------------------------------------------
    @property
    def row(self) -> np.ndarray:
        """``int64 (N,)``: the agents' rows (grid coordinates)."""
        return (self.pos - self._base) // self.padded_w - self.pad

    @property
    def col(self) -> np.ndarray:
        """``int64 (N,)``: the agents' columns (grid coordinates)."""
        return (self.pos - self._base) % self.padded_w - self.pad

    def _front(self) -> tuple[np.ndarray, np.ndarray]:
        """``(flat index, cell uint8 (N, 4))`` of the cell each agent faces (a padding wall
        when it is off the grid)."""
        index = self.pos + self._step_flat[self.direction]
        return index, self._flat[index]

    def _advance(
        self, actions: np.ndarray, active: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        act = actions  # an invalid action is -1: the tables' last entry, NOOP
        op = (_CARDINAL_OPS if self.cardinal else _MINIGRID_OPS)[act]
        op[~active] = NOOP
        self.steps += active
        moving = op == FORWARD
        if self.slip > 0.0:
            here = self._flat[self.pos]
            on_ice = moving & (here[:, 0] == ICE)
        if self.cardinal:
            self.direction = np.where(moving, _CARDINAL_DIRS[act], self.direction)
        else:
            self.direction = (self.direction + _TURN[op]) & 3
        entered = np.full(self.num_envs, -1, dtype=np.int64)
        if self.slip > 0.0 and np.count_nonzero(on_ice):
            which = np.flatnonzero(on_ice)
            u = self._draw(which)
            slipped = u < self.slip
            which, u = which[slipped], u[slipped]
            if len(which):
                side = np.where(u < self.slip / 2, 1, -1)
                slid = (self.direction[which] + side) & 3
                target = self.pos[which] + self._step_flat[slid]
                cell = self._flat[target]
                can = _ENTERABLE_CODE[cell[:, 0] * 4 + np.minimum(cell[:, 2], MAX_STATE)]
                moved = which[can]
                self.pos[moved] = target[can]
                entered[moved] = cell[can, 0]
                moving = moving.copy()
                moving[which] = False  # a slip replaces the move
        index, front = self._front()
        kind, color, state = front[:, 0], front[:, 1], front[:, 2]
        kind_code = kind.astype(np.int64)
        forward = moving & _ENTERABLE_CODE[kind_code * 4 + np.minimum(state, MAX_STATE)]
        if np.count_nonzero(forward):
            self.pos = np.where(forward, index, self.pos)
            entered = np.where(forward, kind_code, entered)
        carried = self.carrying[:, 0] != 0
        pickup = (op == PICKUP) & _PICKABLE[kind_code] & ~carried
        drop = (op == DROP) & carried & (kind == EMPTY)
        toggle = (
            (op == TOGGLE)
            & (kind == DOOR)
            & ((state != LOCKED) | ((self.carrying[:, 0] == KEY) & (self.carrying[:, 1] == color)))
        )
        if np.count_nonzero(pickup):
            self.carrying[pickup] = front[pickup, :3]
            self._flat[index[pickup]] = (EMPTY, 0, 0, 0)
        if np.count_nonzero(drop):
            self._flat[index[drop], :3] = self.carrying[drop]
            self.carrying[drop] = 0
        if np.count_nonzero(toggle):
            self._flat[index[toggle], 2] = np.where(state[toggle] == OPEN, CLOSED, OPEN)
        # the verdict (GridEnv._status and the tasks' overrides)
        if self.rule == "enter":
            success = entered == GOAL
            failure = (entered >= 0) & _HAZARD[np.maximum(entered, 0)]
        elif self.rule == "carry_ball":
            success = self.carrying[:, 0] == BALL
            failure = np.zeros(self.num_envs, dtype=bool)
        else:  # face_target, after the action
            _, front = self._front()
            success = (front[:, 0] == self.target[:, 0]) & (front[:, 1] == self.target[:, 1])
            failure = np.zeros(self.num_envs, dtype=bool)
        success &= active
        terminated = success | (failure & active)
        truncated = ~terminated & active & (self.steps >= self.max_steps)
        reward = np.where(success, 1.0 - 0.9 * self.steps / self.max_steps, 0.0)
        return reward, terminated, truncated, success

    def _score(self, i: int, success: bool) -> float:
        if not success:
            return 0.0
        if not self._spl[i]:
            return 1.0
        optimal = self.envs[i].optimal_steps
        return optimal / max(optimal, int(self.steps[i]))

    def _end_info(self, ended: np.ndarray) -> dict[str, np.ndarray]:
        if not self._spl.any():
            return {}
        optimal = np.zeros(self.num_envs, dtype=np.int64)
        known = np.zeros(self.num_envs, dtype=bool)
        for i in np.flatnonzero(ended & self._spl).tolist():
            value = self.envs[i]._optimal  # set by _score on a success; on a failure if known
            if value is not None:
                optimal[i], known[i] = value, True
        return {"optimal_steps": optimal, "_optimal_steps": known} if known.any() else {}

    def _sync(self, i: int) -> None:
        env = self.envs[i]
        env.grid.padded[...] = self.cells[i]
        env.agent_pos = (int(self.row[i]), int(self.col[i]))
        env.agent_dir = int(self.direction[i])
        env.carrying = tuple(int(v) for v in self.carrying[i])
        env.step_count = int(self.steps[i])
        env._hidden_cache.clear()

    # -- observations and masks -----------------------------------------------------------------
    def _observe(self) -> np.ndarray:
        n = self.num_envs
        if self.full:
            p = self.pad
            obs = self.cells[:, p : p + self.height, p : p + self.width].copy()
            row, col = self.row, self.col
            under = obs[self._rows, row, col, 0]
            obs[self._rows, row, col] = np.stack(
                [np.full(n, AGENT, np.uint8), under, self.direction.astype(np.uint8)], axis=1
            )
            return obs
        v = self.view_size
        words = self._words.take(self._offsets[self.direction] + self.pos[:, None])  # (N, V*V)
        cells = words.view(np.uint8).reshape(n, v * v, 4)
        if not self.see_through_walls:
            opaque = _OPAQUE_BOOL.take(cells[..., 0] * np.uint8(4) + cells[..., 2])  # Grid.ego_view
            packed = np.packbits(opaque, axis=1, bitorder="little")
            chunks = self._blocker_bits.shape[1]
            if packed.shape[1] < 8 * chunks:
                whole = np.zeros((n, 8 * chunks), dtype=np.uint8)
                whole[:, : packed.shape[1]] = packed
                packed = whole
            bits = packed.view(np.uint64)  # (N, chunks): bit k = view cell k is opaque
            if chunks == 1:
                hidden = (bits & self._blocker_bits[:, 0]) != 0
            else:
                hidden = (bits[:, None, :] & self._blocker_bits[None]).any(axis=2)
            words[hidden] = 0
        obs = np.empty((n, v * v, 3), dtype=np.uint8)
        obs[...] = cells[..., :3]
        held = np.where(
            (self.carrying[:, 0] != 0)[:, None], self.carrying, np.array([EMPTY, 0, 0], np.uint8)
        )
        obs[:, (v - 1) * v + v // 2] = held
        return obs.reshape(n, v, v, 3)

    def _masks(self) -> np.ndarray:
        n = self.num_envs
        _, front = self._front()
        kind, color, state = front[:, 0], front[:, 1], front[:, 2]
        kind_code = kind.astype(np.int64)
        carried = self.carrying[:, 0] != 0
        mask = np.zeros((n, self._n_actions), dtype=np.int8)
        if self.cardinal:
            offset = 3
            for a, d in enumerate((3, 0, 1, 2)):  # up right down left
                cell = self._flat[self.pos + self._step_flat[d]]
                can = _ENTERABLE_CODE[cell[:, 0].astype(np.int64) * 4 + np.minimum(cell[:, 2], 3)]
                mask[:, a] = (self.direction != d) | can
        else:
            offset = 2
            mask[:, 0] = mask[:, 1] = 1
            mask[:, 2] = _ENTERABLE_CODE[kind_code * 4 + np.minimum(state, MAX_STATE)]
        mask[:, offset + 1] = _PICKABLE[kind_code] & ~carried
        mask[:, offset + 2] = carried & (kind == EMPTY)
        mask[:, offset + 3] = (kind == DOOR) & (
            (state != LOCKED) | ((self.carrying[:, 0] == KEY) & (self.carrying[:, 1] == color))
        )
        mask[:, offset + 4] = 1
        return mask


class BatchedTreasureEnv(_BatchedBase):
    """``num_envs`` copies of :class:`~verigym.envs.grid.treasure.TreasureEnv` stepped as arrays.

    Walls ``bool (N, size, size)``, agent and treasure cells ``int64 (N, 2)``; the layout of a
    copy is drawn by the single env at reset (per env, once per episode). Observations
    ``uint8 (N, size, size)`` and the rest as the single env and :class:`BatchedGridEnv`
    (``render_mode`` included).

    Args:
        num_envs: copies, >= 1.
        autoreset_mode: as :class:`BatchedGridEnv`.
        **kwargs: ``size``, ``wall_density``, ``max_steps`` of the single env.

    Raises:
        ValueError: ``num_envs`` < 1 or a bad constructor argument.
    """

    def __init__(
        self,
        num_envs: int,
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        **kwargs: Any,
    ):
        if type(num_envs) is not int or num_envs < 1:
            raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
        self.envs: list[TreasureEnv] = [TreasureEnv(**kwargs) for _ in range(num_envs)]
        self._setup(autoreset_mode, self.envs[0].render_mode)
        size = self.size = self.envs[0].size
        self.max_steps = self.envs[0].max_steps
        # walls padded by one cell of wall so that moves need no bounds test
        self.walls = np.ones((num_envs, size + 2, size + 2), dtype=bool)
        self.agent = np.zeros((num_envs, 2), dtype=np.int64)
        self.treasure = np.zeros((num_envs, 2), dtype=np.int64)
        self.optimal = np.zeros(num_envs, dtype=np.int64)
        self.steps = np.zeros(num_envs, dtype=np.int64)
        self._rows = np.arange(num_envs)

    def _load(self, i: int) -> None:
        env = self.envs[i]
        self.walls[i, 1:-1, 1:-1] = env._walls
        self.agent[i], self.treasure[i] = env._agent, env._treasure
        self.optimal[i] = env._optimal
        self.steps[i] = 0

    def _advance(
        self, actions: np.ndarray, active: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        self.steps += active
        move = (actions >= 0) & active
        target = self.agent + TREASURE_MOVES[np.maximum(actions, 0)]
        free = ~self.walls[self._rows, target[:, 0] + 1, target[:, 1] + 1]
        self.agent = np.where((move & free)[:, None], target, self.agent)
        success = active & (self.agent == self.treasure).all(axis=1)
        truncated = ~success & active & (self.steps >= self.max_steps)
        reward = np.where(success, 1.0 - 0.9 * self.steps / self.max_steps, 0.0)
        return reward, success.copy(), truncated, success

    def _score(self, i: int, success: bool) -> float:
        if not success:
            return 0.0
        return int(self.optimal[i]) / max(int(self.optimal[i]), int(self.steps[i]))

    def _end_info(self, ended: np.ndarray) -> dict[str, np.ndarray]:
        return {"optimal_steps": self.optimal.copy(), "_optimal_steps": ended.copy()}

    def _every_info(self) -> dict[str, np.ndarray]:
        return {
            "optimal_steps": self.optimal.copy(),
            "_optimal_steps": np.ones(self.num_envs, bool),
        }

    def _sync(self, i: int) -> None:
        env = self.envs[i]
        env._agent = self.agent[i].copy()
        env._steps = int(self.steps[i])

    def _observe(self) -> np.ndarray:
        obs = self.walls[:, 1:-1, 1:-1].astype(np.uint8)  # WALL == 1
        obs[self._rows, self.treasure[:, 0], self.treasure[:, 1]] = TREASURE
        obs[self._rows, self.agent[:, 0], self.agent[:, 1]] = 3  # AGENT
        return obs

    def _masks(self) -> np.ndarray:
        target = self.agent[:, None, :] + TREASURE_MOVES[None]  # (N, 4, 2)
        return (~self.walls[self._rows[:, None], target[..., 0] + 1, target[..., 1] + 1]).astype(
            np.int8
        )


def make_batched(num_envs: int, *, env_class: type, **kwargs: Any) -> _BatchedBase:
    """The batched engine of ``env_class`` (:class:`BatchedTreasureEnv` for Treasure).

    Raises:
        TypeError: ``env_class`` has no batched engine.
    """
    if env_class is TreasureEnv:
        return BatchedTreasureEnv(num_envs, **kwargs)
    return BatchedGridEnv(num_envs, env_class, **kwargs)


def _entry(env_class: type) -> Any:
    def make(num_envs: int = 1, **kwargs: Any) -> _BatchedBase:
        return make_batched(num_envs, env_class=env_class, **kwargs)

    make.__name__ = make.__qualname__ = f"{env_class.__name__}_vector"
    make.__doc__ = f"``vector_entry_point`` of the {env_class.__name__} rows: a batched engine."
    return make


# ``vector_entry_point`` targets of the grid rows (``verigym.envs.grid.batched:<name>``)
empty_vector = _entry(EmptyEnv)
four_rooms_vector = _entry(FourRoomsEnv)
maze_vector = _entry(MazeEnv)
lava_crossing_vector = _entry(LavaCrossingEnv)
doorkey_vector = _entry(DoorKeyEnv)
multiroom_vector = _entry(MultiRoomEnv)
key_corridor_vector = _entry(KeyCorridorEnv)
goto_object_vector = _entry(GoToObjectEnv)
icelake_vector = _entry(IceLakeEnv)
treasure_vector = _entry(TreasureEnv)
