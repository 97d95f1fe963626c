"""Tiny text tasks a 2-layer character-level model can learn in a minute (GRPO tests, benchmarks)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from verigym.core import ActionParseError, UnicodeText, action_error_info, episode_end

LETTERS = "abcd"


class EchoLetterEnv(gym.Env):
    """Reply with the letter shown: one turn; the first non-space character of the reply counts.

    Observation ``"say x"`` with ``x`` drawn from ``letters``; success iff the reply's first
    non-space character is ``x``. An empty reply is an action error (score 0).
    """

    metadata = {"render_modes": [], "family": "text"}

    def __init__(self, *, letters: str = LETTERS):
        self.letters = letters
        self.observation_space = UnicodeText(64)
        self.action_space = UnicodeText(4096)
        self._target = letters[0]

    def instructions(self) -> str:
        return ""

    def observation_text(self, observation: str) -> str:
        return observation

    def parse_action(self, text: str) -> str:
        stripped = text.strip()
        if not stripped:
            raise ActionParseError("empty reply; reply with one letter")
        return stripped[0]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._target = self.letters[int(self.np_random.integers(len(self.letters)))]
        return f"say {self._target}", {}

    def step(self, action: str):
        info: dict[str, Any] = {}
        try:
            success = self.parse_action(action) == self._target
        except ActionParseError as exc:
            action_error_info(str(exc), info)
            success = False
        episode_end(info, success=success, score=float(success))
        return "done", float(success), True, False, info


class CountdownEnv(gym.Env):
    """A multi-turn task: reply ``go`` ``turns`` times; each observation says how many are left.

    Used to test multi-turn rollouts (env tokens between replies); success iff every reply starts
    with ``g``.
    """

    metadata = {"render_modes": [], "family": "text"}

    def __init__(self, *, turns: int = 3):
        self.turns = turns
        self.observation_space = UnicodeText(64)
        self.action_space = UnicodeText(4096)
        self._left = turns
        self._ok = True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._left, self._ok = self.turns, True
        return f"{self._left} left", {}

    def step(self, action: str):
        self._left -= 1
        self._ok = self._ok and action.strip().startswith("g")
        info: dict[str, Any] = {}
        done = self._left == 0
        if done:
            episode_end(info, success=self._ok, score=float(self._ok))
        return f"{self._left} left", float(done and self._ok), done, False, info
