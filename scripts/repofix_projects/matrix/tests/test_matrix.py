import unittest
from fractions import Fraction

from matrix import Matrix, MatrixError, determinant, inverse, rank, solve

A = Matrix([[2, 1], [1, 3]])
B = Matrix([[1, 2, 3], [0, 1, 4], [5, 6, 0]])


class CoreTest(unittest.TestCase):
    def test_shape_and_tolist(self):
        self.assertEqual(B.shape, (3, 3))
        self.assertEqual(Matrix([[1, 2, 3]]).shape, (1, 3))
        self.assertEqual(Matrix([[Fraction(1, 2), 2]]).tolist(), [["1/2", 2]])

    def test_bad_shapes(self):
        with self.assertRaises(MatrixError):
            Matrix([[1, 2], [3]])
        with self.assertRaises(MatrixError):
            Matrix([])
        with self.assertRaises(MatrixError):
            A + Matrix([[1, 2, 3], [4, 5, 6]])

    def test_add_sub_scale(self):
        self.assertEqual((A + A).tolist(), [[4, 2], [2, 6]])
        self.assertEqual((A - Matrix.identity(2)).tolist(), [[1, 1], [1, 2]])
        self.assertEqual(A.scale(Fraction(1, 2)).tolist(), [[1, "1/2"], ["1/2", "3/2"]])

    def test_matmul(self):
        self.assertEqual((A @ Matrix([[1], [2]])).tolist(), [[4], [7]])
        self.assertEqual((Matrix([[1, 2, 3]]) @ Matrix([[1], [1], [1]])).tolist(), [[6]])
        with self.assertRaises(MatrixError):
            A @ Matrix([[1, 2, 3]])

    def test_transpose(self):
        self.assertEqual(
            Matrix([[1, 2, 3], [4, 5, 6]]).transpose().tolist(), [[1, 4], [2, 5], [3, 6]]
        )

    def test_trace(self):
        self.assertEqual(B.trace(), Fraction(2))
        with self.assertRaises(MatrixError):
            Matrix([[1, 2]]).trace()

    def test_power(self):
        fib = Matrix([[1, 1], [1, 0]])
        self.assertEqual(fib.power(10).tolist(), [[89, 55], [55, 34]])
        self.assertEqual(fib.power(0), Matrix.identity(2))
        self.assertEqual(fib.power(1), fib)
        with self.assertRaises(MatrixError):
            fib.power(-1)

    def test_minor(self):
        self.assertEqual(B.minor(0, 1).tolist(), [[0, 4], [5, 0]])
        self.assertEqual(B.minor(2, 2).tolist(), [[1, 2], [0, 1]])

    def test_zeros_identity(self):
        self.assertEqual(Matrix.zeros(2, 3).tolist(), [[0, 0, 0], [0, 0, 0]])
        self.assertEqual(Matrix.identity(3)[1, 1], Fraction(1))
        self.assertEqual(Matrix.identity(3)[0, 1], Fraction(0))


class LinalgTest(unittest.TestCase):
    def test_determinant(self):
        self.assertEqual(determinant(A), Fraction(5))
        self.assertEqual(determinant(B), Fraction(1))
        self.assertEqual(determinant(Matrix([[0, 1], [1, 0]])), Fraction(-1))
        self.assertEqual(determinant(Matrix([[1, 2], [2, 4]])), Fraction(0))
        self.assertEqual(determinant(Matrix([[7]])), Fraction(7))

    def test_determinant_needs_square(self):
        with self.assertRaises(MatrixError):
            determinant(Matrix([[1, 2]]))

    def test_rank(self):
        self.assertEqual(rank(B), 3)
        self.assertEqual(rank(Matrix([[1, 2], [2, 4]])), 1)
        self.assertEqual(rank(Matrix([[0, 0], [0, 0]])), 0)
        self.assertEqual(rank(Matrix([[1, 2, 3], [2, 4, 6], [1, 0, 1]])), 2)

    def test_inverse(self):
        self.assertEqual(inverse(A).tolist(), [["3/5", "-1/5"], ["-1/5", "2/5"]])
        self.assertEqual(inverse(B).tolist(), [[-24, 18, 5], [20, -15, -4], [-5, 4, 1]])
        self.assertEqual(B @ inverse(B), Matrix.identity(3))

    def test_inverse_with_row_swap(self):
        m = Matrix([[0, 1], [1, 0]])
        self.assertEqual(inverse(m), m)

    def test_singular(self):
        with self.assertRaises(MatrixError):
            inverse(Matrix([[1, 2], [2, 4]]))
        with self.assertRaises(MatrixError):
            solve(Matrix([[1, 2], [2, 4]]), [1, 2])

    def test_solve(self):
        self.assertEqual(solve(A, [3, 5]), [Fraction(4, 5), Fraction(7, 5)])
        self.assertEqual(solve(B, [14, 14, 17]), [Fraction(1), Fraction(2), Fraction(3)])
        self.assertEqual(solve(Matrix([[0, 2], [3, 0]]), [4, 9]), [Fraction(3), Fraction(2)])

    def test_solve_checks_sizes(self):
        with self.assertRaises(MatrixError):
            solve(A, [1, 2, 3])
