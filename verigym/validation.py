"""Validators of constructor arguments, shared by every env family and agent config.

docs/design.md section 2 asks that constructor arguments be keyword-only, JSON-serializable and
validated, and that a programmer error raise ``ValueError``/``TypeError`` with the bad value in the
message (never ``assert``). These functions are that check, written once: each returns the value in
its canonical Python type (so ``env.spec.to_json()`` round-trips) or raises ``ValueError`` naming the
argument, the allowed range or choices, and the value it got.

Bools are never accepted as numbers (``True`` is an ``int`` in Python but never a valid size).
NumPy scalars are accepted and converted to Python ``int``/``float``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, TypeVar

import numpy as np

__all__ = ["check_bool", "check_choice", "check_int", "check_number", "check_odd_int"]

T = TypeVar("T")


def check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    """``value`` as a Python ``int`` after checking it is an integer in ``[low, high]``.

    Args:
        name: the argument's name, for the message.
        value: what the caller passed; ``int`` or a NumPy integer, not ``bool``.
        low: smallest allowed value (inclusive).
        high: largest allowed value (inclusive); ``None`` for no upper bound.

    Returns:
        ``int(value)``.

    Raises:
        ValueError: not an integer (bools and floats included) or out of range; the message names
            ``name``, the range and the value.
    """
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, (int, np.integer))
        or value < low
        or (high is not None and value > high)
    ):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an int {bound}, got {value!r}")
    return int(value)


def check_odd_int(name: str, value: Any, low: int, high: int) -> int:
    """``value`` as an ``int`` after checking it is an odd integer in ``[low, high]``.

    Raises:
        ValueError: not an odd integer in range (e.g. a view window that needs a center cell).
    """
    number = check_int(name, value, low, high)
    if number % 2 == 0:
        raise ValueError(f"{name} must be an odd int in [{low}, {high}], got {value!r}")
    return number


def check_number(
    name: str, value: Any, low: float = -math.inf, high: float = math.inf, *, low_open: bool = False
) -> float:
    """``value`` as a Python ``float`` after checking it is a finite real number in ``[low, high]``.

    Args:
        name: the argument's name, for the message.
        value: ``int``, ``float`` or a NumPy number, not ``bool``.
        low: smallest allowed value (inclusive unless ``low_open``; ``-math.inf``, the default, for
            none).
        high: largest allowed value (inclusive; ``math.inf``, the default, for none).
        low_open: exclude ``low`` itself (``(0, 600]`` seconds: a timeout must be positive).

    Returns:
        ``float(value)``.

    Raises:
        ValueError: not a real number, NaN, infinite, or out of range.
    """
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not math.isfinite(value)
        or not low <= value <= high
        or (low_open and value == low)
    ):
        raise ValueError(
            f"{name} must be a number in {'(' if low_open else '['}{low}, {high}], got {value!r}"
        )
    return float(value)


def check_choice(name: str, value: T, choices: Iterable[Any]) -> T:
    """``value`` unchanged after checking it is one of ``choices``.

    Raises:
        ValueError: it is not; the message lists the choices.
    """
    options = tuple(choices)
    try:
        allowed = value in options
    except TypeError:  # an unhashable or uncomparable value is simply not a choice
        allowed = False
    if not allowed or isinstance(value, bool) != any(
        isinstance(c, bool) and c is value for c in options
    ):
        raise ValueError(f"{name} must be one of {options}, got {value!r}")
    return value


def check_bool(name: str, value: Any) -> bool:
    """``value`` after checking it is a ``bool`` (or a NumPy bool).

    Raises:
        ValueError: anything else (``0``/``1`` and strings included).
    """
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)
