"""Robustness wrappers: action delay, observation noise, dynamics perturbation."""

from __future__ import annotations

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest

import verigym  # noqa: F401  (registers the ids)
from verigym.checker import check_env
from verigym.wrappers import ActionDelay, DynamicsPerturbation, ObservationNoise

pytestmark = pytest.mark.mujoco


def actions(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, size=2).astype(np.float32) for _ in range(n)]


def test_action_delay_executes_actions_late():
    sent = actions(8)
    delayed = ActionDelay(gym.make("verigym/Push-v0"), delay=2)
    reference = gym.make("verigym/Push-v0")
    observation, info = delayed.reset(seed=4)
    reference.reset(seed=4)
    assert info["robustness"] == {"action_delay": 2}
    executed = [np.zeros(2, np.float32)] * 2 + sent[:-2]
    for a, b in zip(sent, executed):
        got, expected = delayed.step(a), reference.step(b)
        np.testing.assert_array_equal(got[0]["observation"], expected[0]["observation"])
        assert got[1] == expected[1]


def test_action_delay_flags_malformed_actions_at_once():
    env = ActionDelay(gym.make("verigym/Treasure-7x7-v0"), delay=1)
    env.reset(seed=0)
    _, _, _, _, info = env.step(9)
    assert "out of range" in info["action_error"] and "no-op" in info["action_error"]
    with pytest.raises(ValueError, match="delay"):
        ActionDelay(gym.make("verigym/Treasure-7x7-v0"), delay=-1)
    with pytest.raises(ValueError, match="noop_action"):
        ActionDelay(gym.make("verigym/Treasure-7x7-v0"), noop_action=7)


def test_observation_noise_statistics_and_seeding():
    env = ObservationNoise(gym.make("verigym/Reach-2Link-v0"), std=0.1)
    clean = gym.make("verigym/Reach-2Link-v0")
    noisy, info = env.reset(seed=1)
    true, _ = clean.reset(seed=1)
    assert info["robustness"] == {"observation_noise_std": 0.1}
    np.testing.assert_array_equal(noisy["desired_goal"], true["desired_goal"])  # the goal is given
    difference = noisy["observation"] - true["observation"]
    assert 0.03 < float(np.std(difference)) < 0.3
    again, _ = env.reset(seed=1)
    np.testing.assert_array_equal(again["observation"], noisy["observation"])
    other, _ = env.reset(seed=2)
    assert not np.array_equal(
        other["observation"] - clean.reset(seed=2)[0]["observation"], difference
    )
    with pytest.raises(ValueError, match="std"):
        ObservationNoise(clean, std=-1.0)


def test_dynamics_perturbation_scales_the_nominal_model_each_episode():
    env = DynamicsPerturbation(
        gym.make("verigym/Swingup-v0"), mass_scale=(0.5, 2.0), friction_scale=(1.0, 1.0)
    )
    nominal = gym.make("verigym/Swingup-v0").unwrapped.model
    seen = set()
    for seed in range(5):
        _, info = env.reset(seed=seed)
        scales = info["robustness"]
        assert 0.5 <= scales["mass_scale"] <= 2.0 and scales["friction_scale"] == 1.0
        model = env.unwrapped.model
        # no compounding across resets: always nominal * this episode's factor
        np.testing.assert_allclose(model.body_mass, nominal.body_mass * scales["mass_scale"])
        np.testing.assert_allclose(model.dof_damping, nominal.dof_damping * scales["damping_scale"])
        seen.add(scales["mass_scale"])
        _, _, _, _, info = env.step(np.zeros(1, np.float32))
        assert info["robustness"] == scales
    assert len(seen) == 5
    assert env.reset(seed=3)[1]["robustness"]["mass_scale"] in seen


def test_dynamics_perturbation_follows_a_rebuilt_model_and_pickles():
    env = DynamicsPerturbation(gym.make("verigym/PointMaze-Small-v0"), mass_scale=(2.0, 2.0))
    for seed in (0, 1):
        env.reset(seed=seed)
        assert env.unwrapped.model.body_mass[-1] == pytest.approx(2.0)  # the 1 kg ball
    clone, copied = pickle.loads(pickle.dumps(env)), copy.deepcopy(env)
    for other in (clone, copied):
        other.reset(seed=2)
        assert other.unwrapped.model.body_mass[-1] == pytest.approx(2.0)


def test_dynamics_perturbation_needs_a_mujoco_model():
    with pytest.raises(TypeError, match="mujoco.MjModel"):
        DynamicsPerturbation(gym.make("verigym/Treasure-7x7-v0"))


def test_stacked_wrappers_pass_verigym_check():
    def make():
        return DynamicsPerturbation(
            ObservationNoise(ActionDelay(gym.make("verigym/Reach-2Link-v0"), delay=1), std=0.01)
        )

    report = check_env(make, steps=60)
    assert report.passed, report.format()
