"""The classic agents' options: one frozen dataclass per algorithm, without torch.

Each config's docstring names the source of its defaults; the docstring under each field is the
field's documentation and its ``verigym train`` flag's help (:mod:`verigym.agents.common.config`).
They live here, beside the algorithms rather than inside them, so that ``verigym train AGENT``
parses and validates its options before it imports the agent's module: a mistyped or
out-of-range option fails without importing torch. Each algorithm module imports its config from
here and re-exports it (``from verigym.agents.ppo import PPOConfig`` works) as its class's
``config_class``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from verigym.agents.common.config import AgentConfig, require

__all__ = [
    "CONFIGS",
    "DQNConfig",
    "IPPOConfig",
    "OptionCriticConfig",
    "PPOConfig",
    "QLearningConfig",
    "SACConfig",
]


@dataclass(frozen=True)
class PPOConfig(AgentConfig):
    """PPO options (defaults: Stable-Baselines3's ``PPO``, except the rollout: 8 envs x 128
    steps where SB3 has 1 x 2048)."""

    num_envs: int = 8
    """parallel envs stepped per rollout (copies of the training env)"""
    num_steps: int = 128
    """steps per env per rollout; a rollout is num_envs * num_steps transitions"""
    learning_rate: float = 3e-4
    """Adam step size"""
    anneal_lr: bool = False
    """anneal the learning rate linearly to 0 over total_steps (SB3's linear schedule: each update
    uses 1 - env steps collected so far / total_steps)"""
    gamma: float = 0.99
    """discount factor"""
    gae_lambda: float = 0.95
    """GAE lambda (bias/variance trade-off of the advantages)"""
    num_epochs: int = 10
    """passes over each rollout"""
    batch_size: int = 64
    """minibatch size (transitions)"""
    clip_coef: float = 0.2
    """surrogate clipping coefficient epsilon"""
    anneal_clip: bool = False
    """anneal clip_coef linearly to 0 over total_steps (as anneal_lr)"""
    clip_vloss: bool = False
    """clip the value loss around the old values (with clip_coef; CleanRL's max of the clipped
    and unclipped squared errors)"""
    norm_adv: bool = True
    """normalize advantages per minibatch"""
    ent_coef: float = 0.0
    """entropy bonus coefficient"""
    vf_coef: float = 0.5
    """value loss coefficient; the value loss is SB3's mean squared error (CleanRL's is half of
    it, so CleanRL's vf_coef 0.5 is 0.25 here)"""
    max_grad_norm: float = 0.5
    """global gradient-norm clip"""
    target_kl: float | None = None
    """stop the epochs of an update early when the approximate KL exceeds this"""
    normalize_observation: bool = False
    """normalize vector observations with running mean/std (clipped to +-10)"""
    normalize_reward: bool = False
    """scale rewards by the running std of the discounted return (clipped to +-10)"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layer widths of the actor and of the critic MLPs (separate networks)"""
    activation: Literal["tanh", "relu", "elu", "gelu"] = "tanh"
    """hidden activation"""
    log_std_init: float = 0.0
    """initial log standard deviation of continuous actions"""
    log_interval: int = 1
    """rollouts between metric reports to the callbacks"""
    batched_env: bool = True
    """step an env id through its natively batched engine when it has one (grid tasks)"""
    encoder: Literal["cnn", "mlp"] = "mlp"
    """encoder of symbolic grid observations: "mlp" (flattened one-hot cells, one linear layer,
    as SB3's MlpPolicy on a flat grid; solved DoorKey in 0.37-0.46x the CNN's time,
    docs/benchmarks.md) or "cnn" (cell embedding + two 2x2 convolutions)"""

    def check(self) -> None:
        for name in ("num_envs", "num_steps", "num_epochs", "batch_size", "log_interval"):
            require(getattr(self, name) >= 1, f"{name} must be >= 1, got {getattr(self, name)}")
        require(self.learning_rate > 0, f"learning_rate must be > 0, got {self.learning_rate}")
        require(
            0 <= self.gamma <= 1 and 0 <= self.gae_lambda <= 1,
            f"gamma and gae_lambda must be in [0, 1], got {self.gamma}, {self.gae_lambda}",
        )
        require(self.clip_coef > 0, f"clip_coef must be > 0, got {self.clip_coef}")
        require(self.max_grad_norm > 0, f"max_grad_norm must be > 0, got {self.max_grad_norm}")
        require(
            self.target_kl is None or self.target_kl > 0,
            f"target_kl must be > 0 or None, got {self.target_kl}",
        )
        require(
            all(h >= 1 for h in self.hidden_sizes),
            f"hidden_sizes must be positive, got {self.hidden_sizes}",
        )


