"""NetHack through the NetHack Learning Environment's core (``nle.nethack.Nethack``) as a verigym env.

Install: ``pip install 'verigym[nethack]' && pip install --no-deps 'nle>=1.3,<1.4'``. nle pins
``gymnasium==1.2.0``, which would downgrade verigym's Gymnasium, so it is installed without its
dependencies; the ``nethack`` extra declares what nle needs at run time (numpy). Only
nle's core is used, never its Gymnasium env, so verigym's Gymnasium applies. NetHack and nle are
under the NetHack General Public License, which is not MIT: the extra is optional, never a default
dependency, and the NetHack ids are registered only where nle is installed
(:data:`verigym.envs.world.table.ROWS`).

Observation: the ``uint8 (24, 80)`` terminal screen (``tty_chars``: the message line, the map,
the two bottom status lines). Action: ``Discrete(len(ACTIONS))`` over nle's useful actions, each
with a name for the text view (``north``, ``far east``, ``down``, ``search``, ``eat``, ...).
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from verigym.core import (
    ActionParseError,
    EpisodeGuard,
    action_error_info,
    coerce_action,
    episode_end,
)
from verigym.kwargs_policy import IntRange, OneOf, client, operator_only
from verigym.render_modes import accept_render_mode
from verigym.validation import check_choice, check_int

__all__ = [
    "DEPTH_PROGRESSION",
    "LEVEL_PROGRESSION",
    "MAX_DEPTH",
    "MAX_LEVEL",
    "NetHackEnv",
    "action_names",
    "import_nle",
    "progression",
]

MAX_DEPTH = 50
"""Deepest dungeon level counted by the progression (the Astral Plane is below ~50)."""
MAX_LEVEL = 30
"""Highest experience level."""
# BALROG's NetHack progression (balrog/environments/nle/achievements.json, MIT, read for its numbers):
# the share of human games (NAO) that reached a dungeon level or an experience level and went on to
# ascend, rounded here to 6 decimals. Levels 1 count 0, as in BALROG.
DEPTH_PROGRESSION = (
    0.0, 0.015392, 0.01754, 0.021221, 0.026482, 0.035429, 0.048461, 0.069581, 0.097709, 0.125586,
    0.161268, 0.206129, 0.256604, 0.292472, 0.308812, 0.324907, 0.340079, 0.352646, 0.365488,
    0.378957, 0.392937, 0.408323, 0.425836, 0.445181, 0.466376, 0.506761, 0.554357, 0.601565,
    0.646505, 0.691311, 0.710109, 0.717646, 0.723212, 0.728441, 0.732776, 0.736853, 0.742146,
    0.747132, 0.753731, 0.76104, 0.767408, 0.772534, 0.777163, 0.781257, 0.785899, 0.789026,
    0.792972, 0.796741, 0.801847, 0.806796,
)  # fmt: skip
"""BALROG's progression of dungeon level ``d`` (1-50): ``DEPTH_PROGRESSION[d - 1]``."""
LEVEL_PROGRESSION = (
    0.0, 0.018478, 0.020812, 0.02416, 0.029109, 0.036888, 0.050758, 0.074536, 0.11705, 0.1791,
    0.254804, 0.332649, 0.414426, 0.494039, 0.577882, 0.626122, 0.656282, 0.681022, 0.701533,
    0.717449, 0.728698, 0.7371, 0.744345, 0.751345, 0.758554, 0.764215, 0.770338, 0.775981,
    0.778335, 0.780456,
)  # fmt: skip
"""BALROG's progression of experience level ``x`` (1-30): ``LEVEL_PROGRESSION[x - 1]``."""
MAX_GAME_SCORE = 10_000
"""In-game points that make a ``score`` of 1 on the ``-Score`` rows (clipped there)."""
_COMPASS = {"N": "north", "E": "east", "S": "south", "W": "west"}
_COMPASS |= {"NE": "northeast", "SE": "southeast", "SW": "southwest", "NW": "northwest"}


def import_nle() -> Any:
    """``nle.nethack``.

    Raises:
        ImportError: nle is not installed; the message names the extra to install.
    """
    try:
        from nle import nethack
    except ImportError as exc:
        raise ImportError(
            f"the NetHack envs need nle ({exc}): pip install 'verigym[nethack]' && pip install "
            "--no-deps 'nle>=1.3,<1.4' (--no-deps: nle pins gymnasium==1.2.0; NetHack GPL)"
        ) from exc
    return nethack


