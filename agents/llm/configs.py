"""The LLM trainers' options without torch: GRPO's and SFT's config dataclasses.

``verigym train grpo`` and ``verigym train sft`` parse and validate their flags with these before
they import the trainer (and torch, seconds of import), so a mistyped or out-of-range option fails
at once, as the classic agents' options do (:mod:`verigym.agents.configs`). Each trainer module
imports its config from here and re-exports it (``from verigym.agents.llm.grpo import
GRPOConfig`` works); :data:`DEFAULT_LORA_TARGETS` is re-exported by
:mod:`verigym.agents.llm.policy`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from verigym.agents.common.config import AgentConfig, require

__all__ = ["DEFAULT_LORA_TARGETS", "GRPOConfig", "SFTConfig"]

DEFAULT_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""The linear layers that get LoRA adapters by default (Llama, Qwen, SmolLM2 names)."""


@dataclass(frozen=True)
class GRPOConfig(AgentConfig):
    """Options of :class:`~verigym.agents.llm.grpo.GRPOTrainer` (also the ``verigym train grpo`` flags)."""

    num_generations: int = 8
    """episodes per group: G rollouts of the same task (same reset seed)"""
    groups_per_step: int = 4
    """groups (distinct tasks) sampled per training step"""
    max_new_tokens: int = 128
    """token budget of one agent reply"""
    max_turns: int = 16
    """agent turns per episode at most; an episode still running then scores 0"""
    max_context_tokens: int = 4096
    """tokens of an episode at most (prompt, replies, env text; also capped by the model's context); an episode that would exceed it ends with score 0"""
    temperature: float = 1.0
    """sampling temperature of rollouts (log-probs are taken under logits / temperature)"""
    top_p: float = 1.0
    """nucleus sampling mass of rollouts"""
    learning_rate: float = 1e-6
    """AdamW learning rate"""
    weight_decay: float = 0.0
    """AdamW weight decay"""
    max_grad_norm: float = 1.0
    """gradient-norm clip; 0 disables"""
    num_iterations: int = 1
    """inner optimisation passes over each batch (mu); > 1 uses the stored rollout log-probs as pi_old"""
    micro_batch_size: int = 8
    """episodes per forward/backward pass (whole groups packed together); gradients accumulate over the batch"""
    share_prompt_min_tokens: int = 0
    """the update runs each group's prompt once per micro-batch (one pass over the groups' prompts, then the rows' suffixes) when that saves at least this many prompt tokens, else one plain pass; 0: whenever it saves any. The extra pass costs a forward and backward's kernel launches, which a GPU may not earn back on short prompts (not measured yet)"""
    clip_eps_low: float = 0.2
    """lower ratio clip epsilon"""
    clip_eps_high: float = 0.28
    """upper ratio clip epsilon (DAPO's clip-higher; equal to clip_eps_low for symmetric PPO clipping)"""
    beta: float = 0.0
    """weight of the k3 KL penalty to the initial (reference) policy; 0 keeps no reference model"""
    scale_rewards: bool = True
    """divide advantages by the group's reward std (GRPO); False is Dr. GRPO"""
    loss_aggregation: Literal["token-mean", "sequence-mean", "constant"] = "token-mean"
    """token-mean (DAPO), sequence-mean (GRPO), or constant: sum / (episodes * max_new_tokens) (Dr. GRPO)"""
    dynamic_sampling: bool = True
    """drop groups whose rewards are all equal (they carry no gradient)"""
    reward: Literal["score", "return"] = "score"
    """episode reward: the verifier's info["score"] at the end, or the sum of step rewards"""
    format_reward: float = 0.0
    """added times the fraction of the episode's replies that parsed (no info["action_error"])"""
    overlong_penalty: float = 0.0
    """subtracted from the reward of an episode with a reply cut at max_new_tokens"""
    overlong_buffer: int = 0
    """DAPO soft overlong punishment: a penalty rising linearly from 0 to overlong_penalty over the last overlong_buffer tokens of the budget"""
    curriculum: bool = True
    """with several tasks, draw them by UCB on recent mean |advantage| (DUMP); else uniformly"""
    curriculum_window: int = 300
    """episodes remembered per task by the curriculum"""
    curriculum_temperature: float = 0.1
    """softmax temperature of the curriculum"""
    train_seed_offset: int = 0
    """reset seed of the first training task; task k uses train_seed_offset + k"""
    gradient_checkpointing: bool = False
    """recompute activations in the backward pass (less memory, ~30% slower)"""
    bf16: bool | None = None
    """bfloat16 autocast for rollouts and the loss (weights and optimizer stay float32); None: on CUDA only"""
    rollout_engine: Literal["dynamic", "static"] = "dynamic"
    """how training rollouts decode: dynamic (TransformersPolicy.generate: ended rows leave the batch) or static (StaticRollout, built for GPUs: one prefill per distinct prompt, a fixed batch of groups_per_step x num_generations rows, a kept static KV cache; the same greedy replies); evaluation stays dynamic"""
    compile_rollout: bool = False
    """with rollout_engine static: run the decode step as CUDA graphs (torch.compile, mode reduce-overhead; the first calls of each cache shape compile); CUDA only"""
    output_dir: str | None = None
    """directory of metrics.jsonl, checkpoints and the final model; None writes nothing"""
    save_every: int = 0
    """write a checkpoint every N steps into output_dir/checkpoint-N (0: only at the end)"""
    tensorboard: bool = False
    """also log metrics to TensorBoard in output_dir (needs the tensorboard package)"""

    def check(self) -> None:
        for name in (
            "num_generations",
            "groups_per_step",
            "max_new_tokens",
            "max_turns",
            "max_context_tokens",
            "num_iterations",
            "micro_batch_size",
            "curriculum_window",
        ):
            require(getattr(self, name) >= 1, f"{name} must be >= 1, got {getattr(self, name)}")
        require(
            self.num_generations >= 2,
            f"num_generations must be >= 2 (a group needs a baseline), got {self.num_generations}",
        )
        require(
            self.temperature > 0,
            f"temperature must be > 0 for GRPO rollouts, got {self.temperature}",
        )
        require(0 < self.top_p <= 1, f"top_p must be in (0, 1], got {self.top_p}")
        require(self.learning_rate > 0, f"learning_rate must be > 0, got {self.learning_rate}")
        require(self.clip_eps_low >= 0 and self.clip_eps_high >= 0, "clip epsilons must be >= 0")
        require(self.beta >= 0, f"beta must be >= 0, got {self.beta}")
        require(
            self.overlong_buffer >= 0, f"overlong_buffer must be >= 0, got {self.overlong_buffer}"
        )
        require(self.save_every >= 0, f"save_every must be >= 0, got {self.save_every}")
        require(
            self.share_prompt_min_tokens >= 0,
            f"share_prompt_min_tokens must be >= 0, got {self.share_prompt_min_tokens}",
        )
        require(self.curriculum_temperature > 0, "curriculum_temperature must be > 0")
        require(
            not self.compile_rollout or self.rollout_engine == "static",
            "compile_rollout needs rollout_engine static",
        )
        require(
            not self.compile_rollout or self.device.split(":")[0] not in {"cpu", "mps"},
            f"compile_rollout (CUDA graphs) needs a CUDA device, got device {self.device!r}",
        )