@dataclass(frozen=True)
class DQNConfig(AgentConfig):
    """DQN options (defaults: Stable-Baselines3's, except ``double_q``)."""

    num_envs: int = 1
    """parallel envs stepped together"""
    learning_rate: float = 1e-4
    """Adam step size"""
    buffer_size: int = 1_000_000
    """replay capacity (transitions)"""
    learning_starts: int = 100
    """env steps of random-policy... (epsilon-greedy) collection before the first update"""
    batch_size: int = 32
    """transitions per gradient step"""
    gamma: float = 0.99
    """discount factor"""
    tau: float = 1.0
    """target update coefficient: 1 copies the online network, < 1 is Polyak averaging"""
    target_update_interval: int = 10_000
    """env steps between target updates"""
    train_freq: int = 4
    """env steps (per env) between training phases"""
    gradient_steps: int = 1
    """gradient steps per training phase"""
    exploration_fraction: float = 0.1
    """share of total_steps over which epsilon decays linearly"""
    exploration_initial_eps: float = 1.0
    """initial epsilon"""
    exploration_final_eps: float = 0.05
    """final epsilon"""
    max_grad_norm: float = 10.0
    """global gradient-norm clip"""
    double_q: bool = True
    """double-DQN targets (online argmax, target value); False is the 2015 DQN target"""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """hidden layer widths of the Q-network MLP"""
    activation: Literal["tanh", "relu", "elu", "gelu"] = "relu"
    """hidden activation"""
    log_interval: int = 1000
    """env steps between metric reports to the callbacks"""

    def check(self) -> None:
        for name in (
            "num_envs",
            "buffer_size",
            "batch_size",
            "target_update_interval",
            "train_freq",
            "log_interval",
        ):
            require(getattr(self, name) >= 1, f"{name} must be >= 1, got {getattr(self, name)}")
        require(
            self.learning_starts >= 0 and self.gradient_steps >= 0,
            "learning_starts and gradient_steps must be >= 0",
        )
        require(self.learning_rate > 0, f"learning_rate must be > 0, got {self.learning_rate}")
        require(0 <= self.gamma <= 1, f"gamma must be in [0, 1], got {self.gamma}")
        require(0 < self.tau <= 1, f"tau must be in (0, 1], got {self.tau}")
        require(
            0 <= self.exploration_fraction <= 1,
            f"exploration_fraction must be in [0, 1], got {self.exploration_fraction}",
        )
        require(
            0 <= self.exploration_final_eps <= 1 and 0 <= self.exploration_initial_eps <= 1,
            "epsilons must be in [0, 1]",
        )


@dataclass(frozen=True)
class SACConfig(AgentConfig):
    """SAC options (defaults: Stable-Baselines3's)."""

    num_envs: int = 1
    """parallel envs stepped together"""
    learning_rate: float = 3e-4
    """Adam step size of actor, critics and temperature"""
    buffer_size: int = 1_000_000
    """replay capacity (transitions)"""
    learning_starts: int = 100
    """env steps of uniformly random actions before the first update"""
    batch_size: int = 256
    """transitions per gradient step"""
    gamma: float = 0.99
    """discount factor"""
    tau: float = 0.005
    """Polyak coefficient of the target critics"""
    train_freq: int = 1
    """env steps (per env) between training phases"""
    gradient_steps: int = 1
    """gradient steps per training phase"""
    ent_coef: float | None = None
    """fixed entropy coefficient alpha; None tunes it automatically"""
    ent_coef_init: float = 1.0
    """initial alpha when tuned automatically"""
    target_entropy: float | None = None
    """entropy target of the automatic tuning; None means -dim(A)"""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """hidden layer widths of the actor and of each critic"""
    activation: Literal["tanh", "relu", "elu", "gelu"] = "relu"
    """hidden activation"""
    her_k: int = 0
    """hindsight relabelled copies per transition (goal-conditioned Dict observations only); 0 is off"""
    log_interval: int = 1000
    """env steps between metric reports to the callbacks"""

    def check(self) -> None:
        for name in ("num_envs", "buffer_size", "batch_size", "train_freq", "log_interval"):
            require(getattr(self, name) >= 1, f"{name} must be >= 1, got {getattr(self, name)}")
        require(
            self.learning_starts >= 0 and self.gradient_steps >= 0 and self.her_k >= 0,
            "learning_starts, gradient_steps and her_k must be >= 0",
        )
        require(self.learning_rate > 0, f"learning_rate must be > 0, got {self.learning_rate}")
        require(0 <= self.gamma <= 1, f"gamma must be in [0, 1], got {self.gamma}")
        require(0 < self.tau <= 1, f"tau must be in (0, 1], got {self.tau}")
        require(
            self.ent_coef is None or self.ent_coef >= 0,
            f"ent_coef must be >= 0 or None, got {self.ent_coef}",
        )
        require(self.ent_coef_init > 0, f"ent_coef_init must be > 0, got {self.ent_coef_init}")


