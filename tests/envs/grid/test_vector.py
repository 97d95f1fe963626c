"""GridVectorEnv: batched stepping matches single envs, next-step autoreset, verdict infos."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import verigym  # noqa: F401
from verigym.envs.grid.vector import GridVectorEnv


def test_batched_steps_equal_single_env_steps():
    envs = GridVectorEnv("verigym/DoorKey-5x5-v0", num_envs=3, observation="full")
    singles = [gym.make("verigym/DoorKey-5x5-v0", observation="full") for _ in range(3)]
    obs, info = envs.reset(seed=10)
    assert (
        obs.shape == (3, 5, 5, 3) and obs.dtype == np.uint8 and info["action_mask"].shape == (3, 7)
    )
    for i, env in enumerate(singles):
        single_obs, _ = env.reset(seed=10 + i)
        assert np.array_equal(obs[i], single_obs)
    rng = np.random.default_rng(0)
    for _ in range(20):
        actions = rng.integers(0, 7, size=3)
        obs, rewards, terminated, truncated, info = envs.step(actions)
        for i, env in enumerate(singles):
            single = env.step(int(actions[i]))
            assert np.array_equal(obs[i], single[0]) and rewards[i] == single[1]


def test_next_step_autoreset_and_verdicts():
    envs = GridVectorEnv("verigym/Empty-5x5-v0", num_envs=2, max_steps=2)
    envs.reset(seed=0)
    envs.step(np.zeros(2, dtype=np.int64))
    _, _, terminated, truncated, info = envs.step(np.zeros(2, dtype=np.int64))
    assert truncated.all() and not terminated.any()
    assert info["_success"].all() and not info["success"].any() and np.all(info["score"] == 0.0)
    obs, rewards, terminated, truncated, info = envs.step(np.zeros(2, dtype=np.int64))
    assert not (terminated | truncated).any() and np.all(rewards == 0.0) and "success" not in info
    assert envs.observation_space.contains(obs)


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match="num_envs"):
        GridVectorEnv("verigym/Empty-5x5-v0", num_envs=0)
    with pytest.raises(TypeError, match="grid envs"):
        GridVectorEnv([lambda: gym.make("CartPole-v1")])
    envs = GridVectorEnv("verigym/Empty-5x5-v0", num_envs=2)
    envs.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        envs.step(np.zeros(3, dtype=np.int64))
