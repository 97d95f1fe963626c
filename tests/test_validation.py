"""The shared argument validators (verigym/validation.py) and their use by every env family."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

import verigym  # noqa: F401  (registers the ids)
from verigym.validation import check_bool, check_choice, check_int, check_number, check_odd_int


@pytest.mark.parametrize("value", [3, np.int64(3), np.uint8(3)])
def test_check_int_accepts_python_and_numpy_ints(value):
    out = check_int("n", value, 1, 5)
    assert out == 3 and type(out) is int


@pytest.mark.parametrize("value", [True, np.bool_(True), 3.0, "3", None, 0, 6])
def test_check_int_rejects_bools_floats_strings_and_out_of_range(value):
    with pytest.raises(ValueError, match=r"n must be an int in \[1, 5\], got"):
        check_int("n", value, 1, 5)


def test_check_int_without_upper_bound():
    assert check_int("n", 10**9, 1) == 10**9
    with pytest.raises(ValueError, match="n must be an int >= 1, got 0"):
        check_int("n", 0, 1)


def test_check_odd_int():
    assert check_odd_int("size", 7, 3, 15) == 7
    with pytest.raises(ValueError, match="odd"):
        check_odd_int("size", 8, 3, 15)


@pytest.mark.parametrize("value", [0.5, 1, np.float32(0.5), np.int32(1)])
def test_check_number_returns_a_python_float(value):
    out = check_number("x", value, 0.0, 1.0)
    assert type(out) is float and out == float(value)


@pytest.mark.parametrize("value", [True, math.nan, math.inf, "0.5", None, -0.1, 1.1])
def test_check_number_rejects(value):
    with pytest.raises(ValueError, match=r"x must be a number in \[0.0, 1.0\]"):
        check_number("x", value, 0.0, 1.0)


def test_check_number_open_lower_bound_and_no_bounds():
    assert check_number("timeout_s", 600, 0, 600, low_open=True) == 600.0
    with pytest.raises(ValueError, match=r"\(0, 600\]"):
        check_number("timeout_s", 0, 0, 600, low_open=True)
    assert check_number("reward", -1e9) == -1e9


def test_check_choice():
    assert check_choice("mode", "a", ("a", "b")) == "a"
    assert check_choice("render_mode", None, (None, "ansi")) is None
    with pytest.raises(ValueError, match=r"mode must be one of \('a', 'b'\), got 'c'"):
        check_choice("mode", "c", ("a", "b"))
    with pytest.raises(ValueError):  # True == 1, but a bool is not the choice 1
        check_choice("seat", True, (0, 1))
    with pytest.raises(ValueError):  # unhashable values are just not a choice
        check_choice("mode", ["a"], ("a",))


def test_check_bool():
    assert check_bool("flag", np.bool_(False)) is False
    with pytest.raises(ValueError, match="flag must be True or False, got 1"):
        check_bool("flag", 1)


@pytest.mark.parametrize(
    ("env_id", "kwargs", "message"),
    [
        ("verigym/Empty-5x5-v0", {"view_size": 4}, "view_size must be an odd int"),
        ("verigym/Empty-5x5-v0", {"max_steps": True}, "max_steps must be an int"),
        ("verigym/IceLake-4x4-v0", {"slip": math.nan}, "slip must be a number"),
        ("verigym/Wordle-Easy-v0", {"difficulty": "impossible"}, "difficulty must be one of"),
        ("verigym/GuessNumber-v0", {"slack_turns": -1}, "slack_turns must be an int >= 0"),
        ("verigym/Calculator-v0", {"max_turns": 0}, "max_turns must be an int >= 1"),
        ("verigym/PythonMath-v0", {"timeout_s": 0}, r"timeout_s must be a number in \(0, 600\]"),
    ],
)
def test_families_validate_through_the_shared_module(env_id, kwargs, message):
    with pytest.raises(ValueError, match=message):
        gym.make(env_id, **kwargs)
