"""The template every multi-turn text game of the family follows (the MiniGrid pattern).

A game subclasses :class:`TextGameEnv` and implements four hooks: ``_new_task()`` (draw the task
from ``self.np_random``), ``_parse(text)`` (text -> move, raising ``ActionParseError``),
``_play(move)`` (apply a legal move, return feedback and whether the goal is reached) and
``oracle_action()``. The base class owns the turn budget, the malformed-action penalty, the
episode-end verdict and the ``ansi`` rendering, so every game ends episodes the same way.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from verigym.core import (
    ACTION_CANDIDATES,
    CANDIDATE_MASK,
    ActionParseError,
    EpisodeGuard,
    UnicodeText,
    action_error_info,
    episode_end,
)
from verigym.kwargs_policy import FloatRange, OneOf, client
from verigym.render_modes import accept_render_mode
from verigym.validation import check_int, check_number
from verigym.verifiers import strip_think

__all__ = ["DIFFICULTIES", "ReplySpace", "TextGameEnv", "visible_text"]

DIFFICULTIES = ("easy", "medium", "hard")
"""The difficulty levels of the procedural games."""

MAX_REPLY = 8192
"""Longest reply the games read, in characters."""


class ReplySpace(UnicodeText):
    """The action space of the text envs: any ``str`` of at most ``max_length`` characters.

    Like :class:`verigym.core.UnicodeText`, but ``sample()`` draws short replies (1 to 64
    printable characters), what a random agent types, instead of strings of up to
    ``max_length`` characters that would make random rollouts slow.
    """

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is not None or probability is not None:
            return super().sample(mask=mask, probability=probability)
        length = int(self.np_random.integers(1, 65))
        return "".join(
            self.character_list[int(i)]
            for i in self.np_random.integers(len(self.character_list), size=length)
        )


def visible_text(text: Any, limit: int = MAX_REPLY) -> str:
    """The reply outside ``<think>``, stripped and lower-cased.

    Raises:
        TypeError: ``text`` is not a ``str``.
        ActionParseError: it is empty or longer than ``limit`` characters.
    """
    if not isinstance(text, str):
        raise TypeError(f"text games take str actions, got {type(text).__name__}: {text!r:.80}")
    if len(text) > limit:
        raise ActionParseError(f"your reply has {len(text)} characters; at most {limit} are read")
    visible = strip_think(text).strip().lower()
    if not visible:
        raise ActionParseError("empty reply; write your move")
    return visible


class TextGameEnv(EpisodeGuard, gym.Env[str, str]):
    """Base class of the multi-turn text games (see the module docstring).

    Subclasses set ``max_turns`` in ``__init__`` (before calling :meth:`_init_base`) and may return
    a finite move list from :meth:`action_candidates` (it goes to ``info["action_candidates"]``)
    and, when some of them are illegal in the current state, :meth:`legal_candidates` (the mask of
    the legal ones goes to ``info["candidate_mask"]``).
    Reward: ``+1`` on the solving turn; ``invalid_action_reward`` for a malformed or illegal move
    (the turn is spent); ``0`` otherwise. Episodes end when solved (terminated, success), when the
    game is lost (terminated, no success) or when ``max_turns`` are spent (truncated); after that,
    ``step`` raises :class:`verigym.core.EpisodeEndedError` until ``reset``.
    """

    metadata = {"render_modes": ["ansi"], "family": "text"}

    remote_kwargs = {
        "difficulty": client(OneOf(DIFFICULTIES)),
        "invalid_action_reward": client(FloatRange(-1.0, 0.0)),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""
    partial_reward_on_loss = False
    """When True, a move that loses the game is rewarded with :meth:`_partial_score` (Shop)."""

    def _init_base(
        self, *, max_turns: int, invalid_action_reward: float, render_mode: str | None
    ) -> None:
        self.max_turns = check_int("max_turns", max_turns, 1)
        self.invalid_action_reward = check_number("invalid_action_reward", invalid_action_reward)
        self.render_mode = accept_render_mode(render_mode, self.metadata["render_modes"])
        self.observation_space = UnicodeText(1 << 14)
        self.action_space = ReplySpace(MAX_REPLY)
        self._turn = 0
        self._last = ""

    # -- hooks ---------------------------------------------------------------------------------------
    def _new_task(self) -> str:
        """Draw a task from ``self.np_random``; return the opening observation text."""
        raise NotImplementedError

    def _parse(self, text: str) -> Any:
        """Parse visible reply text (stripped, lower case) into a move or raise ActionParseError."""
        raise NotImplementedError

    def _play(self, move: Any) -> tuple[str, bool, bool]:
        """Apply a parsed move: (feedback, solved, lost)."""
        raise NotImplementedError

    def _partial_score(self) -> float:
        """The score in [0, 1] of an episode that ends unsolved (default 0)."""
        return 0.0

    def task_fingerprint(self) -> dict[str, Any]:
        """The game's drawn state (the hidden word, code or board; :func:`verigym.task_split.plain_state`
        without the turn counter), the hidden target of the task's content hash."""
        from verigym.task_split import plain_state

        return plain_state(self, exclude=("_turn",))

    def oracle_action(self) -> str:
        """The scripted solver's reply in the current state."""
        raise NotImplementedError

    def action_candidates(self) -> list[str] | None:
        """The finite set of replies, if the game has one (for the tensor view)."""
        return None

    def legal_candidates(self) -> list[str] | None:
        """The candidates that are legal moves now (the game's own legality, e.g. Hangman's untried
        letters); default: every candidate of :meth:`action_candidates`."""
        return self.action_candidates()

    # -- TextInterface -------------------------------------------------------------------------------
    def observation_text(self, observation: str) -> str:
        return observation

    def parse_action(self, text: str) -> Any:
        """Parse a reply into a move.

        Raises:
            TypeError: ``text`` is not a ``str``.
            ActionParseError: the reply is empty, too long or not a legal move.
        """
        return self._parse(visible_text(text))

    # -- Gymnasium API ----------------------------------------------------------------------------
    def _info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"turn": self._turn}
        candidates = self.action_candidates()
        if candidates is not None:
            info[ACTION_CANDIDATES] = candidates
            legal = set(self.legal_candidates() or ())
            info[CANDIDATE_MASK] = np.fromiter(
                (c in legal for c in candidates), dtype=np.int8, count=len(candidates)
            )
        return info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._turn = 0
        self._last = f"{self._new_task()}\nYou have {self.max_turns} turns."
        info = self._info()
        info["instructions"] = (
            self.instructions()
        )  # docs/design.md 2: rules in the reset info, no wrapper needed
        return self._last, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._turn += 1
        prefix = f"Turn {self._turn}/{self.max_turns}."
        error = None
        try:
            move = self.parse_action(action)
        except ActionParseError as exc:
            error = str(exc)
        solved = lost = False
        if error is None:
            try:
                feedback, solved, lost = self._play(move)
            except ActionParseError as exc:  # legal form, illegal in this state
                error = str(exc)
        info = self._info()
        if error is not None:
            action_error_info(error, info)
            feedback = f"Invalid move: {error}"
            reward = self.invalid_action_reward
        else:
            reward = (
                1.0
                if solved
                else (self._partial_score() if lost and self.partial_reward_on_loss else 0.0)
            )
        terminated = solved or lost
        truncated = not terminated and self._turn >= self.max_turns
        if terminated or truncated:
            episode_end(info, success=solved, score=1.0 if solved else self._partial_score())
        self._last = f"{prefix} {feedback}"
        return self._last, reward, terminated, truncated, info

    def render(self) -> str | None:
        return self._last if self.render_mode == "ansi" else None
