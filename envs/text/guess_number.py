"""GuessNumber: the reference natively-text environment (the README's tutorial)."""

from __future__ import annotations

import math
import re
from typing import Any

import gymnasium as gym

from verigym.core import ActionParseError, EpisodeGuard, UnicodeText, action_error_info, episode_end
from verigym.kwargs_policy import FloatRange, IntRange, client
from verigym.render_modes import accept_render_mode
from verigym.validation import check_int, check_number

__all__ = ["GuessNumberEnv", "extract_final_integer"]

_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
_INTEGER = re.compile(r"[-+]?\d{1,30}")


def extract_final_integer(text: str) -> int:
    """The last integer of ``text`` outside any ``<think>...</think>`` block.

    Raises:
        ActionParseError: no integer found.
    """
    visible = _THINK.sub(" ", text)
    found = _INTEGER.findall(visible)
    if not found:
        raise ActionParseError("no integer found in your reply; reply with your guess, e.g. 42")
    return int(found[-1])


class GuessNumberEnv(EpisodeGuard, gym.Env[str, str]):
    """Guess a secret integer from "higher"/"lower" feedback.

    ## Description
    The env draws a secret integer uniformly from ``[1, max_number]``. Each turn the agent guesses;
    the env answers whether the secret is higher or lower. Binary search solves it in
    ``ceil(log2(max_number + 1))`` guesses, the turn budget is that plus ``slack_turns``.

    ## Action Space
    ``UnicodeText(8192)``: the agent's reply. The guess is the **last integer** in the reply outside
    ``<think>...</think>``; a longer reply is malformed.

    ## Observation Space
    ``UnicodeText``: the feedback text, e.g. ``"Turn 2/9. 37 is too low: the number is higher."``.

    ## Rewards
    ``+1`` on the turn the secret is guessed (``score = 1``); ``0`` otherwise. A reply with no integer
    or a guess outside ``[1, max_number]`` costs the turn, gets reward ``invalid_action_reward``
    (default ``-0.1``) and ``info["action_error"]``.

    ## Starting State
    ``secret ~ U{1, max_number}`` from the reset seed.

    ## Episode End
    Terminated when the guess is right (``success=True``); truncated when the turn budget is spent
    (``success=False, score=0``). Both steps carry ``info["success"]`` and ``info["score"]``.

    ## Arguments
    * ``max_number`` (int, >= 2): the secret's upper bound.
    * ``slack_turns`` (int, >= 0): turns beyond the binary-search optimum.
    * ``invalid_action_reward`` (float): reward for an unreadable or out-of-range guess.

    ## Version History
    * v0: initial version.
    """

    metadata = {"render_modes": ["ansi"], "family": "text"}

    remote_kwargs = {
        "max_number": client(IntRange(2, 1_000_000)),
        "slack_turns": client(IntRange(0, 10)),
        "invalid_action_reward": client(FloatRange(-1.0, 0.0)),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(
        self,
        *,
        max_number: int = 100,
        slack_turns: int = 2,
        invalid_action_reward: float = -0.1,
        render_mode: str | None = None,
    ):
        self.max_number = check_int("max_number", max_number, 2)
        self.max_turns = math.ceil(math.log2(max_number + 1)) + check_int(
            "slack_turns", slack_turns, 0
        )
        self.invalid_action_reward = check_number("invalid_action_reward", invalid_action_reward)
        self.render_mode = accept_render_mode(render_mode, self.metadata["render_modes"])
        self.observation_space = UnicodeText(512)
        self.action_space = UnicodeText(8192)
        self._secret = 1
        self._turn = 0
        self._low, self._high = 1, max_number
        self._last = ""

    # -- TextInterface -------------------------------------------------------------------------------
    def instructions(self) -> str:
        return (
            f"I am thinking of an integer from 1 to {self.max_number}. Guess it in at most "
            f"{self.max_turns} turns. After each guess I say whether the number is higher or lower. "
            "Reply with your guess; the last integer in your reply counts."
        )

    def observation_text(self, observation: str) -> str:
        return observation

    def parse_action(self, text: str) -> int:
        """The guess in ``text``.

        Raises:
            TypeError: ``text`` is not a ``str``.
            ActionParseError: no integer, or one outside ``[1, max_number]``.
        """
        if not isinstance(text, str):
            raise TypeError(
                f"GuessNumberEnv takes str actions, got {type(text).__name__}: {text!r:.80}"
            )
        if len(text) > self.action_space.max_length:
            raise ActionParseError(
                f"your reply has {len(text)} characters; at most {self.action_space.max_length} are read"
            )
        guess = extract_final_integer(text)
        if not 1 <= guess <= self.max_number:
            raise ActionParseError(f"{guess} is outside 1..{self.max_number}")
        return guess

    def task_fingerprint(self) -> int:
        """The secret (the hidden target of the task; :meth:`verigym.core.EpisodeGuard.task_fingerprint`)."""
        return int(self._secret)

    # -- oracle -----------------------------------------------------------------------------------
    def oracle_action(self) -> str:
        """Binary search over the interval still consistent with the feedback."""
        return str((self._low + self._high) // 2)

    # -- Gymnasium API ----------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._secret = int(self.np_random.integers(1, self.max_number + 1))
        self._turn = 0
        self._low, self._high = 1, self.max_number
        self._last = f"Turn 0/{self.max_turns}. {self.instructions()}"
        return self._last, {"turn": 0, "instructions": self.instructions()}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._turn += 1
        info: dict[str, Any] = {"turn": self._turn}
        reward, terminated = 0.0, False
        prefix = f"Turn {self._turn}/{self.max_turns}."
        try:
            guess = self.parse_action(action)
        except ActionParseError as exc:
            action_error_info(str(exc), info)
            reward = self.invalid_action_reward
            self._last = f"{prefix} Invalid guess: {exc}."
        else:
            if guess == self._secret:
                reward, terminated = 1.0, True
                self._last = f"{prefix} {guess} is correct!"
            elif guess < self._secret:
                self._low = max(self._low, guess + 1)
                self._last = f"{prefix} {guess} is too low: the number is higher."
            else:
                self._high = min(self._high, guess - 1)
                self._last = f"{prefix} {guess} is too high: the number is lower."
        truncated = not terminated and self._turn >= self.max_turns
        if terminated or truncated:
            episode_end(info, success=terminated, score=1.0 if terminated else 0.0)
        return self._last, reward, terminated, truncated, info

    def render(self) -> str | None:
        return self._last if self.render_mode == "ansi" else None
