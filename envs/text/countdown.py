"""Countdown / 24: reach a target number with the given numbers and + - * /, with feedback."""

from __future__ import annotations

import ast
import re
from fractions import Fraction
from typing import Any

from verigym.core import ActionParseError
from verigym.envs.text.base import DIFFICULTIES, TextGameEnv
from verigym.validation import check_choice

__all__ = ["CountdownEnv", "evaluate_arithmetic"]

# difficulty -> (how many numbers, the largest number, target range or None for 24, attempts)
_LEVELS = {
    "easy": (4, 13, None, 6),
    "medium": (5, 25, (20, 200), 6),
    "hard": (6, 100, (100, 999), 8),
}
_EXPRESSION = re.compile(r"[0-9+\-*/()\s]+")
_OPERATORS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


def evaluate_arithmetic(text: str, *, max_length: int = 200) -> tuple[Fraction, list[int]]:
    """Exact value of an integer expression with ``+ - * /`` and parentheses, and its numbers.

    Parsed with :func:`ast.parse` and walked by hand (never ``eval``): only integer literals,
    the four binary operators and parentheses are accepted. Division is exact (fractions).

    Raises:
        ActionParseError: other characters or syntax, a literal with more than 6 digits, or a
            division by zero.
    """
    text = text.strip()
    if not text or len(text) > max_length or not _EXPRESSION.fullmatch(text):
        raise ActionParseError(
            f"write an expression of at most {max_length} characters with numbers, + - * / and parentheses"
        )
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        raise ActionParseError(f"could not read the expression {text[:60]!r}") from None
    numbers: list[int] = []

    def walk(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            if node.value >= 10**6:
                raise ActionParseError(f"number {node.value} is too large")
            numbers.append(node.value)
            return Fraction(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Sub):
                return left - right
            if isinstance(node.op, ast.Mult):
                return left * right
            if right == 0:
                raise ActionParseError("division by zero")
            return left / right
        raise ActionParseError(
            "only numbers, + - * / and parentheses are allowed (no unary minus, no **)"
        )

    return walk(tree.body), numbers


class CountdownEnv(TextGameEnv):
    """The 24 game (easy) and the Countdown numbers game (medium, hard), with feedback.

    ## Description
    The agent gets numbers and a target and writes an arithmetic expression using each given
    number at most once (each exactly once in the 24 game) with ``+ - * /`` and parentheses.
    Every attempt is answered with its exact value or what is wrong with it. Tasks are built
    backwards from a random expression over the numbers, so every task is solvable; the oracle
    replies with that expression.

    ## Action Space
    ``UnicodeText(8192)``: the reply; the expression is the last line outside ``<think>``, with
    anything up to the last ``:`` and from the first ``=`` on dropped (``"Answer: (8-4)*6 = 24"``
    reads ``(8-4)*6``).

    ## Observation Space
    ``UnicodeText``: the numbers and target, then ``"Turn t/T. (8-4)*5 = 20, not 24."``.

    ## Rewards
    ``+1`` when an expression hits the target; ``invalid_action_reward`` (default ``-0.1``) for an
    unreadable expression or one using numbers that were not given; ``0`` otherwise.

    ## Starting State
    easy: 4 numbers in 1..13, target 24; medium: 5 numbers in 1..25, target in 20..200; hard: 6
    numbers in 1..100, target in 100..999.

    ## Episode End
    Terminated on the first exact hit (success); truncated after the attempts (6, 6, 8) are
    spent; then ``score = max(0, 1 - |best - target| / target)`` of the closest valid attempt.

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
        self.count, self.largest, self.target_range, attempts = _LEVELS[difficulty]
        self._init_base(
            max_turns=attempts, invalid_action_reward=invalid_action_reward, render_mode=render_mode
        )
        self._numbers: list[int] = []
        self._target = 24
        self._solution = ""
        self._best = 0.0

    def instructions(self) -> str:
        use = (
            "each number exactly once" if self.target_range is None else "each number at most once"
        )
        return (
            f"Reach the target with the given numbers, using {use}, + - * / and parentheses. "
            "Reply with the expression alone, e.g. (8 - 4) * 6. You get its value after each attempt."
        )

    def _new_task(self) -> str:
        for _ in range(1000):
            numbers = [
                int(x) for x in self.np_random.integers(1, self.largest + 1, size=self.count)
            ]
            used = (
                self.count
                if self.target_range is None
                else int(self.np_random.integers(3, self.count + 1))
            )
            order = [int(i) for i in self.np_random.permutation(self.count)[:used]]
            value, text = Fraction(numbers[order[0]]), str(numbers[order[0]])
            for index in order[1:]:
                number = numbers[index]
                op = "+-*/"[int(self.np_random.integers(4))]
                if op == "/" and (number == 0 or (value / number).denominator != 1):
                    op = "*"
                if op == "-" and value - number <= 0:
                    op = "+"
                value = {
                    "+": value + number,
                    "-": value - number,
                    "*": value * number,
                    "/": value / number,
                }[op]
                text = f"({text} {op} {number})"
            low, high = (24, 24) if self.target_range is None else self.target_range
            if value.denominator == 1 and low <= value <= high:
                self._numbers, self._target, self._solution = (
                    numbers,
                    int(value),
                    text[1:-1] if text.startswith("(") else text,
                )
                break
        else:  # pragma: no cover - every level finds a task within a few draws
            raise RuntimeError("could not generate a Countdown task")
        self._best = 0.0
        return f"{self.instructions()}\nNumbers: {' '.join(map(str, self._numbers))}. Target: {self._target}."

    def _parse(self, text: str) -> tuple[Fraction, str]:
        line = text.strip().splitlines()[-1].split(":")[-1].split("=")[0].strip().strip(".`*")
        value, used = evaluate_arithmetic(line)
        pool = list(self._numbers)
        for number in used:
            if number not in pool:
                raise ActionParseError(
                    f"{number} is not one of the numbers left ({' '.join(map(str, self._numbers))}); each number may be used once"
                )
            pool.remove(number)
        if self.target_range is None and pool:
            raise ActionParseError(
                f"use all four numbers exactly once; unused: {' '.join(map(str, pool))}"
            )
        return value, line

    def _play(self, move: Any) -> tuple[str, bool, bool]:
        value, line = move
        hit = value == self._target
        if value.denominator == 1:
            self._best = max(
                self._best, max(0.0, 1.0 - abs(float(value) - self._target) / self._target)
            )
        shown = (
            str(value.numerator)
            if value.denominator == 1
            else f"{value.numerator}/{value.denominator}"
        )
        feedback = f"{line} = {shown}" + ("!" if hit else f", not {self._target}.")
        return feedback, hit, False

    def _partial_score(self) -> float:
        """``1 - |best - target| / target`` of the closest integer-valued attempt, at least 0."""
        return self._best

    def oracle_action(self) -> str:
        """The expression the task was generated from."""
        return self._solution
