"""GRPO on a real model: SmolLM2-135M-Instruct on a task it partly solves, on CPU, within a time budget.

Held-out greedy success before and after training with verigym's ``GRPOTrainer`` (issue 18, item
6: target +20 points on 100 held-out seeds within 45 CPU-minutes), a learning-curve PNG
(training success per step and the two held-out points), and the same task, model and budget
through TRL's ``GRPOTrainer(environment_factory=...)`` (:mod:`verigym.agents.llm.trl_adapter`),
printed side by side: seconds per step and held-out success.

The default task is ``verigym/GuessNumber-v0``: SmolLM2 starts around 25% (it follows the format
once the rules are its system message), so groups are mixed and dynamic sampling keeps them.

    python benchmarks/llm_grpo_smollm2.py --minutes 45 --eval-episodes 100
    python benchmarks/llm_grpo_smollm2.py --minutes 5 --eval-episodes 8 --no-trl   # a smoke run

Writes ``--out``: ``metrics.jsonl``, ``result.json`` and ``learning_curve.png``. Needs
``pip install "verigym[smollm2,trl]"``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

HELD_OUT = 1_000_000


def _plot(history: list[dict[str, float]], before: float, after: float, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    steps = [h["step"] for h in history]
    ax.plot(steps, [h["success"] for h in history], label="training success (sampled)")
    ax.scatter([0, steps[-1] if steps else 0], [before, after], color="red", zorder=3, label="held-out success (greedy)")
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("success")
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run_verigym(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    from verigym.agents.llm.grpo import GRPOTrainer
    from verigym.agents.llm.policy import TransformersPolicy

    policy = TransformersPolicy.from_pretrained(args.model, device="cpu")
    trainer = GRPOTrainer(
        policy, args.env, num_generations=args.generations, groups_per_step=args.groups, max_new_tokens=args.new_tokens,
        max_turns=args.max_turns, learning_rate=args.learning_rate, temperature=1.0, micro_batch_size=args.micro_batch,
        format_reward=args.format_reward, output_dir=str(out / "verigym"), seed=args.seed,
    )
    seeds = range(HELD_OUT, HELD_OUT + args.eval_episodes)
    t0 = time.perf_counter()
    before = trainer.evaluate(seeds)["success"]
    eval_time = time.perf_counter() - t0
    print(f"verigym: held-out success before {before:.3f} ({args.eval_episodes} seeds, {eval_time:.0f} s)", flush=True)
    history: list[dict[str, float]] = []
    deadline = time.perf_counter() + 60 * args.minutes
    while len(history) < args.max_steps and time.perf_counter() < deadline:
        metrics = trainer.step()
        history.append(metrics)
        print(f"  step {len(history)}: success {metrics['success']:.2f} reward {metrics['reward']:.2f} "
              f"kept {metrics['groups_kept']:.2f} invalid {metrics['invalid_action_rate']:.2f} "
              f"rollout {metrics['rollout_time']:.0f} s step {metrics['step_time']:.0f} s", flush=True)
    after = trainer.evaluate(seeds)["success"]
    trainer.close()
    step_time = sum(h["step_time"] for h in history) / max(1, len(history))
    print(f"verigym: held-out success after {after:.3f} ({len(history)} steps, {step_time:.0f} s/step)", flush=True)
    _plot(history, before, after, out / "learning_curve.png", f"SmolLM2-135M GRPO on {args.env}")
    return {"trainer": "verigym", "steps": len(history), "seconds_per_step": step_time, "before": before, "after": after}


def run_trl(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """The same task, model and wall-clock budget through TRL's GRPOTrainer and the adapter."""
    import trl
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    from verigym.agents.llm.grpo import GRPOConfig, make_env, rollout
    from verigym.agents.llm.models import resolve_model
    from verigym.agents.llm.policy import TransformersPolicy
    from verigym.agents.llm.trl_adapter import environment_factory

    folder = resolve_model(args.model)
    model = AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    from trl.chat_template_utils import qwen2_5_chat_template, supports_tool_calling

    if not supports_tool_calling(tokenizer) and "<|im_start|>" in str(tokenizer.chat_template):
        # SmolLM2's ChatML template drops tool calls, which TRL refuses; Qwen2.5's template is ChatML
        # with Hermes tool calls (the same special tokens), and TRL parses its replies
        print("TRL: SmolLM2's template cannot render tool calls; using TRL's Qwen2.5 ChatML template", flush=True)
        tokenizer.chat_template = qwen2_5_chat_template
    budget_end = time.perf_counter() + 60 * args.minutes

    class Budget(TrainerCallback):
        def on_step_end(self, _args, state, control, **kwargs):  # noqa: ANN001 - transformers' signature
            control.should_training_stop = time.perf_counter() > budget_end
            return control

    config = trl.GRPOConfig(
        output_dir=str(out / "trl"), per_device_train_batch_size=args.groups * args.generations,
        num_generations=args.generations, max_completion_length=args.new_tokens, max_steps=args.max_steps,
        learning_rate=args.learning_rate, use_cpu=True, report_to="none", logging_steps=1, save_strategy="no",
        bf16=False, seed=args.seed, max_tool_calling_iterations=args.max_turns,
    )
    try:
        trainer = trl.GRPOTrainer(model=model, args=config, processing_class=tokenizer,
                                  environment_factory=environment_factory(args.env), callbacks=[Budget()])
    except ValueError as exc:  # e.g. a chat template that cannot render tool calls
        print(f"TRL: refused: {exc}", flush=True)
        return {"trainer": "trl", "error": str(exc)}
    t0 = time.perf_counter()
    result = trainer.train()
    step_time = (time.perf_counter() - t0) / max(1, result.global_step)
    policy = TransformersPolicy(trainer.model, tokenizer)
    seeds = list(range(HELD_OUT, HELD_OUT + args.eval_episodes))
    episodes = rollout(policy, [make_env(args.env) for _ in seeds], seeds, [0] * len(seeds),
                       GRPOConfig(max_new_tokens=args.new_tokens, max_turns=args.max_turns), temperature=0.0)
    after = sum(e.success for e in episodes) / len(episodes)
    print(f"TRL: held-out success after {after:.3f} ({result.global_step} steps, {step_time:.0f} s/step)", flush=True)
    return {"trainer": "trl", "steps": result.global_step, "seconds_per_step": step_time, "after": after}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--env", default="verigym/GuessNumber-v0")
    parser.add_argument("--minutes", type=float, default=45.0, help="training wall-clock budget per trainer")
    parser.add_argument("--max-steps", type=int, default=1000)
    parser.add_argument("--eval-episodes", type=int, default=100)
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=24)
    parser.add_argument("--max-turns", type=int, default=9)
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=2e-6)
    parser.add_argument("--format-reward", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "2")))
    parser.add_argument("--no-trl", action="store_true")
    parser.add_argument("--out", default="runs/grpo-smollm2")
    args = parser.parse_args(argv)

    import torch

    import verigym  # noqa: F401 - registers the ids

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = [run_verigym(args, out)]
    if not args.no_trl:
        rows.append(run_trl(args, out))
    print(f"\n{'trainer':10s} {'steps':>6s} {'s/step':>8s} {'before':>7s} {'after':>7s}")
    for row in rows:
        if "error" in row:
            print(f"{row['trainer']:10s} refused: {row['error'][:80]}")
            continue
        before = f"{row.get('before', rows[0]['before']):.3f}"
        print(f"{row['trainer']:10s} {row['steps']:6d} {row['seconds_per_step']:8.1f} {before!s:>7s} {row['after']:7.3f}")
    (out / "result.json").write_text(json.dumps(rows, indent=2) + "\n")
    return {"rows": rows}


if __name__ == "__main__":
    main()
