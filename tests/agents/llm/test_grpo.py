"""GRPO: advantages, the loss, masking of env tokens, log-prob consistency, learning, save/load."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
import torch

from tests.agents.llm.tasks import CountdownEnv, EchoLetterEnv
from verigym.agents.llm.curriculum import UCBCurriculum
from verigym.agents.llm.grpo import (
    GRPOConfig,
    GRPOTrainer,
    _pad_batch,
    group_advantages,
    grpo_loss,
    make_env,
    rollout,
    token_log_probs,
)
from verigym.agents.llm.policy import TransformersPolicy


def test_group_advantages_scaled_and_dr_grpo():
    rewards = np.array([[1.0, 0.0, 0.0, 1.0], [0.5, 0.5, 0.5, 0.5]])
    scaled = group_advantages(rewards)
    assert scaled[0] == pytest.approx([1, -1, -1, 1], abs=1e-3)
    assert np.all(scaled[1] == 0)
    centred = group_advantages(rewards, scale=False)
    assert centred[0] == pytest.approx([0.5, -0.5, -0.5, 0.5])


def test_loss_clips_asymmetrically_and_masks():
    """clip-higher: a positive advantage stops at 1 + eps_high, a negative one at 1 - eps_low."""
    old = torch.zeros(2, 3)
    new = torch.log(torch.tensor([[1.5, 1.1, 1.5], [0.5, 0.9, 0.5]])).requires_grad_()
    adv = torch.tensor([1.0, -1.0])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    loss, stats = grpo_loss(new, old, adv, mask, clip_eps_low=0.2, clip_eps_high=0.28)
    assert loss[0].tolist() == pytest.approx([-1.28, -1.1, 0.0])
    assert loss[1].tolist() == pytest.approx([0.8, 0.9, 0.8])
    assert stats["clipped"].tolist() == [[1.0, 0.0, 0.0], [1.0, 0.0, 1.0]]
    loss.sum().backward()
    assert new.grad[0, 0] == 0 and new.grad[0, 2] == 0 and new.grad[0, 1] != 0


def test_k3_kl_is_zero_at_the_reference_and_positive_elsewhere():
    logp = torch.log(torch.tensor([[0.5, 0.2]]))
    mask = torch.ones(1, 2)
    _, same = grpo_loss(
        logp,
        logp,
        torch.zeros(1),
        mask,
        clip_eps_low=0.2,
        clip_eps_high=0.2,
        ref_log_probs=logp,
        beta=0.1,
    )
    assert torch.allclose(same["kl"], torch.zeros(1, 2))
    _, other = grpo_loss(
        logp,
        logp,
        torch.zeros(1),
        mask,
        clip_eps_low=0.2,
        clip_eps_high=0.2,
        ref_log_probs=logp - 0.3,
        beta=0.1,
    )
    assert torch.all(other["kl"] > 0)
    with pytest.raises(ValueError, match="ref_log_probs"):
        grpo_loss(logp, logp, torch.zeros(1), mask, clip_eps_low=0.2, clip_eps_high=0.2, beta=0.1)


def test_config_validation():
    with pytest.raises(ValueError, match="num_generations"):
        GRPOConfig(num_generations=1)
    with pytest.raises(ValueError, match="loss_aggregation"):
        GRPOConfig(loss_aggregation="mean")
    with pytest.raises(TypeError, match="unknown"):
        GRPOConfig.from_dict({"num_generation": 4})
    assert GRPOConfig.from_dict(json.loads(GRPOConfig(beta=0.01).to_json())) == GRPOConfig(
        beta=0.01
    )


def _multi_turn_episodes(policy, n=3, turns=3):
    config = GRPOConfig(max_new_tokens=4, temperature=1.0)
    envs = [make_env(lambda: CountdownEnv(turns=turns)) for _ in range(n)]
    return rollout(
        policy, envs, [0] * n, [0] * n, config, generator=torch.Generator().manual_seed(0)
    )


def test_multi_turn_rollout_masks_env_tokens(policy):
    episodes = _multi_turn_episodes(policy)
    for e in episodes:
        assert e.turns == 3 and e.done
        assert len(e.token_ids) == len(e.loss_mask) == len(e.log_probs)
        text = policy.tokenizer.decode(e.token_ids)
        assert "2 left" in text and "1 left" in text  # env text between the replies
        # the sampled tokens are exactly the masked-in ones, turn by turn
        runs = np.flatnonzero(np.diff(np.r_[0, e.loss_mask, 0]))
        assert len(runs) // 2 == 3
        env_positions = [i for i, m in enumerate(e.loss_mask) if m == 0]
        assert all(e.log_probs[i] == 0.0 for i in env_positions)


def test_rollout_log_probs_match_training_forward(policy):
    """Stored rollout log-probs equal the trainer's forward-pass log-probs on agent tokens."""
    episodes = _multi_turn_episodes(policy)
    batch = _pad_batch(episodes, policy.tokenizer.pad_token_id, torch.device("cpu"))
    with torch.no_grad():
        logp, _ = token_log_probs(
            policy.model, batch["input_ids"], batch["attention_mask"], temperature=1.0
        )
    mask = batch["mask"].bool()
    assert mask.sum() > 0
    assert torch.allclose(logp[mask], batch["old_log_probs"][mask], atol=1e-4)
    start = int(mask.any(0).float().argmax())  # skipping the prompt's logits changes nothing
    with torch.no_grad():
        tail, _ = token_log_probs(
            policy.model, batch["input_ids"], batch["attention_mask"], start=start
        )
    assert start > 0 and torch.allclose(tail, logp[:, start:], atol=1e-5)


