"""TicTacToe: the two-player AEC game, with an exact minimax solver."""

from __future__ import annotations

import re
from functools import cache

import numpy as np
from gymnasium import spaces

from verigym.envs.multiagent.base import MarkBoardGame, TurnBasedGame, last_match

__all__ = ["TicTacToeEnv", "minimax_values"]

LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
MARKS = ".XO"
_CELL = re.compile(r"(?<![\d.])[0-8](?![\d.])")


def _winner(board: tuple[int, ...]) -> int:
    """1 or 2 when that mark has three in a row, else 0."""
    for a, b, c in LINES:
        if board[a] and board[a] == board[b] == board[c]:
            return board[a]
    return 0


@cache
def _value(board: tuple[int, ...], mark: int) -> int:
    """Minimax value for ``mark`` to move: >0 win (10 - plies to the end), 0 draw, <0 loss."""
    empties = [i for i, v in enumerate(board) if v == 0]
    best = -100
    for cell in empties:
        child = board[:cell] + (mark,) + board[cell + 1 :]
        if _winner(child):
            score = 10 - (9 - len(empties) + 1)
        elif len(empties) == 1:
            score = 0
        else:
            score = -_value(child, 3 - mark)
        best = max(best, score)
    return best


def minimax_values(board: tuple[int, ...], mark: int) -> dict[int, int]:
    """Exact minimax value of every legal cell for ``mark`` to move on ``board``.

    Args:
        board: 9 cells, row by row; 0 empty, 1 X, 2 O.
        mark: 1 (X) or 2 (O), the mark to move.

    Returns:
        cell -> value from the mover's side: ``> 0`` a forced win (faster wins score higher),
        ``0`` a draw, ``< 0`` a forced loss.
    """
    values = {}
    empties = [i for i, v in enumerate(board) if v == 0]
    for cell in empties:
        child = board[:cell] + (mark,) + board[cell + 1 :]
        if _winner(child):
            values[cell] = 10 - (9 - len(empties) + 1)
        elif len(empties) == 1:
            values[cell] = 0
        else:
            values[cell] = -_value(child, 3 - mark)
    return values


