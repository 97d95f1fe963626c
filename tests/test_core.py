from __future__ import annotations

import copy
import inspect
import math
import pickle

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from verigym.core import (
    ActionParseError,
    EpisodeEndedError,
    EpisodeGuard,
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


@pytest.mark.parametrize(
    "space",
    [spaces.Box(-1.0, 1.0, shape=(2,)), spaces.MultiDiscrete([3, 3]), spaces.MultiBinary(2)],
)
def test_array_actions_must_be_real_numbers(space):
    # a complex NaN slipped past the NaN check into a Box (MuJoCo's controls); a timedelta crashed
    for bad in ([complex("nan"), 0], [1 + 0j, 0], np.array([1, 0], dtype="m8[s]")):
        with pytest.raises(ActionParseError, match="numeric array"):
            coerce_action(space, bad)


def test_an_action_too_large_to_print_is_still_a_parse_error():
    # the error message's repr raised: an int of over 4300 digits (ValueError), a deep list
    deep: list = [0]
    for _ in range(100_000):
        deep = [deep]
    spaces_ = [spaces.Discrete(4), spaces.Box(-1.0, 1.0, shape=(2,)), spaces.MultiDiscrete([3])]
    spaces_ += [spaces.Dict({"a": spaces.Discrete(2)}), spaces.Tuple((spaces.Discrete(2),))]
    for space in spaces_:
        for bad in (10**5000, deep):
            with pytest.raises(ActionParseError):
                coerce_action(space, bad)


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


# -- the episode boundary (EpisodeGuard) ------------------------------------------------------------
class _Counter(gym.Env):
    """Counts steps; terminates at ``goal``, truncates at 5; not guarded by itself."""

    observation_space = spaces.Discrete(100)
    action_space = spaces.Discrete(2)

    def __init__(self, goal: int = 3):
        self.goal, self.count, self.paid = goal, 0, 0.0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.count = 0
        return 0, {}

    def step(self, action):
        self.count += 1
        terminated = self.count == self.goal
        reward = 1.0 if terminated else 0.0
        self.paid += reward
        return self.count, reward, terminated, not terminated and self.count >= 5, {}


class _Guarded(EpisodeGuard, _Counter):
    """The guard mixed into a class whose ``step`` is inherited from a base that is no guard."""


class _Extended(_Guarded):
    """A subclass whose ``step`` calls ``super().step`` (both are guarded)."""

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        info["extended"] = True
        return observation, reward, terminated, truncated, info


@pytest.mark.parametrize("env_class", [_Guarded, _Extended])
def test_step_after_the_end_raises_until_reset(env_class):
    env = env_class()
    env.reset(seed=0)
    results = [env.step(1) for _ in range(3)]
    assert results[-1][2] and env.paid == 1.0
    for _ in range(2):
        with pytest.raises(
            EpisodeEndedError,
            match=rf"{env_class.__name__}.step\(\) was called after the episode ended.*call reset\(\)",
        ):
            env.step(1)
    assert env.count == 3 and env.paid == 1.0  # the env's own step never ran: no second reward
    env.reset(seed=1)
    assert env.step(1)[0] == 1


def test_truncation_ends_the_episode_too_and_the_error_is_both_kinds():
    env = _Guarded(goal=99)
    env.reset()
    while not env.step(0)[3]:
        pass
    with pytest.raises(RuntimeError):
        env.step(0)
    with pytest.raises(gym.error.ResetNeeded):
        env.step(0)


def test_the_outermost_step_decides_whether_the_episode_ended():
    class Continues(_Guarded):
        """Re-opens the inner step's end (a design choice of the subclass): the outer step rules."""

        def step(self, action):
            observation, reward, terminated, truncated, info = super().step(action)
            return observation, reward, False, truncated, info

    env = Continues(goal=1)
    env.reset()
    assert env.step(0)[2] is False
    env.step(0)  # not refused: the episode did not end for the caller


def test_finished_state_survives_pickle_and_deepcopy():
    env = _Extended(goal=1)
    env.reset(seed=0)
    env.step(0)
    for clone in (pickle.loads(pickle.dumps(env)), copy.deepcopy(env)):
        with pytest.raises(EpisodeEndedError):
            clone.step(0)
        clone.reset()
        clone.step(0)
    with pytest.raises(EpisodeEndedError):  # the original is untouched by its copies' resets
        env.step(0)


def test_guard_keeps_signatures_and_wraps_once():
    assert "seed" in inspect.signature(_Extended.reset).parameters  # gymnasium's checker reads it
    assert _Extended.reset is _Guarded.reset  # inherited guarded methods are not wrapped again
    assert _Guarded.step.__wrapped__ is _Counter.step