def test_env_tokens_get_zero_gradient(policy):
    """Logits at positions that predict env/prompt tokens receive no gradient; agent tokens do."""
    episodes = _multi_turn_episodes(policy)
    batch = _pad_batch(episodes, policy.tokenizer.pad_token_id, torch.device("cpu"))
    captured = {}

    def keep(module, args, output):
        output.retain_grad()
        captured["logits"] = output

    handle = policy.model.lm_head.register_forward_hook(keep)
    try:
        logp, _ = token_log_probs(policy.model, batch["input_ids"], batch["attention_mask"])
        loss, _ = grpo_loss(
            logp,
            logp.detach(),
            torch.tensor([1.0, -0.5, 0.25]),
            batch["mask"],
            clip_eps_low=0.2,
            clip_eps_high=0.28,
        )
        loss.sum().backward()
    finally:
        handle.remove()
    grad = captured["logits"].grad[:, :-1].abs().sum(-1)  # position t predicts token t + 1
    mask = batch["mask"].bool()
    assert torch.all(grad[~mask] == 0)
    assert torch.all(grad[mask] > 0)


def test_curriculum_prefers_tasks_with_learning_signal():
    curriculum = UCBCurriculum(3, temperature=0.1, exploration=0.1)
    assert curriculum.probabilities().tolist() == pytest.approx([1 / 3] * 3)
    for _ in range(20):
        curriculum.update(0, [0.0] * 8, [True] * 8)  # solved: no signal
        curriculum.update(1, [1.0] * 8, [True, False] * 4)  # half solved: signal
        curriculum.update(2, [0.0] * 8, [False] * 8)  # hopeless: no signal
    p = curriculum.probabilities()
    assert p[1] > 0.9
    assert curriculum.success_rates() == [1.0, 0.5, 0.0]
    assert curriculum.sample(np.random.default_rng(0)) in (0, 1, 2)


def test_dynamic_sampling_skips_groups_without_variance(policy):
    """All-fail groups (a random model on a hard task) are dropped: no update, weights unchanged."""
    trainer = GRPOTrainer(
        policy,
        lambda: EchoLetterEnv(letters="z"),
        num_generations=2,
        groups_per_step=2,
        max_new_tokens=1,
        seed=0,
    )
    before = [p.detach().clone() for p in policy.model.parameters()]
    metrics = trainer.step()
    if metrics["groups_kept"] == 0:
        assert "loss" not in metrics
        assert all(torch.equal(a, b) for a, b in zip(before, policy.model.parameters()))
    assert 0 <= metrics["success"] <= 1
    trainer.close()


