"""verigym.wrappers.sb3: a Gymnasium VectorEnv (the batched grid engine) as an SB3 VecEnv."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import verigym  # noqa: F401
from verigym.wrappers.sb3 import SB3VecEnv, make_sb3_vec_env


def test_refuses_what_it_cannot_bridge():
    with pytest.raises(TypeError, match="VectorEnv"):
        SB3VecEnv(gym.make("CartPole-v1"))
    envs = gym.make_vec("verigym/DoorKey-5x5-v0", 2)  # NEXT_STEP, Gymnasium's default
    with pytest.raises(ValueError, match="SAME_STEP"):
        SB3VecEnv(envs)
    envs.close()
    with pytest.raises(ValueError, match="n_envs"):
        make_sb3_vec_env("CartPole-v1", 0)


def test_batched_engine_steps_as_sb3_vec_env():
    venv = make_sb3_vec_env("verigym/DoorKey-5x5-v0", 3, seed=0, max_steps=5)
    assert type(venv.envs).__name__.startswith("Batched")  # the natively batched engine
    obs = venv.reset()
    assert obs.shape == (3, *venv.observation_space.shape)
    masks = venv.action_masks()
    assert masks.dtype == np.bool_ and masks.shape == (3, venv.action_space.n)
    assert venv.has_attr("action_masks")
    np.testing.assert_array_equal(np.stack(venv.env_method("action_masks")), masks)
    dones_seen = 0
    for _ in range(6):
        actions = np.array([np.flatnonzero(m)[0] for m in venv.action_masks()])
        obs, rewards, dones, infos = venv.step(actions)
        assert rewards.dtype == np.float32 and dones.dtype == np.bool_ and len(infos) == 3
        for i in np.flatnonzero(dones):
            dones_seen += 1
            info = infos[i]
            assert info["terminal_observation"].shape == obs.shape[1:]
            assert info["TimeLimit.truncated"] is True  # max_steps=5 truncates, not a success
            assert "success" in info and "score" in info  # the ended episode's final_info
        assert all("action_mask" in info for info in infos)
    assert dones_seen == 3
    venv.close()


def test_terminal_observation_is_the_final_obs_of_sync_vector_env():
    envs = gym.make_vec(
        "CartPole-v1",
        2,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )
    reference = gym.make_vec(
        "CartPole-v1",
        2,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )
    venv = SB3VecEnv(envs)
    venv.seed(5)
    obs = venv.reset()
    expected, _ = reference.reset(seed=[5, 6])
    np.testing.assert_array_equal(obs, expected)
    assert not venv.has_attr("action_masks")  # CartPole reports no mask
    for _ in range(60):
        obs, _, dones, infos = venv.step(np.array([1, 1]))
        expected, _, terminated, truncated, ref_info = reference.step(np.array([1, 1]))
        np.testing.assert_array_equal(obs, expected)
        for i in np.flatnonzero(dones):
            np.testing.assert_array_equal(
                infos[i]["terminal_observation"], ref_info["final_obs"][i]
            )
            assert infos[i]["TimeLimit.truncated"] == bool(truncated[i] and not terminated[i])
    venv.close()
    reference.close()


def _success_rate(model, episodes: int = 20) -> float:
    from sb3_contrib import MaskablePPO

    env = gym.make("verigym/DoorKey-5x5-v0")
    wins = 0
    for episode in range(episodes):
        obs, info = env.reset(seed=10_000 + episode)
        done = False
        while not done:
            kwargs = {}
            if isinstance(model, MaskablePPO):
                kwargs["action_masks"] = info["action_mask"].astype(bool)
            action, _ = model.predict(obs, deterministic=True, **kwargs)
            obs, _, terminated, truncated, info = env.step(int(action))
            done = terminated or truncated
        wins += bool(info["success"])
    env.close()
    return wins / episodes


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["PPO", "MaskablePPO"])
def test_sb3_learns_doorkey_on_the_batched_engine(algo):
    """SB3's PPO and sb3-contrib's MaskablePPO learn DoorKey-5x5 through the bridge (the DoorKey
    example's settings of docs/agents.md; 5-8 min each, niced, on the loaded 2-core machine)."""
    import sb3_contrib
    import stable_baselines3
    import torch
    from stable_baselines3.common.vec_env import VecMonitor

    torch.set_num_threads(1)
    cls = getattr(sb3_contrib if algo == "MaskablePPO" else stable_baselines3, algo)
    venv = VecMonitor(make_sb3_vec_env("verigym/DoorKey-5x5-v0", 8, seed=0))
    model = cls(
        "MlpPolicy",
        venv,
        seed=0,
        n_steps=128,
        batch_size=256,
        n_epochs=4,
        learning_rate=7e-4,
        ent_coef=0.01,
        device="cpu",
    )
    model.learn(60_000)
    assert _success_rate(model) >= 0.9
    venv.close()
