"""FunctionCalling: user requests plus function schemas; reward by structured match of the calls."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from verigym.core import ActionParseError, action_error_info, episode_end
from verigym.envs.tool.base import ToolEnv
from verigym.kwargs_policy import FLAG, IntRange, client
from verigym.toolcalls import Tool, check_arguments, hermes_call, tool_calls_in
from verigym.validation import check_bool, check_int

__all__ = ["FUNCTIONS", "FunctionCallingEnv", "calls_score"]


def _fn(name: str, description: str, properties: dict[str, Any], required: Sequence[str]) -> Tool:
    return Tool(
        name, description, {"type": "object", "properties": properties, "required": list(required)}
    )


_CITIES = (
    "Oslo",
    "Lima",
    "Hanoi",
    "Nairobi",
    "Lisbon",
    "Quito",
    "Perth",
    "Tunis",
    "Seoul",
    "Dakar",
)
_CURRENCIES = ("USD", "EUR", "JPY", "GBP", "INR", "BRL", "KES")
_PEOPLE = (
    "ana@example.com",
    "bo@example.org",
    "chen@example.net",
    "dara@example.com",
    "emil@example.org",
)
_SUBJECTS = ("budget review", "team lunch", "quarterly report", "travel plans", "server outage")
_LANGUAGES = ("French", "German", "Japanese", "Swahili", "Portuguese")
_PHRASES = (
    "good morning",
    "where is the station",
    "thank you very much",
    "the meeting is cancelled",
)
_SYMBOLS = ("ACME", "GLOBX", "INITECH", "UMBR", "WAYNE")

FUNCTIONS: dict[str, Tool] = {
    t.name: t
    for t in (
        _fn(
            "get_weather",
            "Current weather for a city.",
            {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
            },
            ["city"],
        ),
        _fn(
            "convert_currency",
            "Convert an amount of money between currencies.",
            {
                "amount": {"type": "number"},
                "from_currency": {"type": "string", "enum": list(_CURRENCIES)},
                "to_currency": {"type": "string", "enum": list(_CURRENCIES)},
            },
            ["amount", "from_currency", "to_currency"],
        ),
        _fn(
            "set_timer",
            "Start a countdown timer.",
            {"minutes": {"type": "integer"}, "label": {"type": "string", "default": ""}},
            ["minutes"],
        ),
        _fn(
            "send_email",
            "Send an e-mail.",
            {"to": {"type": "string"}, "subject": {"type": "string"}},
            ["to", "subject"],
        ),
        _fn(
            "search_flights",
            "Search flights between two cities on a date (YYYY-MM-DD).",
            {
                "origin": {"type": "string"},
                "destination": {"type": "string"},
                "date": {"type": "string"},
                "passengers": {"type": "integer", "default": 1},
            },
            ["origin", "destination", "date"],
        ),
        _fn(
            "get_stock_price",
            "Latest price of a stock by ticker symbol.",
            {"symbol": {"type": "string"}},
            ["symbol"],
        ),
        _fn(
            "translate",
            "Translate a text into a language.",
            {
                "text": {"type": "string"},
                "target_language": {"type": "string", "enum": list(_LANGUAGES)},
            },
            ["text", "target_language"],
        ),
    )
}

Call = tuple[str, dict[str, Any]]
_Pick = Callable[[Sequence[Any]], Any]


def _request(name: str, rng: np.random.Generator) -> tuple[str, Call]:
    """A phrase asking for one call of ``name`` and the gold call (defaults filled in)."""
    pick: _Pick = lambda seq: seq[int(rng.integers(len(seq)))]  # noqa: E731
    if name == "get_weather":
        city, unit = pick(_CITIES), pick(("celsius", "fahrenheit"))
        return f"what's the weather in {city} in {unit}", (name, {"city": city, "unit": unit})
    if name == "convert_currency":
        amount = int(rng.integers(5, 5000)) + pick((0.0, 0.5, 0.25))
        a, b = rng.choice(len(_CURRENCIES), size=2, replace=False)
        shown = f"{amount:g}"
        return f"convert {shown} {_CURRENCIES[a]} to {_CURRENCIES[b]}", (
            name,
            {"amount": amount, "from_currency": _CURRENCIES[a], "to_currency": _CURRENCIES[b]},
        )
    if name == "set_timer":
        minutes, label = int(rng.integers(1, 120)), pick(("tea", "laundry", "pasta", "stretch"))
        return f"set a {minutes}-minute timer labelled {label}", (
            name,
            {"minutes": minutes, "label": label},
        )
    if name == "send_email":
        to, subject = pick(_PEOPLE), pick(_SUBJECTS)
        return f'email {to} with the subject "{subject}"', (name, {"to": to, "subject": subject})
    if name == "search_flights":
        a, b = rng.choice(len(_CITIES), size=2, replace=False)
        date = f"2026-{int(rng.integers(1, 13)):02d}-{int(rng.integers(1, 29)):02d}"
        passengers = int(rng.integers(1, 5))
        who = "" if passengers == 1 else f" for {passengers} passengers"
        return f"find flights from {_CITIES[a]} to {_CITIES[b]} on {date}{who}", (
            name,
            {
                "origin": _CITIES[a],
                "destination": _CITIES[b],
                "date": date,
                "passengers": passengers,
            },
        )
    if name == "get_stock_price":
        symbol = pick(_SYMBOLS)
        return f"look up the stock price of {symbol}", (name, {"symbol": symbol})
    text, language = pick(_PHRASES), pick(_LANGUAGES)
    return f'translate "{text}" into {language}', (
        name,
        {"text": text, "target_language": language},
    )


_IRRELEVANT = (
    "book a table for two at an Italian restaurant tonight",
    "play some jazz in the living room",
    "turn off the kitchen lights",
    "order a large pizza with mushrooms",
    "what is the capital of Peru",
)
_NEEDED_BY_IRRELEVANT = ("get_weather", "set_timer", "send_email", "get_stock_price")


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        try:
            return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
        except OverflowError:  # an integer too large for a float is no float's value
            return False
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().casefold() == b.strip().casefold()
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    return a == b


def _same_call(a: Call, b: Call) -> bool:
    return (
        a[0] == b[0]
        and a[1].keys() == b[1].keys()
        and all(_same_value(a[1][k], b[1][k]) for k in a[1])
    )


def calls_score(predicted: Sequence[Call], gold: Sequence[Call]) -> float:
    """Structured match of calls (BFCL-style AST match), order-insensitive.

    Each gold call is matched to at most one predicted call with the same name and equal arguments
    (defaults filled in; ints and floats compared numerically, strings stripped and case-folded).

    Returns:
        ``matched / max(len(predicted), len(gold))``; ``1.0`` when both are empty.
    """
    if not predicted and not gold:
        return 1.0
    unused = list(predicted)
    matched = 0
    for call in gold:
        for i, candidate in enumerate(unused):
            if _same_call(candidate, call):
                matched += 1
                del unused[i]
                break
    return matched / max(len(predicted), len(gold))


class FunctionCallingEnv(ToolEnv):
    """Single-turn function calling scored by structured match (BFCL categories).

    ## Description
    A user request and the schemas of 3-5 available functions. By ``difficulty``: 1 ``simple``
    (one call), 2 adds ``multiple`` (two different functions) and ``parallel`` (the same function
    two or three times), 3 adds ``irrelevance`` (no available function fits: the right reply makes
    no call). The functions are not executed: the reply is scored.

    ## Action Space
    ``UnicodeText``: zero or more ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks
    (one bare JSON call is accepted too); a reply without calls (e.g. ``<answer>I cannot do that.</answer>``)
    means "no call".

    ## Observation Space
    ``UnicodeText``: the request and the function schemas on reset; a verdict line after the reply.

    ## Rewards
    ``score = matched / max(#predicted, #gold)`` (:func:`calls_score`), ``success`` when all calls
    match exactly; with ``partial_credit=False`` (default) the reward is ``1`` on success else ``0``,
    otherwise the score. A reply whose calls are not valid JSON gets ``invalid_action_reward``;
    calls to unknown functions or with bad arguments are scored as wrong and reported in
    ``info["action_error"]``.

    ## Starting State
    Request kind, functions and values from the reset seed.

    ## Episode End
    Always after one reply (terminated).

    ## Arguments
    * ``difficulty`` (int, 1-3, default 3 = all kinds): which request kinds occur.
    * ``partial_credit`` (bool): reward the score instead of success.
    * ``invalid_action_reward``, ``max_action_length``: see :class:`ToolEnv`.

    ## Version History
    * v0: initial version. Verifier fix (same version): an argument that is an integer too large
      for a float (4000 digits) is a wrong value, not an ``OverflowError`` out of ``step``.
    """

    metadata = {"render_modes": ["ansi"], "family": "tool"}

    remote_kwargs = {"difficulty": client(IntRange(1, 3)), "partial_credit": client(FLAG)}
    """Constructor kwargs a client or stored data may set (:mod:`verigym.kwargs_policy`)."""

    def __init__(self, *, difficulty: int = 3, partial_credit: bool = False, **kwargs: Any):
        kwargs.setdefault("max_turns", 1)
        super().__init__(**kwargs)
        self.difficulty = check_int("difficulty", difficulty, 1, 3)
        self.partial_credit = check_bool("partial_credit", partial_credit)
        self._available: list[str] = sorted(FUNCTIONS)
        self._gold: list[Call] = []
        self._kind = "simple"

    def _task_instructions(self) -> str:
        return (
            "Fulfil the user's request by calling the available functions: reply with one "
            '<tool_call>{"name": ..., "arguments": {...}}</tool_call> block per call (several blocks for several '
            "calls). If no available function fits the request, reply without any call, e.g. "
            "<answer>None of the functions can do that.</answer>"
        )

    def _tools(self) -> Sequence[Tool]:
        return [FUNCTIONS[name] for name in self._available]

    def instructions(self) -> str:
        return self._task_instructions() + " The available functions are listed with each request."

    def _generate(self) -> str:
        rng = self.np_random
        kinds = (
            ["simple"]
            + (["multiple", "parallel"] if self.difficulty >= 2 else [])
            + (["irrelevance"] if self.difficulty >= 3 else [])
        )
        self._kind = kinds[int(rng.integers(len(kinds)))]
        names = sorted(FUNCTIONS)
        if self._kind == "irrelevance":
            request = _IRRELEVANT[int(rng.integers(len(_IRRELEVANT)))]
            chosen: list[str] = list(rng.choice(_NEEDED_BY_IRRELEVANT, size=3, replace=False))
            self._gold = []
        else:
            count = {"simple": 1, "multiple": 2, "parallel": 1}[self._kind]
            chosen = [str(n) for n in rng.choice(names, size=count, replace=False)]
            repeats = int(rng.integers(2, 4)) if self._kind == "parallel" else 1
            phrases, self._gold = [], []
            for name in chosen:
                for _ in range(repeats):
                    phrase, call = _request(name, rng)
                    if any(_same_call(call, g) for g in self._gold):
                        continue
                    phrases.append(phrase)
                    self._gold.append(call)
            request = " and ".join(phrases)
        others = [n for n in names if n not in chosen]
        extra = [
            str(n)
            for n in rng.choice(
                others, size=min(len(others), int(rng.integers(1, 3))), replace=False
            )
        ]
        self._available = sorted(set(map(str, chosen)) | set(extra))
        schemas = "\n".join(json.dumps(FUNCTIONS[n].schema()) for n in self._available)
        return f"Available functions:\n{schemas}\n\nUser: Please {request}."

    def _parse_calls(self, text: str) -> tuple[list[Call], list[str]]:
        """(checked calls, problems); malformed JSON raises ActionParseError."""
        if not isinstance(text, str):
            raise TypeError(
                f"FunctionCallingEnv takes str actions, got {type(text).__name__}: {text!r:.80}"
            )
        if len(text) > self.max_action_length:
            raise ActionParseError(
                f"your reply has {len(text)} characters; at most {self.max_action_length} are read"
            )
        if not text.strip():
            raise ActionParseError(
                "the reply is empty; make the calls, or say in <answer>...</answer> why none fits"
            )
        calls, problems = [], []
        for name, arguments in tool_calls_in(text):
            if name not in self._available:
                problems.append(f"unknown function {name!r}")
                calls.append((name, arguments))
                continue
            try:
                calls.append((name, check_arguments(FUNCTIONS[name], arguments)))
            except ActionParseError as exc:
                problems.append(str(exc))
                calls.append((name, arguments))
        return calls, problems

    def parse_action(self, text: str) -> list[Call]:  # type: ignore[override]
        """The calls in a reply (possibly none).

        Raises:
            TypeError: ``text`` is not a ``str``.
            ActionParseError: a call is not valid JSON, or a call names an unknown function or has
                arguments that do not fit its schema.
        """
        calls, problems = self._parse_calls(text)
        if problems:
            raise ActionParseError("; ".join(problems))
        return calls

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._turn += 1
        info = self._info()
        try:
            calls, problems = self._parse_calls(action)
        except ActionParseError as exc:
            action_error_info(str(exc), info)
            episode_end(info, success=False, score=0.0)
            self._last = f"Error: {exc}"
            return self._last, self.invalid_action_reward, False, True, info
        if problems:
            action_error_info("; ".join(problems), info)
        score = calls_score(calls, self._gold)
        success = score == 1.0 and not problems
        info["tool_calls"] = len(calls)
        info["request_kind"] = self._kind
        episode_end(info, success=success, score=score)
        self._last = f"{'Correct' if success else 'Not correct'}: {len(calls)} call(s) made, {len(self._gold)} expected."
        reward = score if self.partial_credit else float(success)
        return self._last, reward, True, False, info

    def _call_tool(self, call: Any) -> str:  # the functions are scored, not executed
        raise ActionParseError("functions are not executed in this environment")

    def oracle_action(self) -> str:
        """The gold calls, or a plain refusal when no function fits."""
        if not self._gold:
            return "<answer>None of the available functions can do that.</answer>"
        return "\n".join(hermes_call(n, a) for n, a in self._gold)
