"""Minesweeper on boards that logic alone can clear (no guessing needed)."""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np

from verigym.core import ActionParseError
from verigym.envs.text.base import DIFFICULTIES, TextGameEnv
from verigym.validation import check_choice

__all__ = ["MinesweeperEnv", "deduce"]

# difficulty -> (rows, cols, mines)
_LEVELS = {"easy": (6, 6, 5), "medium": (8, 8, 10), "hard": (9, 9, 14)}
_MOVE = re.compile(
    r"(reveal|flag|open|click)?\s*\(?\s*(?<!\d)(\d{1,4})\s*[, ]\s*(\d{1,4})(?!\d)\s*\)?"
)


@functools.lru_cache(maxsize=4096)
def _neighbours(r: int, c: int, rows: int, cols: int) -> tuple[tuple[int, int], ...]:
    return tuple(
        (r + dr, c + dc)
        for dr in (-1, 0, 1)
        for dc in (-1, 0, 1)
        if (dr or dc) and 0 <= r + dr < rows and 0 <= c + dc < cols
    )


def deduce(
    revealed: np.ndarray, numbers: np.ndarray
) -> tuple[set[tuple[int, int]], set[tuple[int, int]]]:
    """Cells provably safe and provably mines, from the revealed numbers alone.

    Uses the single-cell rule (a number equal to its known mines makes the other unknown
    neighbours safe; equal to known mines plus unknown neighbours makes them all mines) and the
    subset rule between pairs of constraints, repeated to a fixed point.

    Args:
        revealed: bool array (rows, cols), True where the cell is open.
        numbers: int array (rows, cols), the count of adjacent mines (read only where revealed).

    Returns:
        (safe, mines): sets of (row, col) of unopened cells.
    """
    rows, cols = revealed.shape
    safe: set[tuple[int, int]] = set()
    mines: set[tuple[int, int]] = set()
    changed = True
    while changed:
        changed = False
        constraints = []
        for r, c in zip(*np.nonzero(revealed)):
            around = _neighbours(int(r), int(c), rows, cols)
            unknown = frozenset(
                n for n in around if not revealed[n] and n not in safe and n not in mines
            )
            if not unknown:
                continue
            left = int(numbers[r, c]) - sum(n in mines for n in around)
            constraints.append((unknown, left))
        for unknown, left in constraints:
            if left == 0:
                new = unknown - safe
                safe |= new
                changed |= bool(new)
            elif left == len(unknown):
                new = unknown - mines
                mines |= new
                changed |= bool(new)
        if changed:
            continue
        by_cell: dict[tuple[int, int], list[int]] = {}
        for index, (unknown, _) in enumerate(constraints):
            for cell in unknown:
                by_cell.setdefault(cell, []).append(index)
        for a, left_a in constraints:
            related = {j for cell in a for j in by_cell[cell]}
            for j in sorted(related):
                b, left_b = constraints[j]
                if not a < b:
                    continue
                rest, extra = b - a, left_b - left_a
                if extra == 0 and rest - safe:
                    safe |= rest
                    changed = True
                elif extra == len(rest) and rest - mines:
                    mines |= rest
                    changed = True
    return safe, mines


