"""Visibility in the ``grid`` family: the egocentric view window and the line-of-sight rule.

The egocentric view is a ``view_size x view_size`` window in front of the agent, the agent at the
bottom row, center column, facing up. A cell is visible when no opaque cell (wall, closed or locked
door) lies on the straight segment between the centers of the agent's cell and that cell; hidden
cells read ``UNSEEN`` (all zeros). The segment test is a precomputed ``(V*V, V*V)`` blocker matrix
(:func:`blocker_matrix`), so a view costs one small matrix product (:meth:`Grid.ego_view
<verigym.envs.grid.grid.Grid.ego_view>`).
"""

from __future__ import annotations

import functools

import numpy as np

from verigym.envs.grid.encoding import DIR_VEC


@functools.lru_cache(maxsize=64)
def ego_offsets(view_size: int, padded_width: int, pad: int) -> np.ndarray:
    """``int64 (4, V * V)`` flat offsets (in padded cells) of the view window for each direction."""
    if view_size < 3 or view_size % 2 == 0 or view_size - 1 > pad:
        raise ValueError(f"view_size must be odd, >= 3 and <= pad + 1 = {pad + 1}, got {view_size}")
    i, j = np.mgrid[0:view_size, 0:view_size]
    ahead, lateral = view_size - 1 - i, j - view_size // 2
    out = np.empty((4, view_size * view_size), dtype=np.int64)
    for d in range(4):
        fwd, right = DIR_VEC[d], DIR_VEC[(d + 1) % 4]
        dr = ahead * fwd[0] + lateral * right[0]
        dc = ahead * fwd[1] + lateral * right[1]
        out[d] = (dr * padded_width + dc).ravel()
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=16)
def blocker_matrix(view_size: int) -> np.ndarray:
    """``float32 (V*V, V*V)``: entry ``[t, k]`` is 1 when view cell ``k`` lies on the segment
    between the agent's cell and view cell ``t`` (endpoints excluded).

    The segment is sampled at 8 points per cell of length; a sample belongs to the cell whose
    center is nearest. ``blocker_matrix(V) @ opaque.ravel() > 0`` marks the hidden cells.
    """
    n = view_size * view_size
    matrix = np.zeros((n, n), dtype=np.float32)
    agent = np.array([view_size - 1, view_size // 2], dtype=np.float64)
    for t in range(n):
        target = np.array(divmod(t, view_size), dtype=np.float64)
        length = np.abs(target - agent).max()
        if length <= 1:
            continue
        samples = np.linspace(0.0, 1.0, int(8 * length) + 1)[1:-1, None]
        points = np.floor(agent + samples * (target - agent) + 0.5).astype(np.int64)
        for r, c in points:
            k = r * view_size + c
            if k != t and (r, c) != tuple(agent.astype(np.int64)):
                matrix[t, k] = 1.0
    matrix.flags.writeable = False
    return matrix
