"""Learning tests: each agent reaches a threshold within a step budget (issue 9).

Training stops as soon as a periodic evaluation reaches the threshold, so a passing run is
usually shorter than the budget. Thresholds and budgets follow rl-baselines3-zoo / CleanRL.
DQN, SAC, option-critic and PPO on Pendulum (13-60 s each on 2 cores) run in the slow set; the default
run keeps PPO on CartPole and DoorKey, Q-learning, and the quick checks of every agent in
test_classic_agents (continuous actions: IPPO on Spread in test_multiagent).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import verigym  # noqa: F401
import verigym.agents as agents
from tests.agents import rl_zoo
from verigym.agents.common.callbacks import EvalStop


def _train_until(
    name: str,
    env_id: str,
    budget: int,
    threshold: float,
    every: int,
    *,
    metric: str = "mean_return",
    episodes: int = 5,
    deterministic: bool = True,
    env_kwargs: dict | None = None,
    **config,
) -> EvalStop:
    make = (lambda: gym.make(env_id, **env_kwargs)) if env_kwargs else (lambda: env_id)
    agent = agents.make(name, make(), **config)
    stop = EvalStop(
        agent,
        make(),
        threshold=threshold,
        every=every,
        episodes=episodes,
        metric=metric,
        deterministic=deterministic,
    )
    agent.learn(make(), budget, callbacks=[stop])
    return stop


def test_ppo_cartpole():
    # seed 4: 500 at the second evaluation (16,384 steps) under SB3's annealing schedule
    stop = _train_until("ppo", "CartPole-v1", 100_000, 475, 8192, seed=4, **rl_zoo.PPO_CARTPOLE)
    assert stop.reached_at is not None, f"PPO CartPole best {stop.best} < 475: {stop.history}"


@pytest.mark.slow
def test_dqn_cartpole():
    stop = _train_until("dqn", "CartPole-v1", 50_000, 475, 2000, seed=0, **rl_zoo.DQN_CARTPOLE)
    assert stop.reached_at is not None, f"DQN CartPole best {stop.best} < 475: {stop.history}"


@pytest.mark.slow
def test_sac_pendulum():
    stop = _train_until("sac", "Pendulum-v1", 10_000, -250, 1000, seed=0, **rl_zoo.SAC_PENDULUM)
    assert stop.reached_at is not None, f"SAC Pendulum best {stop.best} < -250: {stop.history}"


def _frozenlake_success(q: np.ndarray, env: gym.Env) -> float:
    """Exact success probability of the greedy policy from the start, with the 100-step limit."""
    model = env.unwrapped.P
    policy = q.argmax(axis=1)
    value = np.zeros(q.shape[0])
    for _ in range(env.spec.max_episode_steps):
        new = np.zeros_like(value)
        for s in range(len(value)):
            for prob, s2, reward, done in model[s][policy[s]]:
                new[s] += prob * (reward + (0.0 if done else value[s2]))
        value = new
    return float(value[0])


def test_qlearning_slippery_frozenlake():
    env = gym.make("FrozenLake-v1")
    agent = agents.make("qlearning", env, seed=0)
    agent.learn(env, 100_000)
    success = _frozenlake_success(agent.q, env)
    assert success >= 0.70, f"greedy success {success:.3f} < 0.70 (optimum is about 0.74)"


def test_ppo_doorkey():
    stop = _train_until(
        "ppo",
        "verigym/DoorKey-5x5-v0",
        60_000,
        0.9,
        10_240,
        metric="success_rate",
        episodes=20,
        seed=0,
        num_envs=8,
        num_steps=128,
        batch_size=256,
        num_epochs=4,
        learning_rate=7e-4,
        ent_coef=0.01,
    )
    assert stop.reached_at is not None, (
        f"PPO DoorKey-5x5 best success {stop.best} < 0.9: {stop.history}"
    )


@pytest.mark.slow
def test_option_critic_fourrooms():
    # with A2OC's Atari settings (gamma 0.99, ent_coef 0.01) success stays at 0.6-0.8 for 150k
    # steps: mean |advantage| is ~0.05 and the intra-option policies stay near uniform (entropy
    # ~1.45 of ln 5). gamma 0.95, ent_coef 0.001, vf_coef 1 and a larger step reach 0.9 (50
    # sampled episodes) at 102k/102k/82k steps on seeds 0/1/2, 34-42 s of training on one core
    stop = _train_until(
        "option-critic",
        "verigym/FourRooms-v0",
        150_000,
        0.9,
        20_480,
        metric="success_rate",
        episodes=50,
        deterministic=False,
        env_kwargs={"size": 7, "observation": "full", "action_set": "cardinal"},
        seed=0,
        num_envs=16,
        num_steps=8,
        learning_rate=2e-3,
        gamma=0.95,
        ent_coef=0.001,
        vf_coef=1.0,
        exploration_fraction=0.1,
        option_eps_final=0.01,
    )
    assert stop.reached_at is not None, (
        f"option-critic FourRooms best success {stop.best} < 0.9: {stop.history}"
    )


@pytest.mark.slow
def test_ppo_pendulum():
    # rl-zoo reaches this with gSDE, which verigym's PPO does not implement; without it, a lower
    # initial std and shorter rollouts with an annealed, larger step do (-400 by about 65k steps
    # on seeds 0-2; -130 to -190 at 120k)
    stop = _train_until(
        "ppo",
        "Pendulum-v1",
        120_000,
        -400,
        16_384,
        seed=0,
        num_envs=8,
        num_steps=128,
        batch_size=256,
        gae_lambda=0.95,
        gamma=0.9,
        num_epochs=10,
        learning_rate=3e-3,
        anneal_lr=True,
        log_std_init=-1.0,
        normalize_observation=True,
        normalize_reward=True,
    )
    assert stop.reached_at is not None, f"PPO Pendulum best {stop.best} < -400: {stop.history}"
