"""The tensor view of text and GUI environments (docs/design.md section 2, "Two views").

* :class:`CandidateActionWrapper` -- ``Discrete(max_candidates)`` actions over the env's finite
  answer set, read from ``info["action_candidates"]`` (or the env's ``action_candidates()``), with
  ``info["action_mask"]`` the moves legal now.
* :class:`HashedNGramObservation` -- a fixed-size ``float32`` observation from text by feature
  hashing of word n-grams (Weinberger et al. 2009, "Feature Hashing for Large Scale Multitask
  Learning"), independent of ``PYTHONHASHSEED``.
* :class:`ScreenshotClickWrapper` -- GUI envs as pixels in, ``Discrete`` clicks out (a click grid
  or the page's actionable elements), for SB3's ``CnnPolicy`` and other pixel agents.

The same seed gives the same task and the same reward in both views. Like the envs, each wrapper
refuses a ``step`` after the episode ended (:class:`verigym.core.EpisodeGuard`) until ``reset``,
also where it answers an invalid index itself without stepping the env.
"""

from __future__ import annotations

import copy
import re
import zlib
from collections.abc import Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.utils import RecordConstructorArgs

from verigym.core import (
    ACTION_CANDIDATES,
    ACTION_MASK,
    CANDIDATE_MASK,
    ActionParseError,
    EpisodeGuard,
    InvalidActionLimit,
    coerce_action,
)

__all__ = [
    "CandidateActionWrapper",
    "HashedNGramObservation",
    "ScreenshotClickWrapper",
    "hashed_ngrams",
]


