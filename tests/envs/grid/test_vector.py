"""Grid tasks stepped per env as a Gymnasium ``VectorEnv`` (:class:`EnvPool`, the path of the
tasks without a natively batched engine): the single envs' steps, same-step autoreset, verdicts."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import verigym  # noqa: F401
from verigym.agents.common.vec import EnvPool, action_masks, final_observations, vector_env


def test_pool_steps_equal_single_env_steps():
    envs = EnvPool([gym.make("verigym/DoorKey-5x5-v0", observation="full") for _ in range(3)])
    singles = [gym.make("verigym/DoorKey-5x5-v0", observation="full") for _ in range(3)]
    assert isinstance(envs, gym.vector.VectorEnv) and envs.num_envs == 3
    assert envs.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert envs.single_observation_space == singles[0].observation_space
    obs, info = envs.reset(seed=10)
    assert obs.shape == (3, 5, 5, 3) and obs.dtype == np.uint8
    assert action_masks(info).shape == (3, 7)
    for i, env in enumerate(singles):
        single_obs, _ = env.reset(seed=10 + i)
        assert np.array_equal(obs[i], single_obs)
    rng = np.random.default_rng(0)
    for _ in range(20):
        actions = rng.integers(0, 7, size=3)
        obs, rewards, terminated, truncated, info = envs.step(actions)
        finals = final_observations(info, 3)
        for i, env in enumerate(singles):
            single = env.step(int(actions[i]))
            assert rewards[i] == single[1]
            if single[2] or single[3]:
                assert np.array_equal(finals[i], single[0])
                assert np.array_equal(obs[i], env.reset()[0])
            else:
                assert finals[i] is None and np.array_equal(obs[i], single[0])


def test_same_step_autoreset_and_verdicts():
    envs = EnvPool([gym.make("verigym/Empty-5x5-v0", max_steps=2) for _ in range(2)])
    envs.reset(seed=0)
    _, _, terminated, truncated, info = envs.step(np.zeros(2, dtype=np.int64))
    assert not (terminated | truncated).any() and "final_obs" not in info
    obs, _, terminated, truncated, info = envs.step(np.zeros(2, dtype=np.int64))
    assert truncated.all() and not terminated.any() and info["_final_obs"].all()
    verdict = info["final_info"]
    assert verdict["_success"].all() and not verdict["success"].any()
    assert np.all(verdict["score"] == 0.0)
    assert envs.observation_space.contains(obs)


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match="at least one"):
        EnvPool([])
    with pytest.raises(ValueError, match="same observation"):
        EnvPool([gym.make("verigym/Empty-5x5-v0"), gym.make("CartPole-v1")])
    envs = EnvPool([gym.make("verigym/Empty-5x5-v0") for _ in range(2)])
    envs.reset(seed=0)
    with pytest.raises(ValueError, match="actions"):
        envs.step(np.zeros(3, dtype=np.int64))


def test_learners_vector_env_counts_episodes_and_needs_same_step_autoreset():
    with pytest.raises(ValueError, match="SAME_STEP"):
        vector_env(gym.make_vec("verigym/Empty-5x5-v0", num_envs=2, vectorization_mode="sync"), 2)
    for native in (True, False):  # the batched engine and the per-env pool count alike
        envs = vector_env("verigym/Empty-5x5-v0", 2, native=native)
        envs.reset(seed=0)
        assert envs.pop_episodes() == []
        for _ in range(100):  # Empty-5x5: max_steps 100
            envs.step(np.full(2, 6, dtype=np.int64))  # "done": a no-op, so both run out of time
        assert (
            envs.pop_episodes()
            == [{"return": 0.0, "length": 100.0, "success": 0.0, "score": 0.0}] * 2
        )
        envs.close()
