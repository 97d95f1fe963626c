"""GRPO on a real model: SmolLM2-135M-Instruct on a task it partly solves, on CPU, within a CPU-time budget.

Held-out greedy success before and after training with verigym's ``GRPOTrainer`` (issue 18, item
6: target +20 points on 100 held-out seeds within 45 CPU-minutes), a learning-curve PNG
(training success per step and the held-out points), and the same task, model and budget through
TRL's ``GRPOTrainer(environment_factory=...)`` (:mod:`verigym.agents.llm.trl_adapter`), printed
side by side: CPU and wall seconds per step and held-out success.

The default task is ``verigym/GuessNumber-v0`` with ``max_number=10`` (6 turns): SmolLM2 starts at
12.5% greedy (24 seeds; it mostly echoes the rules, whose last integer is its guess) and 8% sampled,
so groups are mixed and dynamic sampling keeps them. The format reward (0.1 times the fraction of
replies with an integer) cannot outweigh a win. The RG-* single-turn tasks, TicTacToe and
GuessNumber 1-100 were measured first: 0% (no ``<answer>`` and "The answer is X." read whole),
0% sampled (TicTacToe: greedy 50-62% by always playing cell 3), and 4%.

The budget is CPU time (user + system of the trainer's process and its children,
:func:`verigym.agents.llm.grpo.cpu_seconds`), not wall time: on a shared machine wall time is
inflated by the other jobs. ``--parallel`` runs the TRL side in a second process at the same time
(each process has its own CPU budget and ``--threads``), so both fit one wall-clock window.

    python benchmarks/llm_grpo_smollm2.py --cpu-minutes 45 --eval-episodes 100 --parallel
    python benchmarks/llm_grpo_smollm2.py --cpu-minutes 5 --eval-episodes 8 --no-trl   # a smoke run

Writes ``--out``: ``verigym/metrics.jsonl``, ``result.json`` and ``learning_curve.png``. Needs
``pip install "verigym[smollm2,trl]"``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HELD_OUT = 1_000_000


def _plot(
    history: list[dict[str, float]],
    before: float,
    after: float,
    path: Path,
    title: str,
    trl_history: list[dict[str, float]] | None = None,
    trl_after: float | None = None,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    cpu = [h["cpu_minutes"] for h in history]
    ax.plot(
        cpu,
        [h["success"] for h in history],
        marker=".",
        label="verigym: training success (sampled)",
    )
    ax.scatter(
        [0, cpu[-1] if cpu else 0],
        [before, after],
        color="red",
        zorder=3,
        label="verigym: held-out (greedy)",
    )
    if trl_history:
        ax.plot(
            [h["cpu_minutes"] for h in trl_history],
            [h["reward"] for h in trl_history],
            marker=".",
            color="gray",
            label="TRL: training reward",
        )
        if trl_after is not None:
            ax.scatter(
                [trl_history[-1]["cpu_minutes"]],
                [trl_after],
                color="black",
                marker="x",
                zorder=3,
                label="TRL: held-out (greedy)",
            )
    ax.set_xlabel("training CPU minutes")
    ax.set_ylabel("success")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _task(args: argparse.Namespace) -> Any:
    import functools

    import gymnasium as gym

    kwargs = json.loads(args.env_kwargs) if args.env_kwargs else {}
    return functools.partial(gym.make, args.env, **kwargs) if kwargs else args.env


def _held_out(policy: Any, args: argparse.Namespace) -> float:
    """Greedy success of ``policy`` on the held-out seeds (batched, the trainer's own rollout)."""
    from verigym.agents.llm.grpo import GRPOConfig, make_env, rollout

    seeds = list(range(HELD_OUT, HELD_OUT + args.eval_episodes))
    envs = [make_env(_task(args)) for _ in seeds]
    episodes = rollout(
        policy,
        envs,
        seeds,
        [0] * len(seeds),
        GRPOConfig(max_new_tokens=args.new_tokens, max_turns=args.max_turns),
        temperature=0.0,
    )
    for env in envs:
        env.close()
    return sum(e.success for e in episodes) / len(episodes)


def run_verigym(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    from verigym.agents.llm.grpo import GRPOTrainer, cpu_seconds
    from verigym.agents.llm.policy import TransformersPolicy

    policy = TransformersPolicy.from_pretrained(args.model, device="cpu")
    trainer = GRPOTrainer(
        policy,
        _task(args),
        num_generations=args.generations,
        groups_per_step=args.groups,
        max_new_tokens=args.new_tokens,
        max_turns=args.max_turns,
        learning_rate=args.learning_rate,
        temperature=args.temperature,
        micro_batch_size=args.micro_batch,
        format_reward=args.format_reward,
        output_dir=str(out / "verigym"),
        seed=args.seed,
    )
    c0, t0 = cpu_seconds(), time.perf_counter()
    before = _held_out(policy, args)
    print(
        f"verigym: held-out success before {before:.3f} ({args.eval_episodes} seeds, "
        f"{cpu_seconds() - c0:.0f} CPU s, {time.perf_counter() - t0:.0f} s)",
        flush=True,
    )
    history: list[dict[str, float]] = []
    c0, t0 = cpu_seconds(), time.perf_counter()
    wall_end = t0 + 60 * args.max_wall_minutes
    while (
        len(history) < args.max_steps
        and cpu_seconds() - c0 < 60 * args.cpu_minutes
        and time.perf_counter() < wall_end
    ):
        metrics = dict(trainer.step())
        metrics["cpu_minutes"] = (cpu_seconds() - c0) / 60
        history.append(metrics)
        print(
            f"  step {len(history)}: success {metrics['success']:.2f} reward {metrics['reward']:.2f} "
            f"kept {metrics['groups_kept']:.2f} invalid {metrics['invalid_action_rate']:.2f} "
            f"rollout {metrics['rollout_cpu_time']:.0f} CPU s, step {metrics['step_cpu_time']:.0f} CPU s / "
            f"{metrics['step_time']:.0f} s; {metrics['cpu_minutes']:.1f} CPU min",
            flush=True,
        )
    train_cpu, train_wall = cpu_seconds() - c0, time.perf_counter() - t0
    after = _held_out(policy, args)
    trainer.close()
    steps = max(1, len(history))
    row = {
        "trainer": "verigym",
        "steps": len(history),
        "cpu_minutes": train_cpu / 60,
        "cpu_s_per_step": train_cpu / steps,
        "wall_s_per_step": train_wall / steps,
        "before": before,
        "after": after,
    }
    print(
        f"verigym: held-out success after {after:.3f} ({len(history)} steps, {row['cpu_s_per_step']:.0f} CPU s/step)",
        flush=True,
    )
    (out / "verigym_history.json").write_text(json.dumps(history) + "\n")
    return row


TOOL_TURN_TOKENS = 40
"""Tokens a TRL turn spends besides the reply itself: the ``<tool_call>{"name": "act", "arguments":
{"action": ...}}</tool_call>`` wrapper (about 25 SmolLM2 tokens) and the tool result's turn."""


def _trl_completion_tokens(args: argparse.Namespace) -> int:
    """TRL's ``max_completion_length``: it bounds the whole multi-turn completion (every turn's
    reply, tool call and tool result), not one turn, so it is ``max_turns`` turns of ``new_tokens``
    plus :data:`TOOL_TURN_TOKENS` unless ``--trl-completion-tokens`` sets it. (With only
    ``new_tokens``, no tool call fits and every TRL reward is 0.)"""
    return args.trl_completion_tokens or args.max_turns * (args.new_tokens + TOOL_TURN_TOKENS)


def run_trl(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """The same task, model and CPU budget through TRL's GRPOTrainer and the adapter."""
    import trl
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    from verigym.agents.llm.grpo import cpu_seconds
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
        print(
            "TRL: SmolLM2's template cannot render tool calls; using TRL's Qwen2.5 ChatML template",
            flush=True,
        )
        tokenizer.chat_template = qwen2_5_chat_template
    c0, t0 = cpu_seconds(), time.perf_counter()
    history: list[dict[str, float]] = []

    class Budget(TrainerCallback):
        def on_step_end(self, _args, state, control, **kwargs):  # noqa: ANN001 - transformers' signature
            control.should_training_stop = (
                cpu_seconds() - c0 > 60 * args.cpu_minutes
                or time.perf_counter() - t0 > 60 * args.max_wall_minutes
            )
            return control

        def on_log(self, _args, state, control, logs=None, **kwargs):  # noqa: ANN001
            if logs and "reward" in logs:
                history.append(
                    {
                        "step": state.global_step,
                        "reward": float(logs["reward"]),
                        "cpu_minutes": (cpu_seconds() - c0) / 60,
                    }
                )
                print(
                    f"  TRL step {state.global_step}: reward {logs['reward']:.2f}; {history[-1]['cpu_minutes']:.1f} CPU min",
                    flush=True,
                )

    env_kwargs = json.loads(args.env_kwargs) if args.env_kwargs else {}
    config = trl.GRPOConfig(
        output_dir=str(out / "trl"),
        per_device_train_batch_size=args.groups * args.generations,
        num_generations=args.generations,
        max_completion_length=_trl_completion_tokens(args),
        max_steps=args.max_steps,
        learning_rate=args.learning_rate,
        temperature=args.temperature,
        use_cpu=True,
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        bf16=False,
        seed=args.seed,
        max_tool_calling_iterations=args.max_turns,
    )
    try:
        trainer = trl.GRPOTrainer(
            model=model,
            args=config,
            processing_class=tokenizer,
            environment_factory=environment_factory(args.env, **env_kwargs),
            callbacks=[Budget()],
        )
    except ValueError as exc:  # e.g. a chat template that cannot render tool calls
        print(f"TRL: refused: {exc}", flush=True)
        return {"trainer": "trl", "error": str(exc)}
    c0, t0 = cpu_seconds(), time.perf_counter()
    result = trainer.train()
    train_cpu, train_wall = cpu_seconds() - c0, time.perf_counter() - t0
    steps = max(1, result.global_step)
    after = _held_out(
        TransformersPolicy(trainer.model, AutoTokenizer.from_pretrained(folder)), args
    )
    row = {
        "trainer": "trl",
        "steps": result.global_step,
        "cpu_minutes": train_cpu / 60,
        "cpu_s_per_step": train_cpu / steps,
        "wall_s_per_step": train_wall / steps,
        "after": after,
    }
    print(
        f"TRL: held-out success after {after:.3f} ({result.global_step} steps, {row['cpu_s_per_step']:.0f} CPU s/step)",
        flush=True,
    )
    (out / "trl_history.json").write_text(json.dumps(history) + "\n")
    return row


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--env", default="verigym/GuessNumber-v0")
    parser.add_argument(
        "--env-kwargs", default='{"max_number": 10}', help="JSON object passed to gymnasium.make"
    )
    parser.add_argument(
        "--cpu-minutes", type=float, default=45.0, help="training CPU-time budget per trainer"
    )
    parser.add_argument(
        "--max-wall-minutes",
        type=float,
        default=float("inf"),
        help="also stop training after this wall time (a shared machine's deadline); reported as is",
    )
    parser.add_argument("--max-steps", type=int, default=1000)
    parser.add_argument("--eval-episodes", type=int, default=100)
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--max-turns", type=int, default=6)
    parser.add_argument(
        "--trl-completion-tokens",
        type=int,
        default=0,
        help="TRL's max_completion_length over all turns (default: max-turns x (new-tokens + 40))",
    )
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--format-reward", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "2")))
    parser.add_argument("--no-trl", action="store_true")
    parser.add_argument(
        "--parallel",
        action="store_true",
        help="run the TRL side in a second process at the same time",
    )
    parser.add_argument("--only", choices=("verigym", "trl"), help=argparse.SUPPRESS)
    parser.add_argument("--out", default="runs/grpo-smollm2")
    args = parser.parse_args(argv)

    import torch

    import verigym  # noqa: F401 - registers the ids

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.only:
        row = run_verigym(args, out) if args.only == "verigym" else run_trl(args, out)
        (out / f"{args.only}_row.json").write_text(json.dumps(row) + "\n")
        return {"rows": [row]}
    child = None
    if args.parallel and not args.no_trl:
        command = [
            sys.executable,
            __file__,
            *(argv if argv is not None else sys.argv[1:]),
            "--only",
            "trl",
        ]
        child = subprocess.Popen([c for c in command if c != "--parallel"])
    rows = [run_verigym(args, out)]
    if child is not None:
        child.wait()
        trl_row = out / "trl_row.json"
        rows.append(
            json.loads(trl_row.read_text())
            if trl_row.exists()
            else {"trainer": "trl", "error": f"exit code {child.returncode}"}
        )
    elif not args.no_trl:
        rows.append(run_trl(args, out))
    trl_rows = [r for r in rows if r["trainer"] == "trl" and "error" not in r]
    trl_history = (
        json.loads((out / "trl_history.json").read_text())
        if trl_rows and (out / "trl_history.json").exists()
        else None
    )
    _plot(
        json.loads((out / "verigym_history.json").read_text()),
        rows[0]["before"],
        rows[0]["after"],
        out / "learning_curve.png",
        f"SmolLM2-135M GRPO on {args.env}",
        trl_history,
        trl_rows[0]["after"] if trl_rows else None,
    )
    print(
        f"\n{args.env}, {args.eval_episodes} held-out seeds (greedy); budget {args.cpu_minutes:g} CPU min per trainer"
    )
    print(
        f"{'trainer':10s} {'steps':>6s} {'CPU min':>8s} {'CPU s/step':>11s} {'wall s/step':>12s} {'before':>7s} {'after':>7s}"
    )
    for row in rows:
        if "error" in row:
            print(f"{row['trainer']:10s} refused: {row['error'][:80]}")
            continue
        print(
            f"{row['trainer']:10s} {row['steps']:6d} {row['cpu_minutes']:8.1f} {row['cpu_s_per_step']:11.1f} "
            f"{row['wall_s_per_step']:12.1f} {rows[0]['before']:7.3f} {row['after']:7.3f}"
        )
    (out / "result.json").write_text(json.dumps(rows, indent=2) + "\n")
    return {"rows": rows}


if __name__ == "__main__":
    main()
