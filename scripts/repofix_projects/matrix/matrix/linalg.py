"""Gaussian elimination on exact Fractions."""

from fractions import Fraction

from matrix.core import Matrix, MatrixError


def _echelon(rows):
    """Row echelon form of a copy of ``rows``; returns (rows, swaps, pivot columns)."""
    rows = [list(r) for r in rows]
    n, m = len(rows), len(rows[0])
    swaps = 0
    pivots = []
    r = 0
    for c in range(m):
        if r >= n:
            break
        pivot = None
        for i in range(r, n):
            if rows[i][c] != 0:
                pivot = i
                break
        if pivot is None:
            continue
        if pivot != r:
            rows[r], rows[pivot] = rows[pivot], rows[r]
            swaps += 1
        for i in range(r + 1, n):
            factor = rows[i][c] / rows[r][c]
            for j in range(c, m):
                rows[i][j] -= factor * rows[r][j]
        pivots.append(c)
        r += 1
    return rows, swaps, pivots


def determinant(matrix):
    n, m = matrix.shape
    if n != m:
        raise MatrixError("determinant of a non-square matrix")
    rows, swaps, _ = _echelon(matrix.rows)
    result = Fraction(-1) ** swaps
    for i in range(n):
        result *= rows[i][i]
    return result


def rank(matrix):
    return len(_echelon(matrix.rows)[2])


def inverse(matrix):
    n, m = matrix.shape
    if n != m:
        raise MatrixError("inverse of a non-square matrix")
    augmented = [
        row + [Fraction(int(i == j)) for j in range(n)] for i, row in enumerate(matrix.rows)
    ]
    rows, _, pivots = _echelon(augmented)
    if pivots[:n] != list(range(n)):
        raise MatrixError("the matrix is singular")
    for i in range(n - 1, -1, -1):
        pivot = rows[i][i]
        rows[i] = [v / pivot for v in rows[i]]
        for k in range(i):
            factor = rows[k][i]
            rows[k] = [a - factor * b for a, b in zip(rows[k], rows[i])]
    return Matrix([row[n:] for row in rows])


def solve(matrix, vector):
    """x with matrix @ x == vector, for a square non-singular matrix; a list of Fractions."""
    n, m = matrix.shape
    if len(vector) != n:
        raise MatrixError(f"the vector has {len(vector)} entries, expected {n}")
    if n != m:
        raise MatrixError("solve needs a square matrix")
    augmented = [row + [Fraction(v)] for row, v in zip(matrix.rows, vector)]
    rows, _, pivots = _echelon(augmented)
    if pivots[:n] != list(range(n)):
        raise MatrixError("the matrix is singular")
    x = [Fraction(0)] * n
    for i in range(n - 1, -1, -1):
        total = rows[i][n] - sum(rows[i][j] * x[j] for j in range(i + 1, n))
        x[i] = total / rows[i][i]
    return x
