"""LanguageWrapper: any Gymnasium env as a Text -> Text env (the text view, docs/design.md section 2)."""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.utils import RecordConstructorArgs

from verigym.core import (
    ActionParseError,
    EpisodeGuard,
    InvalidActionLimit,
    TextInterface,
    UnicodeText,
)
from verigym.textview import (
    describe_action_space,
    describe_observation_space,
    format_value,
    parse_value,
)

__all__ = ["LanguageWrapper"]


class LanguageWrapper(EpisodeGuard, gym.Wrapper, RecordConstructorArgs):
    """Turn any Gymnasium env into a Text -> Text env, for LLM agents.

    If the unwrapped env implements :class:`verigym.TextInterface`, its ``instructions``,
    ``observation_text`` and ``parse_action`` are used; otherwise generic formatters for the
    ``Discrete``, ``Box``, ``MultiDiscrete``, ``MultiBinary``, ``Dict`` and ``Tuple`` spaces
    (:mod:`verigym.textview`). A natively text env is passed through unchanged.

    Observation space: :class:`verigym.core.UnicodeText` (str). ``info["instructions"]`` holds the
    rules and action format on ``reset``; :meth:`instructions` returns them too.

    Action space: :class:`verigym.core.UnicodeText` of at most ``max_action_length`` characters.

    Malformed actions: text that does not parse (or is too long) does **not** step the inner env.
    The step returns the previous observation text, reward ``invalid_action_reward``,
    ``info["action_error"]`` with the parser's message, and ``terminated=False``. After
    ``max_invalid_actions`` consecutive malformed actions the episode is truncated with
    ``info["success"]=False`` and ``info["score"]=0.0``. (A natively text env handles its own
    malformed replies: it is passed through unchanged.)

    Episode end: after a step that returned ``terminated`` or ``truncated`` -- the inner env's end
    or the wrapper's own truncation -- ``step`` raises :class:`verigym.core.EpisodeEndedError`
    until ``reset`` (:class:`verigym.core.EpisodeGuard`, the base envs' mechanism), before the
    reply is read: a finished episode can neither pay a valid reply nor charge a malformed one.
    :meth:`instructions` tells the agent every way an episode ends (the env's own rules, the step
    limit when the env or its ``TimeLimit`` has one, and the rule for malformed replies).

    Args:
        env: the env to wrap.
        invalid_action_reward: reward for a step whose text did not parse.
        max_invalid_actions: consecutive malformed actions that end the episode; ``None`` never.
        max_action_length: longest accepted action text, in characters.
        precision: significant digits of floats in generic observation text.
    """

    def __init__(
        self,
        env: gym.Env,
        *,
        invalid_action_reward: float = -1.0,
        max_invalid_actions: int | None = 3,
        max_action_length: int = 8192,
        precision: int = 4,
    ):
        if max_action_length < 1:
            raise ValueError(f"max_action_length must be >= 1, got {max_action_length}")
        RecordConstructorArgs.__init__(
            self,
            invalid_action_reward=invalid_action_reward,
            max_invalid_actions=max_invalid_actions,
            max_action_length=max_action_length,
            precision=precision,
        )
        gym.Wrapper.__init__(self, env)
        self.invalid_action_reward = float(invalid_action_reward)
        self.max_invalid_actions = max_invalid_actions
        self._invalid = InvalidActionLimit(max_invalid_actions)
        self.precision = precision
        inner = env.unwrapped
        self._native_text = isinstance(env.observation_space, spaces.Text) and isinstance(
            env.action_space, spaces.Text
        )
        self._interface: TextInterface | None = inner if isinstance(inner, TextInterface) else None
        self.observation_space = (
            env.observation_space if self._native_text else UnicodeText(1 << 20)
        )
        self.action_space = (
            env.action_space if self._native_text else UnicodeText(max_action_length)
        )
        self._last_text = ""

    # -- the text view -------------------------------------------------------------------------
    def instructions(self) -> str:
        """Rules and action format for the agent, ending with how an episode ends
        (:meth:`episode_end_text`)."""
        if self._interface is not None:
            rules = self._interface.instructions()
        else:
            name = (
                self.env.spec.id if self.env.spec is not None else type(self.env.unwrapped).__name__
            )
            rules = (
                f"You are playing the environment {name}. "
                f"{describe_observation_space(self.env.observation_space)} "
                f"{describe_action_space(self.env.action_space)}"
            )
        end = self.episode_end_text()
        return f"{rules}\n{end}" if end else rules

    def step_limit(self) -> int | None:
        """The most steps an episode lasts, or ``None`` when none is known.

        The smallest of the env's own limit (``max_steps`` or ``max_turns`` of the unwrapped env,
        the verigym convention) and Gymnasium's ``TimeLimit`` (``spec.max_episode_steps``).
        """
        limits = [getattr(self.env.unwrapped, name, None) for name in ("max_steps", "max_turns")]
        if self.env.spec is not None:
            limits.append(self.env.spec.max_episode_steps)
        found = [
            int(v)
            for v in limits
            if isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 0
        ]
        return min(found) if found else None

    def episode_end_text(self) -> str:
        """Every way an episode ends besides the task's own end, as one short paragraph for the
        agent (part of :meth:`instructions`): the step limit (:meth:`step_limit`) and, when the
        wrapper reads the replies, the malformed-reply penalty and the streak of them that ends
        the episode. ``""`` when there is nothing to add."""
        ends = []
        limit = self.step_limit()
        if limit is not None:
            ends.append(f"after {limit} {'replies' if self._native_text else 'moves'} at most")
        if not self._native_text and self.max_invalid_actions is not None:
            streak = (
                "1 invalid reply"
                if self.max_invalid_actions == 1
                else f"{self.max_invalid_actions} invalid replies in a row"
            )
            ends.append(f"after {streak} (unsolved, score 0)")
        text = f"The episode also ends {' or '.join(ends)}." if ends else ""
        if not self._native_text:
            text += (
                f" An invalid reply gets reward {self.invalid_action_reward:g} and is not a move."
            )
        return f"Episode end: {text.strip()}" if text else ""

    def observation_text(self, observation: Any) -> str:
        """The inner observation as text."""
        if self._native_text:
            return observation
        if self._interface is not None:
            return self._interface.observation_text(observation)
        space = self.env.observation_space
        if isinstance(space, spaces.Dict):
            return "\n".join(
                f"{k}: {format_value(sub, observation[k], precision=self.precision)}"
                for k, sub in space.spaces.items()
            )
        return format_value(space, observation, precision=self.precision)

    def parse_action(self, text: str) -> Any:
        """Parse the agent's text into an inner action.

        Raises:
            TypeError: ``text`` is not a ``str``.
            ActionParseError: the text is not a valid action.
        """
        if not isinstance(text, str):
            raise TypeError(
                f"LanguageWrapper takes str actions, got {type(text).__name__}: {text!r:.80}"
            )
        if self._native_text:
            return text
        if len(text) > self.action_space.max_length:
            raise ActionParseError(
                f"the action has {len(text)} characters; at most {self.action_space.max_length} are read"
            )
        if self._interface is not None:
            return self._interface.parse_action(text)
        return parse_value(self.env.action_space, text)

    def action_text(self, action: Any) -> str:
        """Format an inner action as text that :meth:`parse_action` reads back (generic spaces)."""
        return format_value(self.env.action_space, action)

    # -- Gymnasium API ---------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        self._invalid.reset()
        self._last_text = self.observation_text(observation)
        info = dict(info)
        info["instructions"] = self.instructions()
        return self._last_text, info

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._native_text:
            return self.env.step(action)
        try:
            inner_action = self.parse_action(action)
        except ActionParseError as exc:
            info, truncated = self._invalid.refuse(str(exc))
            return self._last_text, self.invalid_action_reward, False, truncated, info
        self._invalid.reset()
        observation, reward, terminated, truncated, info = self.env.step(inner_action)
        self._last_text = self.observation_text(observation)
        return self._last_text, reward, terminated, truncated, info
