"""The classic agents compute what Stable-Baselines3 computes (issue 41 item 2): each test pins one
detail that changes the learning curve under SB3's (rl-zoo's) hyperparameters."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

import verigym.agents as agents
from verigym.agents.common import buffers
from verigym.agents.ppo import PPO

HORIZON = 3


class Counter(gym.Env):
    """Observation = steps taken; reward 1; truncated (never terminated) after ``HORIZON`` steps,
    so the last observation ``[3]`` differs from the next episode's first, ``[0]``."""

    metadata = {"render_modes": []}

    def __init__(self, continuous: bool = False):
        self.observation_space = spaces.Box(0.0, 10.0, (1,), np.float32)
        self.action_space = (
            spaces.Box(-1.0, 1.0, (1,), np.float32) if continuous else spaces.Discrete(2)
        )
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t], np.float32), 1.0, False, self.t >= HORIZON, {}


def _value(agent: PPO, x: float) -> float:
    with torch.no_grad():
        obs = {k: torch.tensor([[x]]) for k in ("",)}
        return float(agent.policy.value(agent.policy.encoder(obs))[0])


def test_ppo_bootstraps_a_truncated_step_through_the_final_observation(monkeypatch):
    """SB3 adds gamma * V(terminal_observation) to the reward of a time-limit truncation: the
    truncated step's return target uses V([3]), not V([0]) of the next episode nor 0."""
    captured = {}
    monkeypatch.setattr(PPO, "update", lambda self, data, clip: captured.update(data) or {})
    agent = agents.make("ppo", Counter(), num_envs=1, num_steps=6, gamma=0.9, seed=0)
    agent.learn(Counter(), 6)
    returns = captured["returns"].cpu().numpy()
    values = captured["values"].cpu().numpy()
    final, first = _value(agent, 3.0), _value(agent, 0.0)
    assert abs(final - first) > 1e-3  # the test can tell them apart
    for t in (2, 5):  # the truncating steps of a 3-step episode
        np.testing.assert_allclose(returns[t], 1.0 + 0.9 * final, rtol=1e-5)
        assert values[t] == pytest.approx(_value(agent, 2.0), rel=1e-5)


def test_ppo_value_loss_is_sb3s_mean_squared_error():
    """SB3's PPO minimizes vf_coef * MSE(returns, V) (CleanRL: vf_coef * 0.5 * MSE); rl-zoo's
    settings (CartPole: vf_coef 0.5) are tuned with SB3's."""
    agent = agents.make("ppo", "CartPole-v1", num_epochs=1, batch_size=4, seed=0)
    obs = torch.randn(4, 4)
    with torch.no_grad():
        features = agent.policy.encoder({"": obs})
        values = agent.policy.value(features)
        actions = torch.tensor([0, 1, 0, 1])
        log_probs = agent.policy.dist(features, None).log_prob(actions)
    data = {
        "obs": {"": obs},
        "actions": actions,
        "log_probs": log_probs,
        "values": values,
        "advantages": torch.zeros(4),
        "returns": values + 2.0,
        "masks": None,
        "valid": None,
    }
    losses = agent.update(data, clip=0.2)
    assert losses["losses/value_loss"] == pytest.approx(4.0, rel=1e-5)


@pytest.mark.parametrize("name", ["dqn", "sac"])
def test_off_policy_stores_the_final_observation_of_a_truncated_step(name, monkeypatch):
    """SB3's replay buffer (handle_timeout_termination) bootstraps a truncated transition from its
    terminal_observation: stored next_obs [3] with terminated False."""
    added = []
    original = buffers.ReplayBuffer.add

    def add(self, obs, actions, rewards, next_obs, terminated):
        added.append((obs, next_obs, np.asarray(terminated)))
        return original(self, obs, actions, rewards, next_obs, terminated)

    monkeypatch.setattr(buffers.ReplayBuffer, "add", add)
    env = Counter(continuous=name == "sac")
    agent = agents.make(name, env, learning_starts=1_000, seed=0)
    agent.learn(env, 7)
    seen = 0
    for obs, next_obs, terminated in added:
        (x,), (y,) = next(iter(obs.values()))[0], next(iter(next_obs.values()))[0]
        if x == HORIZON - 1:
            assert y == HORIZON and not terminated[0]
            seen += 1
        else:
            assert y == x + 1
    assert seen == 2
