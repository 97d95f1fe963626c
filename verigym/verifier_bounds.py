"""Worst-case cost of an environment's verifier on adversarial replies (``verigym check``).

Every verifier must be bounded in time and memory on any reply its action space admits
(docs/design.md section 2). :func:`measure_worst_case` plays a fixed set of adversarial replies --
long, deeply nested, huge numbers, power towers, many variables, huge repetition counts, code that
never ends -- against an environment whose actions are text, each reply wrapped the ways an agent
may send it (bare, ``<answer>...</answer>``, ``\\boxed{...}``, and as every string argument of every
tool the environment offers in its instructions or its reset info's ``tools``; every argument also
gets a 4000-digit integer and lists nested 2000 deep as raw JSON), and reports the slowest step
and the largest growth of the process's peak memory. :func:`verigym.checker.check_env` fails an
env whose worst reply takes more than :data:`WORST_CASE_SECONDS` or grows the checking process's
peak resident memory by more than :data:`WORST_CASE_MEMORY_BYTES`.

What is measured, for ``env.step(reply)`` right after ``env.reset(seed=...)``: the CPU time it
takes in this process and in the verifier worker processes (:class:`verigym.workers.BoundedWorker`,
those stopped at their limit included; other children, such as a test runner's, are not counted:
they may be busy with other work), its wall-clock time, and the growth of this process's peak
resident set (``VmHWM``, reset before each step through ``/proc/self/clear_refs``). The time bound
is CPU time, the unit of the verifier workers' own limits, so a loaded machine that gives the
checker half a core does not turn a check that needs 1 s of CPU into a failure; a step that waits
without computing, or computes in a process of another kind, is caught by the wall-clock backstop
of :data:`~verigym.workers.WALL_CLOCK_FACTOR` times the bound (a step that computes at least
:data:`~verigym.workers.COMPUTING_CPU_SHARE` of its wall time is starved, not blocked, and is
stopped only at :data:`~verigym.workers.MAX_WALL_CLOCK_FACTOR` times; wall-clock alone where
``/proc`` is missing). A step over a bound is replayed once and
the better try counts. Memory of other processes must be capped there (verifier workers run under
:data:`verigym.workers.MEMORY_CAP_BYTES`, the sandbox under its own limits).

Envs whose action space is not text (``Discrete``, ``Box``, ...) are skipped: their verifiers do
not read free-form input. Envs that run agent code in :mod:`verigym.sandbox` (found by
:func:`sandbox_deadline`) are bounded in wall-clock time (the sandbox's deadline is wall-clock: a
program that sleeps must be stopped too) by the sandbox's own deadline plus
:data:`SANDBOX_MARGIN_SECONDS` instead of 2 s; once one never-ending program has been stopped at
that deadline in a reply format, the other never-ending programs are not replayed in it. The
measured env's sandbox deadline is first cut to :data:`SANDBOX_CHECK_DEADLINE_SECONDS` (when
longer): what is checked is that the deadline holds on every path a reply can take, whatever its
length, and a never-ending program then costs one second instead of the env's default 5-10.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from verigym.toolcalls import hermes_call
from verigym.workers import (
    COMPUTING_CPU_SHARE,
    MAX_WALL_CLOCK_FACTOR,
    WALL_CLOCK_FACTOR,
    memory_sizes,
    verifier_cpu_seconds,
)

__all__ = [
    "WORST_CASE_MEMORY_BYTES",
    "WORST_CASE_SECONDS",
    "WorstCase",
    "adversarial_payloads",
    "adversarial_replies",
    "measure_worst_case",
    "sandbox_deadline",
    "tool_schemas",
]

logger = logging.getLogger(__name__)

WORST_CASE_SECONDS = 2.0
"""Longest a verifier may take on one reply, seconds of CPU time (this process and its verifier
workers), with a wall-clock backstop of :data:`~verigym.workers.WALL_CLOCK_FACTOR` times it."""
WORST_CASE_MEMORY_BYTES = 512 << 20
"""Most a verifier may grow the checking process's peak resident memory on one reply, bytes."""
SANDBOX_MARGIN_SECONDS = 2.0
"""An env that runs agent code in :mod:`verigym.sandbox` is bounded by the sandbox's deadline plus
this (starting a fresh sandbox, collecting the verdict)."""
SANDBOX_CHECK_DEADLINE_SECONDS = 1.0
"""The sandbox deadline :func:`measure_worst_case` gives the env it measures (seconds)."""