def progression(depth: int, experience_level: int) -> float:
    """BALROG's NetHack progression of a game that reached ``depth`` and ``experience_level``.

    The larger of :data:`DEPTH_PROGRESSION` at the depth and :data:`LEVEL_PROGRESSION` at the
    experience level, each clipped to its table (a depth below 1 counts as 1, below the Astral
    Plane as 50). A float in [0, 0.81].

    Raises:
        TypeError: an argument is not an int.
    """
    for name, value in (("depth", depth), ("experience_level", experience_level)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    depth_score = DEPTH_PROGRESSION[min(max(int(depth), 1), MAX_DEPTH) - 1]
    level_score = LEVEL_PROGRESSION[min(max(int(experience_level), 1), MAX_LEVEL) - 1]
    return max(depth_score, level_score)


def _name(action: Any) -> str:
    kind, name = type(action).__name__, action.name
    if kind == "CompassDirection":
        return _COMPASS[name]
    if kind == "CompassDirectionLonger":
        return f"far {_COMPASS[name]}"
    return name.lower().replace("_", " ")


def action_names(nethack: Any) -> tuple[tuple[str, int], ...]:
    """(name, key code) of each action of nle's ``USEFUL_ACTIONS``, in its order, one per key."""
    seen: dict[int, str] = {}
    for action in nethack.USEFUL_ACTIONS:
        seen.setdefault(int(action), _name(action))
    return tuple((name, key) for key, name in seen.items())


class NetHackEnv(EpisodeGuard, gym.Env[np.ndarray, np.int64]):
    """NetHack 3.6 (``verigym/NetHack-v0``, ``verigym/NetHack-Score-v0``).

    Observation: ``uint8 (24, 80)``, the terminal's characters. Action: ``Discrete(n)``, the keys
    of nle's useful actions (:attr:`actions`: ``(name, key)``). A malformed action (not an int in
    range) waits a turn (``.``) and sets ``info["action_error"]``.

    Reward: 0 each step but the last, which pays the episode's ``score``. Episode end: terminated
    when the game ends (death), truncated after ``max_steps`` keys. ``score``: with
    ``score_by="progression"``, BALROG's progression (:func:`progression`: the larger of its
    table's values for the deepest dungeon level and the highest experience level reached, the
    share of human games that reached them and ascended; 0 at the start, 0.81 at level 50); with
    ``score_by="game"``, the in-game score over :data:`MAX_GAME_SCORE`, clipped at 1. ``success``:
    the deepest level reached is at least ``goal_depth``. Every step's info holds ``depth``,
    ``max_depth``, ``experience_level`` and ``game_score``.

    Seeding: ``reset(seed=s)`` draws NetHack's core, display and level-generation seeds from
    ``np_random`` (no reseeding during the game; the moon phase fixed). Pickling and deep copies
    replay the episode's keys on a new game (NetHack's state lives in C).

    Args:
        score_by: ``"progression"`` or ``"game"``.
        goal_depth: dungeon level whose reaching is a success.
        max_steps: keys per episode (2000 by default, so that ``verigym check``'s random play
            sees episodes end; an operator may allow up to 100000).
        render_mode: ``"ansi"`` (the screen as text); another mode renders nothing.

    Raises:
        ImportError: nle is not installed (``pip install 'verigym[nethack]'``).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "family": "world"}
    remote_kwargs = {
        "score_by": client(OneOf(("progression", "game"))),
        "goal_depth": client(IntRange(1, MAX_DEPTH)),
        "max_steps": operator_only(IntRange(1, 100_000), why="raises the cost of an episode"),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(
        self,
        *,
        score_by: str = "progression",
        goal_depth: int = 2,
        max_steps: int = 2_000,
        render_mode: str | None = None,
    ):
        self.score_by = check_choice("score_by", score_by, ("progression", "game"))
        self.goal_depth = check_int("goal_depth", goal_depth, 1, MAX_DEPTH)
        self.max_steps = check_int("max_steps", max_steps, 1, 100_000)
        self.render_mode = accept_render_mode(render_mode, self.metadata["render_modes"])
        nethack = import_nle()
        self.actions = action_names(nethack)
        self.action_space = spaces.Discrete(len(self.actions))
        self.observation_space = spaces.Box(0, 255, (24, 80), np.uint8)
        self._seeds: tuple[int, int, int] = (0, 0, 0)
        self._keys: list[int] = []
        self._screen = np.zeros((24, 80), np.uint8)
        self._stats = np.zeros(nethack.NLE_BLSTATS_SIZE, np.int64)
        self._max_depth = self._max_level = 1
        self._done = False
        self._game: Any = None
        self._new_game()

    def _new_game(self) -> None:
        nethack = import_nle()
        # copy=True: each env gets its own copy of the NetHack library (its C globals are
        # per library); ttyrec=None: nothing is written to the working directory
        self._game = nethack.Nethack(
            observation_keys=("tty_chars", "blstats"),
            ttyrec=None,
            copy=True,
            fix_moon_phase=True,
        )

    def _observe(self, obs: Any) -> None:
        self._screen = np.array(obs[0], np.uint8)
        self._stats = np.array(obs[1], np.int64)
        nethack = import_nle()
        self._max_depth = max(self._max_depth, int(self._stats[nethack.NLE_BL_DEPTH]))
        self._max_level = max(self._max_level, int(self._stats[nethack.NLE_BL_XP]))

    def _start(self) -> None:
        """Start the game of ``self._seeds`` and replay ``self._keys`` on it."""
        keys, self._keys = self._keys, []
        self._max_depth = self._max_level = 1
        self._game.set_initial_seeds(*self._seeds[:2], False, self._seeds[2])
        self._observe(self._game.reset())
        self._done = False
        for key in keys:
            self._press(key)

    def _press(self, key: int) -> None:
        obs, done = self._game.step(key)
        self._keys.append(key)
        self._observe(obs)
        self._done = bool(done)

    def _info(self) -> dict[str, Any]:
        nethack = import_nle()
        return {
            "depth": int(self._stats[nethack.NLE_BL_DEPTH]),
            "max_depth": self._max_depth,
            "experience_level": self._max_level,
            "game_score": int(self._stats[nethack.NLE_BL_SCORE]),
        }

    def score(self) -> float:
        """The episode's score so far (see the class docstring), in [0, 1]."""
        if self.score_by == "game":
            return min(1.0, max(0, int(self._stats[import_nle().NLE_BL_SCORE])) / MAX_GAME_SCORE)
        return progression(self._max_depth, self._max_level)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._seeds = tuple(int(s) for s in self.np_random.integers(1, 2**62, size=3))
        self._keys = []
        if self._game is None:
            self._new_game()
        self._start()
        return self._screen.copy(), self._info()

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._game is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        error = None
        try:
            index = int(coerce_action(self.action_space, action))
        except ActionParseError as exc:
            index, error = self.action_names().index("wait"), f"{exc}; see the action names"
        self._press(self.actions[index][1])
        info = self._info()
        if error is not None:
            action_error_info(error, info)
        terminated = self._done or self._task_over()
        truncated = not terminated and len(self._keys) >= self.max_steps
        reward = 0.0
        if terminated or truncated:
            reward = self.score()
            episode_end(info, success=self._succeeded(), score=reward)
        return self._screen.copy(), reward, terminated, truncated, info

    def _succeeded(self) -> bool:
        """The verdict: the deepest level reached is at least ``goal_depth``."""
        return self._max_depth >= self.goal_depth

    def _task_over(self) -> bool:
        """Whether the task ended the episode before the game did (never, for the whole game)."""
        return False

    def render(self) -> str | None:
        return self.screen_text(self._screen) if self.render_mode == "ansi" else None

    def close(self) -> None:
        game, self._game = self._game, None
        if game is not None:
            game.close()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_game"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._new_game()
        self._start()

    def task_fingerprint(self) -> dict[str, Any]:
        """NetHack's seeds: the dungeon follows from them (the hidden target of the task hash)."""
        return {"seeds": list(self._seeds)}

    # -- text view (TextInterface) ------------------------------------------------------------------
    def action_names(self) -> list[str]:
        return [name for name, _ in self.actions]

    @staticmethod
    def screen_text(observation: Any) -> str:
        """The terminal screen as 24 lines, trailing blanks cut."""
        rows = np.asarray(observation, np.uint8).reshape(24, 80)
        return "\n".join(bytes(r).decode("latin-1").rstrip() for r in rows).rstrip("\n")

    def instructions(self) -> str:
        goal = (
            f"reach dungeon level {self.goal_depth} (go down the stairs '>' with 'down')"
            if self.goal_depth > 1
            else "stay alive"
        )
        measure = (
            "your in-game score"
            if self.score_by == "game"
            else "the deepest dungeon level and the experience level you reach"
        )
        return (
            "You play NetHack 3.6. The screen is 24 lines: messages on top, the map (@ is you), "
            f"two status lines. Success: {goal}. Score: {measure}. The episode ends when you die "
            f"or after {self.max_steps} keys. Answer '--More--' with 'more'. Reply with exactly one "
            "action name: " + ", ".join(self.action_names())
        )

    def observation_text(self, observation: Any) -> str:
        return self.screen_text(observation)

    def parse_action(self, text: str) -> np.int64:
        """The action a reply names (its last ``<answer>``, else the whole visible reply).

        Raises:
            TypeError: ``text`` is not a ``str``.
            ActionParseError: the reply names no single action.
        """
        from verigym.verifiers import extract_answer

        if not isinstance(text, str):
            raise TypeError(f"NetHack replies are str, got {type(text).__name__}")
        answer = extract_answer(text[-8192:], fallback_to_text=True) or ""
        word = " ".join(answer.strip().strip("`'\".").lower().replace("_", " ").split())
        names = self.action_names()
        if word in names:
            return np.int64(names.index(word))
        raise ActionParseError(
            f"{answer[:60]!r} is not one action name; reply with one of: {', '.join(names)}"
        )

    def action_text(self, action: Any) -> str:
        return self.actions[int(action)][0]