class TicTacToeEnv(MarkBoardGame):
    """TicTacToe for two agents, turn by turn (PettingZoo AEC).

    ## Description
    ``player_0`` plays X and moves first, ``player_1`` plays O. Three marks in a row, column or
    diagonal win; a full board without one is a draw. Perfect play by both sides draws; the exact
    minimax solver is :meth:`solver_action`.

    ## Action Space
    ``Discrete(9)``: the cell to mark, row by row (0 top-left, 8 bottom-right). Legal moves (empty
    cells) are ``infos[agent]["action_mask"]`` (``int8``, shape ``(9,)``).

    ## Observation Space
    ``Box(0, 1, (3, 3, 3), int8)`` from the observing agent's side: channel 0 its own marks,
    channel 1 the opponent's, channel 2 the empty cells.

    ## Rewards
    +1 win, -1 loss, 0 draw, on the final step. An illegal move (occupied cell) or a malformed one
    (not an integer in 0..8) ends the game: the offender gets ``illegal_move_reward`` (default -1)
    and ``info["action_error"]``, the opponent +1.

    ## Starting State
    An empty board (the same for every seed; ``reset(seed)`` only seeds ``np_random``).

    ## Episode End
    Terminated on a win, a draw or a forfeit. Every agent's final info has ``success`` (won),
    ``score`` (1 win, 0.5 draw, 0 loss) and ``payoff``.

    ## Arguments
    * ``max_cycles`` (int | None): most moves per agent before truncation (``None``: no limit).
    * ``illegal_move_reward`` (float): the offender's reward for an illegal move.
    * ``render_mode`` (``"ansi"``, ``"human"`` or ``None``).

    ## Version History
    * v0: initial version.
    """

    metadata = {**TurnBasedGame.metadata, "name": "tictactoe_v0"}

    def __init__(
        self,
        *,
        max_cycles: int | None = None,
        illegal_move_reward: float = -1.0,
        render_mode: str | None = None,
    ):
        agents = ["player_0", "player_1"]
        self._setup(
            agents,
            spaces.Box(0, 1, shape=(3, 3, 3), dtype=np.int8),
            {a: spaces.Discrete(9) for a in agents},
            max_cycles=max_cycles,
            illegal_move_reward=illegal_move_reward,
            render_mode=render_mode,
        )
        self.board = np.zeros(9, dtype=np.int8)

    # -- rules ----------------------------------------------------------------------------------
    def _new_game(self) -> str:
        self.board = np.zeros(9, dtype=np.int8)
        return "player_0"

    def _legal_mask(self, agent: str) -> np.ndarray:
        return (self.board == 0).astype(np.int8)

    def _apply(self, agent: str, action: int) -> str | None:
        self.board[action] = self._mark(agent)
        if _winner(tuple(int(v) for v in self.board)) or not (self.board == 0).any():
            return None
        return self._other(agent)

    def _payoffs(self) -> dict[str, float]:
        return self._mark_payoffs(_winner(tuple(int(v) for v in self.board)))

    def observe(self, agent: str) -> np.ndarray:
        return self._mark_planes(self.board.reshape(3, 3), agent)

    # -- solver ---------------------------------------------------------------------------------
    def solver_action(self, agent: str, rng: np.random.Generator | None = None) -> int:
        """A minimax-optimal cell for ``agent`` (the lowest such cell, or a random one with ``rng``).

        Raises:
            ValueError: the board is full.
        """
        values = minimax_values(tuple(int(v) for v in self.board), self._mark(agent))
        if not values:
            raise ValueError("the board is full; there is no move to make")
        best = max(values.values())
        cells = sorted(c for c, v in values.items() if v == best)
        return int(cells[int(rng.integers(len(cells)))] if rng is not None else cells[0])

    def heuristic_action(self, agent: str, rng: np.random.Generator) -> int:
        """Win if possible, else block the opponent's win, else a random empty cell."""
        board = tuple(int(v) for v in self.board)
        empties = [i for i, v in enumerate(board) if v == 0]
        for mark in (self._mark(agent), 3 - self._mark(agent)):
            for cell in empties:
                if _winner(board[:cell] + (mark,) + board[cell + 1 :]):
                    return cell
        return int(empties[int(rng.integers(len(empties)))])

    # -- text view ------------------------------------------------------------------------------
    def instructions(self, agent: str) -> str:
        mark = MARKS[self._mark(agent)]
        return (
            f"You play TicTacToe as {mark} ({'first' if mark == 'X' else 'second'} to move) against one "
            "opponent. Cells are numbered 0-8 row by row:\n0 1 2\n3 4 5\n6 7 8\n"
            "Get three of your marks in a row, column or diagonal. Reply with the number of an empty "
            "cell; the last number in your reply counts. Playing an occupied cell loses the game."
        )

    def observation_text(self, observation: np.ndarray, agent: str) -> str:
        mine, theirs = MARKS[self._mark(agent)], MARKS[3 - self._mark(agent)]
        rows = []
        for r in range(3):
            cells = [
                mine if observation[r, c, 0] else theirs if observation[r, c, 1] else str(3 * r + c)
                for c in range(3)
            ]
            rows.append(" ".join(cells))
        return f"Board (you are {mine}; digits are empty cells):\n" + "\n".join(rows)

    def parse_action(self, text: str, agent: str) -> int:
        """The cell in ``text`` (the last standalone digit 0-8).

        Raises:
            TypeError: ``text`` is not a ``str``.
            ActionParseError: no cell number found.
        """
        found = last_match(
            _CELL, text, "no cell found; reply with the number (0-8) of an empty cell"
        )
        return int(found.group())

    def board_text(self) -> str:
        rows = [" ".join(MARKS[int(v)] for v in self.board[3 * r : 3 * r + 3]) for r in range(3)]
        return "\n".join(rows)
