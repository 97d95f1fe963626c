"""Calculator: exact arithmetic with a calculator tool that evaluates by an AST allow-list."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from verigym.core import ActionParseError
from verigym.envs.tool.base import ToolEnv, tool_call_text
from verigym.envs.tool.python_math import verify_integer
from verigym.kwargs_policy import IntRange, client
from verigym.toolcalls import Tool, ToolCall
from verigym.validation import check_int

__all__ = ["CALCULATOR_TOOL", "CalculatorEnv", "CalculatorError", "evaluate"]

MAX_BITS = 4096
"""Largest numerator/denominator of any intermediate value, bits (about 1233 decimal digits)."""
MAX_NODES = 256
MAX_LENGTH = 2000
MAX_FACTORIAL = 400
_SPACED_DIGITS = re.compile(r"\d\s+\d")
_GROUPED_INTEGER = re.compile(r"[-+]?\d{1,3}(?: \d{3})+(?:\.0+)?")

CALCULATOR_TOOL = Tool(
    name="calculate",
    description=(
        "Evaluate an arithmetic expression exactly (rational arithmetic). Allowed: numbers, + - * / "
        "// % ** and parentheses, and the functions abs, min, max, gcd, lcm, factorial. "
        f"Intermediate values are limited to {MAX_BITS} bits."
    ),
    parameters={
        "type": "object",
        "properties": {"expression": {"type": "string", "description": "e.g. (12 + 7) * 3 // 4"}},
        "required": ["expression"],
    },
)


class CalculatorError(ActionParseError):
    """The expression is not allowed, malformed, or its value is out of bounds."""


def _bounded(value: Fraction) -> Fraction:
    if value.numerator.bit_length() > MAX_BITS or value.denominator.bit_length() > MAX_BITS:
        raise CalculatorError(f"the result exceeds {MAX_BITS} bits")
    return value


def _integer(value: Fraction, what: str) -> int:
    if value.denominator != 1:
        raise CalculatorError(f"{what} must be an integer")
    return value.numerator


def _power(base: Fraction, exponent: Fraction) -> Fraction:
    exp = _integer(exponent, "an exponent")
    if abs(base) not in (0, 1):
        bits = max(base.numerator.bit_length(), base.denominator.bit_length())
        if abs(exp) * max(bits - 1, 1) > MAX_BITS:
            raise CalculatorError(f"the power is too large (more than {MAX_BITS} bits)")
    if base == 0 and exp < 0:
        raise CalculatorError("0 cannot be raised to a negative power")
    return _bounded(base**exp)


def _divide(a: Fraction, b: Fraction, operator: type) -> Fraction:
    if b == 0:
        raise CalculatorError("division by zero")
    if operator is ast.Div:
        return a / b
    if operator is ast.FloorDiv:
        return Fraction(a // b)
    return a % b


def _factorial(n: Fraction) -> Fraction:
    value = _integer(n, "factorial's argument")
    if not 0 <= value <= MAX_FACTORIAL:
        raise CalculatorError(f"factorial takes an integer in [0, {MAX_FACTORIAL}]")
    result = 1
    for k in range(2, value + 1):
        result *= k
    return Fraction(result)


def _gcd_lcm(args: list[Fraction], lcm: bool) -> Fraction:
    import math

    values = [_integer(a, "gcd/lcm arguments") for a in args]
    return _bounded(Fraction(math.lcm(*values) if lcm else math.gcd(*values)))


_FUNCTIONS: dict[str, Any] = {
    "abs": lambda args: abs(args[0]) if len(args) == 1 else None,
    "min": lambda args: min(args) if args else None,
    "max": lambda args: max(args) if args else None,
    "gcd": lambda args: _gcd_lcm(args, False) if args else None,
    "lcm": lambda args: _gcd_lcm(args, True) if args else None,
    "factorial": lambda args: _factorial(args[0]) if len(args) == 1 else None,
}


def _eval(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        if type(node.value) is float and not abs(node.value) < float("inf"):
            raise CalculatorError("numbers must be finite")
        return _bounded(
            Fraction(str(node.value)) if type(node.value) is float else Fraction(node.value)
        )
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _eval(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left), _eval(node.right)
        op = type(node.op)
        if op is ast.Add:
            return _bounded(left + right)
        if op is ast.Sub:
            return _bounded(left - right)
        if op is ast.Mult:
            return _bounded(left * right)
        if op in (ast.Div, ast.FloorDiv, ast.Mod):
            return _bounded(_divide(left, right, op))
        if op is ast.Pow:
            return _power(left, right)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        result = _FUNCTIONS[node.func.id]([_eval(arg) for arg in node.args])
        if result is None:
            raise CalculatorError(f"wrong number of arguments for {node.func.id}")
        return _bounded(result)
    shown = ast.unparse(node) if isinstance(node, ast.expr) else type(node).__name__
    raise CalculatorError(f"not allowed in a calculator expression: {shown[:60]}")


def evaluate(expression: str) -> Fraction:
    """Evaluate an arithmetic expression exactly, never executing it.

    The expression is parsed with :mod:`ast` and walked over an allow-list (numbers, ``+ - * / //
    % **``, unary signs, ``abs min max gcd lcm factorial``); names, attributes, subscripts, calls of
    anything else, and comprehensions are refused. Every intermediate value is bounded by
    :data:`MAX_BITS` (a power is refused *before* it is computed), so ``9**9**9**9`` fails fast.

    Raises:
        CalculatorError: malformed, not allowed, or out of bounds (the message says which).
    """
    if not isinstance(expression, str):
        raise TypeError(f"expression must be a str, got {type(expression).__name__}")
    if len(expression) > MAX_LENGTH:
        raise CalculatorError(f"the expression is longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise CalculatorError(f"not a valid expression: {type(exc).__name__}") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise CalculatorError(f"the expression has more than {MAX_NODES} parts")
    try:
        return _eval(tree)
    except RecursionError:
        raise CalculatorError("the expression is nested too deeply") from None


def format_fraction(value: Fraction) -> str:
    """``"12"`` for integers, ``"7/3 (≈ 2.3333333333)"`` otherwise."""
    if value.denominator == 1:
        return str(value.numerator)
    return f"{value.numerator}/{value.denominator} (≈ {float(value):.10g})"


def _random_expression(rng: np.random.Generator, depth: int, digits: int) -> str:
    if depth == 0 or rng.random() < 0.2:
        return str(int(rng.integers(2, 10**digits)))
    op = ("+", "-", "*", "//", "%")[int(rng.choice(5, p=[0.3, 0.25, 0.3, 0.1, 0.05]))]
    left = _random_expression(rng, depth - 1, digits)
    right = _random_expression(rng, depth - 1, digits)
    if op in ("//", "%"):
        right = str(int(rng.integers(2, 10 ** max(1, digits - 1))))
    return f"({left} {op} {right})"


class CalculatorEnv(ToolEnv):
    """Exact arithmetic with a calculator tool (the "RandomCalculation" kind of task).

    ## Description
    A random integer expression (``+ - * // %`` on numbers of up to ``difficulty + 2`` digits,
    nesting depth ``difficulty + 1``) must be computed exactly. The ``calculate`` tool evaluates
    expressions by an AST allow-list with bounded magnitude, so it is safe against
    ``__import__('os')`` and fast against ``9**9**9**9``; it runs in the library process and never
    executes agent text.

    ## Action Space
    ``UnicodeText``: ``<tool_call>{"name": "calculate", "arguments": {"expression": "..."}}</tool_call>``
    or ``<answer>INTEGER</answer>``.

    ## Observation Space
    ``UnicodeText``: the expression on reset; then the calculator's result or an error.

    ## Rewards
    ``1`` for the exact integer value, ``0`` otherwise; ``invalid_action_reward`` for a malformed
    reply or a refused expression.

    ## Starting State
    The expression is drawn from the reset seed.

    ## Episode End
    Terminated at the final answer; truncated after ``max_turns`` replies (``score=0``).

    ## Arguments
    * ``difficulty`` (int, 1-3): digits and nesting depth.
    * ``max_turns``, ``invalid_action_reward``, ``max_action_length``: see :class:`ToolEnv`.

    ## Version History
    * v0: initial version.
    """

    metadata = {"render_modes": ["ansi"], "family": "tool"}

    remote_kwargs = {"difficulty": client(IntRange(1, 3))}
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(self, *, difficulty: int = 2, **kwargs: Any):
        super().__init__(**kwargs)
        self.difficulty = check_int("difficulty", difficulty, 1, 3)
        self._expression = "0"
        self._gold = 0
        self._oracle_output: str | None = None

    def _task_instructions(self) -> str:
        return (
            "Compute the value of the integer expression (// is floor division, % the remainder with the sign of "
            "the divisor, as in Python). Answer with the integer only: <answer>-42</answer>."
        )

    def _tools(self) -> Sequence[Tool]:
        return (CALCULATOR_TOOL,)

    def _generate(self) -> str:
        self._expression = _random_expression(
            self.np_random, self.difficulty + 1, self.difficulty + 2
        )
        self._gold = _integer(evaluate(self._expression), "the task")
        self._oracle_output = None
        return f"Compute: {self._expression}"

    def _call_tool(self, call: ToolCall) -> str:
        result = format_fraction(evaluate(call.arguments["expression"]))
        if call.arguments["expression"] == self._expression:
            self._oracle_output = result
        return result

    def _verify(self, answer: str) -> tuple[bool, float]:
        # spaces inside a number only as thousands separators: "0 0" or "12 12" is not 0 or 1212
        if _SPACED_DIGITS.search(answer) and not _GROUPED_INTEGER.fullmatch(
            answer.strip().rstrip(".")
        ):
            return False, 0.0
        return verify_integer(answer, self._gold)

    def oracle_action(self) -> str:
        """Ask the calculator for the whole expression, then answer with its result."""
        if self._oracle_output is None:
            return tool_call_text("calculate", expression=self._expression)
        return f"<answer>{self._oracle_output}</answer>"