class CandidateActionWrapper(EpisodeGuard, gym.Wrapper, RecordConstructorArgs):
    """``Discrete`` actions over a text env's candidate answers, masked to the moves legal now.

    Action ``i`` submits ``candidates[i]``, where ``candidates`` is the list the env put in
    ``info["action_candidates"]`` on the last ``reset``/``step`` (or, if absent there, what
    ``env.unwrapped.action_candidates()`` returns). ``info["action_mask"]`` (``int8`` array of
    shape ``(max_candidates,)``) is 1 for the candidates that are legal moves now, from the env's
    own legality: ``info["candidate_mask"]`` (aligned with the candidates, see
    :class:`verigym.envs.text.base.TextGameEnv`) or ``env.unwrapped.legal_candidates()``; an env
    with neither has every candidate legal. Hangman's tried letters, for instance, are masked out.

    An index with no candidate (or out of range) does not step the env: reward
    ``invalid_action_reward``, ``info["action_error"]``, same observation; the
    ``max_invalid_actions``-th such index in a row truncates the episode with
    ``info["success"]=False`` and ``info["score"]=0.0`` (:class:`verigym.core.InvalidActionLimit`,
    as ``LanguageWrapper`` does). An index whose candidate
    is listed but masked out is passed to the env, which applies its own penalty for an illegal
    move (so both views score the same move the same way).

    The candidate set is never cut: when the env lists more candidates than ``max_candidates``,
    ``reset``/``step`` raise ``ValueError`` (pass a larger ``max_candidates``).

    Args:
        env: a text env that exposes candidates.
        max_candidates: size of the ``Discrete`` action space; ``None`` (default): the number of
            candidates ``env.unwrapped.action_candidates()`` lists on a probe ``reset`` (seed 0), for
            games with a fixed candidate list such as Wordle's 529 words or Hangman's 26 letters.
        invalid_action_reward: reward for choosing an index with no candidate.
        max_invalid_actions: consecutive indices with no candidate that end the episode;
            ``None`` never.

    Raises:
        ValueError: ``max_candidates`` < 1, ``max_invalid_actions`` < 1, or ``None`` and the env
            lists no candidates.
    """

    def __init__(
        self,
        env: gym.Env,
        *,
        max_candidates: int | None = None,
        invalid_action_reward: float = -1.0,
        max_invalid_actions: int | None = 3,
    ):
        invalid = InvalidActionLimit(max_invalid_actions)
        if max_candidates is None:
            max_candidates = self._candidate_count(env)
        if (
            isinstance(max_candidates, bool)
            or not isinstance(max_candidates, (int, np.integer))
            or max_candidates < 1
        ):
            raise ValueError(
                f"max_candidates must be an int >= 1 (or None: from the env), got {max_candidates!r}"
            )
        max_candidates = int(max_candidates)
        RecordConstructorArgs.__init__(
            self,
            max_candidates=max_candidates,
            invalid_action_reward=invalid_action_reward,
            max_invalid_actions=max_invalid_actions,
        )
        gym.Wrapper.__init__(self, env)
        self.max_candidates = max_candidates
        self.invalid_action_reward = float(invalid_action_reward)
        self.max_invalid_actions = max_invalid_actions
        self._invalid = invalid
        self.action_space = spaces.Discrete(max_candidates)
        self._candidates: list[str] = []
        self._legal = np.zeros(0, dtype=np.int8)
        self._last_obs: Any = None

    @staticmethod
    def _candidate_count(env: gym.Env) -> int:
        """The number of candidates ``env`` lists after a probe ``reset(seed=0)`` on a deep copy."""
        probe = copy.deepcopy(env)
        _, info = probe.reset(seed=0)
        found = info.get(ACTION_CANDIDATES)
        if found is None and callable(getattr(probe.unwrapped, "action_candidates", None)):
            found = probe.unwrapped.action_candidates()
        probe.close()
        if not found:
            raise ValueError(
                f"{type(env.unwrapped).__name__} lists no action candidates after reset; it has no tensor view "
                "through CandidateActionWrapper (or pass max_candidates for a game whose list starts empty)"
            )
        return len(found)

    @property
    def candidates(self) -> list[str]:
        """The current candidate answers (index ``i`` of the action space submits ``candidates[i]``)."""
        return list(self._candidates)

    def _update(self, info: dict[str, Any]) -> dict[str, Any]:
        found: Sequence[str] | None = info.get(ACTION_CANDIDATES)
        unwrapped = self.env.unwrapped
        if found is None and callable(getattr(unwrapped, "action_candidates", None)):
            found = unwrapped.action_candidates()
        candidates = [str(c) for c in (found or [])]
        if len(candidates) > self.max_candidates:
            raise ValueError(
                f"{type(unwrapped).__name__} lists {len(candidates)} action candidates but the action space is "
                f"Discrete({self.max_candidates}); cutting the list would hide moves (maybe the answer). Wrap with "
                f"max_candidates>={len(candidates)}, or max_candidates=None to take the size from the env"
            )
        mask = info.get(CANDIDATE_MASK)
        if mask is None or np.shape(mask) != (len(candidates),):
            legal_now = getattr(unwrapped, "legal_candidates", None)
            if callable(legal_now):
                legal = {str(c) for c in (legal_now() or ())}
                mask = [c in legal for c in candidates]
            else:
                mask = np.ones(len(candidates), dtype=np.int8)
        self._candidates = candidates
        self._legal = np.asarray(mask, dtype=np.int8)
        info = dict(info)
        info[ACTION_MASK] = self.action_mask()
        return info

    def action_mask(self) -> np.ndarray:
        """``int8`` array of shape ``(max_candidates,)``: 1 where an index names a legal move now."""
        mask = np.zeros(self.max_candidates, dtype=np.int8)
        mask[: len(self._legal)] = self._legal
        return mask

    def action_masks(self) -> np.ndarray:
        """``bool`` array of shape ``(max_candidates,)``: :meth:`action_mask` under the name
        sb3-contrib's ``MaskablePPO`` calls (no ``ActionMasker`` needed)."""
        return self.action_mask().astype(bool)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        observation, info = self.env.reset(seed=seed, options=options)
        self._invalid.reset()
        self._last_obs = observation
        return observation, self._update(info)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        try:
            index = int(coerce_action(self.action_space, action))
            if index >= len(self._candidates):
                raise ActionParseError(
                    f"action {index} names no candidate; {len(self._candidates)} candidates are available"
                )
        except ActionParseError as exc:
            info, truncated = self._invalid.refuse(str(exc))
            info[ACTION_MASK] = self.action_mask()
            return self._last_obs, self.invalid_action_reward, False, truncated, info
        self._invalid.reset()
        observation, reward, terminated, truncated, info = self.env.step(self._candidates[index])
        self._last_obs = observation
        return observation, reward, terminated, truncated, self._update(info)


_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def hashed_ngrams(text: str, dim: int, ngram_range: tuple[int, int] = (1, 2)) -> np.ndarray:
    """Feature-hash the word n-grams of ``text`` into a ``float32`` vector of shape ``(dim,)``.

    Tokens are lower-cased words and punctuation marks; each n-gram adds +-1 (the sign from a
    second hash) at ``crc32(ngram) % dim``; the vector is L2-normalized (zero for empty text).
    Deterministic across processes (CRC-32, not Python's salted ``hash``).
    """
    tokens = _TOKEN.findall(text.lower())
    vector = np.zeros(dim, dtype=np.float32)
    low, high = ngram_range
    for n in range(low, high + 1):
        for i in range(len(tokens) - n + 1):
            data = " ".join(tokens[i : i + n]).encode("utf-8", "surrogatepass")
            h = zlib.crc32(data)
            vector[h % dim] += 1.0 if (h >> 31) & 1 else -1.0
    norm = float(np.linalg.norm(vector))
    if norm > 0:
        vector /= norm
    return vector


