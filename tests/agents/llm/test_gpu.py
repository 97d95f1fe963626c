"""The LLM stack on a GPU (tests marked ``gpu``; ``scripts/gpu_check.sh`` runs them), and the same
checks on the CPU with a tiny model of the same architecture.

On CUDA the model is Qwen2.5-0.5B's shape with random weights (``benchmarks/llm_random_model.py``:
nothing can be downloaded there). Checked: generation with and without the prefix cache samples
the same tokens with the same log-probs, a GRPO step with LoRA (only the adapters move) and with
full fine-tuning (the weights move), and SFT steps (the loss falls).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import gymnasium as gym
import pytest
import torch

from verigym.agents.llm.grpo import GRPOTrainer
from verigym.agents.llm.policy import TransformersPolicy
from verigym.agents.llm.sft import SFTConfig, SupervisedTrainer

_ROOT = Path(__file__).resolve().parents[3]


def _builder():
    spec = importlib.util.spec_from_file_location(
        "llm_random_model", _ROOT / "benchmarks" / "llm_random_model.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("llm_random_model", module)
    spec.loader.exec_module(module)
    return module.build_random_model


@pytest.fixture(scope="module")
def qwen_tiny_dir(tmp_path_factory):
    return _builder()(tmp_path_factory.mktemp("qwen-tiny"), "tiny")


@pytest.fixture(scope="module")
def qwen_gpu_dir(tmp_path_factory):
    """The Qwen2.5-0.5B-shaped random model: ``$VERIGYM_GPU_MODEL`` when it holds one (built by
    ``scripts/gpu_check.sh`` for every stage), else built here."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    built = os.environ.get("VERIGYM_GPU_MODEL")
    if built and (Path(built) / "config.json").is_file():
        return Path(built)
    return _builder()(tmp_path_factory.mktemp("qwen-0.5b"), "qwen2.5-0.5b")


class _HashRewardEnv(gym.Env):
    """One turn; the reward is a hash of the reply in [0, 1]: random replies of a random model get
    different rewards, so every GRPO group has a learning signal (a mechanics check, not a task)."""

    metadata = {"render_modes": []}

    def __init__(self):
        from verigym.core import UnicodeText

        self.observation_space = UnicodeText(64)
        self.action_space = UnicodeText(4096)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "say something", {}

    def step(self, action):
        from verigym.core import episode_end

        reward = (sum(map(ord, action)) % 7) / 6
        info: dict = {}
        episode_end(info, success=reward > 0.5, score=reward)
        return "done", reward, True, False, info


def _generation_matches_with_and_without_prefix_cache(path: Path, device: str) -> None:
    plain = TransformersPolicy.from_pretrained(path, device=device, dtype=torch.float32)
    cached = TransformersPolicy.from_pretrained(
        path, device=device, dtype=torch.float32, prefix_cache_bytes=64 << 20
    )
    conversation = [{"role": "system", "content": "rules"}, {"role": "user", "content": "turn one"}]
    for turn in range(2):  # the second turn extends the first prompt: the cache serves its prefix
        prompts = [plain.encode_messages(conversation)] * 2
        outs = []
        for policy in (plain, cached):
            generator = torch.Generator(device=policy.device).manual_seed(turn)
            outs.append(policy.generate(prompts, max_new_tokens=6, generator=generator))
        for a, b in zip(*outs):
            assert a.token_ids == b.token_ids
            assert torch.allclose(torch.tensor(a.log_probs), torch.tensor(b.log_probs), atol=1e-3)
        conversation += [
            {"role": "assistant", "content": outs[0][0].text},
            {"role": "user", "content": "turn two"},
        ]
    assert cached.prefix_cache.hits >= 1


def _grpo_step(path: Path, device: str, lora: bool) -> None:
    policy = TransformersPolicy.from_pretrained(path, device=device)
    if lora:
        policy.add_lora(8)
    before = {n: p.detach().clone() for n, p in policy.model.named_parameters()}
    trainer = GRPOTrainer(
        policy,
        _HashRewardEnv,
        num_generations=4,
        groups_per_step=2,
        max_new_tokens=4,
        learning_rate=1e-3,
        dynamic_sampling=False,
        scale_rewards=False,
    )
    assert trainer.optimizer.defaults["fused"] == (device == "cuda")  # fused AdamW on CUDA
    policy.eos_token_ids = frozenset()  # full-length replies: every row has tokens to train
    metrics = trainer.step()
    trainer.close()
    assert torch.isfinite(torch.tensor(metrics["loss"]))
    moved = {n for n, p in policy.model.named_parameters() if not torch.equal(p, before[n])}
    if lora:
        assert moved and all("lora_" in n for n in moved)
    else:
        assert any("mlp" in n for n in moved)


def _sft_steps(path: Path, device: str) -> None:
    policy = TransformersPolicy.from_pretrained(path, device=device)
    records = [
        {"messages": [{"role": "user", "content": f"say {c}"}, {"role": "assistant", "content": c}]}
        for c in "abcdabcd"
    ]
    trainer = SupervisedTrainer(
        policy, records, SFTConfig(batch_size=8, lora_r=8, learning_rate=1e-2, warmup_steps=0)
    )
    assert trainer.optimizer.defaults["fused"] == (device == "cuda")  # fused AdamW on CUDA
    before = trainer.mean_loss()
    for _ in range(3):
        trainer.step(trainer.examples, total_steps=100)
    assert trainer.mean_loss() < before


# -- CPU: the same checks on a tiny model of the same architecture ------------------------------------
def test_cpu_generation_with_and_without_prefix_cache(qwen_tiny_dir):
    _generation_matches_with_and_without_prefix_cache(qwen_tiny_dir, "cpu")


@pytest.mark.parametrize("lora", [True, False])
def test_cpu_grpo_step(qwen_tiny_dir, lora):
    _grpo_step(qwen_tiny_dir, "cpu", lora)


def test_cpu_sft_steps(qwen_tiny_dir):
    _sft_steps(qwen_tiny_dir, "cpu")


# -- CUDA: Qwen2.5-0.5B's shape -------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_generation_with_and_without_prefix_cache(qwen_gpu_dir):
    _generation_matches_with_and_without_prefix_cache(qwen_gpu_dir, "cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("lora", [True, False])
def test_gpu_grpo_step(qwen_gpu_dir, lora):
    _grpo_step(qwen_gpu_dir, "cuda", lora)


@pytest.mark.gpu
def test_gpu_sft_steps(qwen_gpu_dir):
    _sft_steps(qwen_gpu_dir, "cuda")
