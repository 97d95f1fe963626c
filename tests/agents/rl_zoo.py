"""rl-baselines3-zoo hyperparameters (github.com/DLR-RM/rl-baselines3-zoo, hyperparams/*.yml) in
verigym's option names, shared by the learning tests and benchmarks/agents_vs_sb3.py."""

from __future__ import annotations

PPO_CARTPOLE = {
    "num_envs": 8,
    "num_steps": 32,
    "batch_size": 256,
    "gae_lambda": 0.8,
    "gamma": 0.98,
    "num_epochs": 20,
    "ent_coef": 0.0,
    "learning_rate": 1e-3,
    "anneal_lr": True,
    "clip_coef": 0.2,
    "anneal_clip": True,
}
DQN_CARTPOLE = {
    "learning_rate": 2.3e-3,
    "batch_size": 64,
    "buffer_size": 100_000,
    "learning_starts": 1000,
    "gamma": 0.99,
    "target_update_interval": 10,
    "train_freq": 256,
    "gradient_steps": 128,
    "exploration_fraction": 0.16,
    "exploration_final_eps": 0.04,
    "hidden_sizes": (256, 256),
}
SAC_PENDULUM = {"learning_rate": 1e-3}
