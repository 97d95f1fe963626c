"""A curriculum over task distributions driven by live learning signal (DUMP-style UCB).

Each *arm* is a task distribution (an env id, or one difficulty variant of it). After every GRPO
batch the trainer reports, per arm, the absolute advantages of the episodes it sampled and their
success. An arm's score is the mean absolute advantage over its last ``window`` episodes -- high
where the policy sometimes succeeds and sometimes fails, zero where it always (or never) succeeds --
plus a UCB exploration bonus; arms are drawn from ``softmax(score / temperature)``.

Source: Wang et al., "DUMP: Automated Distribution-Level Curriculum Learning for RL-based LLM
Post-training" (2025): UCB over the expected absolute advantage, window 300, temperature 0.1.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

import numpy as np

__all__ = ["UCBCurriculum"]


class UCBCurriculum:
    """Sample task distributions by UCB on their recent mean absolute advantage.

    Args:
        num_arms: number of task distributions (>= 1).
        window: episodes remembered per arm.
        temperature: softmax temperature over the UCB scores (> 0); small is greedy.
        exploration: weight ``c`` of the bonus ``c * sqrt(2 ln N / n_i)``.

    Raises:
        ValueError: an argument out of range.
    """

    def __init__(
        self,
        num_arms: int,
        *,
        window: int = 300,
        temperature: float = 0.1,
        exploration: float = 1.0,
    ):
        if num_arms < 1:
            raise ValueError(f"num_arms must be >= 1, got {num_arms}")
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.num_arms = num_arms
        self.temperature = float(temperature)
        self.exploration = float(exploration)
        self._signal = [deque(maxlen=window) for _ in range(num_arms)]
        self._success = [deque(maxlen=window) for _ in range(num_arms)]
        self._pulls = np.zeros(num_arms, dtype=np.int64)

    def scores(self) -> np.ndarray:
        """float64 array of shape (num_arms,): UCB score of each arm (``inf`` for unseen arms)."""
        total = max(1, int(self._pulls.sum()))
        out = np.full(self.num_arms, np.inf)
        for i, signal in enumerate(self._signal):
            if self._pulls[i]:
                bonus = self.exploration * math.sqrt(2.0 * math.log(total) / self._pulls[i])
                out[i] = float(np.mean(signal)) + bonus
        return out

    def probabilities(self) -> np.ndarray:
        """float64 array of shape (num_arms,): the sampling distribution (unseen arms first)."""
        scores = self.scores()
        unseen = np.isinf(scores)
        if unseen.any():
            return unseen / unseen.sum()
        z = (scores - scores.max()) / self.temperature
        p = np.exp(z)
        return p / p.sum()

    def sample(self, rng: np.random.Generator) -> int:
        """Draw one arm index."""
        return int(rng.choice(self.num_arms, p=self.probabilities()))

    def update(self, arm: int, abs_advantages: Sequence[float], successes: Sequence[bool]) -> None:
        """Record one group of episodes drawn from ``arm``.

        Raises:
            IndexError: ``arm`` out of range.
        """
        if not 0 <= arm < self.num_arms:
            raise IndexError(f"arm {arm} out of range 0..{self.num_arms - 1}")
        self._signal[arm].extend(float(a) for a in abs_advantages)
        self._success[arm].extend(bool(s) for s in successes)
        self._pulls[arm] += 1

    def success_rates(self) -> list[float | None]:
        """Recent success rate per arm (``None`` before its first episode)."""
        return [float(np.mean(s)) if s else None for s in self._success]
