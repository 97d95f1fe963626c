"""The Matrix type (rows of Fractions)."""

from fractions import Fraction


class MatrixError(ValueError):
    pass


class Matrix:
    def __init__(self, rows):
        rows = [[Fraction(v) for v in row] for row in rows]
        if not rows or not rows[0]:
            raise MatrixError("a matrix needs at least one row and one column")
        width = len(rows[0])
        if any(len(row) != width for row in rows):
            raise MatrixError("rows have different lengths")
        self.rows = rows

    @classmethod
    def identity(cls, n):
        return cls([[1 if i == j else 0 for j in range(n)] for i in range(n)])

    @classmethod
    def zeros(cls, n, m):
        return cls([[0] * m for _ in range(n)])

    @property
    def shape(self):
        return (len(self.rows), len(self.rows[0]))

    def __eq__(self, other):
        return isinstance(other, Matrix) and self.rows == other.rows

    def __repr__(self):
        return f"Matrix({self.tolist()!r})"

    def tolist(self):
        """Rows as lists; whole numbers as int, the rest as 'p/q' strings."""
        return [
            [int(v) if v.denominator == 1 else f"{v.numerator}/{v.denominator}" for v in row]
            for row in self.rows
        ]

    def __getitem__(self, index):
        i, j = index
        return self.rows[i][j]

    def __add__(self, other):
        if self.shape != other.shape:
            raise MatrixError(f"cannot add {self.shape} and {other.shape}")
        return Matrix([[a + b for a, b in zip(r, s)] for r, s in zip(self.rows, other.rows)])

    def __sub__(self, other):
        if self.shape != other.shape:
            raise MatrixError(f"cannot subtract {other.shape} from {self.shape}")
        return Matrix([[a - b for a, b in zip(r, s)] for r, s in zip(self.rows, other.rows)])

    def scale(self, k):
        return Matrix([[v * k for v in row] for row in self.rows])

    def __matmul__(self, other):
        n, m = self.shape
        m2, p = other.shape
        if m != m2:
            raise MatrixError(f"cannot multiply {self.shape} by {other.shape}")
        return Matrix(
            [
                [sum(self.rows[i][k] * other.rows[k][j] for k in range(m)) for j in range(p)]
                for i in range(n)
            ]
        )

    def transpose(self):
        n, m = self.shape
        return Matrix([[self.rows[i][j] for i in range(n)] for j in range(m)])

    def trace(self):
        n, m = self.shape
        if n != m:
            raise MatrixError("trace of a non-square matrix")
        return sum(self.rows[i][i] for i in range(n))

    def power(self, k):
        """Matrix to a non-negative integer power, by repeated squaring."""
        n, m = self.shape
        if n != m:
            raise MatrixError("power of a non-square matrix")
        if k < 0:
            raise MatrixError("negative power")
        result = Matrix.identity(n)
        base = self
        while k > 0:
            if k % 2 == 1:
                result = result @ base
            base = base @ base
            k //= 2
        return result

    def minor(self, i, j):
        """The matrix without row i and column j."""
        return Matrix([row[:j] + row[j + 1 :] for r, row in enumerate(self.rows) if r != i])