@pytest.mark.slow
def test_grpo_lifts_success_on_a_small_task(learn_model_dir):
    """From < 20% to >= 90% greedy success on held-out seeds within 200 GRPO steps (CPU, 30-100
    s: slow; the default run keeps GRPO's loss, advantage, KL and step tests above)."""
    torch.manual_seed(0)
    policy = TransformersPolicy.from_pretrained(learn_model_dir, device="cpu")
    trainer = GRPOTrainer(
        policy,
        EchoLetterEnv,
        num_generations=8,
        groups_per_step=8,
        max_new_tokens=2,
        learning_rate=3e-3,
        micro_batch_size=64,
        seed=0,
    )
    held_out = range(100_000, 100_100)
    before = trainer.evaluate(held_out)["success"]
    sampled_before = trainer.evaluate(held_out, temperature=1.0)["success"]
    assert before < 0.2 and sampled_before < 0.2
    after = before
    for step in range(1, 201):
        metrics = trainer.step()
        assert np.isfinite(metrics["reward"])
        if step % 10 == 0:
            after = trainer.evaluate(held_out)["success"]
            if after >= 0.9:
                break
    trainer.close()
    assert after >= 0.9, f"greedy success {after:.2f} after {step} steps"


def test_save_load_round_trip(tmp_path, policy):
    trainer = GRPOTrainer(
        policy,
        EchoLetterEnv,
        num_generations=2,
        groups_per_step=1,
        max_new_tokens=2,
        learning_rate=1e-3,
        output_dir=str(tmp_path / "run"),
        dynamic_sampling=False,
        tensorboard=importlib.util.find_spec("tensorboard") is not None,
        save_every=1,
    )
    trainer.train(2)
    trainer.close()
    out = tmp_path / "run"
    assert {
        "config.json",
        "model.safetensors",
        "grpo_config.json",
        "meta.json",
        "metrics.jsonl",
    } <= {p.name for p in out.iterdir()}
    assert (
        GRPOConfig.from_dict(json.loads((out / "grpo_config.json").read_text())) == trainer.config
    )
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 2 and {
        "reward",
        "success",
        "kl",
        "clip_fraction",
        "entropy",
        "response_length",
    } <= set(json.loads(lines[0]))
    assert (out / "checkpoint-1" / "model.safetensors").exists()
    if trainer.config.tensorboard:
        assert list(out.glob("events.out.tfevents.*"))
    loaded = TransformersPolicy.from_pretrained(out, device="cpu")
    for (name, a), (_, b) in zip(
        policy.model.state_dict().items(), loaded.model.state_dict().items()
    ):
        assert torch.equal(a, b), name
    prompt = policy.encode_messages([{"role": "user", "content": "say b"}])
    assert (
        policy.generate([prompt], max_new_tokens=5, temperature=0)[0].token_ids
        == loaded.generate([prompt], max_new_tokens=5, temperature=0)[0].token_ids
    )


def test_train_grpo_command_line(tmp_path, tiny_model_dir, capsys):
    """``verigym train grpo`` flags come from GRPOConfig; a run writes a servable model directory."""
    import argparse

    from verigym.commands import train_llm

    parser = argparse.ArgumentParser()
    train_llm.add_grpo_arguments(parser)
    out = tmp_path / "cli-run"
    args = parser.parse_args(
        [
            "--env",
            "verigym/GuessNumber-v0",
            "--model",
            str(tiny_model_dir),
            "--steps",
            "1",
            "--num-generations",
            "2",
            "--groups-per-step",
            "1",
            "--max-new-tokens",
            "3",
            "--no-dynamic-sampling",
            "--out",
            str(out),
            "--device",
            "cpu",
            "--eval-episodes",
            "1",
        ]
    )
    assert args.dynamic_sampling is False and "learning_rate" not in vars(args)  # unset: default
    assert train_llm.run_grpo(args) == 0
    assert "greedy success" in capsys.readouterr().out
    saved = json.loads((out / "grpo_config.json").read_text())
    assert saved["num_generations"] == 2 and saved["dynamic_sampling"] is False
    assert TransformersPolicy.from_pretrained(out, device="cpu").generate(
        [[2, 5]], max_new_tokens=2
    )
    with pytest.raises(SystemExit):
        parser.parse_args(["--env", "x", "--model", "m", "--loss-aggregation", "nonsense"])


