from __future__ import annotations

import math

import numpy as np
import pytest
from gymnasium import spaces

from verigym.core import (
    ActionParseError,
    UnicodeText,
    action_error_info,
    coerce_action,
    episode_end,
)


def test_episode_end_clips_and_types():
    info = episode_end({}, success=np.bool_(True), score=1.7)
    assert info == {"success": True, "score": 1.0}
    assert type(info["success"]) is bool
    with pytest.raises(ValueError, match="NaN"):
        episode_end({}, success=False, score=math.nan)


def test_action_error_is_truncated():
    assert len(action_error_info("x" * 2000)["action_error"]) == 500


@pytest.mark.parametrize("bad", [-1, 4, 2.5, math.nan, math.inf, "1", None, np.zeros(2), True])
def test_discrete_rejects(bad):
    with pytest.raises(ActionParseError):
        coerce_action(spaces.Discrete(4), bad)


@pytest.mark.parametrize("good, expected", [(3, 3), (np.int32(2), 2), (1.0, 1), (np.array([0]), 0)])
def test_discrete_accepts(good, expected):
    assert coerce_action(spaces.Discrete(4), good) == expected


def test_box_cases():
    box = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
    assert coerce_action(box, [0.5, -0.5]).dtype == np.float32
    for bad in ([np.nan, 0], [2.0, 0], [0.0], [[0, 0], [0, 0]], ["a", "b"], object()):
        with pytest.raises(ActionParseError):
            coerce_action(box, bad)


def test_multidiscrete_and_dict():
    md = spaces.MultiDiscrete([3, 2])
    assert coerce_action(md, [2, 1]).tolist() == [2, 1]
    with pytest.raises(ActionParseError, match="out of range"):
        coerce_action(md, [3, 0])
    d = spaces.Dict({"a": spaces.Discrete(2), "b": md})
    assert coerce_action(d, {"a": 1, "b": [0, 0]})["a"] == 1
    with pytest.raises(ActionParseError, match="missing"):
        coerce_action(d, {"a": 1})


def test_unicode_text_contains_any_string():
    space = UnicodeText(10)
    assert space.contains("héllo\n{}")
    assert not space.contains("x" * 11)
    assert not space.contains(b"bytes")
    assert space.contains(space.sample())
