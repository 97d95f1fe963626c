"""A multi-turn test task (the single-turn one, EchoLetterEnv, lives in verigym.agents.llm.tiny)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from verigym.agents.llm.tiny import EchoLetterEnv  # noqa: F401 - re-exported for the tests
from verigym.core import UnicodeText, episode_end


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
