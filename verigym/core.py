"""The contracts every verigym environment shares (docs/design.md section 2).

* :class:`TextInterface` -- the text view an LLM agent plays through.
* :class:`ActionParseError` -- raised by ``parse_action`` with a message meant for the agent.
* :data:`FAMILIES` -- the family tags.
* The episode-end contract: the step that ends an episode puts ``info["success"]`` (bool) and
  ``info["score"]`` (float in [0, 1]); a malformed or illegal action gets the env's documented
  penalty and ``info["action_error"]`` (str). :func:`episode_end` and :func:`action_error_info`
  build those entries; :func:`coerce_action` turns whatever an agent produced into a valid element
  of a tensor action space or raises :class:`ActionParseError` saying what was wrong.
* The episode boundary: after a step returned ``terminated`` or ``truncated``, ``step`` raises
  :class:`EpisodeEndedError` until ``reset``. :class:`EpisodeGuard`, a base of every family's base
  class, enforces it for every subclass, so no env can pay a second terminal reward or change its
  verdict after the end.

This module imports only numpy and gymnasium's spaces and errors.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from gymnasium import spaces
from gymnasium.error import ResetNeeded

__all__ = [
    "short_repr",
    "ACTION_CANDIDATES",
    "ACTION_ERROR",
    "ACTION_MASK",
    "CANDIDATE_MASK",
    "UnicodeText",
    "ActionParseError",
    "EpisodeEndedError",
    "EpisodeGuard",
    "FAMILIES",
    "OracleInterface",
    "Family",
    "SCORE",
    "SUCCESS",
    "TextInterface",
    "action_error_info",
    "coerce_action",
    "episode_end",
]

Family = Literal["text", "tool", "gui", "grid", "mujoco", "multiagent", "world"]
"""The family tag of an environment, recorded in the registration table and in
``metadata["family"]``."""

FAMILIES: tuple[str, ...] = ("text", "tool", "gui", "grid", "mujoco", "multiagent", "world")

SUCCESS = "success"
"""``info`` key: ``bool``, set on the step that ends an episode; whether the verifier accepted."""
SCORE = "score"
"""``info`` key: ``float`` in [0, 1], set on the step that ends an episode."""
ACTION_ERROR = "action_error"
"""``info`` key: ``str``, set on a step whose action was malformed or illegal; says what was wrong."""
ACTION_CANDIDATES = "action_candidates"
"""``info`` key: ``list[str]``, the finite answer set of a text env, for the tensor view."""
ACTION_MASK = "action_mask"
"""``info`` key: ``int8`` array, 1 where an action is legal."""
CANDIDATE_MASK = "candidate_mask"
"""``info`` key: ``int8`` array of shape ``(len(info["action_candidates"]),)``, 1 where that
candidate is a legal move now (the tensor view's ``action_mask`` comes from it)."""


class ActionParseError(ValueError):
    """An agent's action could not be parsed or is not legal.

    The message is meant for the agent: it says what was wrong and what format is expected, and it
    becomes ``info["action_error"]``. Subclasses :class:`ValueError`.
    """


class EpisodeEndedError(ResetNeeded, RuntimeError):
    """``step`` was called after the episode ended (or a multi-agent game is over); call ``reset``.

    A programmer error of the loop driving the env, not of the agent. Subclasses Gymnasium's
    :class:`gymnasium.error.ResetNeeded` and :class:`RuntimeError`, so either catches it.
    """


def _episode_ended_message(env: Any) -> str:
    return (
        f"{type(env).__name__}.step() was called after the episode ended (the last step returned "
        "terminated or truncated); call reset() to start a new episode"
    )


def _guard_step(step: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a ``step``: refuse to run after the end, and record whether this step ended the episode.

    Nested guarded steps (a subclass ``step`` calling ``super().step``) each assign the flag; the
    outermost, which returns last, has the final word.
    """

    @functools.wraps(step)
    def guarded_step(self: Any, action: Any, *args: Any, **kwargs: Any) -> Any:
        if self._episode_over:
            raise EpisodeEndedError(_episode_ended_message(self))
        result = step(self, action, *args, **kwargs)
        self._episode_over = bool(result[2] or result[3])
        return result

    guarded_step.__episode_guard__ = True  # type: ignore[attr-defined]
    return guarded_step


def _guard_reset(reset: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a ``reset``: a reset that returns starts a new episode, so ``step`` is allowed again."""

    @functools.wraps(reset)
    def guarded_reset(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = reset(self, *args, **kwargs)
        self._episode_over = False
        return result

    guarded_reset.__episode_guard__ = True  # type: ignore[attr-defined]
    return guarded_reset


class EpisodeGuard:
    """Mixin that enforces the episode boundary (docs/design.md section 2) on every subclass.

    Put it first in the bases of a family's base class (``class GridEnv(EpisodeGuard,
    gym.Env[...])``). The ``step`` and ``reset`` of the class and of every subclass (defined there
    or inherited from a base that is no guard) are wrapped when the class is created
    (:meth:`__init_subclass__`), so a new env gets the contract without writing code for it:

    * after a ``step`` that returned ``terminated`` or ``truncated``, the next ``step`` raises
      :class:`EpisodeEndedError` -- before the env's own code runs, so nothing about the finished
      episode (reward, verdict, state) can change;
    * a ``reset`` that returns clears the flag.

    The flag is the instance attribute ``_episode_over`` (class default ``False``), so it is pickled
    and deep-copied with the instance ``__dict__``; an env with a custom ``__getstate__`` must carry
    it over. Stepping before the first ``reset`` is left to the env (and to Gymnasium's
    ``OrderEnforcing`` wrapper that ``gymnasium.make`` adds). The cost is one Python call per step.

    Why wrapping and not a template method (``step`` calling an overridable ``_step``, as
    ``TorchLearner.learn`` calls ``_learn``): an env author -- ours or a plugin's -- writes
    ``step``/``reset`` as every Gymnasium env does, and the guard must hold for the ones who forget
    it exists; a ``_step`` convention would make verigym envs read unlike any other Gymnasium env
    and leave the guard off wherever someone overrode ``step`` after all.
    """

    _episode_over: bool = False
    """Whether the last step ended the episode (``step`` refuses to run until ``reset``)."""

    def task_fingerprint(self) -> Any:
        """The hidden target of the task drawn by the last ``reset`` (what the reset observation and
        info do not show: a secret, a gold answer, hidden tests), as plain data; ``None`` (this
        default) when the observation shows the whole task. Part of the task's content hash
        (:func:`verigym.task_split.task_hash`), which splits training from evaluation tasks; a
        family's base class overrides it."""
        return None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, guard in (("step", _guard_step), ("reset", _guard_reset)):
            # the method the class resolves to, also one inherited from a base that is no guard
            method = getattr(cls, name, None)
            if inspect.isfunction(method) and not getattr(method, "__episode_guard__", False):
                setattr(cls, name, guard(method))


@runtime_checkable
class TextInterface(Protocol):
    """The text view of an environment (docs/design.md section 2, "Two views").

    ``LanguageWrapper`` uses these methods to turn the env into a Text->Text env; an env without
    them gets generic formatters for its spaces.
    """

    def instructions(self) -> str:
        """The rules of the task and the exact action format, as a prompt for an agent."""
        ...

    def observation_text(self, observation: Any) -> str:
        """Render an observation of ``observation_space`` as text."""
        ...

    def parse_action(self, text: str) -> Any:
        """Parse an agent's text into an element of ``action_space``.

        Raises:
            ActionParseError: the text is not a valid action; the message tells the agent why.
        """
        ...


class UnicodeText(spaces.Text):
    """A ``Text`` space of any Python string (natural language, code, JSON) up to ``max_length``.

    Gymnasium's ``Text`` only contains strings over a fixed charset (alphanumerics by default);
    agents write arbitrary unicode. ``contains`` accepts any ``str`` whose length is within
    bounds; ``sample`` draws printable ASCII.

    ``shape`` is ``()`` and ``dtype`` is numpy's ``object``: one string is one element, so a
    library that preallocates ``np.zeros((n_envs, *space.shape), space.dtype)`` for a batch (SB3's
    ``DummyVecEnv``, which ``make_vec_env`` uses) holds whole strings. Gymnasium's ``Text`` has
    no shape and a ``str`` dtype of length 0, which such a buffer cannot hold.
    """

    def __init__(self, max_length: int = 1 << 16, *, min_length: int = 0, seed: int | None = None):
        printable = "".join(chr(c) for c in range(32, 127)) + "\n"
        super().__init__(max_length=max_length, min_length=min_length, charset=printable, seed=seed)
        self._shape = ()
        self.dtype = np.dtype(object)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A random printable-ASCII string of ``min_length`` to ``max(min_length, min(max_length, 64))``
        characters: short, like an agent's reply, and cheap to draw for any ``max_length``."""
        if mask is not None or probability is not None:
            return super().sample(mask=mask, probability=probability)
        high = max(self.min_length, min(self.max_length, 64))
        length = int(self.np_random.integers(self.min_length, high + 1))
        return "".join(self.np_random.choice(self.character_list, size=length))

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, UnicodeText) and (self.min_length, self.max_length) == (
            other.min_length,
            other.max_length,
        )


@runtime_checkable
class OracleInterface(Protocol):
    """An env with a scripted solver (the "oracle" reference agent of the leaderboards).

    ``oracle_action()`` returns the action (an element of ``action_space``) the solver takes in the
    current state; following it from ``reset`` reaches success on (nearly) every seed, which proves
    the generated tasks solvable.
    """

    def oracle_action(self) -> Any: ...


def episode_end(info: dict[str, Any], *, success: bool, score: float) -> dict[str, Any]:
    """Put the verifier's verdict into ``info`` (in place) and return it.

    Args:
        info: the step's info dict.
        success: whether the episode's goal was verified as reached.
        score: the verified score, clipped into [0, 1]; NaN is refused.

    Raises:
        ValueError: ``score`` is NaN.
    """
    score = float(score)
    if score != score:  # NaN
        raise ValueError("score is NaN; a verifier must return a number in [0, 1]")
    info[SUCCESS] = bool(success)
    # min(1.0, max(0.0, score)) without the two calls (-0.0 becomes 0.0 there too)
    info[SCORE] = score if 0.0 < score <= 1.0 else (1.0 if score > 1.0 else 0.0)
    return info


def action_error_info(message: str, info: dict[str, Any] | None = None) -> dict[str, Any]:
    """Return ``info`` with ``info["action_error"] = message`` (truncated to 500 characters)."""
    info = {} if info is None else info
    message = str(message)
    info[ACTION_ERROR] = message if len(message) <= 500 else message[:497] + "..."
    return info


class InvalidActionLimit:
    """Counts a wrapper's consecutive malformed actions and ends the episode at a limit.

    A wrapper that refuses a malformed action without stepping its env (``LanguageWrapper``,
    ``CandidateActionWrapper``, ``ScreenshotClickWrapper``) would otherwise let an agent that
    sends only malformed actions keep an episode going for ever: the env's own step limit never
    counts them. :meth:`refuse` gives the refusal's ``info`` (``info["action_error"]``) and, at the
    ``limit``-th malformed action in a row, truncates with ``info["success"]=False`` and
    ``info["score"]=0.0``.

    Args:
        limit: consecutive malformed actions that end the episode; ``None`` never.

    Raises:
        ValueError: ``limit`` is not ``None`` and < 1.
    """

    def __init__(self, limit: int | None):
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise ValueError(f"max_invalid_actions must be an int >= 1 or None, got {limit!r}")
        self.limit = limit
        self.streak = 0

    def reset(self) -> None:
        """Start counting again (a reset or a well-formed action)."""
        self.streak = 0

    def refuse(self, message: str) -> tuple[dict[str, Any], bool]:
        """Count one malformed action: ``(info with "action_error", truncated)``."""
        self.streak += 1
        info = action_error_info(message)
        truncated = self.limit is not None and self.streak >= self.limit
        if truncated:
            episode_end(info, success=False, score=0.0)
        return info, truncated


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for error messages; never raises on a value too
    large to show (an int of over 4300 digits, a list nested too deep)."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an int of over 4300 digits, a list nested too deep
        text = f"<a {type(value).__name__} too large to show>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def coerce_action(space: spaces.Space, action: Any) -> Any:
    """Return ``action`` as a valid element of ``space`` or raise :class:`ActionParseError`.

    Accepts what agents commonly produce: Python or numpy scalars for ``Discrete``, lists or arrays
    for ``Box``/``MultiDiscrete``/``MultiBinary`` (cast to the space's dtype), dicts and tuples
    recursively. Rejects NaN/inf, out-of-range values, wrong shapes and non-numeric input with a
    message for the agent. ``Text`` actions are checked for type, length and charset.

    Raises:
        ActionParseError: the action is not in ``space``.
    """
    if isinstance(space, spaces.Discrete):
        return _coerce_discrete(space, action)
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        return _coerce_array(space, action)
    if isinstance(space, spaces.Dict):
        if not isinstance(action, Mapping):
            raise ActionParseError(
                f"expected a dict with keys {list(space.spaces)}, got {short_repr(action)}"
            )
        missing = [k for k in space.spaces if k not in action]
        extra = [k for k in action if k not in space.spaces]
        if missing or extra:
            raise ActionParseError(
                f"dict action keys must be {list(space.spaces)}; missing {missing}, unexpected {extra}"
            )
        return {k: coerce_action(sub, action[k]) for k, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        if not isinstance(action, (tuple, list)) or len(action) != len(space.spaces):
            raise ActionParseError(
                f"expected a tuple of {len(space.spaces)} actions, got {short_repr(action)}"
            )
        return tuple(coerce_action(sub, a) for sub, a in zip(space.spaces, action))
    if isinstance(space, spaces.Text):
        if not isinstance(action, str):
            raise ActionParseError(f"expected a string action, got {type(action).__name__}")
        if space.contains(action):
            return action
        raise ActionParseError(
            f"text action must have {space.min_length} to {space.max_length} characters "
            f"from the allowed charset; got {len(action)} characters"
        )
    if space.contains(action):
        return action
    raise ActionParseError(f"action {short_repr(action)} is not in {space}")


def _coerce_discrete(space: spaces.Discrete, action: Any) -> np.int64:
    if isinstance(action, np.ndarray):
        if action.size != 1:
            raise ActionParseError(
                f"expected one integer action, got an array of shape {action.shape}"
            )
        action = action.reshape(()).item()
    if isinstance(action, (bool, np.bool_)) or not isinstance(
        action, (int, np.integer, float, np.floating)
    ):
        raise ActionParseError(
            f"expected an integer action in [{space.start}, {space.start + space.n - 1}], got {short_repr(action)}"
        )
    if isinstance(action, (float, np.floating)):
        if not math.isfinite(action) or action != int(action):
            raise ActionParseError(f"expected an integer action, got {short_repr(action)}")
    value = int(action)
    if not space.start <= value < space.start + space.n:
        raise ActionParseError(
            f"action {short_repr(value)} is out of range; legal actions are {space.start}..{space.start + space.n - 1}"
        )
    return np.int64(value)


def _coerce_array(
    space: spaces.Box | spaces.MultiDiscrete | spaces.MultiBinary, action: Any
) -> np.ndarray:
    try:
        array = np.asarray(action)
    except Exception as exc:  # ragged nested lists and the like
        raise ActionParseError(f"action could not be read as an array: {exc}") from None
    # real numbers only: a complex NaN passed the finite check below (its real part reached
    # MuJoCo's controls) and a timedelta crashed the bounds check
    if array.dtype.kind not in "biuf":
        raise ActionParseError(
            f"expected a numeric array of shape {space.shape}, got {short_repr(action)}"
        )
    if array.shape != space.shape:
        if array.size == int(np.prod(space.shape)) and array.ndim <= 1:
            array = array.reshape(space.shape)
        else:
            raise ActionParseError(f"expected shape {space.shape}, got shape {array.shape}")
    if np.issubdtype(array.dtype, np.floating) and not np.all(np.isfinite(array)):
        raise ActionParseError("action contains NaN or infinity")
    if isinstance(space, spaces.Box):
        low, high = space.low, space.high
        if np.any(array < low) or np.any(array > high):
            raise ActionParseError(
                f"action {short_repr(array.tolist())} is outside the bounds [{short_repr(low.tolist(), 40)}, {short_repr(high.tolist(), 40)}]"
            )
        return array.astype(space.dtype)
    if np.issubdtype(array.dtype, np.floating) and np.any(array != np.round(array)):
        raise ActionParseError(f"expected integers, got {short_repr(array.tolist())}")
    ints = array.astype(np.int64)
    if isinstance(space, spaces.MultiBinary):
        if np.any((ints != 0) & (ints != 1)):
            raise ActionParseError(f"expected 0/1 values, got {short_repr(ints.tolist())}")
        return ints.astype(space.dtype)
    if np.any(ints < space.start) or np.any(ints >= space.start + space.nvec):
        raise ActionParseError(
            f"action {short_repr(ints.tolist())} is out of range; component i must be in [start_i, start_i + nvec_i - 1] with nvec={space.nvec.tolist()}"
        )
    return ints.astype(space.dtype)


# UnicodeText observations through AsyncVectorEnv's shared memory (registered on import; needs
# UnicodeText above): gymnasium.make_vec(text id, vectorization_mode="async") gives real strings.
from verigym import text_shared_memory as _text_shared_memory  # noqa: E402, F401
