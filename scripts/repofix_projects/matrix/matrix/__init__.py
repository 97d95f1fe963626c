"""Exact matrices over Fractions: arithmetic, determinant, inverse, linear solve, rank."""

from matrix.core import Matrix, MatrixError
from matrix.linalg import determinant, inverse, rank, solve

__all__ = ["Matrix", "MatrixError", "determinant", "inverse", "rank", "solve"]
