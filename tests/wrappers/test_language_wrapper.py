"""LanguageWrapper plays Gymnasium's own CartPole, FrozenLake and Pendulum as text."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

import verigym
from verigym.textview import format_value, parse_value
from verigym.wrappers import LanguageWrapper


@pytest.mark.parametrize(
    "env_id, reply",
    [
        ("CartPole-v1", "I push right: 1"),
        ("FrozenLake-v1", "move 2"),
        ("Pendulum-v1", "torque [0.5]"),
    ],
)
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
    env = LanguageWrapper(
        gym.make("CartPole-v1"), invalid_action_reward=-2.0, max_invalid_actions=2
    )
    first, _ = env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step("no number here")
    assert (observation, reward, terminated, truncated) == (first, -2.0, False, False)
    assert "integer" in info["action_error"]
    _, _, _, truncated, info = env.step("7")  # out of range
    assert truncated and info["success"] is False and info["score"] == 0.0
    assert "out of range" in info["action_error"]


def test_a_5000_digit_integer_is_a_penalty_not_a_crash():
    env = LanguageWrapper(gym.make("CartPole-v1"))
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("9" * 5000)  # int() refuses it: a ValueError
    assert reward == -1.0 and not terminated and "out of range" in info["action_error"]


@pytest.mark.timeout(60)  # the old backward scan from every "]" took hours on this reply
def test_the_last_list_is_found_in_one_pass_over_many_brackets():
    box = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
    assert parse_value(box, "[0.5, -0.5]" + "]" * 200_000).tolist() == [0.5, -0.5]
    assert parse_value(box, "[[0.1, 0.2]] then [0.25, 0.75]]").tolist() == [0.25, 0.75]
    with pytest.raises(verigym.ActionParseError):
        parse_value(box, "]" * 200_000)


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
    spaces.Dict(
        {"move": spaces.Discrete(4), "force": spaces.Box(-1, 1, shape=(2,), dtype=np.float32)}
    ),
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


# -- episode end (issue 28 section 5, issue 29) ------------------------------------------------------


def test_step_after_the_wrappers_own_truncation_is_refused():
    """The wrapper ended the episode after malformed replies: the oracle's reply is not paid."""
    import verigym  # noqa: F401
    from verigym.core import EpisodeEndedError

    env = LanguageWrapper(gym.make("verigym/DoorKey-5x5-v0"), max_invalid_actions=2)
    env.reset(seed=0)
    env.step("no move here")
    *_, truncated, info = env.step("still none")
    assert truncated and info["success"] is False and info["score"] == 0.0
    inner = env.unwrapped
    with pytest.raises(EpisodeEndedError, match="reset"):
        env.step(inner.action_text(inner.oracle_action()))
    with pytest.raises(EpisodeEndedError):
        env.step("garbage")  # not a third malformed reply either
    env.reset(seed=0)
    assert "action_error" not in env.step(inner.action_text(inner.oracle_action()))[4]


def test_malformed_reply_after_the_env_ended_is_refused():
    """The env terminated: a malformed reply is not charged a penalty with terminated=False."""
    from verigym.core import EpisodeEndedError

    env = LanguageWrapper(gym.make("CartPole-v1"))
    env.reset(seed=0)
    for _ in range(500):
        _, _, terminated, truncated, _ = env.step("1")
        if terminated or truncated:
            break
    assert terminated
    for reply in ("not an action", "1"):
        with pytest.raises(EpisodeEndedError):
            env.step(reply)


def test_candidate_wrapper_refuses_step_after_the_end():
    """CandidateActionWrapper answers an index with no candidate itself: not after the end."""
    import verigym  # noqa: F401
    from verigym.core import EpisodeEndedError
    from verigym.wrappers import CandidateActionWrapper

    env = CandidateActionWrapper(gym.make("verigym/Wordle-Easy-v0"))
    env.reset(seed=0)
    for _ in range(50):
        answer = env.candidates.index(env.unwrapped.oracle_action())
        *_, terminated, truncated, _ = env.step(answer)
        if terminated or truncated:
            break
    assert terminated
    with pytest.raises(EpisodeEndedError):
        env.step(env.action_space.n)  # out of range: the wrapper answers it without the env


def test_instructions_state_every_way_the_episode_ends():
    """Issue 29: the agent is told the step limit and the malformed-reply rule that end an episode."""
    import verigym  # noqa: F401

    env = LanguageWrapper(
        gym.make("verigym/DoorKey-5x5-v0"), invalid_action_reward=-0.5, max_invalid_actions=4
    )
    _, info = env.reset(seed=0)
    text = info["instructions"]
    assert text == env.instructions()
    assert "after 250 moves at most" in text
    assert "after 4 invalid replies in a row" in text and "reward -0.5" in text
    # Gymnasium's TimeLimit counts too; no streak rule when it is switched off
    plain = LanguageWrapper(gym.make("CartPole-v1"), max_invalid_actions=None).instructions()
    assert "after 500 moves at most" in plain and "in a row" not in plain
    # a natively text env reads its own replies: every reply counts towards the limit
    native = LanguageWrapper(gym.make("verigym/GuessNumber-v0"))
    assert f"after {native.unwrapped.max_turns} replies at most" in native.instructions()
    assert "in a row" not in native.instructions()


def test_every_registered_wrapped_env_states_its_step_limit():
    """Every registered env with a step limit of its own has it in the instructions."""
    import verigym

    for row in verigym.rows():
        if row.api != "gymnasium" or row.family == "gui":
            continue
        env = LanguageWrapper(gym.make(row.id))
        try:
            limit = getattr(env.unwrapped, "max_steps", None) or getattr(
                env.unwrapped, "max_turns", None
            )
            text = env.instructions()
            if limit is not None:
                assert f"after {limit} " in text, (row.id, text[-300:])
            if not env._native_text:
                assert "after 3 invalid replies in a row" in text, row.id
        finally:
            env.close()
