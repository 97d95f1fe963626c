"""CodeUnitTests: write a function from a spec; hidden unit tests run in a fresh sandbox."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from verigym.envs.tool.base import ToolEnv
from verigym.envs.tool.python_math import PYTHON_TOOL
from verigym.kwargs_policy import FLAG, FloatRange, IntRange, client, operator_only
from verigym.sandbox import Limits, PythonSandbox
from verigym.toolcalls import Tool, ToolCall
from verigym.validation import check_bool, check_int, check_number

__all__ = ["CodeUnitTestsEnv", "strict_equal"]


@dataclass(frozen=True)
class _Problem:
    name: str
    spec: str
    reference: (
        str  # source of the reference solution (trusted, run in the parent and by the oracle)
    )
    inputs: Callable[[np.random.Generator], list]  # one test's argument list


def _ints(rng: np.random.Generator, low: int, high: int, size_high: int) -> list[int]:
    return [int(v) for v in rng.integers(low, high, size=int(rng.integers(0, size_high)))]


_WORDS = (
    "ox",
    "tree",
    "amber",
    "sky",
    "lantern",
    "a",
    "harbour",
    "mint",
    "yes",
    "calendar",
    "io",
    "pebble",
)


def _text(rng: np.random.Generator, words: int) -> str:
    return " ".join(
        _WORDS[int(rng.integers(len(_WORDS)))] for _ in range(int(rng.integers(0, words)))
    )


def _problems(rng: np.random.Generator, difficulty: int) -> _Problem:
    k = int(rng.integers(2, 7))
    table: dict[int, list[Callable[[], _Problem]]] = {
        1: [
            lambda: _Problem(
                "sum_divisible",
                f"sum_divisible(xs: list[int]) -> int: the sum of the elements of xs divisible by {k} (0 for none).",
                f"def sum_divisible(xs):\n    return sum(x for x in xs if x % {k} == 0)\n",
                lambda r: [_ints(r, -50, 50, 12)],
            ),
            lambda: _Problem(
                "count_long_words",
                f"count_long_words(text: str) -> int: how many whitespace-separated words of text have more than {k} characters.",
                f"def count_long_words(text):\n    return sum(1 for w in text.split() if len(w) > {k})\n",
                lambda r: [_text(r, 10)],
            ),
            lambda: _Problem(
                "rotate",
                f"rotate(xs: list[int]) -> list[int]: xs rotated right by {k} positions (the last {k} elements, cyclically, come first); [] stays [].",
                f"def rotate(xs):\n    if not xs:\n        return []\n    s = {k} % len(xs)\n    return xs[-s:] + xs[:-s] if s else list(xs)\n",
                lambda r: [_ints(r, 0, 100, 9)],
            ),
        ],
        2: [
            lambda: _Problem(
                "remove_every",
                f"remove_every(s: str) -> str: s without its characters at 1-based positions {k}, {2 * k}, {3 * k}, ...",
                f"def remove_every(s):\n    return ''.join(c for i, c in enumerate(s, 1) if i % {k})\n",
                lambda r: [_text(r, 6)],
            ),
            lambda: _Problem(
                "run_length",
                "run_length(s: str) -> list: run-length encoding of s as a list of [character, count] pairs, e.g. 'aab' -> [['a', 2], ['b', 1]].",
                "def run_length(s):\n    out = []\n    for c in s:\n        if out and out[-1][0] == c:\n            out[-1][1] += 1\n        else:\n            out.append([c, 1])\n    return out\n",
                lambda r: [
                    "".join(
                        "ab"[int(v)] * int(n)
                        for v, n in zip(r.integers(0, 2, 6), r.integers(1, 4, 6))
                    )[: int(r.integers(0, 14))]
                ],
            ),
            lambda: _Problem(
                "caesar",
                f"caesar(s: str) -> str: shift every lowercase ASCII letter of s forward by {k} places in the alphabet (z wraps to a); other characters unchanged.",
                f"def caesar(s):\n    return ''.join(chr((ord(c) - 97 + {k}) % 26 + 97) if 'a' <= c <= 'z' else c for c in s)\n",
                lambda r: [_text(r, 5) + "!Z" * int(r.integers(0, 2))],
            ),
            lambda: _Problem(
                "digit_sum_count",
                f"digit_sum_count(n: int) -> int: how many integers in [1, n] have a decimal digit sum divisible by {k}.",
                f"def digit_sum_count(n):\n    return sum(1 for i in range(1, n + 1) if sum(map(int, str(i))) % {k} == 0)\n",
                lambda r: [int(r.integers(0, 800))],
            ),
        ],
        3: [
            lambda: _Problem(
                "top_distinct",
                f"top_distinct(xs: list[int]) -> list[int]: the {k} largest distinct values of xs in descending order (all of them if there are fewer).",
                f"def top_distinct(xs):\n    return sorted(set(xs), reverse=True)[:{k}]\n",
                lambda r: [_ints(r, -9, 9, 15)],
            ),
            lambda: _Problem(
                "balanced",
                "balanced(s: str) -> bool: whether the brackets ()[]{} in s are balanced and properly nested (other characters are ignored).",
                "def balanced(s):\n    pairs = {')': '(', ']': '[', '}': '{'}\n    stack = []\n    for c in s:\n        if c in '([{':\n            stack.append(c)\n"
                "        elif c in pairs:\n            if not stack or stack.pop() != pairs[c]:\n                return False\n    return not stack\n",
                lambda r: [
                    "".join("()[]{}x"[int(v)] for v in r.integers(0, 7, int(r.integers(0, 12))))
                ],
            ),
            lambda: _Problem(
                "merge_intervals",
                "merge_intervals(pairs: list[list[int]]) -> list[list[int]]: merge overlapping or touching closed intervals [a, b] (a <= b) and return them sorted by start.",
                "def merge_intervals(pairs):\n    out = []\n    for a, b in sorted(pairs):\n        if out and a <= out[-1][1]:\n            out[-1][1] = max(out[-1][1], b)\n        else:\n            out.append([a, b])\n    return out\n",
                lambda r: [
                    [
                        sorted(int(v) for v in r.integers(0, 30, 2))
                        for _ in range(int(r.integers(0, 6)))
                    ]
                ],
            ),
        ],
    }
    pool = table[difficulty]
    return pool[int(rng.integers(len(pool)))]()


def strict_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values with exact types: ``True != 1``, ``1 != 1.0``, lists element-wise."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(strict_equal(a[k], b[k]) for k in a)
    return a == b


class CodeUnitTestsEnv(ToolEnv):
    """Write a Python function from a specification; hidden unit tests decide (LiveCodeBench-style).

    ## Description
    A procedurally drawn function spec (difficulty 1: simple aggregates; 2: string processing,
    encodings; 3: ordering, nesting, intervals) with two worked examples. The agent may try code in
    a sandboxed Python notebook (``python`` tool) and then submits the function's source. The
    submission is run in a **new** sandbox (new namespaces and mounts: nothing the notebook or an
    earlier episode wrote or started is there, and the sandbox is gone before the next episode, so
    the hidden inputs cannot reach a later one) and called on ``num_tests`` hidden inputs; each return
    value comes back as JSON primitives (exact types; an object whose ``__eq__`` is always true is
    refused) and is compared by the parent with the reference's output. The expected outputs and
    the reference never enter the sandbox; what the submission prints is ignored; exiting early
    (``sys.exit``, ``os._exit``) fails the remaining tests.

    ## Action Space
    ``UnicodeText``: ``<tool_call>{"name": "python", "arguments": {"code": "..."}}</tool_call>`` or
    ``<answer>```python\\ndef f(...): ...\\n```</answer>``.

    ## Observation Space
    ``UnicodeText``: the spec on reset; then the notebook's output or an error.

    ## Rewards
    ``1`` when every hidden test passes, else ``0`` (``partial_credit=True``: the fraction passed);
    ``score`` = fraction passed, ``success`` = all passed; ``invalid_action_reward`` for a malformed reply.

    ## Starting State
    Spec, parameters and hidden inputs from the reset seed.

    ## Episode End
    Terminated at the submission; truncated after ``max_turns`` replies (``score=0``).

    ## Arguments
    * ``difficulty`` (int, 1-3); ``num_tests`` (int, 1-50): hidden tests.
    * ``partial_credit`` (bool); ``timeout_s`` (float): limit of one notebook call, and of all hidden tests together.
    * ``unsafe`` (bool): run code without bubblewrap (never for untrusted agents).
    * ``max_turns``, ``invalid_action_reward``, ``max_action_length``: see :class:`ToolEnv`.

    ## Version History
    * v0: initial version.
    """

    metadata = {"render_modes": ["ansi"], "family": "tool"}

    remote_kwargs = {
        "difficulty": client(IntRange(1, 3)),
        "partial_credit": client(FLAG),
        "num_tests": operator_only(IntRange(1, 50), why="each hidden test is a sandbox call"),
        "timeout_s": operator_only(
            FloatRange(0.001, 600.0), why="wall-clock seconds of each code call"
        ),
    }
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(
        self,
        *,
        difficulty: int = 2,
        num_tests: int = 12,
        partial_credit: bool = False,
        timeout_s: float = 5.0,
        unsafe: bool = False,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.difficulty = check_int("difficulty", difficulty, 1, 3)
        self.num_tests = check_int("num_tests", num_tests, 1, 50)
        self.partial_credit = check_bool("partial_credit", partial_credit)
        unsafe = check_bool("unsafe", unsafe)
        self.limits = Limits(timeout_s=check_number("timeout_s", timeout_s, 0, 600, low_open=True))
        self.unsafe = unsafe
        self.sandbox = PythonSandbox(self.limits, unsafe=unsafe)
        self._problem_name = ""
        self._reference = ""
        self._tests: list[tuple[list, Any]] = []
        self._examples: list[tuple[list, Any]] = []

    def _task_instructions(self) -> str:
        return (
            "Write the Python function described below (standard library only). You may run code with the python "
            "tool. Submit the complete source of the function: <answer>```python\ndef ...\n```</answer>. It is run "
            "on hidden tests; the return values must match exactly (types included)."
        )

    def _tools(self) -> Sequence[Tool]:
        return (PYTHON_TOOL,)

    def _generate(self) -> str:
        self.sandbox.fresh()
        rng = self.np_random
        problem = _problems(rng, self.difficulty)
        namespace: dict[str, Any] = {}
        exec(problem.reference, namespace)  # our own reference source, never agent text
        reference = namespace[problem.name]
        cases = [problem.inputs(rng) for _ in range(self.num_tests + 2)]
        normalized = [
            (args, json.loads(json.dumps(reference(*json.loads(json.dumps(args))))))
            for args in cases
        ]
        self._examples, self._tests = normalized[:2], normalized[2:]
        self._problem_name, self._reference = problem.name, problem.reference
        shown = "\n".join(
            f"  {problem.name}(*{json.dumps(a)}) == {json.dumps(out)}" for a, out in self._examples
        )
        return f"Write {problem.spec}\nExamples (arguments as a JSON list):\n{shown}"

    def _call_tool(self, call: ToolCall) -> str:
        code = call.arguments["code"]
        return self.sandbox.run(code).text()

    def _verify(self, answer: str) -> tuple[bool, float]:
        # The notebook is done: a new sandbox that no agent code has touched runs the submission
        # (nothing the agent did in the notebook is left: files, patched builtins, processes), and
        # the next reset replaces it, so the hidden inputs never reach a later episode.
        checker = self.sandbox
        checker.fresh()
        loaded = checker.run(answer)
        passed = 0
        if loaded.ok:
            results = checker.call_many(self._problem_name, [args for args, _ in self._tests])
            passed = sum(
                1
                for result, (_, expected) in zip(results, self._tests)
                if result.ok and strict_equal(result.value, expected)
            )
        return passed == len(self._tests), passed / len(self._tests)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = super().step(action)
        if terminated and not self.partial_credit:
            reward = float(info["success"])
        return observation, reward, terminated, truncated, info

    def oracle_action(self) -> str:
        """Submit the reference solution."""
        return f"<answer>```python\n{self._reference}```</answer>"

    def close(self) -> None:
        self.sandbox.close()
        super().close()
