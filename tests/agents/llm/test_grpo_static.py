"""GRPO with the static-shape rollout engine (rollout_engine="static") and packed micro-batches."""

from __future__ import annotations

import pytest
import torch

from tests.agents.llm.tasks import CountdownEnv
from verigym.agents.llm.chat import ChatFormat
from verigym.agents.llm.grpo import GRPOConfig, GRPOTrainer, make_env, rollout
from verigym.agents.llm.tiny import EchoLetterEnv


def _lively(policy):
    """The tiny random model with its weights scaled up: its greedy replies vary with the context
    (unscaled, every reply repeats one character)."""
    with torch.no_grad():
        for name, parameter in policy.model.named_parameters():
            if "norm" not in name:
                parameter.mul_(16)
    return policy


def _envs():
    """Three groups of two: GuessNumber (multi-turn), a 3-turn countdown and a one-turn echo."""
    import verigym  # noqa: F401 - registers the ids

    tasks = ["verigym/GuessNumber-v0", CountdownEnv(turns=3), EchoLetterEnv]
    return (
        [make_env(task) for task in tasks for _ in range(2)],
        [1, 1, 0, 0, 3, 3],
        [0, 0, 1, 1, 2, 2],
    )


def test_static_engine_plays_the_same_greedy_episodes(policy, monkeypatch):
    """Greedy GRPO rollouts (3 groups, up to 3 turns, replies ended by EOS, by stop strings and by
    the budget) are the same episodes under both engines: token ids, loss masks, log-probs,
    rewards and replies."""
    _lively(policy)
    monkeypatch.setattr(ChatFormat, "stop_strings", property(lambda self: ("jh", "T)")))
    eos = policy.tokenizer.convert_tokens_to_ids("p")
    monkeypatch.setattr(policy, "eos_token_ids", policy.eos_token_ids | {eos})
    trainer = GRPOTrainer(
        policy,
        EchoLetterEnv,
        rollout_engine="static",
        num_generations=2,
        groups_per_step=3,
        max_new_tokens=12,
        max_turns=3,
    )
    config = trainer.config
    played = {}
    for name, engine in (("dynamic", None), ("static", trainer.static_rollout)):
        envs, seeds, tasks = _envs()
        played[name] = rollout(policy, envs, seeds, tasks, config, temperature=0, engine=engine)
    dynamic, static = played["dynamic"], played["static"]
    for a, b in zip(dynamic, static):
        assert (a.token_ids, a.loss_mask, a.replies) == (b.token_ids, b.loss_mask, b.replies)
        assert (a.reward, a.turns, a.truncated_replies) == (b.reward, b.turns, b.truncated_replies)
        torch.testing.assert_close(
            torch.tensor(a.log_probs), torch.tensor(b.log_probs), atol=1e-4, rtol=1e-4
        )
    replies = [r for e in dynamic for r in e.replies]
    assert max(e.turns for e in dynamic) == 3 and min(e.turns for e in dynamic) == 1
    assert sum(e.truncated_replies for e in dynamic) < len(replies)  # some ended early
    assert len({len(r) for r in replies}) > 2
    # every turn went through the engine's one fixed-batch shape
    assert list(trainer.static_rollout._engines) == [(6, 1024)]
    trainer.close()


def test_the_trainer_rolls_out_with_the_static_engine(policy, monkeypatch):
    trainer = GRPOTrainer(
        policy,
        lambda: CountdownEnv(turns=2),
        rollout_engine="static",
        num_generations=2,
        groups_per_step=2,
        max_new_tokens=4,
        dynamic_sampling=False,
        seed=0,
    )
    engine = trainer.static_rollout
    calls = []
    sample = engine.generate
    monkeypatch.setattr(
        engine, "generate", lambda prompts, **kw: calls.append(1) or sample(prompts, **kw)
    )
    monkeypatch.setattr(policy, "generate", None)  # the dynamic path is not taken
    metrics = trainer.step()
    assert len(calls) == 2 and metrics["turns"] == 2
    assert torch.isfinite(torch.tensor(metrics["loss"]))
    trainer.close()


