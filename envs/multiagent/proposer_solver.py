"""ProposerSolver: one agent sets an arithmetic task within enforced bounds, the other solves it."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from gymnasium import spaces

from verigym.core import ActionParseError
from verigym.envs.multiagent.base import TurnBasedGame, last_match
from verigym.validation import check_choice, check_int

__all__ = ["ProposerSolverEnv", "proposer_reward"]

OPERATIONS = {"add": "+", "multiply": "*"}
_TASK = re.compile(r"(\d{1,12})\s*([+*x×])\s*(\d{1,12})", re.IGNORECASE)
_INTEGER = re.compile(r"(?<![\d.])-?\d{1,30}(?![\d.])")


def proposer_reward(solved: int, attempts: int) -> float:
    """The proposer's reward for a task the solver got right ``solved`` times out of ``attempts``.

    ``1 - solved / attempts`` when the task was solved sometimes but not always, else 0: a task
    every attempt solves is trivial, one no attempt solves may be impossible (the learnability
    reward of Absolute Zero, Zhao et al. 2025).

    Raises:
        ValueError: ``solved`` is outside ``0..attempts``.
    """
    if not 0 <= solved <= attempts or attempts < 1:
        raise ValueError(
            f"solved must be in 0..attempts with attempts >= 1, got {solved}/{attempts}"
        )
    rate = solved / attempts
    return 1.0 - rate if 0.0 < rate < 1.0 else 0.0


class ProposerSolverEnv(TurnBasedGame):
    """Proposer-solver self-play on integer arithmetic (a two-agent AEC game).

    ## Description
    ``proposer_0`` sets a task from the generator family "``a op b``" (``op`` is ``operation``)
    with both operands in ``[min_operand, max_operand]`` — the difficulty bounds, enforced by the
    action space. ``solver_0`` then answers it ``num_attempts`` times; each attempt sees only the
    task, never its earlier answers, so the attempts estimate the solver's success rate. The env
    verifies each answer by exact integer arithmetic.

    ## Action Space
    ``proposer_0``: ``Discrete(n * n)`` with ``n = max_operand - min_operand + 1``; action
    ``i * n + j`` proposes ``a = min_operand + i``, ``b = min_operand + j``. ``solver_0``:
    ``Discrete(max_answer + 1)``, the answer. All actions are legal (all-ones
    ``infos[agent]["action_mask"]`` for the agent to move).

    ## Observation Space
    ``Box(0, high, (6,), int64)``: role one-hot (proposer, solver), whether the task is set, ``a``,
    ``b``, and the number of attempts made.

    ## Rewards
    ``solver_0``: ``1 / num_attempts`` per correct answer (so its return is its success rate).
    ``proposer_0``, at the end: :func:`proposer_reward` (``1 - rate`` when ``0 < rate < 1``, else 0).
    A malformed action ends the game: the offender gets ``illegal_move_reward`` (default -1) and
    ``info["action_error"]``, the other 0.

    ## Starting State
    No task; the proposer moves first. (``np_random`` only drives samplers and opponents.)

    ## Episode End
    Terminated after the last attempt or a forfeit. Final infos: ``success`` (solver: every attempt
    correct; proposer: a learnable task, ``0 < rate < 1``), ``score`` (solver: rate; proposer: its
    reward), ``payoff``, ``task`` and ``solve_rate``.

    ## Arguments
    * ``operation`` (``"add"`` or ``"multiply"``): the generator family.
    * ``min_operand``, ``max_operand`` (int, ``0 <= min <= max <= 999``, at most 200 values):
      the difficulty bounds.
    * ``num_attempts`` (int, 1..16): solver attempts per task.
    * ``max_cycles`` (int | None), ``illegal_move_reward`` (float), ``render_mode``: as in every
      turn-based game of this family.

    ## Version History
    * v0: initial version.
    """

    metadata = {**TurnBasedGame.metadata, "name": "proposer_solver_v0"}
    forfeit_reward = 0.0

    def __init__(
        self,
        *,
        operation: str = "multiply",
        min_operand: int = 2,
        max_operand: int = 99,
        num_attempts: int = 4,
        max_cycles: int | None = None,
        illegal_move_reward: float = -1.0,
        render_mode: str | None = None,
    ):
        check_choice("operation", operation, sorted(OPERATIONS))
        check_int("min_operand", min_operand, 0, 999)
        check_int("max_operand", max_operand, min_operand, min(999, min_operand + 199))
        check_int("num_attempts", num_attempts, 1, 16)
        self.operation, self.symbol = operation, OPERATIONS[operation]
        self.min_operand, self.max_operand, self.num_attempts = (
            min_operand,
            max_operand,
            num_attempts,
        )
        self.span = max_operand - min_operand + 1
        self.max_answer = 2 * max_operand if operation == "add" else max_operand * max_operand
        agents = ["proposer_0", "solver_0"]
        high = np.array([1, 1, 1, max_operand, max_operand, num_attempts], dtype=np.int64)
        self._setup(
            agents,
            spaces.Box(np.zeros(6, dtype=np.int64), high, dtype=np.int64),
            {
                "proposer_0": spaces.Discrete(self.span * self.span),
                "solver_0": spaces.Discrete(self.max_answer + 1),
            },
            max_cycles=max_cycles,
            illegal_move_reward=illegal_move_reward,
            render_mode=render_mode,
        )
        self.task: tuple[int, int] | None = None
        self.attempts = 0
        self.solved = 0

    def answer(self) -> int:
        """The correct answer of the current task.

        Raises:
            ValueError: no task is set yet.
        """
        if self.task is None:
            raise ValueError("no task has been proposed yet")
        a, b = self.task
        return a + b if self.operation == "add" else a * b

    # -- rules ----------------------------------------------------------------------------------
    def _new_game(self) -> str:
        self.task, self.attempts, self.solved = None, 0, 0
        return "proposer_0"

    def _legal_mask(self, agent: str) -> np.ndarray:
        return np.ones(int(self.action_spaces[agent].n), dtype=np.int8)

    def _apply(self, agent: str, action: int) -> str | None:
        if agent == "proposer_0":
            i, j = divmod(action, self.span)
            self.task = (self.min_operand + i, self.min_operand + j)
            return "solver_0"
        self.attempts += 1
        if action == self.answer():
            self.solved += 1
            self.rewards["solver_0"] = 1.0 / self.num_attempts
        return None if self.attempts >= self.num_attempts else "solver_0"

    def _payoffs(self) -> dict[str, float]:
        last = 1.0 / self.num_attempts if self.rewards.get("solver_0", 0.0) > 0 else 0.0
        return {"proposer_0": proposer_reward(self.solved, self.num_attempts), "solver_0": last}

    def _verdict(self, agent: str, payoff: float) -> tuple[bool, float]:
        rate = self.solved / self.num_attempts
        if agent == "solver_0":
            return self.solved == self.num_attempts, rate
        return 0.0 < rate < 1.0, proposer_reward(self.solved, self.num_attempts)

    def _finish(
        self, payoffs: dict[str, float], *, truncated: bool, forfeit: str | None = None
    ) -> None:
        super()._finish(payoffs, truncated=truncated, forfeit=forfeit)
        for a in self.agents:
            self.infos[a]["task"] = (
                None if self.task is None else f"{self.task[0]} {self.symbol} {self.task[1]}"
            )
            self.infos[a]["solve_rate"] = self.solved / self.num_attempts

    def observe(self, agent: str) -> np.ndarray:
        obs = np.zeros(6, dtype=np.int64)
        obs[0 if agent == "proposer_0" else 1] = 1
        if self.task is not None:
            obs[2], obs[3], obs[4] = 1, self.task[0], self.task[1]
        obs[5] = self.attempts
        return obs

    def heuristic_action(self, agent: str, rng: np.random.Generator) -> int:
        """Proposer: a uniformly random task. Solver: an error-prone calculator that gets each
        digit-by-digit step right with probability 0.85 (a wrong answer is off by 1 or 10), so
        harder tasks fail more often."""
        if agent == "proposer_0":
            return int(rng.integers(self.span * self.span))
        a, b = self.task if self.task is not None else (0, 0)
        steps = (
            len(str(a)) * len(str(b))
            if self.operation == "multiply"
            else max(len(str(a)), len(str(b)))
        )
        answer = self.answer()
        if rng.random() < 0.85**steps or self.max_answer == 0:
            return answer
        offset = int(rng.choice([-10, -1, 1, 10]))
        wrong = answer + offset if 0 <= answer + offset <= self.max_answer else answer - offset
        return (
            int(min(max(wrong, 0), self.max_answer))
            if wrong != answer
            else (answer + 1) % (self.max_answer + 1)
        )

    def solver_action(self, agent: str, rng: np.random.Generator | None = None) -> int:
        """Solver: the exact answer. Proposer: the task whose operands are largest (the hardest)."""
        if agent == "solver_0":
            return self.answer()
        return self.span * self.span - 1

    # -- text view ------------------------------------------------------------------------------
    def instructions(self, agent: str) -> str:
        bounds = f"both operands are integers from {self.min_operand} to {self.max_operand}"
        if agent == "proposer_0":
            return (
                f"You are the proposer. Set an arithmetic task 'a {self.symbol} b' where {bounds}. "
                f"The solver then answers it {self.num_attempts} times independently. Your reward is "
                "1 - (share of correct answers) if the solver is right sometimes but not always, else 0: "
                f"propose a task that is hard but solvable. Reply like '37 {self.symbol} 58'; the last "
                "such expression in your reply counts."
            )
        return (
            f"You are the solver. Compute the result of the task ('{self.symbol}' is "
            f"{'addition' if self.operation == 'add' else 'multiplication'}; {bounds}). Reply with "
            "the integer result; the last integer in your reply counts."
        )

    def observation_text(self, observation: np.ndarray, agent: str) -> str:
        obs = [int(v) for v in observation]
        if not obs[2]:
            return f"No task yet. Propose one: 'a {self.symbol} b' with operands in {self.min_operand}..{self.max_operand}."
        return f"Task: {obs[3]} {self.symbol} {obs[4]} = ? (attempt {obs[5] + 1} of {self.num_attempts})"

    def parse_action(self, text: str, agent: str) -> int:
        """Proposer: the last ``a op b`` in ``text``; solver: the last integer.

        Raises:
            TypeError: ``text`` is not a ``str``.
            ActionParseError: nothing found, or operands/answer outside the bounds.
        """
        if agent == "proposer_0":
            found = last_match(_TASK, text, f"no task found; reply like '12 {self.symbol} 34'")
            a, b = int(found.group(1)), int(found.group(3))
            if not (
                self.min_operand <= a <= self.max_operand
                and self.min_operand <= b <= self.max_operand
            ):
                raise ActionParseError(
                    f"operands must be in {self.min_operand}..{self.max_operand}, got {a} and {b}"
                )
            return (a - self.min_operand) * self.span + (b - self.min_operand)
        found = last_match(_INTEGER, text, "no integer found; reply with the result")
        value = int(found.group())
        if not 0 <= value <= self.max_answer:
            raise ActionParseError(f"answers lie in 0..{self.max_answer}, got {value}")
        return value

    def action_text(self, action: Any, agent: str) -> str:
        action = int(action)
        if agent == "proposer_0":
            i, j = divmod(action, self.span)
            return f"{self.min_operand + i} {self.symbol} {self.min_operand + j}"
        return str(action)

    def board_text(self) -> str:
        task = (
            "none"
            if self.task is None
            else f"{self.task[0]} {self.symbol} {self.task[1]} = {self.answer()}"
        )
        return f"task: {task}; attempts {self.attempts}/{self.num_attempts}, solved {self.solved}"
