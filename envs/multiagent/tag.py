"""Tag: one chaser against runners on a grid with walls (a competitive parallel grid game)."""

from __future__ import annotations

from verigym.envs.grid.engine import BLUE, RED
from verigym.envs.multiagent.gridgame import GridGame
from verigym.validation import check_int

__all__ = ["TagEnv"]


class TagEnv(GridGame):
    """Tag: ``chaser_0`` tries to tag every runner before time runs out (PettingZoo Parallel).

    ## Description
    A competitive grid game in the spirit of MPE's ``simple_tag`` (Lowe et al. 2017), on the grid
    engine. ``chaser_0`` and ``num_runners`` runners move simultaneously on a ``size x size`` map
    with scattered walls, at the same speed. After the moves, a runner on the chaser's cell or on
    one of the 4 cells next to it is **tagged** and leaves the game.

    ## Action Space
    ``Discrete(5)`` per agent: 0 stay, 1 up, 2 right, 3 down, 4 left (mask in
    ``infos[agent]["action_mask"]``; see :mod:`verigym.envs.multiagent.gridgame`).

    ## Observation Space
    ``Box(0, 14, (view_size, view_size, 3), uint8)``: the egocentric partial view; the chaser is a
    red ball, runners are blue balls, the observer ``(AGENT, own team color, facing)`` (red: you
    are the chaser).

    ## Rewards
    Zero-sum per tag: the chaser +1, the tagged runner -1. Every runner still free at the time
    limit gets +1 and the chaser -1 per free runner. A malformed action counts as *stay*
    (``info["action_error"]``).

    ## Starting State
    Walls and agents on random distinct free cells (``np_random``); runners start at least 4
    steps (Manhattan) from the chaser when the map allows it.

    ## Episode End
    A runner is terminated when tagged (``success=False``, ``score=0``); the chaser is terminated
    when every runner is tagged (``success=True``, ``score=1``). At ``max_cycles`` the rest are
    truncated: free runners ``success=True``, ``score=1``; the chaser ``success=False`` and
    ``score`` = share of runners tagged.

    ## Arguments
    * ``size`` (int, 5..32), ``wall_density`` (float, 0..0.3), ``view_size`` (3, 5 or 7),
      ``max_cycles`` (int): map, sight and time.
    * ``num_runners`` (int, 1..6).
    * ``render_mode`` (``"ansi"``, ``"rgb_array"``, ``"human"`` or ``None``).

    ## Version History
    * v0: initial version.
    """

    metadata = {**GridGame.metadata, "name": "tag_v0"}

    def __init__(
        self,
        *,
        size: int = 9,
        num_runners: int = 2,
        wall_density: float = 0.15,
        view_size: int = 5,
        max_cycles: int = 50,
        render_mode: str | None = None,
    ):
        check_int("num_runners", num_runners, 1, 6)
        self.num_runners = num_runners
        agents = ["chaser_0", *(f"runner_{i}" for i in range(num_runners))]
        self._setup(
            agents,
            size=size,
            wall_density=wall_density,
            view_size=view_size,
            max_cycles=max_cycles,
            render_mode=render_mode,
        )
        self.tagged: set[str] = set()

    def team_color(self, agent: str) -> int:
        return RED if agent == "chaser_0" else BLUE

    def _place(self, free: list[tuple[int, int]]) -> None:
        chaser = free[0]
        far = [
            cell for cell in free[1:] if abs(cell[0] - chaser[0]) + abs(cell[1] - chaser[1]) >= 4
        ]
        pool = far if len(far) >= self.num_runners else free[1:]
        for agent, cell in zip(self.possible_agents, [chaser, *pool[: self.num_runners]]):
            self.position[agent] = cell
            self.facing[agent] = int(self.np_random.integers(4))
        self.tagged = set()

    def _resolve(self, acting: list[str]) -> tuple[dict[str, float], dict[str, bool]]:
        rewards = dict.fromkeys(acting, 0.0)
        terminations = dict.fromkeys(acting, False)
        cr, cc = self.position["chaser_0"]
        for agent in acting:
            if agent == "chaser_0":
                continue
            r, c = self.position[agent]
            if abs(r - cr) + abs(c - cc) <= 1:
                self.tagged.add(agent)
                rewards[agent] = -1.0
                rewards["chaser_0"] += 1.0
                terminations[agent] = True
        free = [a for a in acting if a != "chaser_0" and not terminations[a]]
        if not free:
            terminations["chaser_0"] = True
        elif self.cycle >= self.max_cycles:
            for agent in free:
                rewards[agent] += 1.0
            rewards["chaser_0"] -= float(len(free))
        return rewards, terminations

    def _verdict(self, agent: str, truncated: bool) -> tuple[bool, float]:
        if agent == "chaser_0":
            return len(self.tagged) == self.num_runners, len(self.tagged) / self.num_runners
        survived = agent not in self.tagged
        return survived, float(survived)

    def instructions(self, agent: str) -> str:
        rules = (
            f"Tag on a {self.size}x{self.size} map with walls: one chaser (red ball, 'Br') and "
            f"{self.num_runners} runner(s) (blue balls, 'Bb') move at the same time. A runner on the "
            "chaser's cell or right next to it (up/down/left/right) after a move is tagged and out. "
        )
        role = (
            "You are the chaser: tag every runner before time runs out (+1 per tag)."
            if agent == "chaser_0"
            else f"You are {agent}, a runner: stay free for {self.max_cycles} steps (+1), a tag costs -1."
        )
        return (
            f"{rules}{role} You see a {self.view_size}x{self.view_size} window ahead of you. Reply with "
            "one move: stay, up, right, down or left (moving also turns you to face that way)."
        )