def test_reward_shaping_format_and_overlong():
    from verigym.agents.llm.grpo import Episode, _finish

    config = GRPOConfig(
        max_new_tokens=10, format_reward=0.5, overlong_penalty=1.0, overlong_buffer=4
    )
    clean = Episode(task=0, seed=0, turns=2, invalid=0, max_reply_tokens=5)
    _finish(clean, {"success": True, "score": 1.0}, config)
    assert clean.reward == pytest.approx(1.5) and clean.success
    soft = Episode(
        task=0, seed=0, turns=2, invalid=1, max_reply_tokens=8
    )  # 2 tokens into the 4-token buffer
    _finish(soft, {"success": False, "score": 0.0}, config)
    assert soft.reward == pytest.approx(0.25 - 0.5)
    cut = Episode(task=0, seed=0, turns=1, truncated_replies=1, max_reply_tokens=10)
    _finish(cut, None, config)  # a trainer limit ended it: no verdict
    assert not cut.success and cut.score == 0.0 and cut.reward == pytest.approx(0.5 - 1.0)


def test_context_budget_ends_long_episodes(policy):
    config = GRPOConfig(max_new_tokens=4, max_context_tokens=240)  # the prompt is ~150 tokens
    envs = [make_env(lambda: CountdownEnv(turns=50))]
    (episode,) = rollout(policy, envs, [0], [0], config, generator=torch.Generator().manual_seed(0))
    assert episode.done and not episode.success and episode.reward == 0.0
    assert len(episode.token_ids) <= 240 and 1 <= episode.turns < 50


def test_bf16_autocast_keeps_float32_master_weights_and_kl(tiny_model_dir):
    """bf16 (autocast) with a KL reference: weights and optimizer stay float32 and still move."""
    policy = TransformersPolicy.from_pretrained(tiny_model_dir, device="cpu", dtype=torch.bfloat16)
    trainer = GRPOTrainer(
        policy,
        EchoLetterEnv,
        num_generations=4,
        groups_per_step=1,
        max_new_tokens=2,
        bf16=True,
        beta=0.01,
        learning_rate=1e-3,
        dynamic_sampling=False,
        seed=0,
    )
    assert policy.model.dtype == torch.float32 and trainer.ref_model.dtype == torch.bfloat16
    before = policy.model.model.embed_tokens.weight.detach().clone()
    metrics = trainer.step()
    assert np.isfinite(metrics["loss"]) and metrics["kl"] >= 0
    assert not torch.equal(before, policy.model.model.embed_tokens.weight)
    trainer.close()


def test_shared_prefix_pass_equals_the_plain_pass(policy):
    """A group's prompt run once (KV repeated to the batch) gives the same log-probs and the same
    gradients as the plain batched pass."""
    from verigym.agents.llm.grpo import shared_prefix_length

    config = GRPOConfig(max_new_tokens=6, max_turns=3)
    generator = torch.Generator().manual_seed(3)
    episodes = rollout(
        policy,
        [make_env(CountdownEnv()) for _ in range(4)],
        [5] * 4,
        [0] * 4,
        config,
        generator=generator,
    )
    batch = _pad_batch(episodes, policy.tokenizer.pad_token_id, torch.device("cpu"))
    start = int(batch["mask"].any(0).float().argmax())
    prefix = min(start, shared_prefix_length(episodes))
    assert prefix > 0 and len({tuple(e.token_ids) for e in episodes}) > 1
    assert shared_prefix_length(episodes[:1]) == 0
    params = [p for p in policy.model.parameters() if p.requires_grad]
    results = []
    for shared in (0, prefix):
        policy.model.zero_grad(set_to_none=True)
        logp, entropy = token_log_probs(
            policy.model,
            batch["input_ids"],
            batch["attention_mask"],
            start=start,
            shared_prefix=shared,
            with_entropy=True,
        )
        (
            logp * batch["mask"][:, start:] * torch.tensor([1.0, -0.5, 0.25, 2.0])[:, None]
        ).sum().backward()
        results.append((logp.detach(), entropy, [p.grad.clone() for p in params]))
    (plain, plain_entropy, plain_grads), (fast, fast_entropy, fast_grads) = results
    mask = batch["mask"][:, start:].bool()
    assert torch.allclose(plain[mask], fast[mask], atol=1e-5)
    assert torch.allclose(plain_entropy[mask], fast_entropy[mask], atol=1e-4)
    for a, b in zip(plain_grads, fast_grads):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)
    assert any(float(g.abs().sum()) > 0 for g in fast_grads)
    with pytest.raises(ValueError, match="shared_prefix"):
        token_log_probs(
            policy.model, batch["input_ids"], batch["attention_mask"], start=1, shared_prefix=2
        )