_VARIABLES = 400
_BOXED_LABELS = ("nested", "power_tower", "long")
_REPEAT = "999999999"


def adversarial_payloads(max_length: int) -> list[tuple[str, str]]:
    """The adversarial answer texts, each at most ``max_length`` characters.

    Args:
        max_length: the longest text the action space admits (characters).

    Returns:
        ``(label, text)`` pairs: long text, deep nesting of every bracket kind, huge numbers and
        power towers (Python, caret and LaTeX spellings), factorials, many variables (sums, logic
        formulas, name lists), huge repetition counts (regex quantifiers, string products, nested
        run-length encodings, SQL ``printf``/``randomblob``/recursive CTEs) and code that never
        ends.
    """
    budget = max(1, max_length)
    depth = max(1, min(5000, (budget - 8) // 2))
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    names = [f"x{i}" for i in range(_VARIABLES)]
    payloads = [
        ("long_digits", "9" * budget),
        ("long_words", ("ab " * (budget // 3 + 1))[:budget]),
        ("nested_parentheses", "(" * depth + "1" + ")" * depth),
        ("nested_brackets", "[" * depth + "1" + "]" * depth),
        ("nested_braces", "{" * depth + "1" + "}" * depth),
        ("nested_json", '{"a":' * (depth // 3) + "1" + "}" * (depth // 3)),
        ("power_tower_python", "9**9**9**9**9"),
        ("power_tower_caret", "9^9^9^9^9"),
        ("power_tower_latex", "10^{10^{10^{10^{10}}}}"),
        ("huge_exponent", f"1e{_REPEAT}"),
        ("huge_fraction", f"1/1e{_REPEAT} + 10**{_REPEAT}"),
        ("factorial", f"{_REPEAT}!"),
        ("many_variables_sum", " + ".join(names)),
        (
            "many_variables_product",
            "(" + ") * (".join(f"{a} + {b}" for a, b in zip(letters, letters[1:])) + ")**99",
        ),
        ("many_variables_logic", " ∧ ".join(f"({a} ∨ ¬{b})" for a, b in zip(names, names[1:]))),
        (
            "many_variables_logic_ascii",
            " and ".join(f"({a} or not {b})" for a, b in zip(names, names[1:])),
        ),
        ("many_names", ", ".join(f"{n} is a knight" for n in names)),
        ("repetition_regex", "(a+)+" * 20 + "a{" + _REPEAT + "}"),
        ("repetition_product", f"'x' * 10**{_REPEAT}"),
        ("repetition_encoded", f"{_REPEAT}[" * 40 + "a" + "]" * 40),
        ("repetition_words", f"repeat 'ab' {_REPEAT} times"),
        ("repetition_moves", f"U{_REPEAT} R{_REPEAT} L{_REPEAT}"),
        ("sql_printf", f"SELECT length(printf('%.*c', {_REPEAT}9, 'x'))"),
        ("sql_blob", "SELECT length(replace(randomblob(2000000000), x'00', zeroblob(1000000)))"),
        (
            "sql_recursive",
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c",
        ),
        ("code_loop", "while True:\n    pass"),
        ("code_memory", "x = [0] * 10**10\nprint(len(x))"),
    ]
    return [(label, text[:budget]) for label, text in payloads]


def tool_schemas(instructions: str) -> list[dict[str, Any]]:
    """The OpenAI function-calling schemas written one per line in an env's instructions.

    Returns:
        ``[{"name": ..., "parameters": {...}}, ...]``; empty when the env offers no tools.
    """
    found = []
    for line in instructions.splitlines():
        line = line.strip()
        if not (line.startswith("{") and '"function"' in line):
            continue
        try:
            schema = json.loads(line)
        except ValueError:
            continue
        function = schema.get("function") if isinstance(schema, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            found.append({"name": function["name"], "parameters": function.get("parameters") or {}})
    return found


def _offered_tools(instructions: str, tools: Any) -> list[dict[str, Any]]:
    """The tools of :func:`tool_schemas` and those of an OpenAI ``tools`` list (a reset info's
    ``"tools"``), each name once."""
    found = {schema["name"]: schema for schema in tool_schemas(instructions)}
    for entry in tools if isinstance(tools, (list, tuple)) else ():
        function = entry.get("function") if isinstance(entry, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            parameters = function.get("parameters")
            found.setdefault(
                function["name"],
                {
                    "name": function["name"],
                    "parameters": parameters if isinstance(parameters, dict) else {},
                },
            )
    return list(found.values())


_RAW_ARGUMENTS = (
    ("huge_integer", "9" * 4000),
    ("huge_negative_integer", "-" + "9" * 4000),
    ("nested_json_argument", "[" * 2000 + "]" * 2000),
)
"""JSON values written raw as an argument of every type: a number no float holds (4000 digits) and
lists nested deeper than the JSON parser's recursion limit."""


def adversarial_replies(
    max_length: int, instructions: str = "", tools: Any = None
) -> list[tuple[str, str]]:
    """Every payload of :func:`adversarial_payloads` in every format an agent may send it.

    Args:
        max_length: the longest reply the action space admits (characters).
        instructions: the env's instructions; tools described there (OpenAI schemas, one per line)
            get each payload as every string argument.
        tools: an OpenAI ``tools`` list (the reset info's ``"tools"``): these tools get the
            payloads too.

    Returns:
        ``(label, reply)`` pairs, each reply at most ``max_length`` characters. Inside ``\\boxed{}``
        only the long, nested and power-tower payloads are sent (the rest reach the same check as
        in ``<answer>``). Every argument of every tool also gets the raw JSON values of
        :data:`_RAW_ARGUMENTS` (a 4000-digit integer, lists nested 2000 deep).
    """
    replies = []
    wrappers: list[tuple[str, Callable[[str], str]]] = [
        ("bare", lambda p: p),
        ("answer", lambda p: f"<answer>{p}</answer>"),
        ("boxed", lambda p: f"\\boxed{{{p}}}"),
    ]
    offered = _offered_tools(instructions, tools)
    for schema in offered:
        properties = (schema["parameters"] or {}).get("properties") or {}
        strings = [
            k
            for k, v in properties.items()
            if isinstance(v, dict) and v.get("type", "string") == "string"
        ]
        for key in strings:
            others = {k: _filler(v) for k, v in properties.items() if k != key}

            def call(
                payload: str, name: str = schema["name"], key: str = key, others: dict = others
            ) -> str:
                return hermes_call(name, {**others, key: payload})

            wrappers.append((f"tool:{schema['name']}.{key}", call))
    for wrapper, wrap in wrappers:
        budget = max(1, max_length - len(wrap("")))
        for index, (label, payload) in enumerate(adversarial_payloads(budget)):
            if wrapper == "boxed" and not label.startswith(_BOXED_LABELS):
                continue  # \\boxed{} shares the <answer> path; only brace-heavy payloads differ
            reply, smaller = wrap(payload), budget
            while len(reply) > max_length and smaller > 1:  # JSON escaping made it longer: shrink
                smaller //= 2
                reply = wrap(adversarial_payloads(smaller)[index][1])
            if len(reply) <= max_length:
                replies.append((f"{label}/{wrapper}", reply))
    for schema in offered:
        properties = (schema["parameters"] or {}).get("properties") or {}
        for key in properties:
            others = {k: _filler(v) for k, v in properties.items() if k != key}
            for label, raw in _RAW_ARGUMENTS:
                body, value = json.dumps(others), f"{json.dumps(key)}: {raw}"
                arguments = f"{{{value}}}" if body == "{}" else f"{body[:-1]}, {value}}}"
                reply = hermes_call(schema["name"], arguments)  # JSON text, written as given
                if len(reply) <= max_length:
                    replies.append((f"{label}/raw:{schema['name']}.{key}", reply))
    return replies


def _filler(schema: Any) -> Any:
    """A valid value for a JSON-schema property (the first enum value, else a neutral one)."""
    if not isinstance(schema, dict):
        return ""
    if schema.get("enum"):
        return schema["enum"][0]
    return {"integer": 1, "number": 1, "boolean": False, "array": [], "object": {}}.get(
        schema.get("type", "string"), ""
    )


@dataclass
class WorstCase:
    """The result of :func:`measure_worst_case`.

    Attributes:
        replies: replies played.
        seconds: the slowest step, seconds of CPU time (wall clock for sandbox envs and where
            ``/proc`` is missing; the better of two tries when over a bound).
        wall_seconds: the wall-clock time of that step, seconds.
        slowest: label of the slowest reply.
        memory_bytes: the largest growth of peak resident memory during one step, bytes.
        hungriest: label of that reply.
        problems: replies over a bound or whose step raised, one line each.
    """

    replies: int = 0
    seconds: float = 0.0
    wall_seconds: float = 0.0
    slowest: str = ""
    memory_bytes: int = 0
    hungriest: str = ""
    problems: list[str] = field(default_factory=list)


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")
    except OSError:  # pragma: no cover - not Linux or not permitted: the peak then only grows
        pass


def _cpu_seconds_so_far() -> float | None:
    """CPU seconds used so far by this process and its verifier workers
    (:func:`verigym.workers.verifier_cpu_seconds`); ``None`` without ``/proc``."""
    workers = verifier_cpu_seconds()
    return None if workers is None else time.process_time() + workers


def _timed_step(env: gym.Env, reply: str, seed: int) -> tuple[float | None, float, int]:
    """``(CPU seconds or None without /proc, wall seconds, peak-memory growth)`` of one step."""
    env.reset(seed=seed)
    _reset_peak()
    (before,) = memory_sizes("VmRSS")  # resident bytes (0 without /proc)
    cpu_start, start = _cpu_seconds_so_far(), time.perf_counter()
    env.step(reply)
    elapsed = time.perf_counter() - start
    cpu_end = _cpu_seconds_so_far()
    (peak,) = memory_sizes("VmHWM")  # peak resident bytes since _reset_peak
    cpu = None if cpu_start is None or cpu_end is None else max(0.0, cpu_end - cpu_start)
    return cpu, elapsed, max(0, peak - before)


_CODE_LABELS = ("code_", "power_tower_python", "repetition_product", "huge_fraction")
"""Payloads that are (also) Python programs which never end or exhaust memory."""


def _sandbox_limits(env: gym.Env) -> list[tuple[Any, str, Any]]:
    """``(owner, attribute, limits)`` of every :class:`verigym.sandbox.Limits` the unwrapped env
    holds: as its own attribute (owner: the env) or as a sandbox attribute's ``limits``."""
    from verigym.sandbox import Limits

    found = []
    for name, value in vars(env.unwrapped).items():
        if isinstance(value, Limits):
            found.append((env.unwrapped, name, value))
        elif isinstance(getattr(value, "limits", None), Limits):
            found.append((value, "limits", value.limits))
    return found


def sandbox_deadline(env: gym.Env) -> float | None:
    """The wall-clock deadline (seconds) of the :mod:`verigym.sandbox` an env runs agent code in.

    Found on the unwrapped env as a :class:`verigym.sandbox.Limits` attribute or a sandbox
    attribute with ``limits``; ``None`` when the env runs no agent code there.
    """
    deadlines = [float(limits.timeout_s) for _, _, limits in _sandbox_limits(env)]
    return max(deadlines) if deadlines else None


def _cut_sandbox_deadlines(env: gym.Env, seconds: float) -> None:
    """Give every sandbox :class:`~verigym.sandbox.Limits` of the unwrapped env a ``timeout_s`` of
    at most ``seconds`` (new ``Limits`` objects: one shared with other envs is never changed)."""
    from dataclasses import replace

    for owner, name, limits in _sandbox_limits(env):
        if limits.timeout_s > seconds:
            setattr(owner, name, replace(limits, timeout_s=seconds))


def measure_worst_case(
    factory: Callable[[], gym.Env],
    *,
    seed: int = 0,
    seconds: float = WORST_CASE_SECONDS,
    memory_bytes: int = WORST_CASE_MEMORY_BYTES,
) -> WorstCase | None:
    """Score every adversarial reply once and report the worst time and memory.

    Args:
        factory: makes the env (a fresh instance is used and closed).
        seed: reset seed before each reply.
        seconds: time bound per reply, seconds of CPU time (wall clock for sandbox envs), with a
            wall-clock backstop of :data:`~verigym.workers.WALL_CLOCK_FACTOR` times it for a step
            that blocks (computes less than :data:`~verigym.workers.COMPUTING_CPU_SHARE` of its
            wall time), :data:`~verigym.workers.MAX_WALL_CLOCK_FACTOR` times it for any step.
        memory_bytes: bound on the growth of peak resident memory per reply (bytes).

    Returns:
        The measurement, or ``None`` when the env's actions are not text. The measurement stops at
        the first reply over the time bound (confirmed by a second try).
    """
    env = factory()
    try:
        space = env.action_space
        if not isinstance(space, spaces.Text):
            return None
        _, info = env.reset(seed=seed)
        instructions = info.get("instructions") if isinstance(info, dict) else None
        tools = info.get("tools") if isinstance(info, dict) else None
        if not isinstance(instructions, str):
            text_interface = getattr(env.unwrapped, "instructions", None)
            instructions = text_interface() if callable(text_interface) else ""
        result = WorstCase()
        _cut_sandbox_deadlines(env, SANDBOX_CHECK_DEADLINE_SECONDS)
        deadline = sandbox_deadline(env)
        if deadline is not None:  # agent code runs until the sandbox kills it: that is the bound
            seconds = max(seconds, deadline + SANDBOX_MARGIN_SECONDS)
        wall_bound = seconds if deadline is not None else WALL_CLOCK_FACTOR * seconds

        def over(cpu: float | None, wall: float) -> bool:
            if deadline is not None or cpu is None:  # wall clock: the sandbox's unit, or no /proc
                return wall > seconds
            # past the backstop only when the step did not compute (it blocked), as the workers'
            # own backstop: a loaded machine that starves a computing step is no overrun
            computing = cpu >= COMPUTING_CPU_SHARE * wall
            return (
                cpu > seconds
                or (wall > wall_bound and not computing)
                or wall > MAX_WALL_CLOCK_FACTOR * seconds
            )

        shown: set[str] = set()
        for label, reply in adversarial_replies(space.max_length, instructions, tools):
            wrapper = label.split("/", 1)[1]
            if label.startswith(_CODE_LABELS) and wrapper in shown:
                continue  # the sandbox deadline already held for this format
            result.replies += 1
            try:
                cpu, wall, grown = _timed_step(env, reply, seed)
                if over(cpu, wall):  # a load spike is not a failure: the better of two tries counts
                    cpu_again, wall_again, grown_again = _timed_step(env, reply, seed)
                    if not over(cpu_again, wall_again) or wall_again < wall:
                        cpu, wall = cpu_again, wall_again
                    grown = max(grown, grown_again)
            except Exception as exc:
                result.problems.append(
                    f"{label}: step raised {type(exc).__name__}: {str(exc)[:200]}"
                )
                continue
            elapsed = wall if deadline is not None or cpu is None else cpu
            if deadline is not None and label.startswith(_CODE_LABELS) and wall >= 0.5 * deadline:
                shown.add(wrapper)
            if elapsed > result.seconds:
                result.seconds, result.wall_seconds, result.slowest = elapsed, wall, label
            if grown > result.memory_bytes:
                result.memory_bytes, result.hungriest = grown, label
            if grown > memory_bytes:
                result.problems.append(
                    f"{label}: peak memory grew by {grown >> 20} MiB (bound {memory_bytes >> 20} MiB)"
                )
            if over(cpu, wall):
                if deadline is not None or cpu is None:
                    result.problems.append(f"{label}: scored in {wall:.2f} s (bound {seconds:g} s)")
                else:
                    result.problems.append(
                        f"{label}: scored in {cpu:.2f} s of CPU time, {wall:.2f} s wall clock "
                        f"(bound {seconds:g} s of CPU time, {wall_bound:g} s wall clock)"
                    )
                break  # one confirmed overrun fails the env; the rest would only cost time
        return result
    finally:
        env.close()
