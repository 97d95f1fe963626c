"""The :class:`Grid` of the ``grid`` family: an encoded cell array inside a wall padding.

Single-agent tasks (:class:`~verigym.envs.grid.base.GridEnv`) and multi-agent games both hold their
world in a :class:`Grid`. Objects are array entries, not instances, so stepping touches only
integers and preallocated arrays. The cell encoding is :mod:`verigym.envs.grid.encoding`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from verigym.envs.grid.encoding import CODE_WEIGHTS, EMPTY, OPAQUE_CODE, WALL
from verigym.envs.grid.visibility import blocker_matrix, ego_offsets


class Grid:
    """A ``height x width`` grid of cells inside a wall padding of ``pad`` cells.

    ``cells`` is a view of the ``uint8 (height, width, 3)`` interior of ``padded``; writing to
    ``cells`` is all a task or a game has to do. The padding (walls) lets :meth:`ego_view` read a
    window near the border with one index operation.

    Args:
        height: rows, >= 3.
        width: columns, >= 3.
        pad: padding in cells; at least ``view_size - 1`` for egocentric views of that size.

    Raises:
        ValueError: a size out of range.
    """

    def __init__(self, height: int, width: int, *, pad: int = 6):
        if height < 3 or width < 3 or pad < 0:
            raise ValueError(
                f"grid must be at least 3x3 with pad >= 0, got {height}x{width}, pad {pad}"
            )
        self.height, self.width, self.pad = int(height), int(width), int(pad)
        self.padded = np.zeros((height + 2 * pad, width + 2 * pad, 3), dtype=np.uint8)
        self.padded[..., 0] = WALL
        self.cells = self.padded[pad : pad + height, pad : pad + width]
        self.cells[..., 0] = EMPTY
        self._flat = self.padded.reshape(-1, 3)

    def __getstate__(self) -> dict[str, Any]:
        return {
            "height": self.height,
            "width": self.width,
            "pad": self.pad,
            "padded": self.padded.copy(),
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.height, self.width, self.pad = state["height"], state["width"], state["pad"]
        self.padded = state["padded"]
        self.cells = self.padded[
            self.pad : self.pad + self.height, self.pad : self.pad + self.width
        ]
        self._flat = self.padded.reshape(-1, 3)

    def copy(self) -> Grid:
        """An independent copy."""
        other = Grid.__new__(Grid)
        other.__setstate__(self.__getstate__())
        return other

    # construction helpers
    def set(self, r: int, c: int, kind: int, color: int = 0, state: int = 0) -> None:
        """Put an object ``(kind, color, state)`` on cell ``(r, c)``."""
        self.cells[r, c] = (kind, color, state)

    def clear(self, r: int, c: int) -> None:
        """Make cell ``(r, c)`` empty floor."""
        self.cells[r, c] = (EMPTY, 0, 0)

    def wall_rect(self, top: int, left: int, height: int, width: int) -> None:
        """Draw the outline of a rectangle of walls."""
        bottom, right = top + height - 1, left + width - 1
        self.cells[top, left : right + 1] = (WALL, 0, 0)
        self.cells[bottom, left : right + 1] = (WALL, 0, 0)
        self.cells[top : bottom + 1, left] = (WALL, 0, 0)
        self.cells[top : bottom + 1, right] = (WALL, 0, 0)

    def find(self, kind: int, color: int | None = None) -> np.ndarray:
        """``int64 (n, 2)``: the cells holding objects of ``kind`` (and ``color``), row-major order."""
        hit = self.cells[..., 0] == kind
        if color is not None:
            hit &= self.cells[..., 1] == color
        return np.argwhere(hit)

    # views
    def ego_view(
        self,
        r: int,
        c: int,
        direction: int,
        view_size: int = 7,
        *,
        see_through_walls: bool = False,
        hidden: np.ndarray | None = None,
    ) -> np.ndarray:
        """The egocentric view of an agent at ``(r, c)`` facing ``direction``.

        Args:
            r, c, direction: the agent's cell and direction.
            view_size: odd side of the view window.
            see_through_walls: show every cell of the window.
            hidden: a precomputed :meth:`hidden_cells` mask for this pose (callers that know the
                opaque cells did not change may cache it); computed when ``None``.

        Returns:
            ``uint8 (view_size, view_size, 3)``, a new array: row 0 is the farthest row ahead, the
            agent's cell is ``(view_size - 1, view_size // 2)`` and holds what the grid holds there
            (callers overwrite it, e.g. with the carried object). Out-of-grid cells read as walls;
            cells hidden behind opaque cells read as ``UNSEEN`` unless ``see_through_walls``.

        Raises:
            ValueError: ``view_size`` is even, < 3, or larger than ``pad + 1``.
        """
        width = self.padded.shape[1]
        offsets = ego_offsets(view_size, width, self.pad)[direction]
        view = self._flat.take(offsets + ((r + self.pad) * width + c + self.pad), axis=0)
        if not see_through_walls:
            if hidden is None:
                hidden = blocker_matrix(view_size).dot(OPAQUE_CODE.take(view.dot(CODE_WEIGHTS))) > 0
            view[hidden] = 0
        return view.reshape(view_size, view_size, 3)

    def hidden_cells(self, r: int, c: int, direction: int, view_size: int = 7) -> np.ndarray:
        """``bool (view_size * view_size,)``: the cells of the view window (row-major) that opaque
        cells hide from an agent at ``(r, c)`` facing ``direction``."""
        width = self.padded.shape[1]
        offsets = ego_offsets(view_size, width, self.pad)[direction]
        view = self._flat.take(offsets + ((r + self.pad) * width + c + self.pad), axis=0)
        return blocker_matrix(view_size).dot(OPAQUE_CODE.take(view.dot(CODE_WEIGHTS))) > 0