class MinesweeperEnv(TextGameEnv):
    """Minesweeper whose boards are generated to be cleared by deduction alone.

    ## Description
    A rows x cols board hides mines. The reset opens a safe start cell with no adjacent mines
    (and the region around it). Each move opens or flags a cell; an opened cell shows its count
    of adjacent mines. Boards are redrawn until the deduction solver (:func:`deduce`) clears
    them from the start, so no guess is ever needed; the oracle opens a cell the solver proves
    safe.

    ## Action Space
    ``UnicodeText(8192)``: ``reveal R C`` or ``flag R C`` (0-based row and column; ``R C`` alone
    reveals).

    ## Observation Space
    ``UnicodeText``: the board, one row per line: ``#`` hidden, ``F`` flagged, ``.`` or a digit
    open; after a move also what happened.

    ## Rewards
    ``+1`` when every safe cell is open; ``invalid_action_reward`` (default ``-0.1``) for a
    malformed move, a cell off the board or already open (the turn is spent); ``0`` otherwise.

    ## Starting State
    Levels (rows, cols, mines): easy (6, 6, 5), medium (8, 8, 10), hard (9, 9, 14).

    ## Episode End
    Terminated when all safe cells are open (success) or a mine is opened (score = share of safe
    cells open); truncated after ``safe cells + 10`` turns.

    ## Arguments
    * ``difficulty``: ``"easy"``, ``"medium"`` or ``"hard"``.
    * ``invalid_action_reward`` (float).

    ## Version History
    * v0: initial version.
    """

    def __init__(
        self,
        *,
        difficulty: str = "easy",
        invalid_action_reward: float = -0.1,
        render_mode: str | None = None,
    ):
        self.difficulty = check_choice("difficulty", difficulty, DIFFICULTIES)
        self.rows, self.cols, self.mines = _LEVELS[difficulty]
        self._init_base(
            max_turns=self.rows * self.cols - self.mines + 10,
            invalid_action_reward=invalid_action_reward,
            render_mode=render_mode,
        )
        self._mine = np.zeros((self.rows, self.cols), dtype=bool)
        self._numbers = np.zeros((self.rows, self.cols), dtype=np.int8)
        self._open = np.zeros((self.rows, self.cols), dtype=bool)
        self._flag = np.zeros((self.rows, self.cols), dtype=bool)

    def instructions(self) -> str:
        return (
            f"Minesweeper on a {self.rows}x{self.cols} board with {self.mines} mines. Open every cell "
            "without a mine. Reply 'reveal R C' to open the cell in row R, column C (0-based) or "
            "'flag R C' to mark a mine. '#' is hidden, 'F' flagged, '.' open with no adjacent mine, "
            "a digit counts the adjacent mines. No guessing is ever needed."
        )

    def _board(self) -> str:
        lines = []
        for r in range(self.rows):
            cells = []
            for c in range(self.cols):
                if self._open[r, c]:
                    cells.append(str(self._numbers[r, c]) if self._numbers[r, c] else ".")
                else:
                    cells.append("F" if self._flag[r, c] else "#")
            lines.append(f"{r:2d} " + " ".join(cells))
        return "   " + " ".join(str(c % 10) for c in range(self.cols)) + "\n" + "\n".join(lines)

    def _flood(self, r: int, c: int) -> None:
        stack = [(r, c)]
        while stack:
            cell = stack.pop()
            if self._open[cell]:
                continue
            self._open[cell] = True
            self._flag[cell] = False
            if self._numbers[cell] == 0:
                stack.extend(
                    n for n in _neighbours(*cell, self.rows, self.cols) if not self._open[n]
                )

    def _new_task(self) -> str:
        for _ in range(2000):
            start = (
                int(self.np_random.integers(self.rows)),
                int(self.np_random.integers(self.cols)),
            )
            forbidden = {start, *_neighbours(*start, self.rows, self.cols)}
            cells = [
                (r, c)
                for r in range(self.rows)
                for c in range(self.cols)
                if (r, c) not in forbidden
            ]
            chosen = self.np_random.choice(len(cells), size=self.mines, replace=False)
            self._mine[:] = False
            for index in chosen:
                self._mine[cells[int(index)]] = True
            padded = np.pad(self._mine, 1).astype(np.int8)
            self._numbers = sum(
                padded[1 + dr : 1 + dr + self.rows, 1 + dc : 1 + dc + self.cols]
                for dr in (-1, 0, 1)
                for dc in (-1, 0, 1)
                if dr or dc
            ).astype(np.int8)
            self._open[:] = False
            self._flag[:] = False
            self._flood(*start)
            if self._solvable():
                self._open[:] = False
                self._flood(*start)
                break
        else:  # pragma: no cover - a solvable board is found within a few dozen draws
            raise RuntimeError("could not generate a Minesweeper board solvable by deduction")
        return f"{self.instructions()}\n{self._board()}"

    def _solvable(self) -> bool:
        while not self._won():
            safe, _ = deduce(self._open, self._numbers)
            if not safe:
                return False
            for cell in safe:
                self._flood(*cell)
        return True

    def _won(self) -> bool:
        return int(self._open.sum()) == self.rows * self.cols - self.mines

    def _parse(self, text: str) -> tuple[str, int, int]:
        found = _MOVE.findall(text)
        if not found:
            raise ActionParseError("reply 'reveal R C' or 'flag R C' with 0-based row and column")
        verb, r, c = found[-1]
        r, c = int(r), int(c)
        if not (0 <= r < self.rows and 0 <= c < self.cols):
            raise ActionParseError(f"cell ({r}, {c}) is off the {self.rows}x{self.cols} board")
        return ("flag" if verb == "flag" else "reveal"), r, c

    def _play(self, move: Any) -> tuple[str, bool, bool]:
        verb, r, c = move
        if self._open[r, c]:
            raise ActionParseError(f"cell ({r}, {c}) is already open")
        if verb == "flag":
            self._flag[r, c] = not self._flag[r, c]
            return (
                f"{'Flagged' if self._flag[r, c] else 'Unflagged'} ({r}, {c}).\n{self._board()}",
                False,
                False,
            )
        if self._mine[r, c]:
            self._open[r, c] = True
            return f"Boom: ({r}, {c}) was a mine.\n{self._board()}", False, True
        self._flood(r, c)
        won = self._won()
        return (
            f"Opened ({r}, {c}).{' All safe cells are open!' if won else ''}\n{self._board()}",
            won,
            False,
        )

    def _partial_score(self) -> float:
        return float(self._open.sum() - self._mine[self._open].sum()) / (
            self.rows * self.cols - self.mines
        )

    def oracle_action(self) -> str:
        """Open a cell the deduction solver proves safe (the first in row-major order)."""
        safe, _ = deduce(self._open, self._numbers)
        if not safe:  # only after a non-oracle move opened a mine; any hidden cell will do
            hidden = np.argwhere(~self._open)
            safe = {tuple(int(x) for x in hidden[0])} if len(hidden) else {(0, 0)}
        r, c = min(safe)
        return f"reveal {r} {c}"