class HashedNGramObservation(EpisodeGuard, gym.ObservationWrapper, RecordConstructorArgs):
    """A fixed-size numeric observation for text envs: hashed word n-grams.

    Observation space: ``Box(-1, 1, shape=(dim,), float32)``, see :func:`hashed_ngrams`.

    Args:
        env: an env whose observations are ``str``.
        dim: vector size.
        ngram_range: smallest and largest n.

    Raises:
        ValueError: ``dim`` < 1 or a bad ``ngram_range``.
    """

    def __init__(self, env: gym.Env, *, dim: int = 1024, ngram_range: tuple[int, int] = (1, 2)):
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        low, high = ngram_range
        if not 1 <= low <= high:
            raise ValueError(f"ngram_range must satisfy 1 <= low <= high, got {ngram_range}")
        RecordConstructorArgs.__init__(self, dim=dim, ngram_range=(low, high))
        gym.ObservationWrapper.__init__(self, env)
        self.dim = dim
        self.ngram_range = (low, high)
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(dim,), dtype=np.float32)

    def observation(self, observation: Any) -> np.ndarray:
        if not isinstance(observation, str):
            raise TypeError(
                f"HashedNGramObservation needs str observations, got {type(observation).__name__}"
            )
        return hashed_ngrams(observation, self.dim, self.ngram_range)


