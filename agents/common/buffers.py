"""Storage and return computations: GAE, running normalization, a replay buffer with hindsight relabelling."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["ReplayBuffer", "RunningMeanStd", "gae"]


def gae(
    rewards: np.ndarray,
    values: np.ndarray,
    dones: np.ndarray,
    last_value: np.ndarray,
    last_done: np.ndarray,
    gamma: float,
    gae_lambda: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalized advantage estimation (Schulman et al. 2016, "High-Dimensional Continuous Control
    Using Generalized Advantage Estimation").

    Args:
        rewards, values: float32 ``(T, N)``; ``values[t]`` = V(s_t).
        dones: bool/float ``(T, N)``; ``dones[t]`` = whether s_t started a new episode (so the
            step before it does not bootstrap through it).
        last_value: V(s_T), ``(N,)``; last_done: whether s_T starts a new episode, ``(N,)``.

    Returns:
        ``(advantages, returns)``, float32 ``(T, N)``; ``returns = advantages + values``.
    """
    steps = len(rewards)
    advantages = np.zeros_like(rewards, dtype=np.float32)
    last = np.zeros(rewards.shape[1], dtype=np.float32)
    for t in reversed(range(steps)):
        if t == steps - 1:
            next_nonterminal, next_value = 1.0 - last_done, last_value
        else:
            next_nonterminal, next_value = 1.0 - dones[t + 1], values[t + 1]
        delta = rewards[t] + gamma * next_value * next_nonterminal - values[t]
        last = delta + gamma * gae_lambda * next_nonterminal * last
        advantages[t] = last
    return advantages, advantages + values


class RunningMeanStd:
    """Running mean and variance (Chan et al. parallel algorithm) of arrays of ``shape``."""

    def __init__(self, shape: tuple[int, ...] = (), epsilon: float = 1e-4):
        self.mean = np.zeros(shape, dtype=np.float64)
        self.var = np.ones(shape, dtype=np.float64)
        self.count = epsilon

    def update(self, batch: np.ndarray) -> None:
        batch = np.asarray(batch, dtype=np.float64)
        mean, var, count = batch.mean(axis=0), batch.var(axis=0), batch.shape[0]
        delta = mean - self.mean
        total = self.count + count
        self.mean = self.mean + delta * count / total
        self.var = (
            self.var * self.count + var * count + delta**2 * self.count * count / total
        ) / total
        self.count = total

    def normalize(self, x: np.ndarray, clip: float = 10.0) -> np.ndarray:
        return np.clip((x - self.mean) / np.sqrt(self.var + 1e-8), -clip, clip).astype(np.float32)

    def state(self) -> dict[str, np.ndarray]:
        return {"mean": self.mean, "var": self.var, "count": np.array(self.count)}

    def load_state(self, state: dict[str, Any]) -> None:
        self.mean = np.asarray(state["mean"], dtype=np.float64)
        self.var = np.asarray(state["var"], dtype=np.float64)
        self.count = float(np.asarray(state["count"]))


class ReplayBuffer:
    """A ring buffer of transitions over batched observations ``{part key: array}``.

    Stores ``obs``, ``next_obs`` (the true last observation at episode ends), ``actions``,
    ``rewards`` and ``terminated`` (truncation is not a terminal: the target bootstraps).

    With ``her_k > 0`` the buffer also remembers raw goal-conditioned observations (``Dict`` with
    ``observation``/``achieved_goal``/``desired_goal``) per env episode and, when an episode ends,
    adds ``her_k`` relabelled copies of each of its transitions whose goal is an achieved goal from
    later in the same episode (the "future" strategy of Andrychowicz et al. 2017, "Hindsight
    Experience Replay"), rewarded by the env's ``compute_reward(achieved, desired, info)``.

    Args:
        capacity: transitions kept.
        rng: numpy generator for sampling.
    """

    def __init__(self, capacity: int, rng: np.random.Generator):
        self.capacity = capacity
        self.rng = rng
        self.size = 0
        self.pos = 0
        self.data: dict[str, Any] = {}

    def _alloc(self, name: str, value: np.ndarray) -> None:
        self.data[name] = np.zeros((self.capacity, *value.shape[1:]), dtype=value.dtype)

    def add(
        self,
        obs: dict[str, np.ndarray],
        actions: np.ndarray,
        rewards: np.ndarray,
        next_obs: dict[str, np.ndarray],
        terminated: np.ndarray,
    ) -> None:
        """Add ``N`` transitions (leading axis of every array)."""
        columns = {f"obs/{k}": v for k, v in obs.items()} | {
            f"next_obs/{k}": v for k, v in next_obs.items()
        }
        columns |= {
            "actions": np.asarray(actions),
            "rewards": np.asarray(rewards, dtype=np.float32),
            "terminated": np.asarray(terminated, dtype=np.float32),
        }
        n = len(columns["actions"])
        if not self.data:
            for name, value in columns.items():
                self._alloc(name, value)
        index = (self.pos + np.arange(n)) % self.capacity
        for name, value in columns.items():
            self.data[name][index] = value
        self.pos = (self.pos + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def sample(self, batch_size: int) -> dict[str, Any]:
        """``batch_size`` uniform transitions: ``{"obs": {...}, "next_obs": {...}, "actions", "rewards", "terminated"}``."""
        index = self.rng.integers(0, self.size, size=batch_size)
        out: dict[str, Any] = {"obs": {}, "next_obs": {}}
        for name, column in self.data.items():
            head, _, key = name.partition("/")
            if key or head in ("obs", "next_obs"):
                out[head][key] = column[index]
            else:
                out[name] = column[index]
        return out


class HindsightRelabeller:
    """Collects each env's episode of goal-conditioned transitions and yields relabelled copies.

    Args:
        num_envs: envs feeding it.
        her_k: relabelled copies per transition.
        compute_reward: ``env.unwrapped.compute_reward(achieved_goal, desired_goal, info)``,
            vectorized over a leading axis.
        rng: numpy generator for the future goal choice.
    """

    def __init__(
        self,
        num_envs: int,
        her_k: int,
        compute_reward: Callable[..., Any],
        rng: np.random.Generator,
    ):
        self.her_k = her_k
        self.compute_reward = compute_reward
        self.rng = rng
        self.episodes: list[list[tuple[Any, Any, Any, bool]]] = [[] for _ in range(num_envs)]

    def record(
        self,
        i: int,
        obs: dict[str, np.ndarray],
        action: np.ndarray,
        next_obs: dict[str, np.ndarray],
        terminated: bool,
    ) -> None:
        self.episodes[i].append((obs, action, next_obs, terminated))

    def finish(
        self, i: int
    ) -> list[tuple[dict[str, np.ndarray], np.ndarray, float, dict[str, np.ndarray], bool]]:
        """End env ``i``'s episode; returns relabelled ``(obs, action, reward, next_obs, terminated)``."""
        episode, self.episodes[i] = self.episodes[i], []
        out = []
        for t, (obs, action, next_obs, _) in enumerate(episode):
            for _ in range(self.her_k):
                future = int(self.rng.integers(t, len(episode)))
                goal = episode[future][2]["achieved_goal"]
                new_obs = dict(obs, desired_goal=goal)
                new_next = dict(next_obs, desired_goal=goal)
                reward = float(
                    self.compute_reward(next_obs["achieved_goal"][None], goal[None], [{}])[0]
                )
                out.append((new_obs, action, reward, new_next, False))
        return out
