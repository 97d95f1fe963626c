"""``verigym train grpo --env ID --model DIR ...``: GRPO from the command line.

Every :class:`~verigym.agents.llm.grpo.GRPOConfig` field is a flag (``--learning-rate 1e-6``,
``--no-dynamic-sampling``), its help the field's docstring. The trained model, ``metrics.jsonl``
and checkpoints go to ``--output-dir``; ``verigym serve-model OUTPUT_DIR`` then serves it.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

HELP = "train a local LLM with GRPO on verigym text/tool envs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The GRPO flags (for ``verigym train grpo``)."""
    from verigym.agents.common.config import add_config_arguments
    from verigym.agents.llm.grpo import GRPOConfig

    parser.add_argument(
        "--env",
        action="append",
        required=True,
        metavar="ID",
        help="a registered env id to train on; repeat for several (the curriculum picks among them)",
    )
    parser.add_argument(
        "--model",
        required=True,
        metavar="DIR",
        help="local model directory (save_pretrained layout), a .gguf file, or smollm2",
    )
    parser.add_argument("--steps", type=int, default=100, help="GRPO steps (default: 100)")
    parser.add_argument(
        "--eval-episodes",
        type=int,
        default=0,
        help="after training, greedy success on this many held-out seeds of each env (default: 0)",
    )
    add_lora_arguments(parser)
    add_config_arguments(parser, GRPOConfig, aliases={"output_dir": ("--out",)})


def add_lora_arguments(parser: argparse.ArgumentParser, *, default_r: int = 0) -> None:
    """``--adapter``, ``--lora-r``, ``--lora-alpha``, ``--lora-target-modules`` (shared with ``train sft``)."""
    from verigym.agents.llm.policy import DEFAULT_LORA_TARGETS

    parser.add_argument(
        "--adapter",
        default=None,
        metavar="DIR",
        help="start from this LoRA adapter (peft save_pretrained folder, e.g. an SFT run) and train it further",
    )
    parser.add_argument(
        "--lora-r",
        type=int,
        default=default_r,
        help=f"LoRA rank: train low-rank adapters only and save only them; 0 trains every weight (default: {default_r})",
    )
    parser.add_argument(
        "--lora-alpha",
        type=float,
        default=None,
        help="LoRA scale numerator (default: 2 * rank)",
    )
    parser.add_argument(
        "--lora-target-modules",
        default=",".join(DEFAULT_LORA_TARGETS),
        help="comma-separated names of the linear layers that get adapters (default: %(default)s)",
    )


def load_policy(args: argparse.Namespace, device: str) -> Any:
    """The policy of ``--model`` with ``--adapter`` (trainable) or new ``--lora-r`` layers.

    Raises:
        FileNotFoundError, ImportError, OSError, ValueError: the model or adapter cannot be loaded.
    """
    from verigym.agents.llm.models import check_adapter, check_model
    from verigym.agents.llm.policy import TransformersPolicy

    if args.lora_r < 0:
        raise ValueError(f"--lora-r must be >= 0, got {args.lora_r}")
    check_model(args.model)  # before the model loads: one line saying what is missing
    if args.adapter:
        check_adapter(args.adapter)
    policy = TransformersPolicy.from_pretrained(
        args.model, device=device, adapter=args.adapter, trainable_adapter=True
    )
    if args.lora_r > 0 and not policy.has_adapter:
        targets = tuple(t for t in args.lora_target_modules.split(",") if t)
        policy.add_lora(args.lora_r, alpha=args.lora_alpha, target_modules=targets)
    return policy


def run(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

    import verigym  # noqa: F401 - registers the ids
    from verigym.agents.llm.grpo import GRPOConfig, GRPOTrainer
    from verigym.commands import lookup_env, usage_error
    from verigym.progress import Progress  # whole lines, not a live bar, when the output is a log

    command = "train grpo"
    if args.steps < 1:
        return usage_error(command, f"--steps must be >= 1, got {args.steps}")
    if args.eval_episodes < 0:
        return usage_error(command, f"--eval-episodes must be >= 0, got {args.eval_episodes}")
    for env_id in args.env:
        api = lookup_env(command, env_id)  # "did you mean" for a misspelled id
        if api is None:
            return 2
        if api != "gymnasium":
            return usage_error(
                command,
                f"{env_id} is a multi-agent env; train on one of its single-agent seats "
                "(verigym list --family multiagent, e.g. verigym/TicTacToe-Random-v0)",
            )
    overrides = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(GRPOConfig)
        if getattr(args, f.name, None) is not None
    }
    try:
        config = GRPOConfig.from_dict(overrides)
    except (TypeError, ValueError) as exc:
        return usage_error(command, str(exc))
    from verigym.progress import quiet_library_bars

    quiet_library_bars()  # no "Loading weights" redraws in a log
    try:
        policy = load_policy(args, config.device)
    except (FileNotFoundError, ImportError, ValueError) as exc:
        return usage_error(command, str(exc).strip().splitlines()[0])
    except OSError as exc:  # transformers could not read the folder (no tokenizer, say)
        return usage_error(command, f"{args.model}: {str(exc).strip().splitlines()[0]}")
    trainer = GRPOTrainer(policy, args.env, config)
    columns = (
        TextColumn("[bold]GRPO"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TextColumn("reward {task.fields[reward]:.3f} success {task.fields[success]:.2f}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns) as progress:
        bar = progress.add_task("grpo", total=args.steps, reward=0.0, success=0.0)

        def show(metrics: dict[str, float]) -> None:
            progress.update(bar, advance=1, reward=metrics["reward"], success=metrics["success"])

        trainer.callbacks.append(show)
        trainer.train(args.steps)
    for index, env_id in enumerate(args.env):
        if args.eval_episodes:
            seeds = range(1_000_000, 1_000_000 + args.eval_episodes)
            result = trainer.evaluate(seeds, task=index)
            print(
                f"{env_id}: greedy success {result['success']:.3f}, score {result['score']:.3f} on {args.eval_episodes} held-out seeds"
            )
    trainer.close()
    if config.output_dir:
        if policy.has_adapter:
            print(
                f"saved the LoRA adapter to {config.output_dir}; play it with the agent spec llm:{args.model}?adapter={config.output_dir}"
            )
        else:
            print(
                f"saved to {config.output_dir}; serve it with: verigym serve-model {config.output_dir}"
            )
    return 0