class ScreenshotClickWrapper(EpisodeGuard, gym.Wrapper, RecordConstructorArgs):
    """The tensor view of GUI envs, for pixel-based RL agents (SB3 ``CnnPolicy``, CleanRL's Atari nets).

    Observation: the screenshot, ``Box(0, 255, (height, width, 3), uint8)`` (channel-last RGB),
    resized from the page's viewport with a bilinear filter (``size=None`` keeps the viewport size).

    Action: ``Discrete``, one of

    * ``actions="grid"`` (default): ``Discrete(rows * cols)``; action ``i`` is a real mouse click
      (the env's ``click_xy``) at the centre of cell ``(i // cols, i % cols)`` of a ``rows x cols``
      grid over the viewport. Every cell is always clickable (``info["action_mask"]`` all ones).
    An index outside the action space (NaN, negative, too large) does not touch the page: reward 0,
    ``info["action_error"]``, same observation; the ``max_invalid_actions``-th in a row truncates
    the episode with ``info["success"]=False`` and ``info["score"]=0.0``
    (:class:`verigym.core.InvalidActionLimit`).

    * ``actions="elements"``: ``Discrete(max_elements)``; action ``i`` clicks the page's actionable
      element ``i`` (the env's ``click``, ids of the last observation's element list);
      ``info["action_mask"]`` is 1 for the ids on the page now. An id not on the page gets the
      env's own malformed-action handling (the step is spent, ``info["action_error"]``).

    Rewards, episode ends and ``info`` (``success``/``score`` from the page's verifier) are the
    env's own: the wrapper only translates observations and actions, so the same seed and the same
    clicks give the same reward in every view.

    Args:
        env: a GUI env (``family="gui"``; a ``Dict`` observation with ``"screenshot"`` and the
            ``click_xy``/``click`` ops of :class:`verigym.envs.gui.env.GuiEnv`; the MiniWoB envs too).
        actions: ``"grid"`` or ``"elements"``.
        grid: ``(rows, cols)`` of the click grid, each in 1..64.
        size: ``(height, width)`` of the observation in pixels (each 8..1280), or ``None``.
        max_invalid_actions: consecutive indices outside the action space that end the episode;
            ``None`` never.

    Raises:
        ValueError: bad ``actions``, ``grid``, ``size`` or ``max_invalid_actions``, or ``env`` has
            no screenshot observation.
    """

    def __init__(
        self,
        env: gym.Env,
        *,
        actions: str = "grid",
        grid: tuple[int, int] = (8, 8),
        size: tuple[int, int] | None = (64, 64),
        max_invalid_actions: int | None = 3,
    ):
        invalid = InvalidActionLimit(max_invalid_actions)
        if actions not in ("grid", "elements"):
            raise ValueError(f"actions must be 'grid' or 'elements', got {actions!r}")
        rows, cols = (int(v) for v in grid)
        if not (1 <= rows <= 64 and 1 <= cols <= 64):
            raise ValueError(f"grid must be (rows, cols) with each in 1..64, got {grid!r}")
        observation_space = env.observation_space
        if (
            not isinstance(observation_space, spaces.Dict)
            or "screenshot" not in observation_space.spaces
        ):
            raise ValueError(
                f"ScreenshotClickWrapper needs a GUI env with a 'screenshot' observation, got {observation_space}"
            )
        shot = observation_space["screenshot"]
        viewport = (int(shot.shape[0]), int(shot.shape[1]))
        if size is not None:
            size = (int(size[0]), int(size[1]))
            if not (8 <= size[0] <= 1280 and 8 <= size[1] <= 1280):
                raise ValueError(f"size must be (height, width) with each in 8..1280, got {size!r}")
        RecordConstructorArgs.__init__(
            self,
            actions=actions,
            grid=(rows, cols),
            size=size,
            max_invalid_actions=max_invalid_actions,
        )
        gym.Wrapper.__init__(self, env)
        self.max_invalid_actions = max_invalid_actions
        self._invalid = invalid
        self.mode = actions
        self.grid = (rows, cols)
        self.viewport = viewport
        self.size = size or viewport
        self.max_elements = int(env.unwrapped.max_elements) if actions == "elements" else 0
        self.observation_space = spaces.Box(0, 255, shape=(*self.size, 3), dtype=np.uint8)
        self.action_space = spaces.Discrete(rows * cols if actions == "grid" else self.max_elements)
        self._last_obs = np.zeros(self.observation_space.shape, dtype=np.uint8)
        self._elements = 0

    def cell_centre(self, index: int) -> tuple[int, int]:
        """The viewport pixel ``(x, y)`` that grid action ``index`` clicks."""
        rows, cols = self.grid
        height, width = self.viewport
        row, col = divmod(int(index), cols)
        return int((col + 0.5) * width / cols), int((row + 0.5) * height / rows)

    def _image(self, observation: dict[str, Any]) -> np.ndarray:
        shot = np.asarray(observation["screenshot"], dtype=np.uint8)
        if shot.shape[:2] == tuple(self.size):
            return shot.copy()
        from PIL import Image

        resized = Image.fromarray(shot).resize(
            (self.size[1], self.size[0]), Image.Resampling.BILINEAR
        )
        return np.array(resized, dtype=np.uint8)  # writable (torch warns on read-only arrays)

    def _wrap(
        self, observation: dict[str, Any], info: dict[str, Any]
    ) -> tuple[np.ndarray, dict[str, Any]]:
        self._last_obs = self._image(observation)
        info = dict(info)
        if self.mode == "elements":
            self._elements = sum(
                1 for line in str(observation.get("text", "")).splitlines() if line.startswith("[")
            )
        info[ACTION_MASK] = self.action_mask()
        return self._last_obs, info

    def action_mask(self) -> np.ndarray:
        """``int8`` array of shape ``(n,)``: every grid cell, or the element ids on the page now."""
        if self.mode == "grid":
            return np.ones(self.action_space.n, dtype=np.int8)
        mask = np.zeros(self.max_elements, dtype=np.int8)
        mask[: min(self._elements, self.max_elements)] = 1
        return mask

    def action_masks(self) -> np.ndarray:
        """``bool`` array of shape ``(n,)``: :meth:`action_mask` under the name sb3-contrib's
        ``MaskablePPO`` calls (no ``ActionMasker`` needed)."""
        return self.action_mask().astype(bool)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        observation, info = self.env.reset(seed=seed, options=options)
        self._invalid.reset()
        return self._wrap(observation, info)

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        from verigym.envs.gui.tasks import make_action

        try:
            index = int(coerce_action(self.action_space, action))
        except ActionParseError as exc:
            info, truncated = self._invalid.refuse(
                f"{exc}; choose an action in 0..{self.action_space.n - 1}"
            )
            info[ACTION_MASK] = self.action_mask()
            return self._last_obs, 0.0, False, truncated, info  # the page is not touched (reward 0)
        self._invalid.reset()
        gui_action = (
            make_action("click_xy", xy=self.cell_centre(index))
            if self.mode == "grid"
            else make_action("click", element=index)
        )
        if "to" in self.env.action_space.spaces:  # MiniWoB's drag target, unused by a click
            gui_action["to"] = np.zeros(2, dtype=np.int64)
        observation, reward, terminated, truncated, info = self.env.step(gui_action)
        wrapped, info = self._wrap(observation, info)
        return wrapped, reward, terminated, truncated, info
