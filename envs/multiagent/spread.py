"""Spread: agents with continuous actions cover landmarks together (MPE ``simple_spread`` kind)."""

from __future__ import annotations

import itertools
import re
import sys
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding

from verigym.core import ActionParseError, action_error_info, coerce_action, episode_end
from verigym.envs.multiagent.base import ParallelGame, last_match
from verigym.validation import check_choice, check_int, check_number

__all__ = ["SpreadEnv"]

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_PAIR = re.compile(rf"({_NUMBER})\s*[, ]\s*({_NUMBER})")


class SpreadEnv(ParallelGame):
    """Cooperative navigation: ``num_agents`` agents must cover as many landmarks (PettingZoo Parallel).

    ## Description
    The cooperative navigation task of Lowe et al. (2017), "Multi-Agent Actor-Critic for Mixed
    Cooperative-Competitive Environments" (PettingZoo's ``simple_spread``), with simple kinematics.
    Agents are discs of radius 0.05 in the square arena ``[-1, 1]^2`` (units). Each step an agent's
    velocity becomes ``damping * velocity + (1 - damping) * max_speed * action`` and its position
    moves by ``velocity * dt``, clipped to the arena. A landmark is **covered** when some agent's
    center is within ``cover_radius`` of it.

    ## Action Space
    ``Box(-1, 1, (2,), float32)`` per agent: the desired velocity direction and magnitude (x, y) as
    a fraction of ``max_speed``. A malformed action (NaN, out of bounds, wrong shape, ``None``)
    counts as ``(0, 0)`` and sets ``info["action_error"]``. A joint action that is not a dict, names
    unknown agents or misses a live agent raises (:class:`~verigym.envs.multiagent.base.ParallelGame`).

    ## Observation Space
    ``Box(-2, 2, (4 + 2 * num_agents + 2 * (num_agents - 1),), float32)``: own velocity (2,
    units/s), own position (2, units), each landmark's position relative to the agent (2 each),
    each other agent's position relative to it (2 each); every entry clipped to [-2, 2].

    ## Rewards
    Shared: ``-mean over landmarks of the distance to the nearest agent`` (units); each agent also
    gets ``-collision_penalty`` per other agent overlapping it.

    ## Starting State
    Agents and landmarks uniform in ``[-0.9, 0.9]^2``, velocities 0 (``np_random``).

    ## Episode End
    Terminated when every landmark is covered (``success=True``, ``score=1``); truncated after
    ``max_cycles`` steps with ``success=False`` and ``score`` = share of landmarks covered. Then
    ``env.agents`` is empty and ``step`` raises :class:`verigym.core.EpisodeEndedError` until ``reset``.

    ## Arguments
    * ``num_agents`` (int, 2..6): agents and landmarks.
    * ``max_cycles`` (int): steps before truncation.
    * ``cover_radius`` (float, 0.01..0.5, units), ``collision_penalty`` (float, >= 0).
    * ``max_speed`` (float, units/s), ``damping`` (float, 0..1), ``dt`` (float, seconds).
    * ``render_mode`` (``"ansi"``, ``"rgb_array"``, ``"human"`` or ``None``).

    ## Version History
    * v0: initial version.
    """

    metadata = {
        "render_modes": ["ansi", "rgb_array", "human"],
        "render_fps": 10,
        "is_parallelizable": True,
        "family": "multiagent",
        "name": "spread_v0",
    }
    agent_radius = 0.05

    def __init__(
        self,
        *,
        num_agents: int = 3,
        max_cycles: int = 50,
        cover_radius: float = 0.1,
        collision_penalty: float = 0.1,
        max_speed: float = 1.0,
        damping: float = 0.5,
        dt: float = 0.1,
        render_mode: str | None = None,
    ):
        check_int("num_agents", num_agents, 2, 6)
        check_int("max_cycles", max_cycles, 1, 100_000)
        check_number("cover_radius", cover_radius, 0.01, 0.5)
        check_number("collision_penalty", collision_penalty, 0.0, 100.0)
        check_number("max_speed", max_speed, 0.01, 10.0)
        check_number("damping", damping, 0.0, 0.99)
        check_number("dt", dt, 0.001, 1.0)
        check_choice("render_mode", render_mode, (None, *self.metadata["render_modes"]))
        self.n, self.max_cycles = num_agents, max_cycles
        self.cover_radius, self.collision_penalty = float(cover_radius), float(collision_penalty)
        self.max_speed, self.damping, self.dt = float(max_speed), float(damping), float(dt)
        self.render_mode = render_mode
        self.possible_agents = [f"agent_{i}" for i in range(num_agents)]
        self.agents: list[str] = []
        size = 4 + 2 * num_agents + 2 * (num_agents - 1)
        observation_space = spaces.Box(-2.0, 2.0, shape=(size,), dtype=np.float32)
        self.observation_spaces = dict.fromkeys(self.possible_agents, observation_space)
        self.action_spaces = {
            a: spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32) for a in self.possible_agents
        }
        self.np_random, self.np_random_seed = seeding.np_random(None)
        self.position = np.zeros((num_agents, 2))
        self.velocity = np.zeros((num_agents, 2))
        self.landmarks = np.zeros((num_agents, 2))
        self.cycle = 0

    # -- dynamics -------------------------------------------------------------------------------
    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        self._reseed(seed)
        self.position = self.np_random.uniform(-0.9, 0.9, size=(self.n, 2))
        self.velocity = np.zeros((self.n, 2))
        self.landmarks = self.np_random.uniform(-0.9, 0.9, size=(self.n, 2))
        self.cycle = 0
        self.agents = list(self.possible_agents)
        return {a: self.observe(a) for a in self.agents}, {a: {} for a in self.agents}

    def _step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        acting = list(self.agents)
        infos: dict[str, dict[str, Any]] = {a: {} for a in acting}
        commands = np.zeros((self.n, 2))
        for i, agent in enumerate(self.possible_agents):
            if (
                agent not in acting
            ):  # every live agent has an entry (ParallelGame.check_joint_action)
                continue
            try:
                commands[i] = coerce_action(self.action_spaces[agent], actions[agent])
            except ActionParseError as exc:
                action_error_info(f"{exc}; the action counts as (0, 0)", infos[agent])
        self.velocity = (
            self.damping * self.velocity + (1.0 - self.damping) * self.max_speed * commands
        )
        self.position = self.position + self.velocity * self.dt
        outside = np.abs(self.position) > 1.0
        self.position = np.clip(self.position, -1.0, 1.0)
        self.velocity[outside] = 0.0
        self.cycle += 1
        distances = self.landmark_distances()
        shared = -float(distances.min(axis=0).mean())
        gaps = np.linalg.norm(self.position[:, None] - self.position[None], axis=-1)
        overlaps = (gaps < 2 * self.agent_radius).sum(axis=1) - 1
        rewards = {
            a: shared - self.collision_penalty * float(overlaps[i])
            for i, a in enumerate(self.possible_agents)
            if a in acting
        }
        covered = self.covered()
        done = bool(covered.all())
        out_of_time = self.cycle >= self.max_cycles and not done
        terminations = dict.fromkeys(acting, done)
        truncations = dict.fromkeys(acting, out_of_time)
        for a in acting:
            if done or out_of_time:
                episode_end(infos[a], success=done, score=float(covered.mean()))
            infos[a]["covered"] = int(covered.sum())
        observations = {a: self.observe(a) for a in acting}
        if done or out_of_time:
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    def landmark_distances(self) -> np.ndarray:
        """``float64 (num_agents, num_landmarks)``: agent-landmark distances (units)."""
        return np.linalg.norm(self.position[:, None] - self.landmarks[None], axis=-1)

    def covered(self) -> np.ndarray:
        """``bool (num_landmarks,)``: landmarks with an agent within ``cover_radius``."""
        return (self.landmark_distances() <= self.cover_radius).any(axis=0)

    def observe(self, agent: str) -> np.ndarray:
        i = self.possible_agents.index(agent)
        others = np.delete(self.position, i, axis=0) - self.position[i]
        parts = [
            self.velocity[i],
            self.position[i],
            (self.landmarks - self.position[i]).ravel(),
            others.ravel(),
        ]
        return np.clip(np.concatenate(parts), -2.0, 2.0).astype(np.float32)

    def greedy_actions(self) -> dict[str, np.ndarray]:
        """Each agent heads at full speed to its landmark under the assignment that minimizes the
        total distance (brute force over permutations); a scripted team for demos and tests."""
        distances = self.landmark_distances()
        best = min(
            itertools.permutations(range(self.n)),
            key=lambda p: sum(distances[i, p[i]] for i in range(self.n)),
        )
        actions = {}
        for i, agent in enumerate(self.possible_agents):
            delta = self.landmarks[best[i]] - self.position[i]
            norm = float(np.linalg.norm(delta))
            speed = min(1.0, norm / (self.max_speed * self.dt * 2.0))
            actions[agent] = (delta / norm * speed if norm > 1e-9 else np.zeros(2)).astype(
                np.float32
            )
        return {a: actions[a] for a in self.agents}

    # -- rendering ------------------------------------------------------------------------------
    def render(self) -> str | np.ndarray | None:
        if self.render_mode is None:
            return None
        if self.render_mode == "rgb_array":
            return self._image()
        text = self._text()
        if self.render_mode == "human":
            sys.stdout.write(text + "\n")
            return None
        return text

    def _text(self) -> str:
        agents = "; ".join(
            f"{a} ({x:+.2f}, {y:+.2f})" for a, (x, y) in zip(self.possible_agents, self.position)
        )
        marks = "; ".join(f"L{j} ({x:+.2f}, {y:+.2f})" for j, (x, y) in enumerate(self.landmarks))
        return f"step {self.cycle}: {agents} | landmarks {marks} | covered {int(self.covered().sum())}/{self.n}"

    def _image(self, pixels: int = 200) -> np.ndarray:
        image = np.full((pixels, pixels, 3), 245, dtype=np.uint8)
        y, x = np.mgrid[0:pixels, 0:pixels]
        to_px = lambda p: ((p[0] + 1) / 2 * (pixels - 1), (1 - p[1]) / 2 * (pixels - 1))  # noqa: E731
        scale = (pixels - 1) / 2
        for landmark in self.landmarks:
            cx, cy = to_px(landmark)
            image[(x - cx) ** 2 + (y - cy) ** 2 <= (self.cover_radius * scale) ** 2] = (
                200,
                200,
                200,
            )
            image[(x - cx) ** 2 + (y - cy) ** 2 <= (0.02 * scale) ** 2] = (40, 40, 40)
        for point in self.position:
            cx, cy = to_px(point)
            image[(x - cx) ** 2 + (y - cy) ** 2 <= (self.agent_radius * scale) ** 2] = (40, 90, 220)
        return image

    def close(self) -> None:
        """Nothing to release; safe to call twice."""

    # -- text view ------------------------------------------------------------------------------
    def instructions(self, agent: str) -> str:
        return (
            f"You are {agent}, one of {self.n} agents in the square arena from -1 to 1 (x right, y up) "
            f"with {self.n} landmarks. Together, cover every landmark: a landmark is covered when an "
            f"agent is within {self.cover_radius} of it. Avoid bumping into other agents. Reply with "
            "your velocity command 'vx vy', two numbers in [-1, 1] (1 = full speed); the last pair counts."
        )

    def observation_text(self, observation: np.ndarray, agent: str) -> str:
        values = [float(v) for v in observation]
        landmarks = ", ".join(
            f"({values[4 + 2 * j]:+.3f}, {values[5 + 2 * j]:+.3f})" for j in range(self.n)
        )
        start = 4 + 2 * self.n
        others = ", ".join(
            f"({values[start + 2 * j]:+.3f}, {values[start + 2 * j + 1]:+.3f})"
            for j in range(self.n - 1)
        )
        return (
            f"Your position ({values[2]:+.3f}, {values[3]:+.3f}), velocity ({values[0]:+.3f}, {values[1]:+.3f}). "
            f"Landmarks relative to you: {landmarks}. Other agents relative to you: {others}."
        )

    def parse_action(self, text: str, agent: str) -> np.ndarray:
        """The last pair of numbers ``vx vy`` in ``text``.

        Raises:
            TypeError: ``text`` is not a ``str``.
            ActionParseError: no pair found, or a number outside [-1, 1].
        """
        found = last_match(
            _PAIR, text, "no velocity found; reply with two numbers 'vx vy' in [-1, 1]"
        )
        action = np.array([float(found.group(1)), float(found.group(2))], dtype=np.float32)
        if not np.all(np.abs(action) <= 1.0):
            raise ActionParseError(f"both numbers must be in [-1, 1], got {action.tolist()}")
        return action

    def action_text(self, action: Any, agent: str) -> str:
        x, y = (float(np.float32(v)) for v in np.asarray(action).ravel()[:2])
        return f"{x!r} {y!r}"
