"""Generic text formatters and parsers for Gymnasium spaces.

Used by :class:`verigym.wrappers.LanguageWrapper` for envs that do not implement
:class:`verigym.TextInterface`, and by ``verigym check`` for the text-view round trip.

Formats (documented to the agent by :func:`describe_action_space`):

* ``Discrete`` -- an integer; the **last** integer in the reply is taken.
* ``Box`` / ``MultiDiscrete`` / ``MultiBinary`` -- the numbers of the **last** ``[...]`` list in the
  reply, or, when there is no list, every number in the reply; exactly ``prod(shape)`` of them,
  in row-major order.
* ``Dict`` / ``Tuple`` -- a JSON object / list, the last ``{...}`` / ``[...]`` in the reply.
* ``Text`` -- the reply itself.

``parse_value(space, format_value(space, a)) == a`` for every ``a`` in the space (round trip).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np
from gymnasium import spaces

from verigym.core import ActionParseError, coerce_action

__all__ = [
    "describe_action_space",
    "describe_observation_space",
    "format_value",
    "parse_value",
]

_NUMBER = re.compile(
    r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf(?:inity)?)\b", re.IGNORECASE
)
_INTEGER = re.compile(r"[-+]?\d+")
_MAX_SHOWN = 256
"""Arrays with more elements are summarized (shape, dtype, range), not listed."""


def _number_text(x: Any) -> str:
    if isinstance(x, (bool, np.bool_)):
        return str(int(x))
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    value = float(x)
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return f"{int(value)}.0"
    return repr(value)


def format_value(space: spaces.Space, value: Any, *, precision: int | None = None) -> str:
    """Render an element of ``space`` as text.

    Args:
        space: the space ``value`` belongs to.
        value: the element.
        precision: significant digits for floats; ``None`` renders exactly (round-trippable),
            which is what actions need. Observations use 4 for readability.
    """
    if isinstance(space, spaces.Text):
        return str(value)
    if isinstance(space, spaces.Discrete):
        return str(int(value))
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        array = np.asarray(value)
        if array.size > _MAX_SHOWN:
            return (
                f"<array of shape {array.shape}, dtype {array.dtype}, "
                f"min {array.min():.4g}, max {array.max():.4g}, mean {array.mean():.4g}>"
            )
        flat = array.reshape(-1)
        if precision is not None and np.issubdtype(array.dtype, np.floating):
            items = [f"{float(x):.{precision}g}" for x in flat]
        else:
            items = [_number_text(x) for x in flat]
        return "[" + ", ".join(items) + "]"
    if isinstance(space, spaces.Dict):
        return json.dumps({k: _jsonable(sub, value[k]) for k, sub in space.spaces.items()})
    if isinstance(space, spaces.Tuple):
        return json.dumps([_jsonable(sub, v) for sub, v in zip(space.spaces, value)])
    return str(value)


def _jsonable(space: spaces.Space, value: Any) -> Any:
    if isinstance(space, spaces.Discrete):
        return int(value)
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        return np.asarray(value).tolist()
    if isinstance(space, spaces.Dict):
        return {k: _jsonable(sub, value[k]) for k, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return [_jsonable(sub, v) for sub, v in zip(space.spaces, value)]
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


def _last_bracketed(text: str, open_char: str, close_char: str) -> str | None:
    """The last balanced ``open_char ... close_char`` group of ``text`` (or None): the group of the
    last closing character that has a match. One pass (a stack of open positions): scanning back
    from each closing character was quadratic, minutes for 100,000 ``]``."""
    opens: list[int] = []
    found = None
    brackets = re.compile(f"[{re.escape(open_char)}{re.escape(close_char)}]")
    for match in brackets.finditer(text):
        if match.group() == open_char:
            opens.append(match.start())
        elif opens:
            found = (opens.pop(), match.start())
    return text[found[0] : found[1] + 1] if found is not None else None


def parse_value(space: spaces.Space, text: str) -> Any:
    """Parse an agent's text into an element of ``space`` (see the module docstring for formats).

    Raises:
        TypeError: ``text`` is not a ``str``.
        ActionParseError: the text holds no valid element; the message says what is expected.
    """
    if not isinstance(text, str):
        raise TypeError(f"expected the action as str, got {type(text).__name__}: {text!r:.80}")
    if isinstance(space, spaces.Text):
        return coerce_action(space, text)
    if isinstance(space, spaces.Discrete):
        found = _INTEGER.findall(text)
        if not found:
            raise ActionParseError(
                f"no integer found; reply with an integer from {space.start} to {space.start + space.n - 1}"
            )
        if len(found[-1].lstrip("+-")) > 30:  # int() refuses over 4300 digits (a ValueError)
            raise ActionParseError(
                f"{found[-1][:20]}... is out of range; reply with an integer from {space.start} to {space.start + space.n - 1}"
            )
        return coerce_action(space, int(found[-1]))
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        group = _last_bracketed(text, "[", "]")
        numbers = _NUMBER.findall(group if group is not None else text)
        expected = int(np.prod(space.shape))
        if len(numbers) != expected:
            raise ActionParseError(
                f"expected {expected} number(s) like {_example(space)}, found {len(numbers)}"
            )
        try:
            values = np.array([float(n) for n in numbers], dtype=np.float64).reshape(space.shape)
        except (ValueError, OverflowError) as exc:
            raise ActionParseError(f"could not read the numbers: {exc}") from None
        return coerce_action(space, values)
    if isinstance(space, (spaces.Dict, spaces.Tuple)):
        opening, closing = ("{", "}") if isinstance(space, spaces.Dict) else ("[", "]")
        group = _last_bracketed(text, opening, closing)
        if group is None:
            raise ActionParseError(
                f"expected a JSON {'object' if opening == '{' else 'list'} like {_example(space)}"
            )
        try:
            data = json.loads(group)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise ActionParseError(f"invalid JSON: {exc}") from None
        return coerce_action(space, data)
    raise ActionParseError(f"cannot parse text into {space}")


def _example(space: spaces.Space) -> str:
    return format_value(space, _zero(space))


def _zero(space: spaces.Space) -> Any:
    if isinstance(space, spaces.Discrete):
        return space.start
    if isinstance(space, spaces.Box):
        return np.clip(np.zeros(space.shape, space.dtype), space.low, space.high)
    if isinstance(space, spaces.MultiDiscrete):
        return np.asarray(space.start, dtype=space.dtype).reshape(space.shape)
    if isinstance(space, spaces.MultiBinary):
        return np.zeros(space.shape, space.dtype)
    if isinstance(space, spaces.Dict):
        return {k: _zero(sub) for k, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_zero(sub) for sub in space.spaces)
    return ""


def _bounds_text(space: spaces.Box) -> str:
    low, high = space.low.reshape(-1), space.high.reshape(-1)
    if np.all(low == low[0]) and np.all(high == high[0]):
        return f"each in [{low[0]:.4g}, {high[0]:.4g}]"
    pairs = ", ".join(f"[{lo:.4g}, {hi:.4g}]" for lo, hi in zip(low, high))
    return f"bounds {pairs}"


def describe_action_space(space: spaces.Space) -> str:
    """One paragraph telling an agent how to write an action of ``space``."""
    if isinstance(space, spaces.Text):
        return f"Reply with text of at most {space.max_length} characters."
    if isinstance(space, spaces.Discrete):
        return f"Reply with one integer from {space.start} to {space.start + space.n - 1}; the last integer in your reply is taken."
    if isinstance(space, spaces.Box):
        return (
            f"Reply with {int(np.prod(space.shape))} number(s) in a list like {_example(space)} "
            f"({_bounds_text(space)}); the last [...] list in your reply is taken."
        )
    if isinstance(space, spaces.MultiDiscrete):
        ranges = ", ".join(
            f"{s}..{s + n - 1}" for s, n in zip(space.start.reshape(-1), space.nvec.reshape(-1))
        )
        return f"Reply with {space.nvec.size} integers in a list like {_example(space)}, ranges {ranges}; the last [...] list is taken."
    if isinstance(space, spaces.MultiBinary):
        return f"Reply with {int(np.prod(space.shape))} values 0 or 1 in a list like {_example(space)}; the last [...] list is taken."
    if isinstance(space, spaces.Dict):
        return f"Reply with a JSON object like {_example(space)}; the last {{...}} object is taken."
    if isinstance(space, spaces.Tuple):
        return f"Reply with a JSON list like {_example(space)}."
    return f"Reply with an element of {space}."


def describe_observation_space(space: spaces.Space) -> str:
    """One line telling an agent what an observation of ``space`` holds."""
    if isinstance(space, spaces.Text):
        return "Observations are text."
    if isinstance(space, spaces.Discrete):
        return f"Observations are an integer from {space.start} to {space.start + space.n - 1}."
    if isinstance(space, spaces.Box):
        return f"Observations are {int(np.prod(space.shape))} number(s) of shape {space.shape} ({_bounds_text(space) if np.prod(space.shape) <= 16 else 'see the env docs for bounds'})."
    if isinstance(space, spaces.Dict):
        return "Observations are a JSON object with keys " + ", ".join(space.spaces) + "."
    return f"Observations are elements of {space}."
