"""The tutorial envs: the oracle solves every seed, rewards follow the docstrings."""

from __future__ import annotations

import gymnasium as gym
import pytest

import verigym  # noqa: F401


def _oracle_episode(env, seed):
    env.reset(seed=seed)
    while True:
        _, reward, terminated, truncated, info = env.step(env.unwrapped.oracle_action())
        if terminated or truncated:
            return reward, info


@pytest.mark.parametrize(
    "env_id",
    [
        "verigym/GuessNumber-v0",
        "verigym/GuessNumber-Hard-v0",
        "verigym/Treasure-7x7-v0",
        "verigym/Treasure-12x12-v0",
    ],
)
def test_oracle_solves_200_seeds(env_id):
    env = gym.make(env_id)
    results = [_oracle_episode(env, seed) for seed in range(200)]
    assert all(info["success"] for _, info in results)
    if "Treasure" in env_id:  # the oracle walks a shortest path: SPL is exactly 1
        assert all(info["score"] == 1.0 for _, info in results)


def test_guess_number_feedback_and_think_blocks():
    env = gym.make("verigym/GuessNumber-v0")
    env.reset(seed=0)
    secret = env.unwrapped._secret
    wrong = 1 if secret != 1 else 2
    obs, reward, terminated, _, _ = env.step(f"<think>maybe {secret}</think> I say {wrong}")
    assert not terminated and reward == 0.0 and str(wrong) in obs
    obs, reward, terminated, _, info = env.step(f"final answer: {secret}")
    assert terminated and reward == 1.0 and info["success"] and info["score"] == 1.0


def test_guess_number_invalid_guess_costs_a_turn():
    env = gym.make("verigym/GuessNumber-v0")
    env.reset(seed=0)
    _, reward, _, _, info = env.step("1000")
    assert reward == -0.1 and "outside 1..100" in info["action_error"] and info["turn"] == 1


def test_treasure_wall_bump_stays_in_place():
    env = gym.make("verigym/Treasure-7x7-v0")
    for seed in range(50):
        obs, info = env.reset(seed=seed)
        blocked = [a for a in range(4) if info["action_mask"][a] == 0]
        if blocked:
            break
    assert blocked, "no seed in 0..49 starts next to a wall or border"
    obs2, reward, *_ = env.step(blocked[0])
    assert (obs2 == obs).all() and reward == 0.0


@pytest.mark.parametrize(
    "kwargs", [{"size": 2}, {"size": 7, "wall_density": 0.9}, {"max_steps": 0}]
)
def test_treasure_validates_kwargs(kwargs):
    with pytest.raises(ValueError):
        gym.make("verigym/Treasure-7x7-v0", **kwargs)