@dataclass(frozen=True)
class SFTConfig(AgentConfig):
    """Options of :class:`~verigym.agents.llm.sft.SupervisedTrainer` (also the ``verigym train sft`` flags)."""

    epochs: int = 2
    """passes over the data"""
    batch_size: int = 4
    """episodes per optimizer step"""
    learning_rate: float = 2e-4
    """AdamW learning rate (2e-4 suits LoRA; use ~1e-5 for full fine-tuning)"""
    weight_decay: float = 0.0
    """AdamW weight decay"""
    warmup_steps: int = 5
    """steps of linear learning-rate warm-up"""
    max_grad_norm: float = 1.0
    """gradient clipping norm"""
    max_length: int = 1536
    """tokens per episode at most; longer episodes are cut (their later replies are not trained on)"""
    max_records: int = 100_000
    """records read from the data at most"""
    lora_r: int = 16
    """LoRA rank; 0 fine-tunes every weight"""
    lora_alpha: float = 32.0
    """LoRA scale numerator (the update is alpha / r * B A)"""
    lora_target_modules: tuple[str, ...] = DEFAULT_LORA_TARGETS
    """names of the linear layers that get LoRA adapters"""
    output_dir: str | None = None
    """where the adapter (or model), sft_config.json and train_log.jsonl go; None writes nothing"""
    log_every: int = 10
    """log a line every N optimizer steps"""
    gradient_checkpointing: bool = False
    """recompute activations in the backward pass: memory of one layer's activations instead of all
    layers' (SmolLM2-135M, batches of 8 ~620-token episodes: 1.8 GB peak with it, 7.8 GB without);
    slower: each layer's forward runs again in the backward pass"""
    bf16: bool | None = None
    """bfloat16 autocast of the forward and backward passes (weights and optimizer stay float32);
    None: on CUDA only (CPUs with AMX also gain: 1.2x on SmolLM2 here)"""

    def check(self) -> None:
        for name in ("epochs", "batch_size", "max_length", "max_records", "log_every"):
            require(getattr(self, name) >= 1, f"{name} must be >= 1, got {getattr(self, name)}")
        require(self.learning_rate > 0, f"learning_rate must be > 0, got {self.learning_rate}")
        require(self.lora_r >= 0, f"lora_r must be >= 0, got {self.lora_r}")
        require(self.warmup_steps >= 0, f"warmup_steps must be >= 0, got {self.warmup_steps}")
        require(
            self.lora_r == 0 or bool(self.lora_target_modules),
            "lora_target_modules must name at least one module",
        )
