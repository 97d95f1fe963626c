"""LanguageWrapper plays Gymnasium's own CartPole, FrozenLake and Pendulum as text."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from verigym.textview import format_value, parse_value
from verigym.wrappers import LanguageWrapper


@pytest.mark.parametrize("env_id, reply", [("CartPole-v1", "I push right: 1"), ("FrozenLake-v1", "move 2"), ("Pendulum-v1", "torque [0.5]")])
def test_plays_gymnasium_envs_as_text(env_id, reply):
    env = LanguageWrapper(gym.make(env_id))
    observation, info = env.reset(seed=0)
    assert isinstance(observation, str) and observation
    assert "Reply with" in info["instructions"]
    total = 0.0
    for _ in range(5):
        observation, reward, terminated, truncated, info = env.step(reply)
        assert isinstance(observation, str)
        assert "action_error" not in info
        total += reward
        if terminated or truncated:
            break
    assert np.isfinite(total)


def test_text_and_tensor_views_agree_on_cartpole():
    tensor, text = gym.make("CartPole-v1"), LanguageWrapper(gym.make("CartPole-v1"))
    obs, _ = tensor.reset(seed=3)
    text_obs, _ = text.reset(seed=3)
    for action in [0, 1, 1, 0, 1]:
        assert text.observation_text(obs) == text_obs
        obs, r, term, trunc, _ = tensor.step(action)
        text_obs, r2, term2, trunc2, _ = text.step(text.action_text(action))
        assert (r, term, trunc) == (r2, term2, trunc2)


def test_malformed_text_is_penalized_then_truncates():
    env = LanguageWrapper(gym.make("CartPole-v1"), invalid_action_reward=-2.0, max_invalid_actions=2)
    first, _ = env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step("no number here")
    assert (observation, reward, terminated, truncated) == (first, -2.0, False, False)
    assert "integer" in info["action_error"]
    _, _, _, truncated, info = env.step("7")  # out of range
    assert truncated and info["success"] is False and info["score"] == 0.0
    assert "out of range" in info["action_error"]


def test_rejects_non_str_action():
    env = LanguageWrapper(gym.make("CartPole-v1"))
    env.reset(seed=0)
    with pytest.raises(TypeError):
        env.step(1)


def test_native_text_env_passes_through():
    import verigym  # noqa: F401

    env = LanguageWrapper(gym.make("verigym/GuessNumber-v0"))
    observation, info = env.reset(seed=1)
    assert observation.startswith("Turn 0/")
    assert "higher or lower" in info["instructions"]


def test_records_constructor_args():
    env = LanguageWrapper(gym.make("CartPole-v1"), max_invalid_actions=5)
    assert env.spec.additional_wrappers[-1].kwargs["max_invalid_actions"] == 5


SPACES = [
    spaces.Discrete(5, start=-2),
    spaces.Box(-3.0, 3.0, shape=(2, 2), dtype=np.float32),
    spaces.Box(-np.inf, np.inf, shape=(3,), dtype=np.float64),
    spaces.MultiDiscrete([3, 4, 2]),
    spaces.MultiBinary(4),
    spaces.Dict({"move": spaces.Discrete(4), "force": spaces.Box(-1, 1, shape=(2,), dtype=np.float32)}),
]


@pytest.mark.parametrize("space", SPACES, ids=lambda s: type(s).__name__)
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_generic_round_trip(space, seed):
    space.seed(seed)
    action = space.sample()
    parsed = parse_value(space, "My answer: " + format_value(space, action))
    if isinstance(space, spaces.Dict):
        assert all(np.array_equal(parsed[k], action[k]) for k in action)
    else:
        assert np.array_equal(parsed, action)
