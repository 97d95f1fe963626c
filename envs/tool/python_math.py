"""PythonMath: math word problems solved with a sandboxed Python tool; the answer is verified."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from verigym.envs.tool.base import ToolEnv, tool_call_text
from verigym.kwargs_policy import FloatRange, IntRange, client, operator_only
from verigym.sandbox import Limits, PythonSandbox
from verigym.toolcalls import Tool, ToolCall
from verigym.validation import check_bool, check_int, check_number

__all__ = ["PYTHON_TOOL", "PythonMathEnv", "parse_integer_answer", "verify_integer"]

PYTHON_TOOL = Tool(
    name="python",
    description=(
        "Run Python 3 code in a sandbox (standard library only, no network, no files of the host). "
        "State persists between calls like a notebook. Returns what the code printed; the value of a "
        "final expression is printed like in a notebook."
    ),
    parameters={
        "type": "object",
        "properties": {"code": {"type": "string", "description": "Python source"}},
        "required": ["code"],
    },
)

_INTEGER_ANSWER = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+$|^[-+]?\d+$")


def parse_integer_answer(text: str) -> int | None:
    """The integer an answer states (``"1,234"``, ``"-7"``, ``"12.0"``), or ``None``.

    Anything else (two numbers, words, ``"41 or 42"``) is ``None``: no credit for hedging.
    """
    cleaned = text.strip().rstrip(".").replace(" ", "")
    if re.fullmatch(r"[-+]?\d+\.0+", cleaned):
        cleaned = cleaned.split(".")[0]
    if len(cleaned) > 200 or not _INTEGER_ANSWER.match(cleaned):
        return None
    return int(cleaned.replace(",", ""))


def verify_integer(answer: str, gold: int) -> tuple[bool, float]:
    """(success, score) of an integer answer: exactly ``gold`` (see :func:`parse_integer_answer`)."""
    value = parse_integer_answer(answer)
    correct = value is not None and value == gold
    return correct, 1.0 if correct else 0.0


def _primes_between(low: int, high: int) -> int:
    sieve = np.ones(high + 1, dtype=bool)
    sieve[:2] = False
    for p in range(2, math.isqrt(high) + 1):
        if sieve[p]:
            sieve[p * p :: p] = False
    return int(sieve[low : high + 1].sum())


def _fibonacci_mod(n: int, m: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, (a + b) % m
    return a


# Each generator: rng -> (question, gold answer, oracle code). The gold answer is computed here by
# trusted code; the oracle code is an independent program the oracle runs in the sandbox.
Problem = tuple[str, int, str]


def _boxes(rng: np.random.Generator) -> Problem:
    rows, trees, apples, box = (
        int(rng.integers(lo, hi)) for lo, hi in ((12, 90), (15, 60), (40, 400), (6, 48))
    )
    question = (
        f"An orchard has {rows} rows of {trees} apple trees, and each tree gives {apples} apples. "
        f"The apples are packed in boxes of {box}. How many boxes can be filled completely?"
    )
    return question, rows * trees * apples // box, f"print({rows} * {trees} * {apples} // {box})"


def _savings(rng: np.random.Generator) -> Problem:
    start, weekly, weeks, spend = (
        int(rng.integers(100, 5000)),
        int(rng.integers(100, 400)),
        int(rng.integers(20, 160)),
        int(rng.integers(5, 90)),
    )
    question = (
        f"Mia has {start} dollars. Every week she earns {weekly} dollars and spends {spend} dollars. "
        f"How many dollars does she have after {weeks} weeks?"
    )
    return (
        question,
        start + weeks * (weekly - spend),
        f"print({start} + {weeks} * ({weekly} - {spend}))",
    )


def _multiples(rng: np.random.Generator) -> Problem:
    p, q, n = (
        int(rng.integers(3, 13)),
        int(rng.integers(13, 40)),
        int(rng.integers(10_000, 150_000)),
    )
    question = (
        f"What is the sum of all positive integers below {n} that are multiples of {p} or {q}?"
    )
    gold = (
        sum(k for k in range(n) if k % p == 0 or k % q == 0)
        if n < 50_000
        else (
            _sum_multiples(p, n) + _sum_multiples(q, n) - _sum_multiples(p * q // math.gcd(p, q), n)
        )
    )
    return question, gold, f"print(sum(k for k in range({n}) if k % {p} == 0 or k % {q} == 0))"


def _sum_multiples(k: int, n: int) -> int:
    count = (n - 1) // k
    return k * count * (count + 1) // 2


def _primes(rng: np.random.Generator) -> Problem:
    low = int(rng.integers(1, 50_000))
    high = low + int(rng.integers(1_000, 150_000))
    question = f"How many prime numbers are there between {low} and {high}, inclusive?"
    code = (
        f"n = {high}\ns = bytearray([1]) * (n + 1)\ns[0] = s[1] = 0\n"
        "for p in range(2, int(n ** 0.5) + 1):\n    if s[p]:\n        s[p*p::p] = bytearray(len(s[p*p::p]))\n"
        f"print(sum(s[{low}:n + 1]))"
    )
    return question, _primes_between(low, high), code


def _power_digits(rng: np.random.Generator) -> Problem:
    base, exponent, digits = (
        int(rng.integers(2, 999)),
        int(rng.integers(1000, 10**9)),
        int(rng.integers(4, 10)),
    )
    question = f"What number do the last {digits} digits of {base}^{exponent} form (leading zeros dropped)?"
    return (
        question,
        pow(base, exponent, 10**digits),
        f"print(pow({base}, {exponent}, 10**{digits}))",
    )


def _fibonacci(rng: np.random.Generator) -> Problem:
    n, m = int(rng.integers(500, 50_000)), int(rng.integers(1_000, 1_000_000))
    question = f"Let F(0)=0, F(1)=1, F(k)=F(k-1)+F(k-2). What is F({n}) modulo {m}?"
    code = f"a, b = 0, 1\nfor _ in range({n}):\n    a, b = b, (a + b) % {m}\nprint(a)"
    return question, _fibonacci_mod(n, m), code


LEVELS: dict[int, Sequence[Callable[[np.random.Generator], Problem]]] = {
    1: (_boxes, _savings),
    2: (_multiples, _power_digits),
    3: (_primes, _fibonacci),
}


class PythonMathEnv(ToolEnv):
    """Math word problems with a sandboxed Python interpreter as the tool.

    ## Description
    A procedurally generated problem (difficulty 1: multi-step arithmetic stories; 2: sums of
    multiples below up to 1.5*10^5, last digits of huge powers; 3: prime counts in ranges, Fibonacci
    numbers modulo m) whose answer is an integer. The agent may run Python in
    :class:`verigym.sandbox.PythonSandbox` (a notebook that persists through the episode) and then
    answers. Like "math with a code interpreter" setups (ToRL, ReTool).

    ## Action Space
    ``UnicodeText(max_action_length)``: a tool call
    ``<tool_call>{"name": "python", "arguments": {"code": "..."}}</tool_call>`` or a final answer
    ``<answer>INTEGER</answer>`` (see :mod:`verigym.toolcalls`).

    ## Observation Space
    ``UnicodeText``: the problem on reset; then the tool's output (printed text, capped) or an
    error message.

    ## Rewards
    ``1`` for a final answer equal to the integer solution (commas allowed, nothing else), ``0``
    otherwise; ``invalid_action_reward`` (default ``-0.1``) for a malformed reply. The answer is
    compared by the parent process; nothing the code printed is trusted.

    ## Starting State
    Problem template and numbers from the reset seed.

    ## Episode End
    Terminated at the final answer (``success`` = correct, ``score`` = reward); truncated after
    ``max_turns`` replies (``success=False``, ``score=0``).

    ## Arguments
    * ``difficulty`` (int, 1-3): the problem level.
    * ``timeout_s`` (float): wall-clock limit of one Python call, seconds.
    * ``unsafe`` (bool): run code without bubblewrap (never for untrusted agents).
    * ``max_turns``, ``invalid_action_reward``, ``max_action_length``: see :class:`ToolEnv`.

    ## Version History
    * v0: initial version.
    """

    metadata = {"render_modes": ["ansi"], "family": "tool"}

    remote_kwargs = {
        "difficulty": client(IntRange(1, 3)),
        "timeout_s": operator_only(
            FloatRange(0.001, 600.0), why="wall-clock seconds of each code call"
        ),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(
        self, *, difficulty: int = 2, timeout_s: float = 10.0, unsafe: bool = False, **kwargs: Any
    ):
        super().__init__(**kwargs)
        self.difficulty = check_int("difficulty", difficulty, 1, 3)
        timeout_s = check_number("timeout_s", timeout_s, 0, 600, low_open=True)
        self.sandbox = PythonSandbox(
            Limits(timeout_s=timeout_s), unsafe=check_bool("unsafe", unsafe)
        )
        self._gold = 0
        self._oracle_code = ""
        self._oracle_output: str | None = None

    def _task_instructions(self) -> str:
        return "Solve the math problem. You may run Python to compute. Answer with the integer only: <answer>123</answer>."

    def _tools(self) -> Sequence[Tool]:
        return (PYTHON_TOOL,)

    def _generate(self) -> str:
        self.sandbox.fresh()
        generators = LEVELS[self.difficulty]
        question, self._gold, self._oracle_code = generators[
            int(self.np_random.integers(len(generators)))
        ](self.np_random)
        self._oracle_output = None
        return question

    def _call_tool(self, call: ToolCall) -> str:
        result = self.sandbox.run(call.arguments["code"])
        if call.arguments["code"] == self._oracle_code and result.ok:
            self._oracle_output = result.output
        return result.text()

    def _verify(self, answer: str) -> tuple[bool, float]:
        return verify_integer(answer, self._gold)

    def oracle_action(self) -> str:
        """Run an independent program for the problem, then answer with what it printed."""
        if self._oracle_output is None:
            return tool_call_text("python", code=self._oracle_code)
        return f"<answer>{self._oracle_output.strip()}</answer>"

    def close(self) -> None:
        self.sandbox.close()
        super().close()
