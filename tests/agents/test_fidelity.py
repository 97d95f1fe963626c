"""The classic agents compute what Stable-Baselines3 computes (issue 41 item 2): each test pins one
detail that changes the learning curve under SB3's (rl-zoo's) hyperparameters."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

import verigym.agents as agents
from tests.agents import rl_zoo
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


def test_ppo_anneals_on_sb3s_schedule(monkeypatch):
    """SB3 sets an update's learning rate and clip range from the progress remaining after its
    rollout (1 - steps collected / total steps), so a run of two rollouts updates at 1/2, then 0
    (CleanRL's schedule, one rollout earlier, gave 1, then 1/2)."""
    seen = []
    monkeypatch.setattr(
        PPO,
        "update",
        lambda self, data, clip: seen.append((self.optimizer.param_groups[0]["lr"], clip)) or {},
    )
    config = {"num_envs": 2, "num_steps": 4, "learning_rate": 1e-3, "clip_coef": 0.2}
    agent = agents.make("ppo", Counter(), anneal_lr=True, anneal_clip=True, seed=0, **config)
    agent.learn(Counter(), 16)
    assert seen == [pytest.approx((5e-4, 0.1)), (0.0, 0.0)]


@pytest.mark.slow
def test_ppo_learns_what_sb3_learns_from_the_same_weights_and_actions(monkeypatch):
    """End to end, rollouts and updates: SB3's PPO and verigym's from the same initial weights,
    with both libraries' sampling replaced by the greedy action (the one random draw left), on
    CartPole cut at 10 steps (the greedy episodes end both ways: terminated at 8-9 steps, with no
    bootstrap, or truncated at 10, bootstrapping through the final observation), under rl-zoo's
    CartPole settings with the learning rate and clip range annealed: after 4 rollouts of 20
    epochs the weights agree to float32 rounding (a different schedule, value loss, advantage or
    bootstrap moves them by 1e-3 or more: a terminated step bootstrapped as a truncated one, 1.2e-3)."""
    import warnings

    from stable_baselines3 import PPO as SB3PPO
    from stable_baselines3.common import distributions as sb3_distributions
    from stable_baselines3.common.env_util import make_vec_env

    from verigym.agents.common import distributions

    monkeypatch.setattr(sb3_distributions.CategoricalDistribution, "sample", lambda d: d.mode())
    monkeypatch.setattr(distributions.Categorical, "sample", lambda d, generator=None: d.mode())
    limit = {"max_episode_steps": 10}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        venv = make_vec_env("CartPole-v1", n_envs=8, seed=0, env_kwargs=limit)
        theirs = SB3PPO(
            "MlpPolicy",
            venv,
            n_steps=32,
            batch_size=256,
            n_epochs=20,
            learning_rate=lambda progress: progress * 1e-3,
            clip_range=lambda progress: progress * 0.2,
            gamma=0.98,
            gae_lambda=0.8,
            ent_coef=0.0,
            seed=0,
            device="cpu",
        )
    ours = agents.make("ppo", "CartPole-v1", seed=0, torch_threads=1, **rl_zoo.PPO_CARTPOLE)
    policy = theirs.policy
    layers = [
        (ours.policy.actor[0], policy.mlp_extractor.policy_net[0]),
        (ours.policy.actor[2], policy.mlp_extractor.policy_net[2]),
        (ours.policy.actor[4], policy.action_net),
        (ours.policy.critic[0], policy.mlp_extractor.value_net[0]),
        (ours.policy.critic[2], policy.mlp_extractor.value_net[2]),
        (ours.policy.critic[4], policy.value_net),
    ]
    with torch.no_grad():
        for mine, sb3 in layers:
            mine.weight.copy_(sb3.weight)
            mine.bias.copy_(sb3.bias)
    start = [mine.weight.detach().clone() for mine, _ in layers]
    theirs.learn(4 * 256)
    ours.learn(gym.make("CartPole-v1", **limit), 4 * 256)
    lengths = [episode["l"] for episode in theirs.ep_info_buffer]
    assert min(lengths) < 10 and max(lengths) == 10  # terminated and truncated episodes both
    for mine, sb3 in layers:
        for a, b in ((mine.weight, sb3.weight), (mine.bias, sb3.bias)):
            assert (a - b).abs().max().item() < 1e-5
    moved = max((mine.weight - w).abs().max().item() for (mine, _), w in zip(layers, start))
    assert moved > 1e-2  # the updates did move the weights


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
