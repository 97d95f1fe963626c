import unittest

from exprcalc import LexError, ParseError, Token, evaluate, parse, tokenize, variables


class LexerTest(unittest.TestCase):
    def test_tokens(self):
        self.assertEqual(
            [(t.kind, t.text) for t in tokenize("x1 + 2.5*(y // 3)")],
            [
                ("name", "x1"),
                ("op", "+"),
                ("number", "2.5"),
                ("op", "*"),
                ("op", "("),
                ("name", "y"),
                ("op", "//"),
                ("number", "3"),
                ("op", ")"),
                ("end", ""),
            ],
        )

    def test_positions(self):
        self.assertEqual(tokenize("ab  **2")[1], Token("op", "**", 4))
        self.assertEqual(tokenize("ab  **2")[-1], Token("end", "", 7))

    def test_numbers(self):
        self.assertEqual(
            [t.text for t in tokenize("1.5e3 .5 7e-2 3e")][:-1], ["1.5e3", ".5", "7e-2", "3", "e"]
        )

    def test_bad_character(self):
        with self.assertRaises(LexError) as caught:
            tokenize("1 + $")
        self.assertEqual(caught.exception.position, 4)

    def test_second_dot_ends_number(self):
        self.assertEqual([t.text for t in tokenize("1.2.3")][:-1], ["1.2", ".3"])


class ParserTest(unittest.TestCase):
    def test_precedence(self):
        self.assertEqual(parse("1 + 2 * 3"), ("+", ("num", 1), ("*", ("num", 2), ("num", 3))))

    def test_left_associative(self):
        self.assertEqual(parse("8 - 3 - 2"), ("-", ("-", ("num", 8), ("num", 3)), ("num", 2)))

    def test_power_right_associative(self):
        self.assertEqual(parse("2 ** 3 ** 2"), ("**", ("num", 2), ("**", ("num", 3), ("num", 2))))

    def test_call(self):
        self.assertEqual(parse("max(1, x)"), ("call", "max", (("num", 1), ("var", "x"))))
        self.assertEqual(parse("f()"), ("call", "f", ()))

    def test_errors(self):
        for text in ("1 +", "(1", "1 2", ")", "max(1,", ""):
            with self.assertRaises(ParseError):
                parse(text)


class EvaluateTest(unittest.TestCase):
    def test_arithmetic(self):
        self.assertEqual(evaluate("1 + 2 * 3"), 7)
        self.assertEqual(evaluate("(1 + 2) * 3"), 9)
        self.assertEqual(evaluate("10 - 4 - 3"), 3)
        self.assertEqual(evaluate("7 // 2"), 3)
        self.assertEqual(evaluate("7 % 4"), 3)
        self.assertEqual(evaluate("7 / 2"), 3.5)
        self.assertEqual(evaluate("2 ** 3 ** 2"), 512)

    def test_unary_minus(self):
        self.assertEqual(evaluate("-3 + 5"), 2)
        self.assertEqual(evaluate("--4"), 4)
        self.assertEqual(evaluate("-2 ** 2"), -4)
        self.assertEqual(evaluate("+7"), 7)

    def test_floats(self):
        self.assertEqual(evaluate("1.5e1 + .5"), 15.5)

    def test_variables(self):
        self.assertEqual(evaluate("x * y + 1", {"x": 3, "y": 4}), 13)
        with self.assertRaises(NameError):
            evaluate("x + 1")

    def test_functions(self):
        self.assertEqual(evaluate("max(1, 5, 3) + min(4, 2)"), 7)
        self.assertEqual(evaluate("abs(-3)"), 3)
        self.assertEqual(evaluate("sqrt(16)"), 4.0)
        self.assertEqual(evaluate("round(2.567, 2)"), 2.57)

    def test_function_arity(self):
        with self.assertRaises(TypeError):
            evaluate("abs(1, 2)")
        with self.assertRaises(TypeError):
            evaluate("round(1, 2, 3)")
        with self.assertRaises(TypeError):
            evaluate("max()")
        with self.assertRaises(NameError):
            evaluate("nope(1)")

    def test_division_by_zero(self):
        for text in ("1 / 0", "1 // 0", "1 % 0"):
            with self.assertRaises(ZeroDivisionError):
                evaluate(text)

    def test_variables_listed(self):
        self.assertEqual(variables("b + max(a, -c) * a"), ["a", "b", "c"])
        self.assertEqual(variables("1 + 2"), [])
