"""Pursuit: cooperative predators surround randomly moving prey (a parallel grid game)."""

from __future__ import annotations

from typing import Any

from verigym.envs.grid.engine import BLUE, DIR_VEC, RED
from verigym.envs.multiagent.gridgame import GridGame
from verigym.validation import check_int, check_number

__all__ = ["PursuitEnv"]


class PursuitEnv(GridGame):
    """Cooperative pursuit: predators must surround prey together (PettingZoo Parallel).

    ## Description
    After the SISL pursuit task (Gupta et al. 2017, "Cooperative Multi-Agent Control Using Deep
    Reinforcement Learning"), on the grid engine. ``num_predators`` predators (the agents) and
    ``num_prey`` prey share a ``size x size`` map with scattered walls. Each step the predators
    move, then every remaining prey steps to a random enterable cell not held by a predator (or
    stays). A prey is **caught** when at least ``catch_size`` predators stand on its cell or on the
    4 cells next to it; caught prey leave the map. No single predator can catch alone when
    ``catch_size >= 2``, so the team must coordinate.

    ## Action Space
    ``Discrete(5)`` per predator: 0 stay, 1 up, 2 right, 3 down, 4 left (mask in
    ``infos[agent]["action_mask"]``; see :mod:`verigym.envs.multiagent.gridgame`).

    ## Observation Space
    ``Box(0, 14, (view_size, view_size, 3), uint8)``: the egocentric partial view; predators are
    blue balls, prey red balls, the observer ``(AGENT, blue, facing)``.

    ## Rewards
    Shared: every predator gets +1 for each prey caught in the step, minus ``step_cost`` per step.
    A malformed action counts as *stay* (``info["action_error"]``).

    ## Starting State
    Walls, predators and prey on random distinct free cells (``np_random``); prey start at least
    3 steps (Manhattan) from every predator when the map allows it.

    ## Episode End
    Terminated when every prey is caught (``success=True``); truncated after ``max_cycles`` steps.
    ``score`` is the share of prey caught.

    ## Arguments
    * ``size`` (int, 5..32), ``wall_density`` (float, 0..0.3), ``view_size`` (3, 5 or 7),
      ``max_cycles`` (int): map, sight and time.
    * ``num_predators`` (int, 2..8), ``num_prey`` (int, 1..8), ``catch_size`` (int, 1..4).
    * ``step_cost`` (float, >= 0): per-step penalty of each predator.
    * ``render_mode`` (``"ansi"``, ``"rgb_array"``, ``"human"`` or ``None``).

    ## Version History
    * v0: initial version.
    """

    metadata = {**GridGame.metadata, "name": "pursuit_v0"}

    def __init__(
        self,
        *,
        size: int = 8,
        num_predators: int = 3,
        num_prey: int = 2,
        catch_size: int = 2,
        wall_density: float = 0.1,
        view_size: int = 5,
        max_cycles: int = 100,
        step_cost: float = 0.01,
        render_mode: str | None = None,
    ):
        check_int("num_predators", num_predators, 2, 8)
        check_int("num_prey", num_prey, 1, 8)
        check_int("catch_size", catch_size, 1, 4)
        check_number("step_cost", step_cost, 0.0, 10.0)
        self.num_prey, self.catch_size, self.step_cost = num_prey, catch_size, float(step_cost)
        self._setup(
            [f"predator_{i}" for i in range(num_predators)],
            size=size,
            wall_density=wall_density,
            view_size=view_size,
            max_cycles=max_cycles,
            render_mode=render_mode,
        )
        self.prey: list[tuple[int, int]] = []

    def team_color(self, agent: str) -> int:
        return BLUE

    def npcs(self) -> list[tuple[int, int, int]]:
        return [(r, c, RED) for r, c in self.prey]

    def _place(self, free: list[tuple[int, int]]) -> None:
        predators = free[: len(self.possible_agents)]
        for agent, cell in zip(self.possible_agents, predators):
            self.position[agent] = cell
            self.facing[agent] = int(self.np_random.integers(4))
        rest = free[len(predators) :]
        far = [
            cell
            for cell in rest
            if min(abs(cell[0] - r) + abs(cell[1] - c) for r, c in predators) >= 3
        ]
        pool = far if len(far) >= self.num_prey else rest
        self.prey = pool[: self.num_prey]

    def _caught(self, cell: tuple[int, int]) -> bool:
        r, c = cell
        near = sum(
            1
            for a in self.agents
            if abs(self.position[a][0] - r) + abs(self.position[a][1] - c) <= 1
        )
        return near >= self.catch_size

    def _resolve(self, acting: list[str]) -> tuple[dict[str, float], dict[str, bool]]:
        before = len(self.prey)
        self.prey = [cell for cell in self.prey if not self._caught(cell)]
        held = {self.position[a] for a in acting}
        moved = []
        for r, c in self.prey:
            options = [(r, c)] + [(r + int(dr), c + int(dc)) for dr, dc in DIR_VEC]
            options = [cell for cell in options if self._enterable(*cell) and cell not in held]
            moved.append(options[int(self.np_random.integers(len(options)))] if options else (r, c))
        self.prey = [cell for cell in moved if not self._caught(cell)]
        catches = before - len(self.prey)
        done = not self.prey
        return {a: catches - self.step_cost for a in acting}, dict.fromkeys(acting, done)

    def _verdict(self, agent: str, truncated: bool) -> tuple[bool, float]:
        return not self.prey, (self.num_prey - len(self.prey)) / self.num_prey

    def instructions(self, agent: str) -> str:
        return (
            f"You are {agent}, one of {len(self.possible_agents)} predators (blue balls, 'Bb') on a "
            f"{self.size}x{self.size} map with walls. Catch the {self.num_prey} prey (red balls, 'Br'): a prey "
            f"is caught when at least {self.catch_size} predators stand on it or right next to it "
            "(up/down/left/right). Prey move at random. Every predator gets +1 per catch. You see a "
            f"{self.view_size}x{self.view_size} window ahead of you. Reply with one move: stay, up, "
            "right, down or left (moving also turns you to face that way)."
        )

    def greedy_actions(self) -> dict[str, Any]:
        """Greedy joint action: each predator steps toward the nearest prey (for demos and tests)."""
        actions = {}
        for agent in self.agents:
            r, c = self.position[agent]
            if not self.prey:
                actions[agent] = 0
                continue
            tr, tc = min(self.prey, key=lambda p: abs(p[0] - r) + abs(p[1] - c))
            mask = self.action_mask(agent)
            best, best_distance = 0, abs(tr - r) + abs(tc - c)
            for action, (dr, dc) in zip((1, 2, 3, 4), ((-1, 0), (0, 1), (1, 0), (0, -1))):
                distance = abs(tr - r - dr) + abs(tc - c - dc)
                if mask[action] and distance < best_distance:
                    best, best_distance = action, distance
            actions[agent] = best
        return actions
