"""ConnectFour: the two-player AEC game of dropping discs into columns."""

from __future__ import annotations

import re

import numpy as np
from gymnasium import spaces

from verigym.envs.multiagent.base import MarkBoardGame, TurnBasedGame, last_match

__all__ = ["ConnectFourEnv"]

ROWS, COLUMNS = 6, 7
DISCS = ".XO"
_COLUMN = re.compile(r"(?<![\d.])[0-6](?![\d.])")


def _connects(board: np.ndarray, row: int, col: int) -> bool:
    """Whether the disc at ``(row, col)`` completes four in a line."""
    mark = board[row, col]
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        count = 1
        for sign in (1, -1):
            r, c = row + sign * dr, col + sign * dc
            while 0 <= r < ROWS and 0 <= c < COLUMNS and board[r, c] == mark:
                count += 1
                r, c = r + sign * dr, c + sign * dc
        if count >= 4:
            return True
    return False


class ConnectFourEnv(MarkBoardGame):
    """ConnectFour for two agents on a 6x7 board (PettingZoo AEC).

    ## Description
    ``player_0`` (X) and ``player_1`` (O) drop discs in turn into one of 7 columns; a disc falls to
    the lowest empty cell. Four discs of one player in a row, column or diagonal win; a full board
    is a draw (Allis 1988: the first player wins with perfect play).

    ## Action Space
    ``Discrete(7)``: the column, 0 (left) to 6. A full column is illegal; the legal columns are
    ``infos[agent]["action_mask"]`` (``int8``, shape ``(7,)``).

    ## Observation Space
    ``Box(0, 1, (6, 7, 3), int8)`` from the observing agent's side (row 0 is the top): channel 0
    its own discs, channel 1 the opponent's, channel 2 the empty cells.

    ## Rewards
    +1 win, -1 loss, 0 draw, on the final step. An illegal (full column) or malformed move ends the
    game: the offender gets ``illegal_move_reward`` (default -1) and ``info["action_error"]``, the
    opponent +1.

    ## Starting State
    An empty board.

    ## Episode End
    Terminated on four in a line, a full board or a forfeit; final infos carry ``success`` (won),
    ``score`` (1 win, 0.5 draw, 0 loss) and ``payoff``.

    ## Arguments
    * ``max_cycles`` (int | None): most moves per agent before truncation (``None``: no limit).
    * ``illegal_move_reward`` (float): the offender's reward for an illegal move.
    * ``render_mode`` (``"ansi"``, ``"human"`` or ``None``).

    ## Version History
    * v0: initial version.
    """

    metadata = {**TurnBasedGame.metadata, "name": "connect_four_v0"}

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
            spaces.Box(0, 1, shape=(ROWS, COLUMNS, 3), dtype=np.int8),
            {a: spaces.Discrete(COLUMNS) for a in agents},
            max_cycles=max_cycles,
            illegal_move_reward=illegal_move_reward,
            render_mode=render_mode,
        )
        self.board = np.zeros((ROWS, COLUMNS), dtype=np.int8)
        self._winner = 0

    # -- rules ----------------------------------------------------------------------------------
    def _new_game(self) -> str:
        self.board = np.zeros((ROWS, COLUMNS), dtype=np.int8)
        self._winner = 0
        return "player_0"

    def _legal_mask(self, agent: str) -> np.ndarray:
        return (self.board[0] == 0).astype(np.int8)

    def _drop_row(self, col: int) -> int:
        return int(np.flatnonzero(self.board[:, col] == 0)[-1])

    def _apply(self, agent: str, action: int) -> str | None:
        row = self._drop_row(action)
        self.board[row, action] = self._mark(agent)
        if _connects(self.board, row, action):
            self._winner = self._mark(agent)
            return None
        if not (self.board[0] == 0).any():
            return None
        return self._other(agent)

    def _payoffs(self) -> dict[str, float]:
        return self._mark_payoffs(self._winner)

    def observe(self, agent: str) -> np.ndarray:
        return self._mark_planes(self.board, agent)

    def heuristic_action(self, agent: str, rng: np.random.Generator) -> int:
        """Win now if possible, else block the opponent's immediate win, else a random column that
        does not hand the opponent a win on top of it (else any legal column)."""
        legal = [int(c) for c in np.flatnonzero(self.board[0] == 0)]
        mine = self._mark(agent)
        for mark in (mine, 3 - mine):
            for col in legal:
                row = self._drop_row(col)
                self.board[row, col] = mark
                wins = _connects(self.board, row, col)
                self.board[row, col] = 0
                if wins:
                    return col
        safe = []
        for col in legal:
            row = self._drop_row(col)
            if row == 0:
                safe.append(col)
                continue
            self.board[row - 1, col] = 3 - mine
            gives = _connects(self.board, row - 1, col)
            self.board[row - 1, col] = 0
            if not gives:
                safe.append(col)
        pool = safe or legal
        return pool[int(rng.integers(len(pool)))]

    # -- text view ------------------------------------------------------------------------------
    def instructions(self, agent: str) -> str:
        mark = DISCS[self._mark(agent)]
        return (
            f"You play ConnectFour as {mark} ({'first' if mark == 'X' else 'second'} to move). The board "
            "has 6 rows and 7 columns numbered 0-6; a disc dropped in a column falls to its lowest "
            "empty cell. Connect four of your discs in a row, column or diagonal. Reply with a column "
            "number; the last number in your reply counts. Dropping into a full column loses."
        )

    def observation_text(self, observation: np.ndarray, agent: str) -> str:
        mine, theirs = DISCS[self._mark(agent)], DISCS[3 - self._mark(agent)]
        rows = [
            " ".join(mine if cell[0] else theirs if cell[1] else "." for cell in row)
            for row in observation
        ]
        return (
            f"Board (you are {mine}; top row first):\n"
            + "\n".join(rows)
            + "\n"
            + " ".join(str(c) for c in range(COLUMNS))
        )

    def parse_action(self, text: str, agent: str) -> int:
        """The column in ``text`` (the last standalone digit 0-6).

        Raises:
            TypeError: ``text`` is not a ``str``.
            ActionParseError: no column number found.
        """
        found = last_match(_COLUMN, text, "no column found; reply with a column number 0-6")
        return int(found.group())

    def board_text(self) -> str:
        return "\n".join(" ".join(DISCS[int(v)] for v in row) for row in self.board)