def test_compile_rollout_is_refused_off_cuda(policy):
    with pytest.raises(ValueError, match="rollout_engine static"):
        GRPOConfig(compile_rollout=True)
    with pytest.raises(ValueError, match="CUDA"):
        GRPOConfig(rollout_engine="static", compile_rollout=True, device="cpu")
    config = GRPOConfig(rollout_engine="static", compile_rollout=True)  # device auto: the policy's
    with pytest.raises(ValueError, match="CUDA device; the policy is on cpu"):
        GRPOTrainer(policy, EchoLetterEnv, config)


def _one_update(model_dir, micro_batch_size, **options):
    """The metrics, the gradients and the forward batch sizes of one update of a fixed batch."""
    from verigym.agents.llm.policy import TransformersPolicy

    policy = _lively(TransformersPolicy.from_pretrained(model_dir, device="cpu"))
    trainer = GRPOTrainer(
        policy,
        EchoLetterEnv,
        micro_batch_size=micro_batch_size,
        beta=0.01,
        max_new_tokens=6,
        max_turns=3,
        seed=0,
        **options,
    )
    envs, seeds, tasks = _envs()
    generator = torch.Generator().manual_seed(0)
    episodes = rollout(policy, envs, seeds, tasks, trainer.config, generator=generator)
    batch = list(zip(episodes, [1.0, -1.0, 0.5, -0.5, 2.0, -2.0]))
    grads, batches = [], []

    def keep_grads():
        grads.extend(p.grad.clone() for p in trainer._trainable if p.grad is not None)

    trainer.optimizer.step = keep_grads
    hook = policy.model.register_forward_pre_hook(
        lambda module, args, kwargs: batches.append(kwargs["input_ids"].shape[0]),
        with_kwargs=True,
    )
    try:
        metrics = trainer._update(batch)
    finally:
        hook.remove()
        trainer.close()
    return metrics, grads, batches


def test_packed_micro_batches_equal_one_group_per_micro_batch(tiny_model_dir):
    """Three groups in one micro-batch (each group's prompt run once, in one batch of prefixes;
    or, with share_prompt_min_tokens above what sharing saves, one plain pass) give the losses,
    metrics and gradients of one micro-batch per group, KL term included."""
    one_each, one_grads, one_batches = _one_update(tiny_model_dir, 2)
    assert one_batches == [1, 2] * 3  # per group: its prefix, then its 2 rows
    assert one_each["kl"] == 0 and one_each["grad_norm"] > 0
    for options, batches in (({}, [3, 6]), ({"share_prompt_min_tokens": 10**6}, [6])):
        packed, packed_grads, packed_batches = _one_update(tiny_model_dir, 6, **options)
        assert packed_batches == batches  # [the 3 groups' prefixes,] the 6 rows
        for key in ("loss", "kl", "clip_fraction", "entropy", "grad_norm"):
            assert packed[key] == pytest.approx(one_each[key], rel=1e-4, abs=1e-6)
        # the reference model's pass equals the policy's (it is a copy): the KL stays 0
        assert len(packed_grads) == len(one_grads) > 0
        for a, b in zip(one_grads, packed_grads):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.gpu
def test_gpu_compiled_static_rollouts_equal_the_dynamic_ones(tiny_model_dir):
    """On CUDA: the compiled engine (CUDA graphs) plays the greedy episodes the dynamic path
    plays, on every call (the later ones replay the graphs), and a training step runs on it."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from verigym.agents.llm.policy import TransformersPolicy

    policy = _lively(TransformersPolicy.from_pretrained(tiny_model_dir, device="cuda"))
    trainer = GRPOTrainer(
        policy,
        EchoLetterEnv,
        rollout_engine="static",
        compile_rollout=True,
        bf16=False,
        num_generations=2,
        groups_per_step=3,
        max_new_tokens=12,
        max_turns=3,
        dynamic_sampling=False,
    )
    envs, seeds, tasks = _envs()
    dynamic = rollout(policy, envs, seeds, tasks, trainer.config, temperature=0)
    for _ in range(3):
        envs, seeds, tasks = _envs()
        static = rollout(
            policy, envs, seeds, tasks, trainer.config, temperature=0, engine=trainer.static_rollout
        )
        assert [e.token_ids for e in static] == [e.token_ids for e in dynamic]
    metrics = trainer.step()
    assert torch.isfinite(torch.tensor(metrics["loss"]))
    trainer.close()