@dataclass(frozen=True)
class QLearningConfig(AgentConfig):
    """Tabular Q-learning options."""

    learning_rate: float = 0.1
    """initial step size alpha"""
    final_learning_rate: float = 0.01
    """step size at the end of the decay"""
    lr_fraction: float = 0.9
    """share of total_steps over which alpha decays linearly"""
    gamma: float = 0.99
    """discount factor"""
    exploration_initial_eps: float = 1.0
    """initial epsilon"""
    exploration_final_eps: float = 0.05
    """final epsilon"""
    exploration_fraction: float = 0.5
    """share of total_steps over which epsilon decays linearly"""
    initial_q: float = 0.0
    """initial value of every table entry"""
    table_size: int = 65536
    """rows of the table for non-Discrete (hashed) observations"""
    log_interval: int = 10_000
    """env steps between metric reports to the callbacks"""

    def check(self) -> None:
        require(
            self.learning_rate > 0 and self.final_learning_rate > 0, "learning rates must be > 0"
        )
        require(0 <= self.gamma <= 1, f"gamma must be in [0, 1], got {self.gamma}")
        for name in (
            "exploration_initial_eps",
            "exploration_final_eps",
            "exploration_fraction",
            "lr_fraction",
        ):
            require(
                0 <= getattr(self, name) <= 1,
                f"{name} must be in [0, 1], got {getattr(self, name)}",
            )
        require(
            self.table_size >= 1 and self.log_interval >= 1,
            "table_size and log_interval must be >= 1",
        )


@dataclass(frozen=True)
class OptionCriticConfig(AgentConfig):
    """Option-critic options."""

    num_options: int = 4
    """number of options"""
    num_envs: int = 16
    """parallel envs stepped per rollout"""
    num_steps: int = 16
    """steps per env per rollout (the n of the n-step returns)"""
    learning_rate: float = 7e-4
    """Adam step size"""
    gamma: float = 0.99
    """discount factor"""
    termination_reg: float = 0.01
    """termination regularizer xi (deliberation cost), added to the option advantage"""
    ent_coef: float = 0.01
    """entropy bonus of the intra-option policies"""
    vf_coef: float = 0.5
    """weight of the critic loss"""
    max_grad_norm: float = 0.5
    """global gradient-norm clip"""
    option_eps_initial: float = 1.0
    """initial epsilon of the epsilon-greedy policy over options"""
    option_eps_final: float = 0.05
    """final epsilon"""
    exploration_fraction: float = 0.5
    """share of total_steps over which epsilon decays linearly"""
    hidden_sizes: tuple[int, ...] = (128,)
    """trunk MLP widths after the encoder"""
    activation: Literal["tanh", "relu", "elu", "gelu"] = "relu"
    """hidden activation"""
    log_interval: int = 1
    """rollouts between metric reports to the callbacks"""

    def check(self) -> None:
        for name in ("num_options", "num_envs", "num_steps", "log_interval"):
            require(getattr(self, name) >= 1, f"{name} must be >= 1, got {getattr(self, name)}")
        require(self.learning_rate > 0, f"learning_rate must be > 0, got {self.learning_rate}")
        require(0 <= self.gamma <= 1, f"gamma must be in [0, 1], got {self.gamma}")
        for name in ("option_eps_initial", "option_eps_final", "exploration_fraction"):
            require(
                0 <= getattr(self, name) <= 1,
                f"{name} must be in [0, 1], got {getattr(self, name)}",
            )
        require(self.max_grad_norm > 0, f"max_grad_norm must be > 0, got {self.max_grad_norm}")


@dataclass(frozen=True)
class IPPOConfig(PPOConfig):
    """IPPO options: PPO's (per policy; ``num_envs`` = copies of the game) and the sharing ones."""

    share_parameters: bool = True
    """one network for every agent, trained on all their transitions; False: one per agent"""
    agent_indicator: bool = False
    """add a one-hot agent id (agents in sorted name order) to each observation of the shared network (needs share_parameters)"""

    def check(self) -> None:
        super().check()
        require(
            self.share_parameters or not self.agent_indicator,
            "agent_indicator needs share_parameters=True (independent networks already know their agent)",
        )


CONFIGS: dict[str, type[AgentConfig]] = {
    "ppo": PPOConfig,
    "sac": SACConfig,
    "dqn": DQNConfig,
    "qlearning": QLearningConfig,
    "option-critic": OptionCriticConfig,
    "ippo": IPPOConfig,
}
"""verigym's own trainable agents: agent name -> its config class (the agent class's
``config_class``), read by ``verigym train`` without importing the agent's module."""
